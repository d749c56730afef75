"""Statistics of a label assignment (frequencies, cardinality, head and tail), logged with a
sweep as ``data_stats.json``. The head/tail rule itself belongs to the metrics that use it
(``trainables.evaluation.multilabel.head_label_mask``).
Paper references are to abalone_multilabel.txt (Audibert et al., "Exploring Contrastive
Learning for Long-Tailed Multi-Label Text Classification"; docs/architecture.md lists the papers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from contrasweep.data.multilabel.labels import multi_hot
from contrasweep.errors import DataError


def label_statistics(labels, label_names: Sequence[str], head_mass: float | None = None) -> dict[str, Any]:
    """Statistics of a label assignment, plain JSON-able values for logging with a sweep.

    ``labels`` is a multi-hot ``[N, L]`` matrix, a pyarrow list column or a sequence of id
    lists. Returned keys:

    * ``num_docs``, ``num_labels`` (L);
    * ``label_counts`` / ``label_frequency``: documents carrying each label (name → count,
      and count / num_docs);
    * ``cardinality``: mean number of labels per document (Table 1's L̄ in the paper);
      ``density``: cardinality / L;
    * ``distinct_combinations``: distinct label sets (the empty set counts if it occurs);
      ``docs_without_labels``;
    * ``head_labels`` / ``tail_labels`` (names, by decreasing count): see
      :func:`head_label_mask` (head = fewest most frequent labels covering ``head_mass`` of
      all label occurrences); ``head_share``: the share they actually cover;
    * ``max_min_ratio``: largest count / smallest non-zero count (1.0 when balanced).
    """
    names = [str(n) for n in label_names]
    y = np.asarray(labels) if isinstance(labels, np.ndarray) else multi_hot(labels, len(names))
    if y.ndim != 2 or y.shape[1] != len(names):
        raise DataError(f"labels have shape {y.shape}; allowed: [N, {len(names)}] (one column per label name)")
    n_docs = int(y.shape[0])
    counts = y.sum(axis=0).astype(np.int64)
    per_doc = y.sum(axis=1)
    # imported here: the spec imports this package to check a data section, before torch is needed
    from trainables.evaluation.multilabel import HEAD_MASS, head_label_mask  # scikit-learn: only here

    head_mass = HEAD_MASS if head_mass is None else head_mass
    mask = head_label_mask(counts, head_mass)
    by_count = np.argsort(-counts, kind="stable")
    nonzero = counts[counts > 0]
    total = int(counts.sum())
    cardinality = float(per_doc.mean()) if n_docs else 0.0
    return {
        "num_docs": n_docs,
        "num_labels": len(names),
        "label_counts": {n: int(c) for n, c in zip(names, counts)},
        "label_frequency": {n: (float(c) / n_docs if n_docs else 0.0) for n, c in zip(names, counts)},
        "cardinality": cardinality,
        "density": cardinality / len(names) if names else 0.0,
        "distinct_combinations": int(len(np.unique(y, axis=0))) if n_docs else 0,
        "docs_without_labels": int((per_doc == 0).sum()),
        "head_mass": float(head_mass),
        "head_labels": [names[i] for i in by_count if mask[i]],
        "tail_labels": [names[i] for i in by_count if not mask[i]],
        "head_share": float(counts[mask].sum() / total) if total else 0.0,
        "max_min_ratio": float(nonzero.max() / nonzero.min()) if nonzero.size else float("nan"),
    }
