"""Label filtering of abalone_multilabel.txt Sec. 4.1: keep the labels carried by at least
``min_count`` training documents (``filter_labels``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from contrasweep.data.multilabel.labels import LABELS_TYPE, is_int, multi_hot
from contrasweep.errors import DataError


class LabelFilter(NamedTuple):
    data: Any  # the filtered table, or {split: table} when a mapping was given
    label_names: list[str]  # kept names; position = new id
    mapping: dict[int, int]  # old id -> new id, kept labels only
    counts: dict[str, int]  # kept name -> documents in the counting table
    removed: list[str]  # names of the removed labels
    empty_docs: dict[str, int]  # per split ("all" for one table): documents left with no label


def filter_labels(
    data: pa.Table | Mapping[str, pa.Table],
    label_names: Sequence[str],
    min_count: int,
    count_split: str = "train",
    drop_empty: bool = False,
) -> LabelFilter:
    """Keep the labels carried by at least ``min_count`` documents of the training data.

    This is the paper's RCV1-v2 rule (Sec. 4.1: "we have opted to retain only those labels
    that occur at least 30 times in the training set"). Labels are counted in
    ``data[count_split]`` when ``data`` is a ``{split: table}`` mapping (every split is then
    filtered with the same kept set), or in ``data`` itself when it is one table. Kept labels
    keep their relative order (so new ids still follow the sorted names) and are renumbered
    ``0..K-1``; removed ids are deleted from every document's label list.

    Documents left without a label are *kept* by default (``drop_empty=False``): the paper
    changes only the label set — "We have retained the original training/test split, albeit
    modifying the number of labels" — and its Table 1 sizes match the original RCV1-v2 split
    (19.7k train + 3.5k val ≈ the 23,149 original training documents; 781k test). With
    ``drop_empty=True`` they are removed. ``empty_docs`` reports how many there are either
    way.
    """
    if not is_int(min_count) or min_count < 1:
        raise DataError(f"min_count must be an integer >= 1, got {min_count!r}")
    names = [str(n) for n in label_names]
    tables = dict(data) if isinstance(data, Mapping) else {"data": data}
    if isinstance(data, Mapping):
        if count_split not in tables:
            raise DataError(f"count_split {count_split!r} is not a split of the data; allowed: {', '.join(tables)}")
        counting = tables[count_split]
    else:
        counting = data
    for split, table in tables.items():
        if "labels" not in table.column_names:
            raise DataError(f"{split}: column 'labels' not found; allowed: a table from read_multilabel/bbc_multilabel")
    counts = multi_hot(counting["labels"], len(names)).sum(axis=0)
    kept = [i for i in range(len(names)) if counts[i] >= min_count]
    if not kept:
        top = int(np.argmax(counts)) if len(names) else None
        most = f"{names[top]!r} with {int(counts[top])}" if top is not None else "none"
        raise DataError(
            f"no label occurs in at least {min_count} documents of the counting split (most frequent: {most}); "
            "allowed: a smaller min_count"
        )
    mapping = {old: new for new, old in enumerate(kept)}
    lookup = np.full(len(names), -1, dtype=np.int64)
    lookup[kept] = np.arange(len(kept))
    out, empty = {}, {}
    for split, table in tables.items():
        ids = [[int(lookup[i]) for i in row if lookup[i] >= 0] for row in table["labels"].to_pylist()]
        no_label = np.array([not row for row in ids], dtype=bool)
        empty[split] = int(no_label.sum())
        table = table.set_column(table.schema.get_field_index("labels"), "labels", pa.array(ids, type=LABELS_TYPE))
        if drop_empty and no_label.any():
            table = table.filter(pa.array(~no_label))
        out[split] = table
    result = out if isinstance(data, Mapping) else out["data"]
    if not isinstance(data, Mapping):
        empty = {"all": empty["data"]}
    return LabelFilter(
        data=result,
        label_names=[names[i] for i in kept],
        mapping=mapping,
        counts={names[i]: int(counts[i]) for i in kept},
        removed=[names[i] for i in range(len(names)) if counts[i] < min_count],
        empty_docs=empty,
    )
