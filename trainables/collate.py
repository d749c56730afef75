"""Dynamic padding of tokenised rows into numpy batches."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def collate_numpy(table: pa.Table, indices, pad_id: int = 0) -> dict[str, np.ndarray]:
    """Rows ``indices`` of a prepared split as int64 arrays padded to the longest row of the
    batch: ``input_ids``, ``attention_mask``, ``token_type_ids`` (``[B, T]``; zeros when the
    split has no such column) and ``labels`` (``[B]`` class ids, or ``[B, L]`` multi-hot for
    a multi-label split, whose labels are fixed-size lists)."""
    rows = table.take(pa.array(np.asarray(indices, dtype=np.int64)))
    ids = rows.column("input_ids")
    lengths = pc.list_value_length(ids).to_numpy(zero_copy_only=False).astype(np.int64)
    width = int(lengths.max()) if len(lengths) else 0
    mask = np.arange(width)[None, :] < lengths[:, None]
    batch = {
        "input_ids": _pad(ids, mask, pad_id),
        "attention_mask": mask.astype(np.int64),
        "labels": _labels(rows.column("labels")),
    }
    if "token_type_ids" in rows.column_names:
        batch["token_type_ids"] = _pad(rows.column("token_type_ids"), mask, 0)
    else:
        batch["token_type_ids"] = np.zeros_like(batch["attention_mask"])
    return batch


def _labels(column: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_fixed_size_list(column.type):
        width = column.type.list_size
        return pc.list_flatten(column).to_numpy().astype(np.int64).reshape(-1, width)
    return column.to_numpy().astype(np.int64)


def _pad(column: pa.ChunkedArray, mask: np.ndarray, value: int) -> np.ndarray:
    out = np.full(mask.shape, value, dtype=np.int64)
    # Row-major order of the True cells of `mask` is exactly the order of the flattened values.
    out[mask] = pc.list_flatten(column).to_numpy().astype(np.int64)
    return out
