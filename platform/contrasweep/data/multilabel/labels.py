"""Label sets as data: the ``labels`` column type, label-name ordering and multi-hot encoding.

Tables of the multi-label data modules have the columns ``text`` (string) and ``labels``
(``list<int32>``: the sorted, distinct label ids of the document, possibly empty); the label
names travel beside the table as a list whose position is the id. Ids follow the sorted label
names (numerically sorted when every name is an integer), the rule ``sources.py`` uses for
single-label data.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrasweep.errors import DataError

LABELS_TYPE = pa.list_(pa.int32())


def sort_names(names) -> list[str]:
    """Sorted label names: numerically when every name is an integer, else as strings."""
    names = list(names)
    try:
        return sorted(names, key=int)
    except ValueError:
        return sorted(names)


def label_table(texts: list[str], ids: list[list[int]]) -> pa.Table:
    """A ``text`` / ``labels`` table from texts and per-document id lists."""
    return pa.table({"text": pa.array(texts, type=pa.string()), "labels": pa.array(ids, type=LABELS_TYPE)})


def multi_hot(label_lists, num_labels: int) -> np.ndarray:
    """``[N, num_labels]`` int8 0/1 matrix from per-document label-id lists.

    ``label_lists`` is a pyarrow list column (``table["labels"]``) or any sequence of id
    sequences. Empty lists give all-zero rows; an id outside ``[0, num_labels)`` is an error.
    """
    if isinstance(label_lists, (pa.ChunkedArray, pa.Array)):
        array = label_lists.combine_chunks() if isinstance(label_lists, pa.ChunkedArray) else label_lists
        if array.null_count:
            array = pc.fill_null(array, pa.scalar([], type=array.type))
        rows = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        cols = pc.list_flatten(array).to_numpy(zero_copy_only=False).astype(np.int64)
        n = len(array)
    else:
        lists = [list(ids) for ids in label_lists]
        n = len(lists)
        rows = np.repeat(np.arange(n), [len(ids) for ids in lists])
        cols = np.asarray([i for ids in lists for i in ids], dtype=np.int64)
    if cols.size and (cols.min() < 0 or cols.max() >= num_labels):
        bad = int(cols[(cols < 0) | (cols >= num_labels)][0])
        raise DataError(f"label id {bad} is out of range; allowed: ids in [0, {num_labels - 1}]")
    out = np.zeros((n, num_labels), dtype=np.int8)
    out[rows, cols] = 1
    return out


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
