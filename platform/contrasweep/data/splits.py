"""Train/validation/test splits, and the seeded per-class sampling the protocols share.

Rule for splits: a split the source provides (hub dataset, mapping of files) is used as is,
after unlabelled rows are dropped. A split the source lacks, or whose rows are all
unlabelled (GLUE's test split: labels -1), is carved out of the source's train split by a
stratified, seeded split (``split_seed``): ``test_fraction`` of the train rows of each class
go to test and ``validation_fraction`` to validation (both fractions of the same pool,
carved in one pass; the rest stays train). A single-file source or a bundled corpus thus
becomes 70/10/20 by default.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pyarrow as pa

from contrasweep.data.config import DataConfig
from contrasweep.data.sources import RawData


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
            parts[i].append(idx[start:start + n])
            start += n
        parts[0].append(idx[start:])
    return [np.sort(np.concatenate(p)) if p else np.zeros(0, np.int64) for p in parts]


def make_splits(raw: RawData, cfg: DataConfig) -> dict[str, pa.Table]:
    """Return ``{"train", "validation", "test"}`` tables (module docstring has the rule)."""
    splits = dict(raw.splits)
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
