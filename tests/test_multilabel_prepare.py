"""data: {task: multilabel}: config checks, prepare (split, Sec. 4.1 label filtering, tokenise
once, cache) and multi-hot batches."""

from __future__ import annotations

import numpy as np
import pytest

from contrasweep.data import collate_numpy, load_splits
from contrasweep.data.multilabel.prepare import MultiLabelConfig, prepare_multilabel
from contrasweep.errors import DataError, SpecError
from contrasweep.spec.load import validate


def test_bundled_corpus_prepares_multi_hot_splits_and_hits_the_cache(tiny_model_dir, tmp_path):
    cfg = MultiLabelConfig.from_dict({"task": "multilabel", "source": "bbc_multilabel", "n_docs": 120})
    first = prepare_multilabel(cfg, tiny_model_dir, 32, cache_dir=str(tmp_path))
    again = prepare_multilabel(cfg, tiny_model_dir, 32, cache_dir=str(tmp_path))
    assert not first.cache_hit and again.cache_hit and again.path == first.path
    splits = load_splits(first.path)
    assert sum(t.num_rows for t in splits.values()) == 120 and first.num_labels == 5
    batch = collate_numpy(splits["train"], np.arange(4))
    assert batch["labels"].shape == (4, 5) and set(np.unique(batch["labels"])) <= {0, 1}
    assert (batch["labels"].sum(1) >= 1).all()  # every derived document has 1-3 topics
    stats = first.stats["train"]
    assert stats["n"] == splits["train"].num_rows and len(stats["head_labels"]) >= 1


def test_min_label_count_filters_labels_seen_too_rarely_in_train(tmp_path, tiny_model_dir):
    rows = ["text,labels"] + [f"doc a {i},a" for i in range(8)] + [f"doc ab {i},a|b" for i in range(4)] + ["doc c,c"]
    path = tmp_path / "ml.csv"
    path.write_text("\n".join(rows) + "\n")
    cfg = MultiLabelConfig.from_dict({"task": "multilabel", "source": str(path), "min_label_count": 2,
                                      "validation_fraction": 0.2, "test_fraction": 0.2})
    prepared = prepare_multilabel(cfg, tiny_model_dir, 16, cache_dir=str(tmp_path / "c"))
    assert prepared.label_names == ["a", "b"] and prepared.stats["removed_labels"] == ["c"]
    labels = np.concatenate([collate_numpy(t, np.arange(t.num_rows))["labels"] for t in load_splits(prepared.path).values()])
    assert labels.shape == (13, 2) and labels.sum(0).tolist() == [12, 4]  # "doc c" kept, with no label


@pytest.mark.parametrize("section, message", [
    ({"source": "bbc_news"}, "not allowed for task multilabel; allowed: bbc_multilabel, hub:NAME"),
    ({"source": "hub:a:b:c"}, "allowed hub form: hub:NAME or hub:NAME:CONFIG"),
    ({"source": "bbc_multilabel", "protocol": "few_shot"}, r"unknown data key\(s\) protocol for task multilabel"),
    ({"source": "bbc_multilabel", "min_label_count": 0}, "data.min_label_count must be an integer >= 1"),
    ({"source": "bbc_multilabel", "label_columns": "x"}, "allowed: a list of 0/1 column names or 'auto'"),
])
def test_bad_multilabel_data_sections(section, message):
    with pytest.raises(DataError, match=message):
        MultiLabelConfig.from_dict({"task": "multilabel", **section})


def test_single_label_method_rejects_multilabel_data():
    raw = {"method": "ce", "data": {"task": "multilabel", "source": "bbc_multilabel"}, "grid": {"lr": [1.0e-5]}}
    with pytest.raises(SpecError, match="method 'ce' takes single-label data but data.task is multilabel"):
        validate(raw)


# --- hub sources (datasets.load_dataset replaced by local datasets; offline: a clear error) ----


def _hub(monkeypatch, expected, splits):
    import datasets

    def fake_load_dataset(name, config=None, **kwargs):
        assert (name, config) == expected
        return datasets.DatasetDict(splits)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)


def test_hub_class_label_sequences_become_names_and_test_is_carved_from_train(monkeypatch, tiny_model_dir, tmp_path):
    """go_emotions' layout: ``labels`` is a Sequence(ClassLabel); train and validation given."""
    import datasets

    names = ["joy", "anger", "fear"]  # the dataset's order, not sorted
    features = datasets.Features({"text": datasets.Value("string"),
                                  "labels": datasets.Sequence(datasets.ClassLabel(names=names))})
    rows = lambda n, offset: {"text": [f"doc {offset + i}" for i in range(n)],  # noqa: E731
                              "labels": [[i % 3] if i % 4 else [0, 2] for i in range(n)]}
    _hub(monkeypatch, ("go_emotions", "simplified"), {
        "train": datasets.Dataset.from_dict(rows(40, 0), features=features),
        "validation": datasets.Dataset.from_dict(rows(6, 100), features=features)})
    cfg = MultiLabelConfig.from_dict({"task": "multilabel", "source": "hub:go_emotions:simplified", "test_fraction": 0.25})
    prepared = prepare_multilabel(cfg, tiny_model_dir, 16, cache_dir=str(tmp_path))
    assert prepared.label_names == ["anger", "fear", "joy"]  # ids follow the sorted names
    assert [prepared.stats[s]["n"] for s in ("train", "validation", "test")] == [30, 6, 10]  # 25 % of 40 carved
    splits = load_splits(prepared.path)
    val = collate_numpy(splits["validation"], np.arange(6))["labels"]
    # validation row i carries names[i % 3], or joy and fear when i % 4 == 0; ids are the sorted names
    row_names = [["joy", "fear"] if i % 4 == 0 else [names[i % 3]] for i in range(6)]
    expected = [[int(n in row) for n in prepared.label_names] for row in row_names]
    assert val.tolist() == expected


def test_hub_indicator_columns_keep_all_three_splits(monkeypatch, tiny_model_dir, tmp_path):
    import datasets

    split = lambda n: datasets.Dataset.from_dict({"sentence": [f"s {i}" for i in range(n)],  # noqa: E731
                                                  "b": [i % 2 for i in range(n)], "a": [1] * n})
    _hub(monkeypatch, ("sem_eval", None), {"train": split(20), "dev": split(4), "test": split(5)})
    cfg = MultiLabelConfig.from_dict({"task": "multilabel", "source": "hub:sem_eval", "text": "sentence",
                                      "label_columns": ["a", "b"]})
    prepared = prepare_multilabel(cfg, tiny_model_dir, 16, cache_dir=str(tmp_path))
    assert prepared.label_names == ["a", "b"]
    assert [prepared.stats[s]["n"] for s in ("train", "validation", "test")] == [20, 4, 5]
    test = collate_numpy(load_splits(prepared.path)["test"], np.arange(5))["labels"]
    assert test.tolist() == [[1, i % 2] for i in range(5)]


def test_hub_unreachable_multilabel_is_one_line(tiny_model_dir, tmp_path):
    cfg = MultiLabelConfig.from_dict({"task": "multilabel", "source": "hub:go_emotions"})
    with pytest.raises(DataError) as excinfo:
        prepare_multilabel(cfg, tiny_model_dir, 16, cache_dir=str(tmp_path))
    message = str(excinfo.value)
    assert "\n" not in message and "hub is unreachable" in message and "bundled corpus (bbc_multilabel)" in message
