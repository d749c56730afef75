"""Multi-label data from the Hugging Face hub (``data: {task: multilabel, source: hub:NAME[:CONFIG]}``),
when the hub is reachable; offline it is the one-line error of ``sources.load_hub``.

Layouts are those of ``read.read_multilabel``: a list-valued ``label`` column (names, or
ids of a ``Sequence(ClassLabel)`` feature such as go_emotions' ``labels``, which are turned into
the ClassLabel names), or one 0/1 column per label (``label_columns``). Each split is parsed on
its own and its ids are then mapped onto the sorted union of all splits' names, so one label
has one id everywhere.

Splits follow the rule of single-label data (``splits.py``): a split the dataset provides
(``train``; ``validation``/``dev``/...; ``test``) is used as is; a missing one is carved out
of train by ``split_multilabel`` (seeded, every label kept in train) with its fraction.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from contrasweep.data.multilabel.labels import LABELS_TYPE, sort_names
from contrasweep.data.multilabel.read import parse_multilabel_table
from contrasweep.data.multilabel.split import split_multilabel
from contrasweep.data.sources import TEST_NAMES, VALIDATION_NAMES, HubSource
from contrasweep.errors import DataError

OURS = (("train", ("train",)), ("validation", VALIDATION_NAMES), ("test", TEST_NAMES))


def hub_multilabel(
    source: HubSource,
    text: str = "text",
    label: str = "labels",
    label_columns=None,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> tuple[dict[str, pa.Table], list[str]]:
    """Train/validation/test tables (``text``, ``labels`` as sorted id lists) and label names."""
    dd = source.dataset()
    found = {ours: next((n for n in names if n in dd), None) for ours, names in OURS}
    if found["train"] is None:
        raise DataError(f"hub dataset {source.name!r} has no 'train' split; it has: {', '.join(dd)}")
    parsed = {}
    for ours, split in found.items():
        if split is None:
            continue
        table = _names_for_class_ids(dd[split], label) if label_columns is None else dd[split].with_format("arrow")[:]
        parsed[ours] = parse_multilabel_table(table, text, label, label_columns, where=f"hub:{source.name} ({split})")
    names = sort_names({n for _, split_names in parsed.values() for n in split_names})
    tables = {ours: _remap(table, split_names, names) for ours, (table, split_names) in parsed.items()}
    missing = [s for s in ("validation", "test") if s not in tables]
    if missing:
        carved = split_multilabel(
            tables["train"],
            validation_fraction if "validation" in missing else 0.0,
            test_fraction if "test" in missing else 0.0,
            seed,
            num_labels=len(names),
        )
        tables["train"] = carved["train"]
        tables.update({s: carved[s] for s in missing})
    return {s: tables[s] for s in ("train", "validation", "test")}, names


def _names_for_class_ids(dataset, label: str) -> pa.Table:
    """The split as Arrow, with ``Sequence(ClassLabel)`` ids in ``label`` replaced by their names."""
    table = dataset.with_format("arrow")[:]
    feature = dataset.features.get(label)
    inner = getattr(feature, "feature", None)  # Sequence / List of ...
    names = getattr(inner, "names", None)  # ... ClassLabel
    if names is None or label not in table.column_names:
        return table
    cells = [
        None if ids is None else [names[i] for i in ids if i is not None and 0 <= i < len(names)]
        for ids in table[label].to_pylist()
    ]
    return table.set_column(table.schema.get_field_index(label), label, pa.array(cells, type=pa.list_(pa.string())))


def _remap(table: pa.Table, split_names: list[str], names: list[str]) -> pa.Table:
    index = np.array([names.index(n) for n in split_names], dtype=np.int64)
    ids = [sorted(index[row].tolist()) for row in table["labels"].to_pylist()]
    return table.set_column(table.schema.get_field_index("labels"), "labels", pa.array(ids, type=LABELS_TYPE))
