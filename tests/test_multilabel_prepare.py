"""data: {task: multilabel}: config checks, prepare (split, Sec. 4.1 label filtering, tokenise
once, cache) and multi-hot batches."""

from __future__ import annotations

import numpy as np
import pytest

from contrasweep.data import collate_numpy, load_splits
from contrasweep.data.multilabel_prepare import MultiLabelConfig, prepare_multilabel
from contrasweep.errors import DataError, SpecError
from contrasweep.spec import validate


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
    ({"source": "bbc_news"}, "not allowed for task multilabel; allowed: bbc_multilabel or a local"),
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
