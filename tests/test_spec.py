"""Spec validation: each bad value gives its own one-line error naming value and range."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contrasweep.errors import SpecError, UserError
from contrasweep.search.registry import load_spec, reported_names, validate
from contrasweep.spec.load import apply_override

ROOT = Path(__file__).resolve().parents[1]


def base(**extra) -> dict:
    raw = {
        "method": "ce",
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4},
        "grid": {"lr": [1.0e-5, 2.0e-5]},
        "reported": {"lr": 2.0e-5},
        "fixed": {"epochs": 2},
        "sweep": {"seeds": [0, 1]},
    }
    raw.update(extra)
    return raw


def test_every_search_space_file_loads():
    for path in sorted((ROOT / "search_spaces").glob("*.yaml")):
        sweep = load_spec(path)
        assert sweep.method


@pytest.mark.parametrize("path", sorted((ROOT / "search_spaces").glob("*.yaml")), ids=lambda p: p.name)
def test_every_search_space_file_loads_for_a_smoke_test(path):
    """--smoke-test (``load_spec(..., smoke=True)``): one epoch wherever the spec sets its epochs,
    fixed or searched (ABALONE's grid searches them), the first 2 grid trials, 2 samples."""
    sweep = load_spec(path, smoke=True)
    assert sweep.max_epochs == 1 and sweep.num_samples <= 2
    assert 1 <= len(sweep.grid_configs()) <= 2 and all(c["epochs"] == 1 for c in sweep.grid_configs())
    assert sweep.experiment == load_spec(path).experiment  # the CLI adds "-smoke"


def test_a_smoke_test_cuts_the_epochs_where_the_spec_sets_them(tmp_path):
    def _write(raw: dict) -> Path:
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
        return tmp_path / "s.yaml"

    fixed = load_spec(_write(base(reported={"lr": 2.0e-5, "epochs": 7})), smoke=True)
    assert fixed.fixed["epochs"] == 1 and "epochs" not in fixed.reported
    grid = base(grid=[{"lr": [1.0e-5], "epochs": [10, 40]}, {"lr": [2.0e-5], "epochs": [80]}], fixed={},
                reported={"lr": 2.0e-5, "epochs": 80}, search={"lr": {"choice": [1.0e-5, 2.0e-5]}, "epochs": {"choice": [80]}})
    searched = load_spec(_write(grid), smoke=True)
    assert searched.grids == [{"lr": [1.0e-5], "epochs": [1]}, {"lr": [2.0e-5], "epochs": [1]}]
    assert searched.reported["epochs"] == 1 and searched.domains["epochs"].largest() == 1 and "epochs" not in searched.fixed
    assert searched.grid_limit == 2 and load_spec(_write(grid)).grid_limit is None
    with pytest.raises(SpecError, match="epochs is both fixed and searched"):  # a user's own --set still is checked
        load_spec(_write(grid), ["fixed.epochs=1"], smoke=True)
    # a max_steps budget would override the one epoch: off (0) wherever the spec sets it
    steps = load_spec(_write(base(fixed={"epochs": 10, "max_steps": 200})), smoke=True)
    assert steps.fixed["max_steps"] == 0 and steps.most_epochs((40,)) == 1
    grid["grid"][0]["max_steps"], grid["search"]["max_steps"] = [100, 200], {"choice": [100]}
    searched = load_spec(_write(grid), smoke=True)
    assert searched.grids[0]["max_steps"] == [0] and searched.domains["max_steps"].largest() == 0


def test_max_steps_is_a_loop_hyperparameter_fixed_or_searched():
    """``max_steps`` (0 = off) is set like any loop hyperparameter: fixed, in a grid, on a domain;
    the most epochs a trial may train (group ASHA's ``max_t``) resolves it on the fewest rows."""
    sweep = validate(base(fixed={"epochs": 3, "batch_size": 8, "max_steps": 40}))
    assert sweep.fixed["max_steps"] == 40 and sweep.most_epochs((20, 100)) == 14 and sweep.most_epochs() == 40
    grid = validate(base(grid={"lr": [1.0e-5], "max_steps": [0, 20]}, fixed={"epochs": 3, "batch_size": 8}))
    assert grid.grid["max_steps"] == [0, 20] and grid.most_epochs((100,)) == 3  # 0: its 3 epochs; 20 steps: 2 epochs
    raw = base(grid=None, search={"max_steps": {"randint": [50, 150]}}, fixed={"epochs": 3, "batch_size": 8})
    raw["sweep"]["searcher"] = "random"
    assert validate(raw).most_epochs((40,)) == 30 and validate(raw).domains["max_steps"].largest() == 150


def test_a_relative_data_path_in_a_spec_is_read_from_the_specs_folder(tmp_path, monkeypatch):
    """In the spec file: from the spec's folder, wherever the command runs; with --set: from the
    working directory, as any shell path; a missing file's error says which base was used."""
    folder = tmp_path / "project"
    folder.mkdir()
    for where in (folder / "d.csv", tmp_path / "e.csv"):
        where.write_text("text,label\na,x\nb,y\n")
    spec = folder / "s.yaml"
    spec.write_text(yaml.safe_dump(base(data={"source": "d.csv", "protocol": "full"})))
    monkeypatch.chdir(tmp_path)
    sweep = load_spec(spec)
    assert sweep.data["source"] == str(folder.resolve() / "d.csv") == sweep.raw["data"]["source"]
    assert load_spec(spec, ["data.source=e.csv"]).data["source"] == str(tmp_path.resolve() / "e.csv")
    spec.write_text(yaml.safe_dump(base(data={"source": "e.csv", "protocol": "full"})))
    with pytest.raises(UserError) as excinfo:
        load_spec(spec)
    message = str(excinfo.value)
    assert str(folder.resolve() / "e.csv") in message and "read from the spec's folder" in message
    assert "\n" not in message


def test_the_reported_point_outside_a_one_point_grid_is_named_and_inside_it_runs_once():
    """A user's one-point grid: a reported point equal to it (its defaults filled in) is one
    trial; one that differs runs first as its own configuration, and its run name says it is
    the reported point and shows the defaults it trains with for the grid's keys."""
    from contrasweep.spec.identity import TrialIdentity, run_name
    from contrasweep.spec.sweep import hp_defaults

    inside = validate(base(grid={"lr": [2.0e-5], "batch_size": [hp_defaults("ce")["batch_size"]]}, reported={"lr": 2.0e-5}))
    assert len(inside.grid_points()) == 1 and reported_names(inside) is None
    outside = validate(base(grid={"lr": [1.0e-4], "batch_size": [8]}, reported={"lr": 2.0e-5}))
    assert len(outside.grid_points()) == 2
    names = reported_names(outside)
    assert names == {"config": {"epochs": 2, "lr": 2.0e-5},
                     "defaults": {"batch_size": hp_defaults("ce")["batch_size"]}}
    from contrasweep.spec.static import SweepStatic, VariantStatic

    static = SweepStatic.of(outside, reported=names)
    assert static.varied == tuple(outside.varied) and static.reported == names

    def name(config: dict) -> str:
        return run_name(TrialIdentity({**config, "seed": 0}, VariantStatic(), 0, "c", ""), static)

    first, second = outside.grid_points()
    assert name(first) == f"ce lr=2e-05 batch_size={hp_defaults('ce')['batch_size']} (reported) · seed=0"
    assert name(second) == "ce lr=0.0001 batch_size=8 · seed=0"
    from contrasweep.runner.inputs import reported_line  # the console's line says so, in the run names' numbers

    assert reported_line(inside) is None
    assert reported_line(outside).endswith(f"(its runs are named '(reported)'): lr=2e-05 batch_size={hp_defaults('ce')['batch_size']}")


def test_ce_yaml_grid_is_lacon_section_3_1():
    sweep = load_spec(ROOT / "search_spaces" / "ce.yaml")
    assert sweep.grid["lr"] == [1e-5, 2e-5, 3e-5]
    assert sweep.grid["batch_size"] == [8, 16, 32, 64, 96]
    assert sweep.fixed == {"epochs": 10, "warmup_ratio": 0.06}
    configs = sweep.grid_configs()
    assert len(configs) == 15
    assert configs[0] == {"epochs": 10, "warmup_ratio": 0.06, "lr": 2e-5, "batch_size": 32, "seed": 0}
    assert len({tuple(sorted(c.items())) for c in configs}) == 15  # reported point not duplicated


@pytest.mark.parametrize("name, fusion", [("lacon.yaml", False), ("lacon_fusion.yaml", True)])
def test_lacon_yaml_is_section_3_1_crossed_with_section_4_4(name, fusion):
    sweep = load_spec(ROOT / "search_spaces" / name)
    assert sweep.grid["temperature"] == pytest.approx([0.05 * i for i in range(1, 11)])
    assert sweep.grid["lam"] == pytest.approx([0.1 * i for i in range(1, 11)])
    assert sweep.grid["lr"] == [1e-5, 2e-5, 3e-5] and sweep.grid["batch_size"] == [8, 16, 32, 64, 96]  # Sec. 3.1
    assert sweep.search["lr"] == {"choice": [1e-5, 2e-5, 3e-5]}
    assert sweep.search["batch_size"] == {"choice": [8, 16, 32, 64, 96]}
    fixed = {"heads": 6, "epochs": 10, "lr_schedule": "linear", "warmup_ratio": 0.06}
    assert sweep.fixed == ({"fusion": True, "fusion_window": 3, **fixed} if fusion else fixed)
    assert sweep.reported == {"temperature": 0.1}
    assert sweep.data["validation_fraction"] == 0.05 and sweep.data["protocol"] == "max_per_class"  # Sec. 3.1, fn. 1
    assert sweep.seeds == list(range(10))  # Sec. 3.1: 10 runs
    points = sweep.grid_points()
    # the reported point (τ 0.1; λ, lr, batch at their defaults 0.5, 2e-5, 32) is that grid point: run once, first
    assert len(points) == 3 * 5 * 10 * 10 and points[0] == {**sweep.fixed, "temperature": 0.1}
    assert {**sweep.fixed, "temperature": 0.1, "lam": 0.5, "lr": 2e-5, "batch_size": 32} not in points
    configs = sweep.grid_configs()
    assert len(configs) == 15000 and [c["seed"] for c in configs[:10]] == list(range(10))


def test_lacon_few_shot_override_is_section_4_1():
    sweep = load_spec(ROOT / "search_spaces" / "lacon.yaml", [
        "data.protocol=few_shot", "data.k=[10, 20, 50, 100]", "fixed.epochs=20",
        "data.seed=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "sweep.seeds=[0]"])
    assert sweep.fixed["epochs"] == 20 and len(sweep.variants) == 40 and sweep.repeats == 40
    assert {v.data["k"] for v in sweep.variants} == {10, 20, 50, 100}


ODD = [0.1, 0.3, 0.5, 0.7, 0.9]


def test_supcl_seq_yaml_is_table_1_and_4():
    sweep = load_spec(ROOT / "search_spaces" / "supcl_seq.yaml")
    table_1 = {(0.0, 0.1, 0.2, 0.3, 0.4): 800, (0.0, 0.1, 0.2, 0.3): 640, (0.0, 0.1, 0.2): 480, (0.0, 0.1): 320,
               (0.1, 0.1): 256}
    table_4 = {(0.0, 0.05, 0.1, 0.2): 128, (0.0, 0.2): 48, (0.0, 0.2, 0.3, 0.4, 0.5): 16}  # the sets Table 1 lacks
    sets = [list(k) for k in {**table_1, **table_4}]
    assert sweep.grid == {"dropouts": sets, "batch_size": list({**table_1, **table_4}.values()), "lr": [5e-5, 1e-4]}
    assert sweep.search["dropouts"] == {"choice": sets}
    assert sweep.fixed == {"temperature": 0.05, "epochs": 5}
    assert sweep.reported == {"dropouts": [0.0, 0.1, 0.2], "batch_size": 480, "lr": 1e-4}
    configs = sweep.grid_configs()
    # 16 grid points (each set at its own batch size × 2 rates), the reported one first and not twice
    assert len(configs) == 16 and configs[0] == {**sweep.fixed, **sweep.reported, "seed": 0}
    assert all(c["batch_size"] == {**table_1, **table_4}[tuple(c["dropouts"])] for c in configs)
    assert sorted((tuple(c["dropouts"]), c["lr"]) for c in configs) == sorted(
        (k, lr) for k in {**table_1, **table_4} for lr in (5e-5, 1e-4))


def test_grid_blocks_run_in_order_each_a_product_and_shared_points_once():
    raw = {"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4},
           "grid": [{"lr": [1e-3, 1e-4], "batch_size": [8]}, {"lr": [1e-4], "batch_size": [8, 16]}]}
    sweep = validate(raw)
    assert [(p["lr"], p["batch_size"]) for p in sweep.grid_points()] == [(1e-3, 8), (1e-4, 8), (1e-4, 16)]
    assert sweep.grid == {"lr": [1e-3, 1e-4], "batch_size": [8, 16]} and sweep.varied == ["lr", "batch_size"]
    for bad, says in (([{"lr": [1e-3]}, 3], "a non-empty list"), ([{}], "a non-empty list"),
                      ([{"lr": 1e-3}], "grid.lr=0.001 is not allowed"), ([{"lr": [5.0]}], "grid.lr")):
        with pytest.raises(SpecError, match=says):
            validate({**raw, "grid": bad})


def test_scl_moo_yaml_is_section_3():
    sweep = load_spec(ROOT / "search_spaces" / "scl_moo.yaml")
    assert sweep.grid == {"temperature": ODD, "lam": ODD, "r1": ODD, "moo": ["ls", "epo"]}
    assert sweep.reported == {"temperature": 0.3, "lam": 0.3, "r1": 0.1}
    # 200 optimiser steps at every N (issue 55: 10 epochs were 20 steps at N = 20, at the majority class)
    assert sweep.fixed == {"lr": 1e-5, "batch_size": 16, "classifier_dropout": 0.1, "max_steps": 200, "eval_every": 10}
    configs = sweep.grid_configs()
    # reported point = (0.3, 0.3, 0.1) with the default solver (ls): a grid point, run first once
    assert len(configs) == 250 and configs[0]["r1"] == 0.1 and "moo" not in configs[0]
    # N = 20, 50, 100 in all (settings) × 10 seeds (repeats); test and validation from the dev split
    assert {v.data["n_total"] for v in sweep.variants} == {20, 50, 100} and len(sweep.variants) == 30
    assert {v.label for v in sweep.variants[:10]} == {f"n_total=20 seed={i}" for i in range(10)}
    assert (sweep.data["dev_test_fraction"], sweep.data["dev_validation_max"]) == (0.5, 500)


def test_ce_scl_yaml_grid():
    sweep = load_spec(ROOT / "search_spaces" / "ce_scl.yaml")
    assert sweep.grid == {"temperature": ODD, "lam": ODD}
    assert sweep.fixed == {"lr": 1e-5, "batch_size": 16, "classifier_dropout": 0.1, "epochs": 10}
    assert len(sweep.grid_configs()) == 25


def test_vascl_and_simcse_yaml_are_app_a():
    vascl = load_spec(ROOT / "search_spaces" / "vascl.yaml")
    assert {k: vascl.fixed[k] for k in ("lr", "head_lr", "head_dim", "batch_size", "epochs", "lr_schedule")} == {
        "lr": 5e-6, "head_lr": 5e-4, "head_dim": 128, "batch_size": 1024, "epochs": 5, "lr_schedule": "constant"}
    # App. A: Δ is set by model size (15 base, 30 large), not searched; one configuration
    assert vascl.grid == {} and vascl.search == {} and vascl.reported == {} and vascl.fixed["delta"] == 15.0
    assert len(vascl.grid_points()) == 1 and vascl.metric == ["val/cluster_acc"]
    # App. A's model selection on STS-B dev, when the pairs are given
    with_sts = load_spec(ROOT / "search_spaces" / "vascl.yaml",
                         ["evaluation.sts=hub:mteb/stsbenchmark-sts", "sweep.metric=val/sts_spearman"])
    assert with_sts.metric == ["val/sts_spearman"]
    simcse = load_spec(ROOT / "search_spaces" / "simcse.yaml")
    assert simcse.grid == {"lr": [1e-5, 3e-5]} and simcse.reported == {"lr": 3e-5}
    assert simcse.fixed["batch_size"] == 1024 and simcse.fixed["epochs"] == 5 and simcse.fixed["temperature"] == 0.05
    for small in ("vascl_small.yaml", "simcse_small.yaml"):
        sweep = load_spec(ROOT / "search_spaces" / small)
        assert sweep.fixed["batch_size"] == 64 and sweep.fixed["epochs"] == 1


def test_representation_methods_default_to_clustering_accuracy(tmp_path):
    raw = base()
    raw.update(method="simcse", grid={"lr": [3.0e-5]})
    raw["sweep"].pop("metric", None)
    assert validate(raw).metric == ["val/cluster_acc"]
    raw["sweep"]["metric"] = "val/accuracy"
    with pytest.raises(SpecError, match="allowed: val/cluster_acc, val/nmi, val/probe5_acc"):
        validate(raw)


def test_abalone_yaml_is_table_2_and_app_a():
    sweep = load_spec(ROOT / "search_spaces" / "abalone.yaml")
    # Table 2: the contrastive losses × three temperatures × both Sec. 4.3 rates at 80 epochs (App. A); then the
    # BCE-family baselines (Table 3) × both rates × epochs {10, 40, 80} (App. A), not crossed with τ: 24 + 18
    assert [sorted(b) for b in sweep.grids] == [["epochs", "loss", "lr", "temperature"], ["epochs", "loss", "lr"]]
    points = sweep.grid_points()
    contrastive = [p for p in points if p["loss"] in ("msc", "base", "bqueue", "bqproto")]
    baselines = [p for p in points if p["loss"] in ("bce", "focal", "asl")]
    assert len(points) == 42 and points[0]["loss"] == "msc" and len(contrastive) == 24 and len(baselines) == 18
    assert {p["temperature"] for p in contrastive} == {0.07, 0.1, 0.2} and {p["epochs"] for p in contrastive} == {80}
    assert all("temperature" not in p for p in baselines) and {p["epochs"] for p in baselines} == {10, 40, 80}
    assert sweep.seeds == [0, 1, 2] and sweep.search["temperature"] == {"choice": [0.07, 0.1, 0.2]}
    assert {k: sweep.fixed[k] for k in ("queue_size", "momentum", "beta", "batch_size", "proj_dim")} == {
        "queue_size": 512, "momentum": 0.999, "beta": 0.1, "batch_size": 32, "proj_dim": 256}
    assert sweep.metric == ["val/micro_f1"] and sweep.data["task"] == "multilabel"


def test_list_valued_choice_travels_through_optuna_as_text(tmp_path):
    from contrasweep.folder import sweeps
    from contrasweep.search.registry import param_space, search_alg

    sweep = load_spec(ROOT / "search_spaces" / "supcl_seq.yaml", ["sweep.searcher=optuna"])
    space = param_space(sweep)
    assert "dropouts" not in space  # Tune's param_space holds the fixed values; the searcher its domains
    searcher = search_alg(sweep, sweeps.create(tmp_path, "s", sweep.raw, {}))
    assert searcher.space["dropouts"].choices[2] == "0.0,0.1,0.2"
    searcher.set_search_properties(None, None, space)  # what tune.Tuner does with param_space
    suggested = searcher.suggest("t1")  # the reported point first, as text
    assert suggested["dropouts"] == "0.0,0.1,0.2" and suggested["__suggestion__"] == 0
    from trainables.registry import get_method

    assert get_method("supcl_seq").params["dropouts"].coerce("dropouts", suggested["dropouts"]) == [0.0, 0.1, 0.2]


def test_grid_times_seeds_reported_first():
    configs = validate(base()).grid_configs()
    assert [(c["lr"], c["seed"]) for c in configs] == [(2e-5, 0), (2e-5, 1), (1e-5, 0), (1e-5, 1)]


def test_numbers_written_without_decimal_point_are_coerced(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("method: ce\ndata: {source: bbc_news}\ngrid: {lr: [1e-5, 2e-5]}\n")
    assert load_spec(path).grid["lr"] == [1e-5, 2e-5]


def test_overrides():
    raw = base()
    apply_override(raw, "fixed.epochs=3")
    apply_override(raw, "grid.lr=[3.0e-5]")
    apply_override(raw, "sweep.resources.workers=2")
    sweep = validate(raw)
    assert sweep.fixed["epochs"] == 3 and sweep.grid["lr"] == [3e-5]
    assert sweep.resources["workers"] == 2 and sweep.distributed


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda r: r.update(method="lacon9"), "method 'lacon9' is not a built-in method; allowed: abalone, ce"),
        (lambda r: r.update(bogus=1), "unknown spec key 'bogus'"),
        (lambda r: r["grid"].update(lr=[0.0]), "grid.lr=0.0 is not allowed; allowed: a number in (0, 1]"),
        (lambda r: r["grid"].update(lr=[]), "grid.lr=[] is not allowed; allowed: a non-empty list"),
        (lambda r: r["grid"].update(temperature=[0.1]), "grid.temperature: unknown hyperparameter"),
        (lambda r: r["fixed"].update(batch_size=-8), "fixed.batch_size=-8 is not allowed; allowed: an integer in [1, 65536]"),
        (lambda r: r["fixed"].update(warmup_ratio="lots"), "fixed.warmup_ratio='lots' is not allowed"),
        (lambda r: r["fixed"].update(max_steps=-1), "fixed.max_steps=-1 is not allowed; allowed: an integer in [0, 1000000000]"),
        (lambda r: r["fixed"].update(max_steps=1.5), "fixed.max_steps=1.5 is not allowed; allowed: an integer in [0, 1000000000]"),
        (lambda r: r["grid"].update(max_steps=[100, -5]), "grid.max_steps=-5 is not allowed; allowed: an integer in [0, 1000000000]"),
        (lambda r: r["fixed"].update(eval_every=0), "fixed.eval_every=0 is not allowed; allowed: an integer in [1, 10000]"),
        (lambda r: r["sweep"].update(searcher="bayes"), "sweep.searcher='bayes' is not allowed; allowed: grid, optuna, random"),
        (lambda r: r["sweep"].update(scheduler="pbt"), "sweep.scheduler='pbt' is not allowed; allowed: asha, none"),
        (lambda r: r["sweep"].update(metric="val/auc"), "sweep.metric='val/auc' is not allowed"),
        (lambda r: r["sweep"].update(mode="up"), "sweep.mode='up' is not allowed; allowed: max, min"),
        (lambda r: r["sweep"].update(num_samples=0), "sweep.num_samples=0 is not allowed; allowed: an integer in [1, 100000]"),
        (lambda r: r["sweep"].update(seeds=[1, 1]), "repeats a seed"),
        (lambda r: r["sweep"].update(seeds=[-1]), "sweep.seeds=-1 is not allowed"),
        (lambda r: r["sweep"].update(resources={"cpu": 0}), "sweep.resources.cpu=0 is not allowed; allowed: a number in (0, 4096]"),
        (lambda r: r["sweep"].update(resources={"gpus": 1}), "unknown key sweep.resources.gpus"),
        (lambda r: r["sweep"].update(searcher="optuna"), "needs a 'search' section"),
        (lambda r: r.update(search={"warmup_ratio": {"loguniform": [0.0, 0.1]}}), "0 < low < high"),
        (lambda r: r.update(search={"lr": {"uniform": [1.0e-4, 1.0e-5]}}), "low < high"),
        (lambda r: r.update(search={"lr": {"normal": [0, 1]}}), "allowed: one of {uniform, loguniform, quniform, randint, choice"),
        (lambda r: r.update(encoder={"pooling": "max"}), "encoder.pooling='max' is not allowed; allowed: 'cls', 'mean'"),
        (lambda r: r.update(encoder={"max_length": 4}), "encoder.max_length=4 is not allowed; allowed: an integer in [8, 8192]"),
        (lambda r: r["fixed"].update(lr=1e-5), "lr is both fixed and searched"),
        (lambda r: r.update(grid=None, search={"lr": {"uniform": [3.0e-5, 1.0e-4]}}, sweep={"searcher": "optuna"}),
         "reported.lr=2e-05 lies outside search.lr"),
        (lambda r: r.update(name="bad name!"), "name='bad name!' is not allowed"),
        (lambda r: r["data"].update(protocol="zero_shot"), "zero_shot"),
        (lambda r: r.pop("data"), "data.source is missing"),
    ],
)
def test_bad_values_give_one_line_errors(mutate, fragment):
    raw = base()
    mutate(raw)
    with pytest.raises(UserError) as err:
        validate(raw)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_reported_point_fills_unreported_dimensions():
    from contrasweep.spec.sweep import reported_point

    raw = base(grid=None, search={"lr": {"loguniform": [1.0e-5, 1.0e-4]}, "batch_size": {"choice": [16, 64]},
                                  "warmup_ratio": {"uniform": [0.0, 0.1]}})
    raw["sweep"]["searcher"] = "optuna"
    point = reported_point(validate(raw))
    # lr reported; batch_size default 32 is not a choice -> first choice; warmup default 0.06 fits
    assert point == {"lr": 2e-5, "batch_size": 16, "warmup_ratio": 0.06}


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: [ce\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(bad)
    bad.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(SpecError, match="must hold a YAML mapping"):
        load_spec(bad)


def test_bad_override_syntax():
    with pytest.raises(SpecError, match="KEY=VALUE"):
        apply_override({}, "epochs")
    with pytest.raises(SpecError, match="unknown section 'epochs'"):
        apply_override({}, "epochs=3")


@pytest.mark.parametrize("text, key, lines", [
    ("method: ce\ndata: {source: bbc_news}\ngrid:\n  lr: [1.0e-5]\n  lr: [2.0e-5]\n", "lr", (4, 5)),
    ("method: ce\ndata: {source: bbc_news, source: tweet_sentiment}\ngrid: {lr: [1.0e-5]}\n", "source", (2, 2)),
])
def test_a_key_given_twice_is_refused(tmp_path, text, key, lines):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=rf"key '{key}' appears twice \(lines {lines[0]} and {lines[1]}\)"):
        load_spec(path)


def test_equal_keys_in_different_mappings_are_fine(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("method: ce\ndata: {source: bbc_news}\nreported: {lr: 1.0e-5}\ngrid: {lr: [1.0e-5]}\n"
                    "search: {lr: {loguniform: [1.0e-5, 1.0e-4]}}\n")
    sweep = load_spec(path)
    assert sweep.grid["lr"] == [1.0e-5] and sweep.search["lr"] == {"loguniform": [1.0e-5, 1.0e-4]}


def test_search_domains_are_parsed_once_into_typed_objects():
    """contrasweep.spec.domains: each spec domain becomes one object that answers what the
    checks, the searcher and the budget ask (no code downstream reads ``{kind: [args]}``)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from contrasweep.spec.domains import CHECKED_VALUES, Choice, IntRange, LogRange, Range, SteppedRange

    raw = base(grid=None, search={"lr": {"loguniform": [1.0e-5, 1.0e-4]}, "batch_size": [16, 64],
                                  "warmup_ratio": {"uniform": [0.0, 0.1]}, "epochs": {"randint": [2, 4]},
                                  "weight_decay": {"quniform": [0.0, 0.1, 0.05]}})
    raw["sweep"]["searcher"] = "optuna"
    raw["fixed"] = {}
    sweep = validate(raw)
    assert sweep.domains == {"lr": LogRange(1e-5, 1e-4), "batch_size": Choice((16, 64)), "warmup_ratio": Range(0.0, 0.1),
                             "epochs": IntRange(2, 4), "weight_decay": SteppedRange(0.0, 0.1, 0.05)}
    assert sweep.search["batch_size"] == {"choice": [16, 64]}  # the spec's own form, as saved and logged
    assert sweep.domains["lr"].distribution() == FloatDistribution(1e-5, 1e-4, log=True)
    assert sweep.domains["epochs"].distribution() == IntDistribution(2, 4)
    assert sweep.domains["weight_decay"].distribution() == FloatDistribution(0.0, 0.1, step=0.05)
    assert sweep.domains["batch_size"].distribution() == CategoricalDistribution([16, 64])  # lists travel as text
    assert sweep.domains["epochs"].check_values() == [2, 3, 4]
    assert sweep.domains["weight_decay"].check_values() == pytest.approx([0.0, 0.05, 0.1])
    assert IntRange(0, CHECKED_VALUES).check_values() == [0, CHECKED_VALUES]  # too many: the bounds
    assert sweep.domains["lr"].contains(2e-5) and not sweep.domains["lr"].contains(2e-4)
    assert sweep.max_epochs == 4  # the largest value the epochs domain gives


def test_every_searcher_and_scheduler_the_spec_allows_has_its_object():
    """contrasweep.search.registry maps each scheduler name the spec validates against to the
    object that builds its Tune part (a searcher's name is the registry's own: ``searcher_of``);
    a searcher's trial count and groups come from it."""
    from contrasweep.search.registry import SCHEDULERS, group_sizes, live_limit, num_samples, total_trials
    from contrasweep.spec.sweep import SCHEDULERS as SCHEDULER_NAMES

    assert sorted(SCHEDULERS) == sorted(SCHEDULER_NAMES)
    grid = validate(base())
    assert (num_samples(grid), total_trials(grid)) == (4, 4)  # 2 points x 2 seeds, one sample a trial
    assert sorted(group_sizes(grid).values()) == [2, 2]
    raw = base(grid=None, search={"lr": {"loguniform": [1.0e-5, 1.0e-4]}})
    raw["sweep"].update(searcher="random", num_samples=3, max_concurrent=1)
    searched = validate(raw)
    assert (num_samples(searched), total_trials(searched), group_sizes(searched)) == (6, 6, 2)
    assert live_limit(searched) == 2  # group ASHA (the default): a whole group live at once
    raw["sweep"]["scheduler"] = "none"
    assert live_limit(validate(raw)) == 1


def test_numbers_read_alike_everywhere():
    """4 significant digits for hyperparameters (numbers read back from MLflow as text too),
    4 decimals and ± only over 2 or more repeats for metrics, counted nouns in number; 1e-4 in a
    spec or a --set is a number (YAML 1.2), and a tab in a spec is named."""
    from contrasweep.spec.text import counted, hp_text, mean_std

    assert hp_text("0.0002693883019285409") == "0.0002694" and hp_text(0.000443038) == "0.000443"
    assert hp_text(32) == "32" and hp_text("msc") == "msc" and hp_text([0.1, 0.2]) == "[0.1,0.2]" and hp_text(True) == "True"
    assert mean_std(0.75, 0.353553, 2) == "0.7500 ± 0.3536" and mean_std(0.5, 0.0, 1) == "0.5000"
    assert mean_std(float("nan"), float("nan"), 0) == "–"
    assert counted(1, "repeat") == "1 repeat" and counted(2, "configuration") == "2 configurations"
    raw = base()
    apply_override(raw, "grid.lr=[1e-4, 3e-5]")
    assert raw["grid"]["lr"] == [1.0e-4, 3.0e-5]


def test_a_tab_in_a_spec_is_named(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("method: ce\ndata:\n\tsource: bbc_news\n")
    with pytest.raises(SpecError, match="at line 3: a tab character; allowed: indentation with spaces"):
        load_spec(path)


@pytest.mark.parametrize("value, fragment", [(-1, "got -1"), ("some", "got 'some'"), (True, "got True"), (1.5, "got 1.5")])
def test_keep_models_is_a_whole_number_or_all(value, fragment):
    """tracking.keep_models: how many configurations of each setting keep an MLflow model
    besides what a report shows (default 2), or all; anything else is one line."""
    assert validate(base()).keep_models == 2
    assert validate(base(tracking={"keep_models": "all"})).keep_models == "all"
    assert validate(base(tracking={"keep_models": 0})).keep_models == 0
    with pytest.raises(SpecError) as excinfo:
        validate(base(tracking={"keep_models": value}))
    message = str(excinfo.value)
    assert message.startswith("tracking.keep_models must be a whole number >= 0 or all") and fragment in message
    assert "allowed:" in message and "\n" not in message
    with pytest.raises(SpecError, match="allowed: tracking.experiment, tracking.keep_models"):
        validate(base(tracking={"keep": 1}))
