"""contrasweep.data.multilabel: reading label sets, the BBC-derived long-tailed corpus,
label filtering (ABALONE Sec. 4.1), label statistics, multi-hot encoding, the split."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrasweep.data.multilabel import (
    LABELS_TYPE,
    bbc_multilabel,
    filter_labels,
    label_statistics,
    multi_hot,
    read_multilabel,
    split_multilabel,
)
from contrasweep.errors import DataError
from trainables.evaluation.multilabel import head_label_mask


def _labels(table):
    return table["labels"].to_pylist()


def _one_line_error(excinfo):
    message = str(excinfo.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- read_multilabel


def test_csv_list_column_pipe_separated(tmp_path):
    path = tmp_path / "docs.csv"
    path.write_text('text,labels\nfirst,sport|tech\nsecond, tech \nthird,\n"fourth, with comma",politics|sport|sport\n')
    table, names = read_multilabel(path)
    assert names == ["politics", "sport", "tech"]  # ids follow the sorted names
    assert table.schema.field("text").type == pa.string()
    assert table.schema.field("labels").type == LABELS_TYPE
    assert table["text"].to_pylist() == ["first", "second", "third", "fourth, with comma"]
    # "third" has an empty cell: a document with no label (kept); duplicates are collapsed
    assert _labels(table) == [[1, 2], [2], [], [0, 1]]


@pytest.mark.parametrize("cell, sep", [("b;a", None), ("b,a", None), ("b/a", "/"), ('["b", "a"]', None)])
def test_csv_other_separators_and_json_cells(tmp_path, cell, sep):
    path = tmp_path / "docs.csv"
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([["body", "tags"], ["x", cell], ["y", "c"]])
    table, names = read_multilabel(path, text="body", label="tags", sep=sep)
    assert names == ["a", "b", "c"]
    assert _labels(table) == [[0, 1], [2]]


def test_jsonl_list_column_numeric_names_and_null_rows(tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [
        {"text": "a", "labels": [10, 2]},
        {"text": "b", "labels": []},
        {"text": "c", "labels": None},  # no label cell: dropped
        {"text": None, "labels": [2]},  # no text: dropped
        {"text": "d", "labels": [9]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    table, names = read_multilabel(path)
    assert names == ["2", "9", "10"]  # integer names sort numerically
    assert table["text"].to_pylist() == ["a", "b", "d"]
    assert _labels(table) == [[0, 2], [], [1]]


def test_indicator_columns_explicit_auto_and_parquet(tmp_path):
    csv_path = tmp_path / "docs.csv"
    csv_path.write_text("text,zeta,alpha,id\nx,1,0,7\ny,1,1,8\nz,0,0,9\n")
    table, names = read_multilabel(csv_path, label_columns=["zeta", "alpha"])
    assert names == ["alpha", "zeta"]  # sorted, not column order
    assert _labels(table) == [[1], [0, 1], []]

    pq_path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"text": ["x", "y"], "b": [True, False], "a": [0.0, 1.0]}), pq_path)
    table, names = read_multilabel(pq_path, label_columns="auto")
    assert names == ["a", "b"]
    assert _labels(table) == [[1], [0]]


def test_bad_inputs_are_one_line_data_errors(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("text,labels,a\nx,p|q,1\n")
    with pytest.raises(DataError) as excinfo:
        read_multilabel(good, text="body")
    message = _one_line_error(excinfo)
    assert "'body' not found" in message and "available columns: text, labels, a" in message
    with pytest.raises(DataError) as excinfo:
        read_multilabel(good, label="tags")
    assert "'tags' not found" in _one_line_error(excinfo)
    with pytest.raises(DataError) as excinfo:
        read_multilabel(good, label_columns=["a", "missing"])
    assert "'missing' not found" in _one_line_error(excinfo)

    # 'auto' takes the 'labels' column too, whose values are not 0/1
    with pytest.raises(DataError) as excinfo:
        read_multilabel(good, label_columns="auto")
    assert "label column 'labels'" in _one_line_error(excinfo) and "allowed: 0 or 1" in str(excinfo.value)

    bad_value = tmp_path / "bad.csv"
    bad_value.write_text("text,a,b\nx,1,0\ny,2,1\n")
    with pytest.raises(DataError) as excinfo:
        read_multilabel(bad_value, label_columns=["a", "b"])
    message = _one_line_error(excinfo)
    assert "'a' has the value 2 in row 1" in message and "allowed: 0 or 1" in message

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError) as excinfo:
        read_multilabel(empty)
    assert "is empty; allowed:" in _one_line_error(excinfo)
    header_only = tmp_path / "header.jsonl"
    header_only.write_text("\n")
    with pytest.raises(DataError) as excinfo:
        read_multilabel(header_only)
    _one_line_error(excinfo)
    no_rows = tmp_path / "header.csv"
    no_rows.write_text("text,labels\n")
    with pytest.raises(DataError) as excinfo:
        read_multilabel(no_rows)
    assert "has no rows" in _one_line_error(excinfo)

    with pytest.raises(DataError) as excinfo:
        read_multilabel(tmp_path / "nope.csv")
    assert "file not found" in _one_line_error(excinfo)


# --------------------------------------------------------------------------- multi_hot, statistics


def test_multi_hot_from_arrow_and_lists():
    column = pa.chunked_array([pa.array([[0, 2], []], type=LABELS_TYPE), pa.array([[1]], type=LABELS_TYPE)])
    expected = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=np.int8)
    assert multi_hot(column, 3).dtype == np.int8
    np.testing.assert_array_equal(multi_hot(column, 3), expected)
    np.testing.assert_array_equal(multi_hot([[0, 2], [], [1]], 3), expected)
    with pytest.raises(DataError, match="label id 3 is out of range"):
        multi_hot([[3]], 3)


def test_label_statistics_hand_example():
    # 5 documents, labels a b c d:   a: 4 docs, b: 2, c: 1, d: 0   (7 occurrences)
    y = [[0, 1], [0], [0, 1], [0, 2], []]
    stats = label_statistics(y, ["a", "b", "c", "d"])
    assert stats["num_docs"] == 5 and stats["num_labels"] == 4
    assert stats["label_counts"] == {"a": 4, "b": 2, "c": 1, "d": 0}
    assert stats["label_frequency"]["a"] == pytest.approx(4 / 5)
    assert stats["cardinality"] == pytest.approx(7 / 5)  # (2+1+2+2+0) / 5
    assert stats["density"] == pytest.approx(7 / 5 / 4)
    assert stats["distinct_combinations"] == 4  # {a,b}, {a}, {a,c}, {}
    assert stats["docs_without_labels"] == 1
    # head: a alone covers 4/7 = 57% >= 50% of occurrences
    assert stats["head_labels"] == ["a"] and stats["tail_labels"] == ["b", "c", "d"]
    assert stats["head_share"] == pytest.approx(4 / 7)
    assert stats["max_min_ratio"] == pytest.approx(4.0)  # 4 / 1 (d, with 0, is ignored)
    json.dumps(stats)  # loggable as is


def test_head_label_mask_ties_and_mass():
    # 300/150/100/75/60: the first alone is 44% < 50%, the first two 66%
    assert head_label_mask([300, 150, 100, 75, 60]).tolist() == [True, True, False, False, False]
    # tie broken by the smaller id: label 0 first, 5/11 < 1/2, so label 1 joins (10/11)
    assert head_label_mask([5, 5, 1]).tolist() == [True, True, False]
    assert head_label_mask([1, 5, 5]).tolist() == [False, True, True]
    assert head_label_mask([6, 5, 1]).tolist() == [True, False, False]  # 6/12 = 1/2 is enough
    assert head_label_mask([5, 5, 0], head_mass=1.0).tolist() == [True, True, False]


# --------------------------------------------------------------------------- filter_labels


def test_filter_labels_hand_example():
    names = ["a", "b", "c", "d"]
    train = pa.table({"text": ["t0", "t1", "t2", "t3"],
                      "labels": pa.array([[0, 1], [0, 2], [0, 2], [1, 3]], type=LABELS_TYPE)})
    test = pa.table({"text": ["s0", "s1"], "labels": pa.array([[1, 3], [2, 3]], type=LABELS_TYPE)})
    # train counts: a 3, b 2, c 2, d 1  ->  min_count 2 keeps a, b, c
    result = filter_labels({"train": train, "test": test}, names, min_count=2)
    assert result.label_names == ["a", "b", "c"]
    assert result.mapping == {0: 0, 1: 1, 2: 2}
    assert result.counts == {"a": 3, "b": 2, "c": 2} and result.removed == ["d"]
    assert _labels(result.data["train"]) == [[0, 1], [0, 2], [0, 2], [1]]
    assert _labels(result.data["test"]) == [[1], [2]]
    assert result.empty_docs == {"train": 0, "test": 0}

    # min_count 3 keeps only a (new id 0); documents left without a label are kept...
    result = filter_labels({"train": train, "test": test}, names, min_count=3)
    assert result.label_names == ["a"] and result.mapping == {0: 0}
    assert _labels(result.data["train"]) == [[0], [0], [0], []]
    assert result.data["test"].num_rows == 2 and result.empty_docs == {"train": 1, "test": 2}
    # ...unless drop_empty=True
    result = filter_labels({"train": train, "test": test}, names, min_count=3, drop_empty=True)
    assert result.data["train"]["text"].to_pylist() == ["t0", "t1", "t2"]
    assert result.data["test"].num_rows == 0

    # a single table counts itself; ids are remapped past removed labels (c: 2 -> 1)
    one = filter_labels(train, names, min_count=2).data  # keeps a b c
    assert _labels(one)[3] == [1]
    result = filter_labels(pa.table({"text": ["x", "y"], "labels": pa.array([[1, 2], [2]], type=LABELS_TYPE)}),
                           ["a", "b", "c"], min_count=2)
    assert result.label_names == ["c"] and result.mapping == {2: 0} and _labels(result.data) == [[0], [0]]

    with pytest.raises(DataError) as excinfo:
        filter_labels({"train": train}, names, min_count=10)
    assert "allowed: a smaller min_count" in _one_line_error(excinfo)


# --------------------------------------------------------------------------- split_multilabel


def _rare_label_table(n_common=60):
    # label 0 on most documents; label 1 on 1 document, 2 on 2, 3 and 4 on exactly 3
    rows = [[0] for _ in range(n_common)]
    rows[5] = [0, 1, 2]
    rows[10] = [2]
    rows[20], rows[21], rows[22] = [3], [0, 3], [0, 3]
    rows[30], rows[31], rows[32] = [0, 4], [4], [0, 4]
    rows.append([])  # one document without labels
    return pa.table({"text": [f"doc {i}" for i in range(len(rows))], "labels": pa.array(rows, type=LABELS_TYPE)})


def test_split_keeps_every_label_in_train():
    table = _rare_label_table()
    for seed in range(5):
        splits = split_multilabel(table, validation_fraction=0.1, test_fraction=0.2, seed=seed)
        assert sum(t.num_rows for t in splits.values()) == table.num_rows
        texts = [t["text"].to_pylist() for t in splits.values()]
        assert len(set().union(*texts)) == table.num_rows  # disjoint and complete
        assert splits["test"].num_rows == 12 and splits["validation"].num_rows == 6  # round(61*.2), round(61*.1)
        for label in range(5):
            assert any(label in row for row in _labels(splits["train"])), (seed, label)
        # labels with >= 3 documents also reach test and validation (best effort; achievable
        # here because labels 3 and 4 never share a document)
        for label in (3, 4):
            assert any(label in row for row in _labels(splits["test"])), (seed, label)
            assert any(label in row for row in _labels(splits["validation"])), (seed, label)
    again = split_multilabel(table, 0.1, 0.2, seed=3)
    assert again["test"].equals(split_multilabel(table, 0.1, 0.2, seed=3)["test"])
    assert not again["test"].equals(split_multilabel(table, 0.1, 0.2, seed=4)["test"])
    with pytest.raises(DataError, match="allowed: a sum below 1"):
        split_multilabel(table, 0.5, 0.5, seed=0)


# --------------------------------------------------------------------------- bbc_multilabel


@pytest.fixture(scope="module")
def bbc():
    return bbc_multilabel(seed=0)


def test_bbc_multilabel_is_deterministic_per_seed(bbc):
    table, names, counts = bbc
    assert names == ["business", "entertainment", "politics", "sports", "tech"]
    assert table.num_rows == 600 and table.column_names == ["text", "labels", "sources"]
    again = bbc_multilabel(seed=0)
    assert again.table.equals(table) and again.label_counts == counts
    other = bbc_multilabel(seed=1)
    assert not other.table.equals(table)
    recipe = json.loads(table.schema.metadata[b"contrasweep.recipe"])
    assert recipe["seed"] == 0 and "not a published benchmark" in recipe["derived_from"]


def test_bbc_multilabel_documents_and_long_tail(bbc):
    table, names, counts = bbc
    labels, sources = _labels(table), table["sources"].to_pylist()
    for row, used in zip(labels, sources):
        assert 1 <= len(row) <= 3 and len(set(row)) == len(row) and row == sorted(row)
        # each passage's article is from one of the document's topics, one article per topic
        assert sorted(names.index(s.split("/")[0]) for s in used) == row
    all_sources = [s for used in sources for s in used]
    assert len(all_sources) == len(set(all_sources))  # no article reused with the defaults
    assert json.loads(table.schema.metadata[b"contrasweep.recipe"])["reused_passages"] == 0
    stats = label_statistics(table["labels"], names)
    assert stats["label_counts"] == counts
    assert max(counts.values()) >= 5 * min(counts.values())  # long-tailed
    assert max(counts, key=counts.get) == "sports"  # rank 1 by default (most articles)
    assert 1.3 < stats["cardinality"] < 1.7  # expected 0.6*1 + 0.3*2 + 0.1*3 = 1.5
    assert all(t.strip() for t in table["text"].to_pylist())


def test_bbc_multilabel_reuses_articles_only_when_needed():
    # all 5 topics in each of 400 documents: entertainment (386 articles) is 14 short, and
    # tech (401), politics (417), business (510), sports (511) are not
    result = bbc_multilabel(seed=0, n_docs=400, topics_per_doc=(0, 0, 0, 0, 1))
    recipe = json.loads(result.table.schema.metadata[b"contrasweep.recipe"])
    assert recipe["reused_passages"] == 14
    texts = result.table["text"].to_pylist()
    assert len(set(texts)) == len(texts)  # a reused article contributes another passage
    with pytest.raises(DataError, match="topics_per_doc"):
        bbc_multilabel(topics_per_doc=(0.5, 0.2))
