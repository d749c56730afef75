"""Train/validation/test splits, and the seeded per-class sampling the protocols share.

Rule for splits: a split the source provides (hub dataset, mapping of files) is used as is,
after unlabelled rows are dropped. A split the source lacks, or whose rows are all
unlabelled (GLUE's test split: labels -1), is carved out of the source's train split by a
stratified, seeded split (``split_seed``): ``test_fraction`` of the train rows of each class
go to test and ``validation_fraction`` to validation (both fractions of the same pool,
carved in one pass; the rest stays train). A single-file source or a bundled corpus thus
becomes 70/10/20 by default.

With ``dev_test_fraction`` the dev rule applies instead (``dev_splits``): validation and test
both come from the source's development (validation) split, as in SCL-MOO Sec. 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from contrasweep.data.config import DataConfig
from contrasweep.data.sources import RawData
from contrasweep.errors import DataError


def round_half_up(x: float) -> int:
    # Python's round() is banker's rounding (round(2.5) == 2); counts should not depend on parity.
    return int(math.floor(x + 0.5))


def random_state(seed: int) -> np.random.RandomState:
    # The legacy RandomState stream is frozen across numpy versions (Generator's is not
    # guaranteed), so the same seed picks the same rows after an upgrade.
    return np.random.RandomState(seed)


def labels_of(table: pa.Table) -> np.ndarray:
    return table["label"].to_numpy()


def take(table: pa.Table, indices: np.ndarray) -> pa.Table:
    return table.take(pa.array(np.asarray(indices, dtype=np.int64)))


def stratified_split(labels: np.ndarray, fractions: Sequence[float], seed: int) -> list[np.ndarray]:
    """Split row indices class by class: part ``i+1`` receives ``round(n_c * fractions[i])``
    rows of each class ``c``, part 0 the rest. Each part is returned sorted."""
    rs = random_state(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(len(fractions) + 1)]
    for c in np.unique(labels):
        idx = rs.permutation(np.flatnonzero(labels == c))
        start = 0
        for i, fraction in enumerate(fractions, start=1):
            n = min(round_half_up(len(idx) * fraction), len(idx) - start)
            parts[i].append(idx[start : start + n])
            start += n
        parts[0].append(idx[start:])
    return [np.sort(np.concatenate(p)) if p else np.zeros(0, np.int64) for p in parts]


def stratified_counts(counts: np.ndarray, n_total: int) -> np.ndarray:
    """Rows per class for a stratified sample of ``n_total`` rows from a pool with ``counts``
    per class: the proportional shares ``n_total · counts / counts.sum()`` rounded down, the
    remaining rows to the largest remainders (ties: lower class id), every class with rows
    given at least one when ``n_total`` allows it (a few-shot class with no example could not
    be learned at all)."""
    counts = np.asarray(counts, dtype=np.int64)
    present = counts > 0
    if n_total < int(present.sum()):
        raise DataError(
            f"few_shot n_total={n_total} is smaller than the {int(present.sum())} classes; "
            f"allowed: n_total >= {int(present.sum())} (one example per class at least)"
        )
    share = n_total * counts / counts.sum()
    out = np.floor(share).astype(np.int64)
    out[present & (out == 0)] = 1
    while out.sum() > n_total:  # the minimum of 1 overshot: take from the largest classes
        out[np.argmax(np.where(out > 1, out - share, -np.inf))] -= 1
    order = np.lexsort((np.arange(len(counts)), -(share - out)))
    for c in order[: n_total - int(out.sum())]:
        out[c] += 1
    return out


def draw_per_class(labels: np.ndarray, sizes: dict[int, list[int]], seed: int) -> list[np.ndarray]:
    """For each class ``c`` (in label order) shuffle its row indices with one seeded stream and
    cut consecutive, hence disjoint, chunks of ``sizes[c]``; chunk ``j`` of every class goes
    to output ``j`` (sorted)."""
    rs = random_state(seed)
    n_out = max(len(s) for s in sizes.values())
    out: list[list[np.ndarray]] = [[] for _ in range(n_out)]
    for c in sorted(sizes):
        idx = rs.permutation(np.flatnonzero(labels == c))
        start = 0
        for j, n in enumerate(sizes[c]):
            out[j].append(idx[start : start + n])
            start += n
    return [np.sort(np.concatenate(chunks)) for chunks in out]


def make_splits(raw: RawData, cfg: DataConfig) -> dict[str, pa.Table]:
    """Return ``{"train", "validation", "test"}`` tables (module docstring has the rule)."""
    splits = dict(raw.splits)
    if cfg.dev_test_fraction is not None:
        return dev_splits(splits, cfg)
    missing = [s for s in ("validation", "test") if s not in splits or splits[s].num_rows == 0]
    if not missing:
        return splits
    fractions = [cfg.validation_fraction if s == "validation" else cfg.test_fraction for s in missing]
    train = splits["train"]
    rest, *carved = stratified_split(labels_of(train), fractions, cfg.split_seed)
    for split, indices in zip(missing, carved, strict=True):
        splits[split] = take(train, indices)
    splits["train"] = take(train, rest)
    return splits


def dev_splits(splits: dict[str, pa.Table], cfg: DataConfig) -> dict[str, pa.Table]:
    """The dev rule. SCL-MOO Sec. 3 (few-shot, "similar to" Gunel et al.): "we sample 500
    examples from the original validation set of each dataset to build our validation set, and
    half of the validation to build the test set". Here: the source's validation split is the
    dev split; ``dev_test_fraction`` of each of its classes (``stratified_split``, seeded by
    ``split_seed``) becomes the test split; the rest is the validation split, cut down to
    ``dev_validation_max`` rows when it has more (stratified by largest remainder, the same
    seed), so the two are disjoint. The train split is the source's train split, untouched (a
    few-shot protocol samples it afterwards). A labelled test split of the source is not used.
    A source without a dev split (a single file, a bundled corpus) first gives
    ``validation_fraction`` of its train rows per class to a dev split."""
    train = splits["train"]
    dev = splits.get("validation")
    if dev is None or dev.num_rows == 0:
        rest, carved = stratified_split(labels_of(train), [cfg.validation_fraction], cfg.split_seed)
        train, dev = take(train, rest), take(train, carved)
    assert cfg.dev_test_fraction is not None  # the dev rule's (make_splits)
    keep, test = stratified_split(labels_of(dev), [cfg.dev_test_fraction], cfg.split_seed)
    cap = cfg.dev_validation_max
    if cap is not None and len(keep) > cap:
        labels = labels_of(dev)[keep]
        counts = np.bincount(labels)
        classes = int((counts > 0).sum())
        if cap < classes:
            raise DataError(
                f"data.dev_validation_max={cap} is smaller than the {classes} classes of the dev split; "
                f"allowed: dev_validation_max >= {classes}"
            )
        per_class = stratified_counts(counts, cap)
        (chosen,) = draw_per_class(labels, {c: [int(n)] for c, n in enumerate(per_class)}, cfg.split_seed)
        keep = keep[chosen]
    return {"train": train, "validation": take(dev, keep), "test": take(dev, test)}
