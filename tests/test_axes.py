"""Data axes (contrasweep.spec.axes): list-valued data keys expand into variants; a trial is a
configuration × data variant × training seed; stratified n_total; trial identity in MLflow."""

from __future__ import annotations

import numpy as np
import pytest

from contrasweep.data import prepare
from contrasweep.data.splits import stratified_counts
from contrasweep.errors import DataError, SpecError
from contrasweep.spec.axes import expand
from contrasweep.spec.identity import identify, run_name, tags
from contrasweep.spec.load import validate
from contrasweep.spec.trial import DATA_KEY, TRIAL_INDEX, trial_hp, trial_variant


def spec(data=None, **sections):
    raw = {
        "method": "ce",
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": [5, 20], "seed": [0, 1, 2], **(data or {})},
        "grid": {"lr": [1.0e-5, 2.0e-5]},
        "sweep": {"seeds": [0, 1]},
    }
    raw.update(sections)
    return validate(raw)


def test_three_split_seeds_two_k_two_configs_two_seeds_expand_to_every_trial():
    sweep = spec()
    assert len(sweep.variants) == 6 and sweep.repeats == 12
    assert [v.setting for v in sweep.variants] == [{"k": 5}] * 3 + [{"k": 20}] * 3
    assert [v.repeat for v in sweep.variants] == [{"seed": s} for s in (0, 1, 2)] * 2
    assert sweep.variants[4].data == {"source": "bbc_news", "protocol": "few_shot", "k": 20, "seed": 1}
    assert sweep.variants[4].label == "k=20 seed=1"
    trials = sweep.grid_trials()
    assert len(trials) == 2 * 6 * 2
    # a configuration's repeats are contiguous: config, then variant, then training seed
    assert [(t["lr"], t[DATA_KEY], t["seed"]) for t in trials[:4]] == [(1e-5, 0, 0), (1e-5, 0, 1), (1e-5, 1, 0), (1e-5, 1, 1)]
    assert {(t[DATA_KEY], t["seed"]) for t in trials if t["lr"] == 2e-5} == {(v, s) for v in range(6) for s in (0, 1)}
    assert sweep.grid_configs() == [{"lr": lr, "seed": s} for lr in (1e-5, 2e-5) for s in (0, 1)]  # unchanged


def test_no_list_means_one_variant_and_the_old_trials():
    sweep = spec(data={"k": 20, "seed": 0})
    assert len(sweep.variants) == 1 and sweep.variants[0].label == "" and sweep.repeats == 2
    assert [t[DATA_KEY] for t in sweep.grid_trials()] == [0] * 4


def test_value_lists_stay_values():
    variants = expand({"source": "x.csv", "protocol": "imbalance", "minority_classes": ["a", "b"], "rho": [1, 10]})
    assert [v.data["minority_classes"] for v in variants] == [["a", "b"], ["a", "b"]]
    assert [v.setting for v in variants] == [{"rho": 1}, {"rho": 10}]


@pytest.mark.parametrize("data,fragment", [
    ({"validation_fraction": [0.1, 0.2]}, "data.validation_fraction=[0.1, 0.2]: a list is not allowed here; allowed as lists"),
    ({"k": []}, "data.k=[] is empty"),
    ({"seed": [1, 1]}, "repeats a value"),
    ({"k": [5, "many"]}, "data.k must be an integer >= 1, got 'many'"),
    ({"protocol": "full", "k": None, "rho": [1, 3]}, "data.rho only applies to protocol 'imbalance'"),
])
def test_bad_axes_are_one_line_errors(data, fragment):
    with pytest.raises((SpecError, DataError)) as excinfo:
        spec(data=data)
    assert fragment in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_searcher_repeat_index_counts_seeds_then_variants():
    from contrasweep.spec.static import SweepStatic, VariantStatic

    static = SweepStatic(method="ce", seeds=(7, 8), variants=(VariantStatic(0), VariantStatic(1), VariantStatic(2)))
    pairs = [(trial_hp({TRIAL_INDEX: i, "lr": 1e-5}, static)["seed"], trial_variant({TRIAL_INDEX: i}, static)) for i in range(6)]
    assert pairs == [(7, 0), (8, 0), (7, 1), (8, 1), (7, 2), (8, 2)]
    grid = {"hp": {"lr": 1e-5, DATA_KEY: 2, "seed": 8}}
    assert trial_variant(grid, static) == 2 and DATA_KEY not in trial_hp(grid, static)


def test_searcher_sweep_repeats_every_suggestion_on_every_variant():
    from contrasweep.search.registry import num_samples, param_space

    sweep = spec(grid={}, search={"lr": {"loguniform": [1.0e-5, 1.0e-4]}}, sweep={"searcher": "random", "seeds": [0], "num_samples": 3})
    assert sweep.repeats == 6 and num_samples(sweep) == 18
    assert "seed" not in param_space(sweep)  # the repeat index sets it


# ------------------------------------------------------------------ n_total (SCL-MOO Sec. 3)

def test_stratified_counts_follow_class_shares_by_largest_remainder():
    assert stratified_counts(np.array([100, 50, 10]), 20).tolist() == [13, 6, 1]
    assert stratified_counts(np.array([1000, 10, 10]), 20).tolist() == [18, 1, 1]  # every class keeps one
    assert stratified_counts(np.array([60, 40, 30]), 13).tolist() == [6, 4, 3]
    with pytest.raises(DataError, match="n_total=2 is smaller than the 3 classes"):
        stratified_counts(np.array([5, 5, 5]), 2)


def test_few_shot_n_total_draws_n_rows_in_all(tiny_model_dir, cache_dir, tmp_path):
    import csv

    rows = [{"text": f"row {i} " + "word " * (i % 7), "label": label}
            for i, label in enumerate(["apple"] * 60 + ["banana"] * 40 + ["cherry"] * 30)]
    path = tmp_path / "toy.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    prep = prepare({"source": str(path), "protocol": "few_shot", "n_total": 13}, tokenizer=tiny_model_dir, max_length=32)
    pool = {"apple": 60, "banana": 40, "cherry": 30}
    expected = dict(zip(pool, stratified_counts(np.array([round(n * 0.7) for n in pool.values()]), 13).tolist()))
    assert prep.stats["train"]["per_class"] == expected and prep.stats["train"]["n"] == 13
    assert prep.stats["validation"]["per_class"] == expected
    with pytest.raises(DataError, match="data.k and data.n_total are exclusive"):
        prepare({"source": str(path), "protocol": "few_shot", "n_total": 13, "k": 2}, tokenizer=tiny_model_dir)


# ------------------------------------------------------------------ identity in MLflow

def test_run_name_tags_and_groups():
    sweep = validate({"method": "lacon", "data": {"source": "bbc_news", "protocol": "few_shot", "k": [5, 20], "seed": [0, 3]},
                      "grid": {"temperature": [0.1, 0.3], "lam": [0.5]}, "sweep": {"seeds": [0, 1]}})
    from contrasweep.runner.inputs import sweep_static

    class Prepared:  # what the sweep's fixed part reads of a PreparedData
        num_labels, key, label_names, is_pair = 5, "abc", ["a", "b", "c", "d", "e"], False
        stats = {"train": {"n": 10}, "validation": {"n": 10}, "test": {"n": 20}}
        chance_levels = {"val/accuracy": 0.2}

    class Folder:
        train_location = trials_location = "/tmp/unused"

    static = sweep_static(sweep, Folder(), [Prepared()] * len(sweep.variants))
    assert static.variants[3].label_names == ("a", "b", "c", "d", "e") and static.variants[3].sizes["test"] == 20
    by_index = {}
    for trial in sweep.grid_trials():
        ident = identify({"hp": trial}, static)
        by_index[(trial["temperature"], trial[DATA_KEY], trial["seed"])] = ident
    one = by_index[(0.1, 3, 1)]  # k=20, split seed 3, training seed 1
    assert run_name(one, static) == "lacon τ=0.1 λ=0.5 · k=20 split=3 seed=1"
    t = tags(one, "lacon")
    assert t["contrasweep.k"] == "20" and t["contrasweep.data_seed"] == "3" and t["contrasweep.seed"] == "1"
    assert t["contrasweep.method"] == "lacon" and t["contrasweep.dataset"] == "bbc_news" and t["contrasweep.protocol"] == "few_shot"
    # repeats share a group; other settings and other configurations do not
    assert one.group == by_index[(0.1, 2, 0)].group  # k=20, split 0, seed 0
    assert one.group != by_index[(0.1, 0, 1)].group  # k=5
    assert one.config == by_index[(0.1, 0, 1)].config
    assert one.group != by_index[(0.3, 3, 1)].group
    groups = {i.group for i in by_index.values()}
    assert len(groups) == 2 * 2 and all(sum(i.group == g for i in by_index.values()) == 4 for g in groups)
