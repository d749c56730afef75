"""contrasweep.data: sources, splits, LaCon protocols, the tokenised Arrow cache, collation.

Small files are written in tmp_path; the two bundled corpora are the real ones. The
tokenizer is the tiny test model's (MiniLM's vocabulary)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrasweep.data import DataConfig, PreparedData, collate_numpy, load_splits, prepare
from contrasweep.data.cache import read_marker, write_entry
from contrasweep.data.protocols import max_per_class
from contrasweep.data.sources import open_source
from contrasweep.errors import DataError

COUNTS = {"apple": 60, "banana": 40, "cherry": 30}  # 130 rows, 3 imbalanced classes
WORDS = "the quick brown fox jumps over a lazy dog while it rains".split()


def _text(i: int) -> str:
    # Unique per row (the number) and of varying length, so rows can be told apart by tokens.
    return f"row {i} " + " ".join(WORDS[: 1 + i % len(WORDS)])


def _rows(counts=COUNTS):
    rows, i = [], 0
    for label, n in counts.items():
        for _ in range(n):
            rows.append({"text": _text(i), "label": label})
            i += 1
    return rows


def _write_csv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


@pytest.fixture()
def toy_csv(tmp_path):
    return _write_csv(tmp_path / "toy.csv", _rows())


@pytest.fixture()
def run(tiny_model_dir, cache_dir):
    """prepare() with the tiny tokenizer and a per-test cache (via $CONTRASWEEP_CACHE)."""

    def _run(max_length=32, **cfg) -> PreparedData:
        return prepare(cfg, tokenizer=tiny_model_dir, max_length=max_length)

    return _run


def _per_class(prep, split):
    return prep.stats[split]["per_class"]


def _row_set(table):
    return {tuple(ids) for ids in table.column("input_ids").to_pylist()}


def _one_line_error(excinfo, *fragments):
    message = str(excinfo.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


# --- config validation -------------------------------------------------------------------


def test_config_defaults_are_normalised(toy_csv):
    cfg = DataConfig.from_dict({"source": toy_csv, "protocol": "imbalance"})
    assert (cfg.minority, cfg.rho, cfg.minority_classes) == (32, 1.0, None)  # LaCon Sec. 4.2
    assert cfg.to_dict()["validation_fraction"] == 0.1 and cfg.to_dict()["test_fraction"] == 0.2
    assert "k" not in cfg.to_dict()
    assert DataConfig.from_dict({"source": toy_csv, "protocol": "num_classes", "num_classes": 2}).per_class == 1000
    assert DataConfig.from_dict({"source": toy_csv, "protocol": "few_shot", "k": "20"}).k == 20  # YAML strings


@pytest.mark.parametrize(
    "extra, fragments",
    [
        ({"colour": 1}, ["unknown data key(s) colour", "allowed: source"]),
        ({"protocol": "zero_shot"}, ["'zero_shot'", "allowed: full, max_per_class, few_shot, imbalance, num_classes"]),
        ({"protocol": "few_shot", "k": 0}, ["data.k must be an integer >= 1, got 0"]),
        ({"protocol": "few_shot"}, ["data.k is required"]),
        ({"protocol": "imbalance", "rho": 0.5}, ["data.rho must be a number >= 1, got 0.5"]),
        ({"protocol": "imbalance", "rho": "many"}, ["data.rho must be a number >= 1"]),
        ({"k": 5}, ["data.k only applies to protocol 'few_shot'"]),
        ({"seed": -1}, ["data.seed must be an integer in [0, 4294967295], got -1"]),
        ({"test_fraction": 1.5}, ["data.test_fraction must be a number in (0, 1)"]),
        ({"validation_fraction": 0.5, "test_fraction": 0.5}, ["allowed: a sum below 1"]),
        ({"protocol": "num_classes", "num_classes": 2, "classes": ["a", "b"]}, ["exclusive"]),
        ({"protocol": "max_per_class", "max_per_class": True}, ["data.max_per_class must be an integer >= 1"]),
        ({"dev_test_fraction": 1.0}, ["data.dev_test_fraction must be a number in (0, 1), got 1.0"]),
        ({"dev_test_fraction": 0.5, "test_fraction": 0.2}, ["data.test_fraction does not apply with data.dev_test_fraction"]),
        ({"dev_validation_max": 500}, ["data.dev_validation_max needs data.dev_test_fraction"]),
        ({"dev_test_fraction": 0.5, "dev_validation_max": 0}, ["data.dev_validation_max must be an integer >= 1, got 0"]),
    ],
)
def test_config_errors_are_one_line(toy_csv, extra, fragments):
    with pytest.raises(DataError) as excinfo:
        DataConfig.from_dict({"source": toy_csv, **extra})
    _one_line_error(excinfo, *fragments)


def test_missing_file_and_bad_source(tmp_path):
    with pytest.raises(DataError) as excinfo:
        DataConfig.from_dict({"source": str(tmp_path / "nope.csv")})
    _one_line_error(excinfo, "file not found", "nope.csv")
    with pytest.raises(DataError) as excinfo:
        DataConfig.from_dict({"source": "imdb"})
    _one_line_error(excinfo, "'imdb'", "bbc_news", "hub:NAME[:CONFIG]")
    with pytest.raises(DataError) as excinfo:
        DataConfig.from_dict({"source": {"dev": "x.csv"}})
    _one_line_error(excinfo, "train (required), validation, test")


def test_missing_column_lists_available_columns(run, toy_csv):
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, text="body")
    _one_line_error(excinfo, "column 'body' not found", "available columns: text, label")


def test_a_label_column_under_another_name_is_suggested(run, tmp_path):
    path = _write_csv(tmp_path / "s.csv", [{"text": _text(i), "sentiment": "pos" if i % 2 else "neg"} for i in range(20)])
    with pytest.raises(DataError) as excinfo:
        run(source=path)
    _one_line_error(excinfo, "column 'label' not found", "available columns: text, sentiment",
                    "allowed: name the column with data.label, e.g. data.label: sentiment")


def test_dropped_rows_are_counted_by_reason_and_a_stray_class_is_named(run, tmp_path):
    """An empty text, an empty label and a one-row label '7' (a typo): the two rows dropped are
    counted in the prepared stats (which the sweep logs as data_stats.json) and the notes the
    console prints name them and the class that some split lacks; a cache hit says the same."""
    from contrasweep.data.prepare import data_notes

    rows = _rows() + [{"text": " ", "label": "apple"}, {"text": "orphan", "label": ""}, {"text": "odd one", "label": "7"}]
    source = _write_csv(tmp_path / "dirty.csv", rows)
    prep = run(source=source, protocol="full")
    assert prep.dropped == {"train": {"no label": 1, "empty text": 1}}
    assert prep.stats["train"]["n"] + prep.stats["validation"]["n"] + prep.stats["test"]["n"] == sum(COUNTS.values()) + 1
    notes = data_notes(prep.stats, prep.dropped)
    assert notes[0] == "dropped 2 rows of the source's train split: 1 empty text, 1 no label"
    (stray,) = [n for n in notes if n.startswith("class '7'")]
    assert "has no row in" in stray and "stray label" in stray and len(notes) == 2
    again = run(source=source, protocol="full")
    assert again.cache_hit and data_notes(again.stats, again.dropped) == notes
    clean = run(source=_write_csv(tmp_path / "clean.csv", _rows()), protocol="full")
    assert clean.dropped == {} and data_notes(clean.stats, clean.dropped) == []


def test_bad_max_length(toy_csv, tiny_model_dir, cache_dir):
    with pytest.raises(DataError) as excinfo:
        prepare({"source": toy_csv}, tokenizer=tiny_model_dir, max_length=2)
    _one_line_error(excinfo, "max_length must be an integer >= 8")


# --- splits and protocols ------------------------------------------------------------------


def test_automatic_split_is_stratified(run, toy_csv):
    prep = run(source=toy_csv)
    assert prep.label_names == ["apple", "banana", "cherry"]  # sorted unique strings
    assert prep.num_labels == 3 and not prep.is_pair and not prep.cache_hit
    for name, n in COUNTS.items():
        assert abs(_per_class(prep, "test")[name] - 0.2 * n) <= 1
        assert abs(_per_class(prep, "validation")[name] - 0.1 * n) <= 1
        assert sum(_per_class(prep, s)[name] for s in ("train", "validation", "test")) == n
    splits = load_splits(prep.path)
    assert set(splits) == {"train", "validation", "test"}
    all_rows = [_row_set(t) for t in splits.values()]
    assert sum(map(len, all_rows)) == len(set().union(*all_rows)) == 130  # disjoint, complete
    assert splits["train"].schema.field("input_ids").type == pa.list_(pa.int32())
    assert splits["train"].schema.field("labels").type == pa.int64()
    assert max(len(r) for r in splits["train"].column("input_ids").to_pylist()) <= 32


def test_few_shot_k_per_class_disjoint_validation_test_unchanged(run, toy_csv):
    prep = run(source=toy_csv, protocol="few_shot", k=5)
    full = run(source=toy_csv)
    assert _per_class(prep, "train") == {"apple": 5, "banana": 5, "cherry": 5}
    assert _per_class(prep, "validation") == {"apple": 5, "banana": 5, "cherry": 5}
    assert prep.stats["test"] == full.stats["test"]  # LaCon Sec. 4.1: whole test set kept
    splits, full_splits = load_splits(prep.path), load_splits(full.path)
    assert not _row_set(splits["train"]) & _row_set(splits["validation"])
    pool = _row_set(full_splits["train"])  # both drawn from the training pool
    assert _row_set(splits["train"]) <= pool and _row_set(splits["validation"]) <= pool
    assert _row_set(splits["test"]) == _row_set(full_splits["test"])


def test_few_shot_k_too_large(run, toy_csv):
    # cherry: 30 rows, 21 of them in train after the 70/10/20 split -> k <= 10.
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, protocol="few_shot", k=11)
    _one_line_error(excinfo, "needs 22 training rows of each class", "'cherry' has 21 (needs 22)",
                    "allowed: k <= 10 (the most every class can give)")


def test_few_shot_k_too_large_names_every_class_short_of_rows(run, toy_csv):
    """k = 18 needs 36 rows of every class: banana (28 in train) and cherry (21) both fall
    short, and both are named with their counts; the allowed k is cherry's."""
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, protocol="few_shot", k=18)
    _one_line_error(excinfo, "short: 'banana' has 28 (needs 36), 'cherry' has 21 (needs 36)", "allowed: k <= 10")
    assert "apple" not in str(excinfo.value)


def test_few_shot_n_total_too_large_gives_the_largest_that_works(run, toy_csv):
    # shares of apple/banana/cherry (42/28/21 in train): n_total 91 would need every training row twice
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, protocol="few_shot", n_total=91)
    message = str(excinfo.value)
    largest = int(message.split("n_total <= ")[1].split()[0])
    run(source=toy_csv, protocol="few_shot", n_total=largest)  # that one works
    with pytest.raises(DataError):
        run(source=toy_csv, protocol="few_shot", n_total=largest + 1)


def test_same_seed_same_rows_other_seed_other_rows(tiny_model_dir, toy_csv, tmp_path):
    def train_rows(seed, cache):
        cfg = {"source": toy_csv, "protocol": "few_shot", "k": 4, "seed": seed}
        prep = prepare(cfg, tokenizer=tiny_model_dir, max_length=32, cache_dir=str(tmp_path / cache))
        assert not prep.cache_hit
        return load_splits(prep.path)["train"]

    first, again, other = train_rows(0, "a"), train_rows(0, "b"), train_rows(1, "c")
    assert first.equals(again)
    assert not first.equals(other)


def test_split_seed_changes_the_automatic_split(run, toy_csv):
    a, b = run(source=toy_csv), run(source=toy_csv, split_seed=1)
    assert a.key != b.key
    assert _row_set(load_splits(a.path)["test"]) != _row_set(load_splits(b.path)["test"])


# --- the dev rule: validation and test from the source's dev split (SCL-MOO Sec. 3) ---------


def _dev_source(tmp_path):
    """train 40 (20 + 20), dev 40 (24 + 16), a labelled test of 10: as parquet files."""
    rows = [{"text": _text(i), "label": "ab"[i % 2]} for i in range(40)]
    dev = [{"text": _text(100 + i), "label": "ab"[int(i >= 24)]} for i in range(40)]
    test = [{"text": _text(200 + i), "label": "ab"[i % 2]} for i in range(10)]
    paths = {}
    for split, part in (("train", rows), ("validation", dev), ("test", test)):
        paths[split] = str(tmp_path / f"dev_{split}.parquet")
        pq.write_table(pa.Table.from_pylist(part), paths[split])
    return paths


def test_dev_rule_test_is_half_the_dev_split_validation_the_rest_capped(run, tmp_path):
    paths = _dev_source(tmp_path)
    prep = run(source=paths, dev_test_fraction=0.5, dev_validation_max=10)
    plain = run(source=paths)
    assert _per_class(prep, "test") == {"a": 12, "b": 8}  # half of each class of the dev split
    assert _per_class(prep, "validation") == {"a": 6, "b": 4}  # the other half, cut to 10 rows, stratified
    assert prep.stats["train"] == plain.stats["train"]  # the source's train split, untouched
    splits, plain_splits = load_splits(prep.path), load_splits(plain.path)
    dev = _row_set(plain_splits["validation"])
    assert _row_set(splits["test"]) <= dev and _row_set(splits["validation"]) <= dev
    assert not _row_set(splits["test"]) & _row_set(splits["validation"])
    assert not _row_set(splits["test"]) & _row_set(plain_splits["test"])  # the source's own test is not used
    uncapped = run(source=paths, dev_test_fraction=0.5)
    assert _per_class(uncapped, "validation") == {"a": 12, "b": 8}
    assert prep.key != uncapped.key != plain.key


def test_dev_rule_with_few_shot_keeps_the_dev_validation_and_draws_the_same_train_rows(run, tmp_path):
    paths = _dev_source(tmp_path)
    prep = run(source=paths, protocol="few_shot", n_total=6, dev_test_fraction=0.5, dev_validation_max=10)
    lacon_rule = run(source=paths, protocol="few_shot", n_total=6)
    assert _per_class(prep, "train") == {"a": 3, "b": 3}
    assert _per_class(prep, "validation") == {"a": 6, "b": 4} and prep.stats["test"]["n"] == 20
    assert _per_class(lacon_rule, "validation") == {"a": 3, "b": 3}  # without the rule: drawn from train
    assert load_splits(prep.path)["train"].equals(load_splits(lacon_rule.path)["train"])
    # without a validation draw the whole class may be used for training
    assert _per_class(run(source=paths, protocol="few_shot", k=20, dev_test_fraction=0.5), "train") == {"a": 20, "b": 20}
    with pytest.raises(DataError) as excinfo:
        run(source=paths, protocol="few_shot", k=21, dev_test_fraction=0.5)
    _one_line_error(excinfo, "needs 21 training rows of each class;", "'a' has 20 (needs 21)", "allowed: k <= 20")


def test_dev_rule_without_a_dev_split_carves_one_from_train(run, toy_csv):
    prep = run(source=toy_csv, validation_fraction=0.4, dev_test_fraction=0.5)
    # dev = 40 % of each class (24, 16, 12), half of it test, the rest validation; no test_fraction carve
    assert _per_class(prep, "test") == {"apple": 12, "banana": 8, "cherry": 6}
    assert _per_class(prep, "validation") == {"apple": 12, "banana": 8, "cherry": 6}
    assert _per_class(prep, "train") == {"apple": 36, "banana": 24, "cherry": 18}
    splits = load_splits(prep.path)
    all_rows = [_row_set(t) for t in splits.values()]
    assert sum(map(len, all_rows)) == len(set().union(*all_rows)) == 130  # disjoint, complete
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, validation_fraction=0.4, dev_test_fraction=0.5, dev_validation_max=2)
    _one_line_error(excinfo, "data.dev_validation_max=2 is smaller than the 3 classes", "allowed: dev_validation_max >= 3")


def test_dev_rule_keys_stay_out_of_the_config_while_unset(toy_csv):
    plain = DataConfig.from_dict({"source": toy_csv})
    assert "dev_test_fraction" not in plain.to_dict() and "dev_validation_max" not in plain.key_dict()
    dev = DataConfig.from_dict({"source": toy_csv, "dev_test_fraction": "0.5", "dev_validation_max": 500})
    assert (dev.to_dict()["dev_test_fraction"], dev.to_dict()["dev_validation_max"]) == (0.5, 500)


def test_imbalance_minority_and_majority_counts(run, toy_csv):
    prep = run(source=toy_csv, protocol="imbalance", minority=4, rho=2.5)
    # default minority class: the last in label order; majority = round(4 * 2.5) = 10
    assert _per_class(prep, "train") == {"apple": 10, "banana": 10, "cherry": 4}
    prep = run(source=toy_csv, protocol="imbalance", minority=3, rho=5, minority_classes=["apple", "banana"])
    assert _per_class(prep, "train") == {"apple": 3, "banana": 3, "cherry": 15}


def test_imbalance_errors(run, toy_csv):
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, protocol="imbalance", minority=4, rho=10)  # majority 40 > 28 banana rows
    _one_line_error(excinfo, "needs 40 training rows of class 'banana'", "it has 28")
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, protocol="imbalance", minority_classes=["durian"])
    _one_line_error(excinfo, "durian", "label names are: apple, banana, cherry")


def test_max_per_class_caps(run, toy_csv):
    prep = run(source=toy_csv, protocol="max_per_class", max_per_class=25)
    full = run(source=toy_csv)
    assert _per_class(prep, "train") == {"apple": 25, "banana": 25, "cherry": 21}
    assert prep.stats["test"] == full.stats["test"]


@pytest.mark.parametrize("counts, cap", [((6000, 5200), 5000), ((1500, 1200, 800), 1000)])
def test_max_per_class_default_is_lacon_rule(counts, cap):
    # LaCon Sec. 3.1: at most 5K per class when binary, 1K when multi-class.
    labels = np.repeat(np.arange(len(counts)), counts)
    splits = {"train": pa.table({"label": pa.array(labels, pa.int64())})}
    cfg = DataConfig.from_dict({"source": "bbc_news", "protocol": "max_per_class"})
    out, _ = max_per_class(splits, [str(i) for i in range(len(counts))], cfg)
    assert np.bincount(out["train"]["label"].to_numpy()).tolist() == [min(n, cap) for n in counts]


def test_num_classes_keeps_and_remaps(run, toy_csv):
    full = run(source=toy_csv)
    prep = run(source=toy_csv, protocol="num_classes", num_classes=2, per_class=6)
    assert prep.label_names == ["apple", "banana"] and prep.num_labels == 2
    assert _per_class(prep, "train") == {"apple": 6, "banana": 6}
    for split in ("validation", "test"):  # LaCon Sec. 4.5: evaluation rows of kept classes unchanged
        assert _per_class(prep, split) == {k: full.stats[split]["per_class"][k] for k in ("apple", "banana")}
    for table in load_splits(prep.path).values():
        assert set(table["labels"].to_pylist()) == {0, 1}
    named = run(source=toy_csv, protocol="num_classes", classes=["cherry", "apple"], per_class=6)
    assert named.label_names == ["apple", "cherry"]  # label order, remapped to 0..1
    assert _per_class(named, "test") == {"apple": 12, "cherry": 6}
    with pytest.raises(DataError) as excinfo:
        run(source=toy_csv, protocol="num_classes", num_classes=4)
    _one_line_error(excinfo, "allowed: 2..3")


# --- formats, pairs, source splits ----------------------------------------------------------


def test_pair_inputs_have_two_segments(run, tmp_path):
    path = tmp_path / "nli.jsonl"
    with open(path, "w") as handle:
        for i in range(40):
            row = {"premise": _text(i), "hypothesis": f"claim {i}", "gold": ["yes", "no"][i % 2]}
            handle.write(json.dumps(row) + "\n")
    prep = run(source=str(path), text="premise", text_pair="hypothesis", label="gold")
    assert prep.is_pair and prep.label_names == ["no", "yes"]
    train = load_splits(prep.path)["train"]
    for segments in train.column("token_type_ids").to_pylist():
        assert segments[0] == 0 and segments[-1] == 1
    batch = collate_numpy(train, [0, 1, 2])
    assert set(np.unique(batch["token_type_ids"][batch["attention_mask"] == 1])) == {0, 1}


def test_source_splits_are_used_and_parquet_int_labels(run, tmp_path):
    rows = [{"sentence": _text(i), "y": i % 2} for i in range(30)]
    paths = {}
    for split, part in (("train", rows[:20]), ("validation", rows[20:24]), ("test", rows[24:])):
        paths[split] = str(tmp_path / f"{split}.parquet")
        pq.write_table(pa.Table.from_pylist(part), paths[split])
    prep = run(source=paths, text="sentence", label="y")
    assert prep.label_names == ["0", "1"]
    assert [prep.stats[s]["n"] for s in ("train", "validation", "test")] == [20, 4, 6]


def test_json_array_and_unlabelled_rows(run, tmp_path):
    records = [{"text": _text(i), "label": [-1, 1, None][i % 3]} for i in range(60)]
    (tmp_path / "data.json").write_text(json.dumps(records))
    prep = run(source=str(tmp_path / "data.json"))
    # null labels are dropped; in a local file -1 is a class of its own (not "unlabelled")
    assert prep.label_names == ["-1", "1"]
    assert sum(prep.stats[s]["n"] for s in prep.stats) == 40


def test_hub_classlabel_unlabelled_test_is_carved_from_train(run, monkeypatch):
    import datasets

    label = datasets.ClassLabel(names=["neg", "pos"])
    features = datasets.Features({"sentence": datasets.Value("string"), "label": label})

    def fake_load_dataset(name, config=None, **kwargs):
        assert (name, config) == ("glue", "sst2")
        def split(n, labelled=True):
            return datasets.Dataset.from_dict(
                {"sentence": [_text(i) for i in range(n)], "label": [i % 2 if labelled else -1 for i in range(n)]},
                features=features,
            )
        return datasets.DatasetDict({"train": split(50), "validation": split(10), "test": split(8, labelled=False)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    prep = run(source="hub:glue:sst2", text="sentence")
    assert prep.label_names == ["neg", "pos"]
    # GLUE test labels are -1: test = 20 % of train per class, validation = the source's own
    assert [prep.stats[s]["n"] for s in ("train", "validation", "test")] == [40, 10, 10]


def test_hub_unreachable_is_a_clear_error(run):
    with pytest.raises(DataError) as excinfo:
        run(source="hub:glue:sst2", text="sentence")
    _one_line_error(excinfo, "hub is unreachable", "local", "bbc_news")


# --- cache ---------------------------------------------------------------------------------


def test_cache_hit_does_not_tokenise(run, toy_csv, cache_dir, monkeypatch):
    first = run(source=toy_csv, protocol="few_shot", k=3)
    assert not first.cache_hit and first.path.startswith(str(cache_dir))

    def boom(*args, **kwargs):
        raise AssertionError("tokenised on a cache hit")

    import trainables.encoder
    import datasets

    monkeypatch.setattr(trainables.encoder, "load_tokenizer", boom)
    monkeypatch.setattr(datasets.Dataset, "map", boom)
    second = run(source=toy_csv, protocol="few_shot", k=3)
    assert second.cache_hit and second.key == first.key and second.path == first.path
    assert second.stats == first.stats and second.label_names == first.label_names


def test_cache_key_changes_with_max_length_protocol_and_content(run, toy_csv, tmp_path):
    base = run(source=toy_csv)
    assert run(source=toy_csv, max_length=16).key != base.key
    assert run(source=toy_csv, protocol="few_shot", k=2).key != base.key
    assert run(source=toy_csv, seed=7).key == base.key  # `full` ignores the sampling seed
    copy = _write_csv(tmp_path / "copy.csv", _rows())
    assert run(source=copy).key == base.key  # content-hashed, not path-hashed
    changed = _write_csv(tmp_path / "changed.csv", _rows({**COUNTS, "cherry": 31}))
    assert run(source=changed).key != base.key


def test_concurrent_writer_loses_race_cleanly(run, toy_csv, cache_dir):
    import datasets

    prep = run(source=toy_csv)
    other = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"x": [1]})})
    path = write_entry(cache_dir, prep.key, other, {"label_names": ["late"]})
    assert str(path) == prep.path
    assert read_marker(path)["label_names"] == prep.label_names  # the first writer's copy stays
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]
    assert load_splits(prep.path)["train"].num_rows == prep.stats["train"]["n"]


def test_load_splits_rejects_other_directories(tmp_path):
    with pytest.raises(DataError) as excinfo:
        load_splits(tmp_path)
    _one_line_error(excinfo, "not a prepared data directory")


# --- bundled corpora -----------------------------------------------------------------------


def test_bbc_news_corpus():
    cfg = DataConfig.from_dict({"source": "bbc_news"})
    raw = open_source(cfg).load(cfg)
    assert raw.label_names == ["business", "entertainment", "politics", "sports", "tech"]
    assert raw.splits["train"].num_rows == 2225
    counts = np.bincount(raw.splits["train"]["label"].to_numpy()).tolist()
    assert counts == [510, 386, 417, 511, 401]


def test_tweet_sentiment_corpus():
    cfg = DataConfig.from_dict({"source": "tweet_sentiment"})
    raw = open_source(cfg).load(cfg)
    assert raw.label_names == ["negative", "neutral", "positive"]
    assert raw.splits["train"].num_rows == 38158
    assert np.bincount(raw.splits["train"]["label"].to_numpy()).tolist() == [16186, 15018, 6954]


def test_bbc_news_few_shot_end_to_end(run):
    prep = run(source="bbc_news", protocol="few_shot", k=2, max_length=16)
    assert prep.num_labels == 5
    assert prep.stats["train"]["n"] == prep.stats["validation"]["n"] == 10
    assert prep.stats["test"]["n"] == 444  # 20 % of each topic: 102 + 77 + 83 + 102 + 80


# --- collation -----------------------------------------------------------------------------


def test_collate_numpy_pads_dynamically():
    table = pa.table(
        {
            "input_ids": pa.array([[101, 7, 102], [101, 102], [101, 5, 6, 7, 102]], pa.list_(pa.int32())),
            "labels": pa.array([2, 0, 1], pa.int64()),
        }
    )
    batch = collate_numpy(table, np.array([2, 1]), pad_id=9)
    assert batch["input_ids"].tolist() == [[101, 5, 6, 7, 102], [101, 102, 9, 9, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0] * 5, [0] * 5]  # no column: single sentences
    assert batch["labels"].tolist() == [1, 0]
    assert all(v.dtype == np.int64 for v in batch.values())
    assert collate_numpy(table, [1])["input_ids"].shape == (1, 2)  # T = longest row of this batch


def test_collate_numpy_on_prepared_split(run, toy_csv):
    train = load_splits(run(source=toy_csv).path)["train"]
    idx = [0, 3, 17, 40]
    batch = collate_numpy(train, idx)
    lengths = [len(train["input_ids"][i]) for i in idx]
    assert batch["input_ids"].shape == (4, max(lengths))
    assert batch["attention_mask"].sum(1).tolist() == lengths
    assert batch["labels"].tolist() == [train["labels"][i].as_py() for i in idx]


def test_empty_label_cells_are_unlabelled_not_a_class(run, tmp_path):
    """A CSV's empty cell reads as '' (not null): such a label means no label (the row is
    dropped like a missing one), never a class named ''; whitespace-only texts are dropped too."""
    rows = ["text,label"] + [f"{_text(i)},{['pos', 'neg', ''][i % 3]}" for i in range(60)] + ["   ,pos"]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    prep = run(source=str(tmp_path / "d.csv"))
    assert prep.label_names == ["neg", "pos"]
    assert sum(prep.stats[s]["n"] for s in prep.stats) == 40


def test_a_file_whose_texts_are_all_empty_is_refused(run, tmp_path):
    (tmp_path / "d.csv").write_text("text,label\n" + "".join(f",{'ab'[i % 2]}\n" for i in range(20)))
    with pytest.raises(DataError, match="the train split has no row with both a text and a label"):
        run(source=str(tmp_path / "d.csv"))
