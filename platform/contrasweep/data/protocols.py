"""Data protocols of LaCon (Zhang et al. 2022): how the training set is sampled.

Each protocol maps ``(splits, label_names, cfg) -> (splits, label_names)``. Sampling is per
class, without replacement, seeded by ``cfg.seed`` and deterministic; sampled rows keep
their source order. Only the training split is sampled unless a docstring says otherwise;
the test split is never sampled (the paper keeps "the full original test sets").
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from contrasweep.data.config import DataConfig
from contrasweep.data.splits import draw_per_class, labels_of, round_half_up, stratified_counts, take
from contrasweep.errors import DataError

Splits = dict[str, pa.Table]


def apply_protocol(splits: Splits, names: list[str], cfg: DataConfig) -> tuple[Splits, list[str]]:
    return PROTOCOLS[cfg.protocol](splits, names, cfg)


def full(splits: Splits, names: list[str], cfg: DataConfig):
    """``full``: every row of every split (LaCon Sec. 3.1 trains MRPC, RTE and CoLA on their whole training sets)."""
    return splits, names


def max_per_class(splits: Splits, names: list[str], cfg: DataConfig):
    """``max_per_class``: at most ``max_per_class`` training rows per class. Without a value,
    LaCon Sec. 3.1's rule: "at most 5K (binary-class) / 1K (multi-class) training instances
    per class", sampled without replacement."""
    cap = cfg.max_per_class or (5000 if len(names) == 2 else 1000)
    return _cap_train(splits, len(names), cap, cfg.seed), names


def few_shot(splits: Splits, names: list[str], cfg: DataConfig):
    """``few_shot``: ``k`` training rows per class, and a validation set of another ``k`` per
    class drawn from the same training pool, disjoint from the training sample (it replaces
    the source's validation split); test unchanged.
    LaCon Sec. 4.1: "sampling 20 samples for each class to form training set. We also held
    out the same amount of samples for validation set but keep the whole test set
    unchanged" (k in {10, 20, 50, 100} for Fig. 2).

    With ``n_total`` instead of ``k``: N training rows in all, stratified (SCL-MOO Sec. 3: "20,
    50, 100 labeled examples"), each class getting its share of the pool by largest remainder
    (``stratified_counts``), and a validation set of the same per-class sizes drawn the same way.

    With ``dev_test_fraction`` (the dev rule, ``splits.dev_splits``; SCL-MOO Sec. 3 builds its
    validation set from the original validation split: "500 examples") the validation split
    already comes from the dev split and is kept; only the training rows are drawn here (the
    same rows as without the rule, for the same seed)."""
    labels = labels_of(splits["train"])
    counts = np.bincount(labels, minlength=len(names))
    if cfg.n_total is not None:
        per_class = stratified_counts(counts, cfg.n_total)
    else:
        per_class = np.full(len(names), cfg.k)
    keep_validation = cfg.dev_test_fraction is not None
    chunks = 1 if keep_validation else 2
    short = [c for c in range(len(names)) if counts[c] < chunks * per_class[c]]
    if short:
        _few_shot_shortfall(short, counts, per_class, chunks, names, cfg)
    sizes = {c: [int(per_class[c])] * chunks for c in range(len(names))}
    train, *validation = draw_per_class(labels, sizes, cfg.seed)
    pool = splits["train"]
    out = {**splits, "train": take(pool, train)}
    if validation:
        out["validation"] = take(pool, validation[0])
    return out, names


def _few_shot_shortfall(short, counts, per_class, chunks: int, names: list[str], cfg: DataConfig):
    """The one-line error of a few-shot draw that some classes cannot give: each short class
    with its rows, and what works (the largest k or n_total, else dropping or merging a class)."""
    what = f"n_total={cfg.n_total}" if cfg.n_total is not None else f"k={cfg.k}"
    need = (
        f"{chunks * int(per_class[0])} training rows of each class"
        if cfg.n_total is None
        else "its share of training rows from each class"
    )
    parts = " (as many for train as for validation)" if chunks == 2 else ""
    listed = ", ".join(f"{names[c]!r} has {int(counts[c])} (needs {chunks * int(per_class[c])})" for c in short)
    if cfg.n_total is None:
        largest = int(counts.min()) // chunks
        works = f"k <= {largest} (the most every class can give)" if largest else None
    else:
        largest = next(
            (n for n in range(cfg.n_total - 1, 1, -1) if np.all(chunks * stratified_counts(counts, n) <= counts)), 0
        )
        works = f"n_total <= {largest} (the most the classes' shares allow)" if largest else None
    if works is None:
        poorest = int(np.argmin(counts))
        works = (
            f"drop class {names[poorest]!r} ({int(counts[poorest])} {'row' if counts[poorest] == 1 else 'rows'}) "
            f"from the source or merge it into another class, then a k every class can give"
        )
    error = DataError(f"few_shot {what} needs {need}{parts}; short: {listed}; allowed: {works}")
    # prepare names another spelling it could merge with (DataError, in trainables.errors, declares no label)
    error.label = names[int(np.argmin(counts))]  # type: ignore[attr-defined]
    raise error


def imbalance(splits: Splits, names: list[str], cfg: DataConfig):
    """``imbalance``: minority classes get ``minority`` training rows, every other class
    ``round(minority * rho)`` (half rounds up). LaCon Sec. 4.2 (after Cao et al. 2019):
    rho = |class_max| / |class_min|, "the minority class contains 32 samples and the majority
    class contains 32 x rho", rho in {1, 3, 5, 10, 20}. Default minority class: the last class
    in label order (for binary tasks, label 1)."""
    minority_names = cfg.minority_classes or (names[-1],)
    _check_names(minority_names, names, "minority_classes")
    assert cfg.minority is not None and cfg.rho is not None  # the parser's defaults (config._parse_imbalance)
    majority = round_half_up(cfg.minority * cfg.rho)
    wanted = {c: cfg.minority if name in minority_names else majority for c, name in enumerate(names)}
    labels = labels_of(splits["train"])
    counts = np.bincount(labels, minlength=len(names))
    short = {c: need - counts[c] for c, need in wanted.items()}
    c = max(short, key=short.__getitem__)  # the class short by the most rows
    if short[c] > 0:
        raise DataError(
            f"imbalance (minority={cfg.minority}, rho={cfg.rho:g}) needs {wanted[c]} training rows of class "
            f"{names[c]!r}, it has {counts[c]}; allowed: lower minority or rho"
        )
    (train,) = draw_per_class(labels, {c: [n] for c, n in wanted.items()}, cfg.seed)
    return {**splits, "train": take(splits["train"], train)}, names


def num_classes(splits: Splits, names: list[str], cfg: DataConfig):
    """``num_classes``: keep ``num_classes`` classes (the first ones in label order) or the
    named ``classes`` (kept in label order), in every split, labels remapped to 0..n-1; then
    at most ``per_class`` training rows per class. Validation and test keep all rows of the
    kept classes. LaCon Sec. 4.5 (DBpedia, 2..14 labels): "randomly select 1000 samples for
    each label ... as training set. Meanwhile, we keep the whole samples for the chosen labels
    in the evaluation set unchanged"."""
    if cfg.classes is not None:
        _check_names(cfg.classes, names, "classes")
        kept = [c for c, name in enumerate(names) if name in cfg.classes]
    else:
        assert cfg.num_classes is not None  # the parser asks for classes or num_classes (config._parse_num_classes)
        if cfg.num_classes > len(names):
            raise DataError(
                f"data.num_classes={cfg.num_classes} but the source has {len(names)} classes; allowed: 2..{len(names)}"
            )
        kept = list(range(cfg.num_classes))
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[kept] = np.arange(len(kept))
    splits = {split: _keep_classes(table, remap) for split, table in splits.items()}
    assert cfg.per_class is not None  # the parser's default: 1000
    return _cap_train(splits, len(kept), cfg.per_class, cfg.seed), [names[c] for c in kept]


def _cap_train(splits: Splits, n_classes: int, cap: int, seed: int) -> Splits:
    labels = labels_of(splits["train"])
    sizes = {c: [min(cap, int(n))] for c, n in enumerate(np.bincount(labels, minlength=n_classes))}
    (train,) = draw_per_class(labels, sizes, seed)
    return {**splits, "train": take(splits["train"], train)}


def _keep_classes(table: pa.Table, remap: np.ndarray) -> pa.Table:
    new = remap[labels_of(table)]
    kept = np.flatnonzero(new >= 0)
    table = take(table, kept)
    return table.set_column(table.schema.get_field_index("label"), "label", pa.array(new[kept], pa.int64()))


def _check_names(given, names: list[str], key: str) -> None:
    unknown = [n for n in given if n not in names]
    if unknown:
        raise DataError(f"data.{key}: unknown label name(s) {unknown}; label names are: {', '.join(names)}")


PROTOCOLS = {
    "full": full,
    "max_per_class": max_per_class,
    "few_shot": few_shot,
    "imbalance": imbalance,
    "num_classes": num_classes,
}
