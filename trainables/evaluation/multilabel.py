"""Multi-label evaluation as in abalone_multilabel.txt (Audibert et al.).

* :func:`multilabel_metrics`: "the hamming loss, Micro-F1 score and Macro-F1 score"
  (Sec. 4.3), plus per-label F1 and macro-F1 over the head and the tail labels, since the
  paper's point is the long tail (Sec. 1, 3.2).
* :func:`combination_clustering`: Silhouette score and Davies–Bouldin index of the
  embeddings when "each unique label combination" is a class and only the most frequent
  half of the combinations is kept (Sec. 5.3, Table 4, App. D).
* :func:`threshold_predictions`: probabilities (or logits) to multi-hot predictions.

All metrics are scikit-learn's. Label matrices are multi-hot ``[N, L]`` arrays (0/1 or
bool); ``contrasweep.data.multilabel.multi_hot`` builds them from a ``labels`` column, and
:func:`head_label_mask` splits the labels into head and tail (the rule the data statistics use too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.metrics import davies_bouldin_score, f1_score, hamming_loss, silhouette_score

HEAD_MASS = 0.5  # default share of label occurrences that the head labels cover


def head_label_mask(counts, head_mass: float = HEAD_MASS) -> np.ndarray:
    """Which labels form the head of the distribution (boolean mask over label ids).

    Definition: sort the labels by count, largest first (ties: smaller id first); the head
    is the shortest prefix whose counts add up to at least ``head_mass`` of all label
    occurrences (default: half). All other labels, and every label with count 0, are tail.
    With 5 labels counted 300/150/100/75/60 (685 occurrences), the head is the first two
    (450 = 66% ≥ 50%; the first alone is 44%).
    """
    counts = np.asarray(counts, dtype=np.float64).ravel()
    if not 0.0 < head_mass <= 1.0:
        raise ValueError(f"head_mass must be a number in (0, 1], got {head_mass!r}")
    mask = np.zeros(len(counts), dtype=bool)
    total = counts.sum()
    if total <= 0:
        return mask
    order = np.argsort(-counts, kind="stable")
    covered = np.cumsum(counts[order])
    n_head = int(np.searchsorted(covered, head_mass * total - 1e-9 * total) + 1)
    mask[order[:n_head]] = True
    mask &= counts > 0
    return mask


def threshold_predictions(scores, threshold: float = 0.5) -> np.ndarray:
    """Multi-hot int8 predictions: label ``j`` is predicted for document ``i`` when
    ``scores[i, j] >= threshold``.

    Use ``threshold=0.5`` for sigmoid probabilities and ``0.0`` for logits (same decision).
    No label is forced: a document whose scores are all below the threshold gets an
    all-zero row, which :func:`multilabel_metrics` accepts.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be [N, L], got shape {s.shape}")
    return (s >= threshold).astype(np.int8)


def multilabel_metrics(
    y_true,
    y_pred,
    label_names: Sequence[str] | None = None,
    head_labels: Sequence[int | str] | None = None,
    train_counts=None,
    head_mass: float = HEAD_MASS,
) -> dict:
    """Micro-/macro-F1, Hamming loss, per-label F1 and head/tail macro-F1.

    Args:
        y_true, y_pred: ``[N, L]`` multi-hot arrays. Rows may be all zero (a document with no
            gold label, or no predicted label).
        label_names: names for ``per_label_f1`` (default ``"0"``, ``"1"``, ...).
        head_labels: the head labels, as ids or names (names need ``label_names``).
        train_counts: used only when ``head_labels`` is None: per-label document counts in
            the *training* data (``[L]`` array, or a name → count mapping), from which the
            head is derived with :func:`head_label_mask` (fewest
            most frequent labels covering ``head_mass`` of all training label occurrences).
            Counting the test labels instead would let the evaluation set define the split.
        head_mass: see ``train_counts``.

    Returns:
        ``micro_f1``, ``macro_f1``, ``hamming_loss`` (scikit-learn, fractions: the paper's
        tables print the Hamming loss ×10³), ``per_label_f1`` (name → F1). When a head is
        given or derived, also ``head_labels``/``tail_labels`` (names), ``head_macro_f1`` and
        ``tail_macro_f1``: the unweighted mean F1 over those labels (NaN for an empty
        group).

    Every F1 uses ``zero_division=0``: a label that is neither present nor predicted scores
    0 and pulls macro-F1 down; the micro-F1 of data with no positive at all is 0.
    """
    yt = _multi_hot(y_true, "y_true")
    yp = _multi_hot(y_pred, "y_pred")
    if yt.shape != yp.shape:
        raise ValueError(f"y_true {yt.shape} and y_pred {yp.shape} must have the same shape [N, L]")
    n_labels = yt.shape[1]
    names = [str(i) for i in range(n_labels)] if label_names is None else [str(n) for n in label_names]
    if len(names) != n_labels:
        raise ValueError(f"{len(names)} label names for {n_labels} label columns")
    per_label = f1_score(yt, yp, average=None, labels=list(range(n_labels)), zero_division=0)
    out = {
        "micro_f1": float(f1_score(yt, yp, average="micro", zero_division=0)),
        "macro_f1": float(f1_score(yt, yp, average="macro", zero_division=0)),
        "hamming_loss": float(hamming_loss(yt, yp)),
        "per_label_f1": {name: float(v) for name, v in zip(names, per_label)},
    }
    head = _head_ids(head_labels, train_counts, names, head_mass)
    if head is not None:
        tail = [j for j in range(n_labels) if j not in set(head)]
        out["head_labels"] = [names[j] for j in head]
        out["tail_labels"] = [names[j] for j in tail]
        out["head_macro_f1"] = _group_f1(yt, yp, head)
        out["tail_macro_f1"] = _group_f1(yt, yp, tail)
    return out


def _multi_hot(y, what: str) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim != 2:
        raise ValueError(f"{what} must be a multi-hot [N, L] array, got shape {a.shape}")
    if a.size and not np.isin(a, (0, 1)).all():
        raise ValueError(f"{what} must hold only 0/1 values (use threshold_predictions for scores)")
    return a.astype(np.int8)


def _head_ids(head_labels, train_counts, names: list[str], head_mass: float) -> list[int] | None:
    if head_labels is not None:
        index = {n: j for j, n in enumerate(names)}
        ids = []
        for label in head_labels:
            if isinstance(label, str):
                if label not in index:
                    raise ValueError(f"head label {label!r} is not a label name; names: {', '.join(names)}")
                ids.append(index[label])
            elif isinstance(label, (int, np.integer)) and 0 <= int(label) < len(names):
                ids.append(int(label))
            else:
                raise ValueError(f"head label {label!r} is not an id in [0, {len(names) - 1}] or a name")
        return sorted(set(ids))
    if train_counts is None:
        return None
    if isinstance(train_counts, Mapping):
        counts = np.array([train_counts.get(n, 0) for n in names], dtype=np.float64)
    else:
        counts = np.asarray(train_counts, dtype=np.float64).ravel()
    if counts.shape != (len(names),):
        raise ValueError(f"train_counts has {counts.size} entries for {len(names)} labels")
    return np.flatnonzero(head_label_mask(counts, head_mass)).tolist()


def _group_f1(yt: np.ndarray, yp: np.ndarray, ids: list[int]) -> float:
    if not ids:
        return float("nan")
    return float(f1_score(yt, yp, average="macro", labels=ids, zero_division=0))


def combination_clustering(
    embeddings,
    y_true,
    keep_fraction: float = 0.5,
    max_points: int | None = 10000,
    seed: int = 0,
    normalize: bool = False,
    include_empty: bool = True,
) -> dict:
    """Silhouette score and Davies–Bouldin index with label combinations as classes.

    The paper's procedure (Sec. 5.3): "We treat each unique label combination in the dataset
    as a separate class [...] our analysis focuses on subsets of the most prevalent label
    combinations, retaining only half of the most represented label combination"; App. D
    makes "half" a share of the *classes*: "create one class for each unique multi-label
    combination, resulting in up to 2^L classes. Although 50% of these were retained in
    Table 4 [...]"; Table 4 uses "10^4 embeddings from RCV1-v2 test set". Here:

    1. Each distinct row of ``y_true`` is a class (the empty set too, unless
       ``include_empty=False`` drops label-less documents first).
    2. Classes are ranked by number of documents, largest first (ties: the label set's
       id vector in lexicographic order, descending — only for determinism); the top
       ``ceil(keep_fraction × number of classes)`` are kept with all their documents.
    3. If more than ``max_points`` documents remain, ``max_points`` of them are drawn
       uniformly without replacement (``numpy.random.default_rng(seed)``; ``None`` keeps all).
       Classes are counted on the full input, so the kept set does not depend on the draw.
    4. ``silhouette_score`` and ``davies_bouldin_score`` (scikit-learn) of the embeddings
       with these classes. The paper names neither a distance nor a normalisation; scikit-
       learn's defaults are used: Euclidean distance on the embeddings as given (Davies–
       Bouldin is Euclidean-only there, so both scores share one geometry).
       ``normalize=True`` L2-normalises the embeddings first, i.e. the cosine geometry the
       contrastive losses use (‖a−b‖² = 2 − 2 cos(a, b) on the unit sphere).

    Degenerate cases give NaN scores and a ``reason`` instead of an exception: fewer than
    two classes kept (or left after subsampling), or as many classes as points (the
    silhouette needs 2 ≤ classes ≤ points − 1).

    Returns:
        ``silhouette`` (higher is better, in [-1, 1]), ``davies_bouldin`` (lower is better),
        ``n_points`` (scored), ``n_combinations`` (classes in the input),
        ``n_kept_combinations``, ``kept_point_fraction`` (share of input documents in the
        kept classes, before subsampling) and ``reason`` (None, or why the scores are NaN;
        a string, not a metric).
    """
    x = np.asarray(embeddings, dtype=np.float64)
    y = _multi_hot(y_true, "y_true")
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(f"embeddings {x.shape} must be [N, d] with N = len(y_true) = {len(y)}")
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction!r}")
    if max_points is not None and max_points < 1:
        raise ValueError(f"max_points must be >= 1 or None, got {max_points!r}")
    n_input = len(y)
    if not include_empty:
        has_label = y.any(axis=1)
        x, y = x[has_label], y[has_label]

    combos, classes, sizes = np.unique(y, axis=0, return_inverse=True, return_counts=True)
    classes = classes.ravel()
    # largest first; ties broken by the combination vector (np.lexsort: last key is primary)
    order = (
        np.lexsort(tuple(-combos[:, j] for j in reversed(range(combos.shape[1]))) + (-sizes,))
        if len(combos)
        else np.zeros(0, dtype=np.int64)
    )
    n_keep = min(len(combos), math.ceil(keep_fraction * len(combos) - 1e-9))
    kept = np.isin(classes, order[:n_keep])
    out: dict[str, float | str | None] = {
        "silhouette": float("nan"),
        "davies_bouldin": float("nan"),
        "n_points": 0,
        "n_combinations": int(len(combos)),
        "n_kept_combinations": int(n_keep),
        "kept_point_fraction": float(kept.sum() / n_input) if n_input else 0.0,
        "reason": None,
    }
    if n_keep < 2:
        out["reason"] = f"{n_keep} label combination(s) kept; the scores need at least 2"
        return out
    idx = np.flatnonzero(kept)
    if max_points is not None and len(idx) > max_points:
        idx = np.sort(np.random.default_rng(seed).choice(idx, size=max_points, replace=False))
    xs, cs = x[idx], classes[idx]
    if normalize:
        xs = xs / np.maximum(np.linalg.norm(xs, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    n_classes = len(np.unique(cs))
    out["n_points"] = int(len(idx))
    if n_classes < 2:
        out["reason"] = f"{n_classes} label combination(s) left after subsampling; the scores need at least 2"
        return out
    if n_classes > len(idx) - 1:
        out["reason"] = (
            f"{n_classes} label combinations for {len(idx)} points; the silhouette needs fewer classes than points"
        )
        return out
    out["silhouette"] = float(silhouette_score(xs, cs, metric="euclidean"))
    out["davies_bouldin"] = float(davies_bouldin_score(xs, cs))
    return out


def train_label_counts(context) -> np.ndarray:
    """Documents per label in the training split of a ``StageContext`` (defines head and tail),
    computed once per epoch (the split stores labels as fixed-size 0/1 lists)."""
    key = "multilabel/train_counts"
    if key not in context.cache:
        import pyarrow.compute as pc

        column = context.tables["train"].column("labels")
        width = column.type.list_size
        context.cache[key] = pc.list_flatten(column).to_numpy().astype(np.int64).reshape(-1, width).sum(0)
    return context.cache[key]


def context_label_names(context, num_labels: int) -> list[str]:
    """The label names the data carry (``context.data["label_names"]``), else ``"0"``, ``"1"``, ..."""
    names = (context.data or {}).get("label_names")
    return (
        [str(n) for n in names]
        if names is not None and len(names) == num_labels
        else [str(j) for j in range(num_labels)]
    )
