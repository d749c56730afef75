"""A seeded train/validation/test split of multi-label data that keeps every label in train
(``split_multilabel``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrasweep.data.multilabel.labels import multi_hot
from contrasweep.data.splits import random_state, round_half_up, take
from contrasweep.errors import DataError


def split_multilabel(
    table: pa.Table,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.2,
    seed: int = 0,
    num_labels: int | None = None,
) -> dict[str, pa.Table]:
    """Seeded train/validation/test split that keeps every label in train.

    Targets: ``round_half_up(N * test_fraction)`` test and ``round_half_up(N *
    validation_fraction)`` validation documents, the rest train. Procedure, with one
    seeded random priority order over the documents (``RandomState(seed).permutation``)
    and labels visited from the rarest (fewest documents; ties: smaller id):

    1. Train: for each label not yet carried by a train document, its highest-priority
       document goes to train. At this point only train holds documents, so **every label
       with at least one document appears in train** (hence every label with ≥ 3).
    2. Test, then validation: for each label with ≥ 3 documents not yet in that split, its
       highest-priority unassigned document goes there, while the split is below its target
       (best effort: a label's documents may all be taken already).
    3. The remaining documents, in priority order, fill test and then validation up to their
       targets; the rest is train. Reserved documents can make a split exceed its target
       on very small data.

    This is not iterative stratification (which would need a new dependency); it only
    guarantees coverage. Each returned table keeps the input's row order.
    """
    for key, value in (("validation_fraction", validation_fraction), ("test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise DataError(f"{key} must be a number in [0, 1), got {value!r}")
    if validation_fraction + test_fraction >= 1.0:
        raise DataError(
            f"validation_fraction + test_fraction = {validation_fraction + test_fraction:g}; "
            "allowed: a sum below 1 (train needs rows)"
        )
    n = table.num_rows
    labels = table["labels"]
    if num_labels is None:
        flat = pc.list_flatten(labels)
        num_labels = int(pc.max(flat).as_py()) + 1 if len(flat) else 0
    y = multi_hot(labels, num_labels).astype(bool)
    priority = np.empty(n, dtype=np.int64)
    priority[random_state(seed).permutation(n)] = np.arange(n)
    TRAIN, VALIDATION, TEST, FREE = 0, 1, 2, -1
    split = np.full(n, FREE, dtype=np.int64)
    targets = {TEST: round_half_up(n * test_fraction), VALIDATION: round_half_up(n * validation_fraction)}
    counts = y.sum(axis=0)
    rarest_first = [c for c in np.argsort(counts, kind="stable") if counts[c] > 0]

    def reserve(label: int, part: int) -> None:
        docs = np.flatnonzero(y[:, label])
        if (split[docs] == part).any():
            return
        free = docs[split[docs] == FREE]
        if free.size:
            split[free[np.argmin(priority[free])]] = part

    for label in rarest_first:
        reserve(label, TRAIN)
    for part in (TEST, VALIDATION):
        for label in rarest_first:
            if counts[label] >= 3 and (split == part).sum() < targets[part]:
                reserve(label, part)
    free = [doc for doc in np.argsort(priority) if split[doc] == FREE]
    n_test = max(0, targets[TEST] - int((split == TEST).sum()))
    n_val = max(0, targets[VALIDATION] - int((split == VALIDATION).sum()))
    split[free[:n_test]] = TEST
    split[free[n_test : n_test + n_val]] = VALIDATION
    split[free[n_test + n_val :]] = TRAIN
    return {
        name: take(table, np.flatnonzero(split == part))
        for name, part in (("train", TRAIN), ("validation", VALIDATION), ("test", TEST))
    }
