"""Reading multi-label files and tables: a list-valued label column (names as lists, JSON lists
or separated strings) or one 0/1 column per label (``read_multilabel``,
``parse_multilabel_table``)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrasweep.data.config import FILE_SUFFIXES
from contrasweep.data.multilabel.labels import label_table, sort_names
from contrasweep.data.sources import read_file
from contrasweep.errors import DataError

log = logging.getLogger(__name__)

SEPARATORS = ("|", ";", ",")  # tried in this order when ``sep`` is None


def read_multilabel(
    path: str | os.PathLike,
    text: str = "text",
    label: str = "labels",
    label_columns: Sequence[str] | str | None = None,
    sep: str | None = None,
) -> tuple[pa.Table, list[str]]:
    """Read a local multi-label ``.csv``/``.jsonl``/``.json``/``.parquet`` file.

    Two layouts are accepted:

    (a) ``label_columns=None``: the column ``label`` holds the label *names* of each row:

        * a list (JSON array, parquet ``list<...>``): each item is one name;
        * a string (CSV, or a JSON string): either a JSON-encoded list (the cell starts with
          ``[``, e.g. ``["sport", "tech"]``) or names joined by one separator. The separator
          is ``sep`` if given, otherwise the first of ``|``, ``;``, ``,`` that occurs in any
          (non-JSON) cell of the column; so a name may not contain the separator, and a
          column whose names contain commas should use ``|``/``;`` or JSON lists.
          Surrounding whitespace is stripped, empty pieces are ignored;
        * a scalar number: one label, named by its value.

        An empty list or empty string is a document with no labels (kept); a null cell is a
        row without labels and is dropped, like rows with a null text.

    (b) one 0/1 column per label: ``label_columns=[...]`` names them, ``"auto"`` takes every
        column except ``text``. Values must be 0/1 (integers, floats or booleans) with no
        nulls; the column name is the label name.

    Duplicate names within a row are collapsed. Label ids are assigned by sorting the names
    (numerically if all are integers), so the same file always gives the same ids.

    Returns:
        ``(table, label_names)``: ``table`` has columns ``text`` (string) and ``labels``
        (``list<int32>``, sorted ids); ``label_names[i]`` is the name of id ``i``.

    Raises:
        DataError: one line naming the problem and what is allowed (missing file or column,
            an empty file, a non-0/1 value in a label column, no label at all).
    """
    path = _checked_path(path)
    if not isinstance(text, str) or not text:
        raise DataError(f"text must be a column name (a non-empty string), got {text!r}")
    table = read_file(path, [text, label] if label_columns is None else [text])
    return parse_multilabel_table(table, text, label, label_columns, sep, where=path)


def parse_multilabel_table(
    table: pa.Table,
    text: str = "text",
    label: str = "labels",
    label_columns: Sequence[str] | str | None = None,
    sep: str | None = None,
    where: str = "data",
) -> tuple[pa.Table, list[str]]:
    """``read_multilabel``'s layouts (a) and (b) on a table already in memory (a file's, or a
    hub split's); ``where`` names it in error messages. Returns ``(table, label_names)``."""
    _require_rows(table, where)
    if label_columns is None:
        _require_columns(table, [text, label], where)
        return _from_name_lists(table, text, label, sep, where)
    if label_columns == "auto":
        columns = [c for c in table.column_names if c != text]
        _require_columns(table, [text], where)
        if not columns:
            raise DataError(
                f"{where}: label_columns='auto' found no column besides {text!r}; allowed: one 0/1 column per label"
            )
    elif isinstance(label_columns, str) or not isinstance(label_columns, Sequence) or not label_columns:
        raise DataError(
            f"label_columns must be None, 'auto' or a non-empty list of column names, got {label_columns!r}"
        )
    else:
        columns = [str(c) for c in label_columns]
        if len(set(columns)) != len(columns) or text in columns:
            raise DataError(
                f"label_columns {columns} repeat a name or include the text column {text!r}; "
                "allowed: distinct label columns other than the text column"
            )
        _require_columns(table, [text, *columns], where)
    return _from_indicator_columns(table, text, columns, where)


def _checked_path(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise DataError(f"path must be a file path, got {path!r}")
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if not path.lower().endswith(FILE_SUFFIXES):
        raise DataError(f"{path}: unsupported file type; allowed: a {'/'.join(FILE_SUFFIXES)} file")
    if not os.path.isfile(path):
        raise DataError(f"file not found: {path}")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path} is empty; allowed: a file with a header (or keys) and at least one row")
    return path


def _require_rows(table: pa.Table, path: str) -> None:
    if table.num_rows == 0:
        raise DataError(f"{path} has no rows; allowed: a file with at least one document")


def _require_columns(table: pa.Table, columns: Sequence[str], path: str) -> None:
    for column in columns:
        if column not in table.column_names:
            raise DataError(f"{path}: column {column!r} not found; available columns: {', '.join(table.column_names)}")


def _text_column(table: pa.Table, text: str, path: str) -> pa.ChunkedArray:
    column = table[text]
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not pa.types.is_string(column.type):
        try:
            column = column.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise DataError(f"{path}: column {text!r} is not text ({column.type}); allowed: a string column") from None
    return column


def _from_name_lists(table: pa.Table, text: str, label: str, sep: str | None, path: str):
    column = table[label]
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    texts = _text_column(table, text, path).to_pylist()
    cells = column.to_pylist()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        if sep is None:
            sep = _detect_separator(cells)
        elif not isinstance(sep, str) or not sep:
            raise DataError(f"sep must be a non-empty string, got {sep!r}")
        parse = lambda cell: _split_cell(cell, sep, path, label)  # noqa: E731
    elif pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        parse = _list_cell
    elif pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_boolean(column.type):
        parse = lambda cell: [_name(cell)]  # noqa: E731
    else:
        raise DataError(
            f"{path}: column {label!r} has type {column.type}; allowed: a list of label names, or a string of "
            f"names separated by one of {' '.join(SEPARATORS)} (or a JSON list)"
        )
    kept_texts, name_sets = [], []
    for row_text, cell in zip(texts, cells):
        if row_text is None or cell is None:
            continue
        kept_texts.append(row_text)
        name_sets.append(sorted(set(parse(cell))))
    if len(kept_texts) < len(texts):
        log.info("%s: dropped %d rows without text or labels", path, len(texts) - len(kept_texts))
    if not kept_texts:
        raise DataError(f"{path}: no row has both a text and a label cell; allowed: non-null {text!r} and {label!r}")
    names = sort_names({n for names in name_sets for n in names})
    if not names:
        raise DataError(f"{path}: column {label!r} holds no label name; allowed: at least one label in the file")
    index = {n: i for i, n in enumerate(names)}
    ids = [sorted(index[n] for n in row) for row in name_sets]
    return label_table(kept_texts, ids), names


def _detect_separator(cells) -> str:
    for sep in SEPARATORS:
        if any(isinstance(c, str) and not c.lstrip().startswith("[") and sep in c for c in cells):
            return sep
    return SEPARATORS[0]  # no cell has two names; any separator gives the same result


def _split_cell(cell: str, sep: str, path: str, label: str) -> list[str]:
    stripped = cell.strip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError:
            raise DataError(
                f"{path}: column {label!r} has a cell starting with '[' that is not a JSON list: {cell[:60]!r}; "
                "allowed: a JSON list of names or names joined by one separator"
            ) from None
        if not isinstance(items, list):
            raise DataError(f"{path}: column {label!r} cell {cell[:60]!r} is not a JSON list of names")
        return _list_cell(items)
    return [piece.strip() for piece in stripped.split(sep) if piece.strip()]


def _list_cell(items) -> list[str]:
    return [name for name in (_name(v) for v in items if v is not None) if name]


def _name(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 3.0 from a float column names the label "3"
    return str(value).strip()


def _from_indicator_columns(table: pa.Table, text: str, columns: list[str], path: str):
    texts = _text_column(table, text, path)
    matrix = np.zeros((table.num_rows, len(columns)), dtype=np.int8)
    for j, name in enumerate(columns):
        matrix[:, j] = _indicator(table[name], name, path)
    keep = pc.is_valid(texts).to_numpy(zero_copy_only=False)
    if not keep.all():
        log.info("%s: dropped %d rows without text", path, int((~keep).sum()))
    if not keep.any():
        raise DataError(f"{path}: every {text!r} value is null; allowed: at least one row with text")
    names = sort_names(columns)
    order = [columns.index(n) for n in names]  # column position of each id
    matrix = matrix[keep][:, order]
    kept_texts = texts.filter(pa.array(keep)).to_pylist()
    ids = [np.flatnonzero(row).tolist() for row in matrix]
    return label_table(kept_texts, ids), names


def _indicator(column: pa.ChunkedArray, name: str, path: str) -> np.ndarray:
    allowed = "allowed: 0 or 1 (or true/false) in every row of a label column"
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if column.null_count:
        row = int(np.flatnonzero(pc.is_null(column).to_numpy(zero_copy_only=False))[0])
        raise DataError(f"{path}: label column {name!r} is empty in row {row}; {allowed}")
    if pa.types.is_boolean(column.type):
        return column.to_numpy(zero_copy_only=False).astype(np.int8)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        sample = column.slice(0, 1).to_pylist()[0]
        raise DataError(f"{path}: label column {name!r} has {column.type} values such as {sample!r}; {allowed}")
    values = column.to_numpy(zero_copy_only=False)
    bad = ~np.isin(values, (0, 1))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"{path}: label column {name!r} has the value {values[row].item()!r} in row {row}; {allowed}")
    return values.astype(np.int8)
