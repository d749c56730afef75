"""``contrasweep plan`` (contrasweep.runner.sweep_plan, trainables.calibration): the counts equal what
Tune is handed for every shipped search space and for a searcher (no training); the cost model's
parts (concurrency from resources, FIFO makespan, resume states) by hand; the calibration runs
the real loop for every method on the tiny model; and, end to end on a real Ray and MLflow, the
plan of a tiny sweep counts the trials ``run`` then runs and estimates its wall time within a
factor 1.5, its fixed costs measured on this machine; bad input is one line."""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import write_spec
from contrasweep.search import registry
from contrasweep.folder.record import read as read_record

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = {"setup_s": 0.5, "first_setup_s": 3.0, "train_row_s": 0.1, "stage2_row_s": 0.0, "eval_row_s": 0.02,
               "eval_fixed_s": 0.5, "write_byte_s": 1e-9, "weights_bytes": 1000, "resume_bytes": 3000,
               "rows": {}, "steps": 3, "measured_s": 1.0}


def _prepared(sweep, train=40, validation=40, test=200) -> list:
    return [SimpleNamespace(stats={"train": {"n": train}, "validation": {"n": validation}, "test": {"n": test}},
                            num_labels=5, key="k") for _ in (sweep.variants or [None])]


@pytest.mark.parametrize("path", sorted((ROOT / "search_spaces").glob("*.yaml")), ids=lambda p: p.stem)
def test_plan_counts_what_tune_is_given_for_every_shipped_search_space(path):
    from ray.tune.search.variant_generator import _count_variants

    from contrasweep.runner.sweep_plan import plan
    from contrasweep.search.registry import num_samples, param_space, total_trials
    from contrasweep.spec.load import load_spec

    sweep = load_spec(str(path), [])
    found = plan(sweep, _prepared(sweep), CALIBRATION, {"CPU": 2.0})
    # Tune's own count of the trials its generator makes of the sweep's param space (what run hands it)
    assert found.trials == _count_variants({"config": param_space(sweep), "num_samples": num_samples(sweep)}, [])
    assert found.trials == total_trials(sweep)
    assert found.configurations * found.repeats == found.trials
    settings = {tuple(sorted(v.setting.items(), key=str)) for v in sweep.variants} or {()}
    assert found.settings == len(settings)
    assert found.epochs_total == sum(c.epochs for c in found.costs) and found.steps_total > 0


def test_plan_of_the_demo_and_of_a_searcher(tmp_path):
    """The demo by hand: 2 learning rates × 2 seeds, 3 epochs, 40 training rows in batches of 8;
    an Optuna sweep: num_samples suggestions × seeds × data variants, a searched epochs at its largest."""
    from contrasweep.runner.sweep_plan import plan
    from contrasweep.spec.load import load_spec

    demo = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), [])
    found = plan(demo, _prepared(demo), CALIBRATION, {"CPU": 2.0})
    assert (found.trials, found.configurations, found.repeats, found.settings) == (4, 2, 2, 1)
    assert (found.epochs_total, found.steps_total, found.concurrency) == (12, 4 * 3 * 5, 2)
    assert json.loads(json.dumps(found.as_json()))["trials"] == 4
    assert set(found.as_json()) >= {"trials", "configurations", "settings", "repeats", "epochs_total", "steps_total",
                                    "disk_bytes", "estimated_seconds", "calibration"}

    spec = write_spec(tmp_path / "s.yaml", "default", data={"k": [2, 3]}, grid={}, reported={},
                      search={"lr": {"loguniform": [1.0e-5, 1.0e-3]}, "epochs": {"choice": [2, 4]}},
                      sweep={"searcher": "optuna", "num_samples": 3, "seeds": [0, 1], "scheduler": "none"})
    raw = yaml.safe_load(spec.read_text())
    del raw["fixed"]["epochs"]  # searched instead
    spec.write_text(yaml.safe_dump(raw))
    sweep = load_spec(str(spec), [])
    found = plan(sweep, _prepared(sweep), CALIBRATION, {"CPU": 2.0})
    assert (found.trials, found.configurations, found.repeats, found.settings) == (12, 3, 4, 2)
    assert found.epochs_total == 12 * 4 and found.steps_total == 12 * 4 * 5
    assert found.test_passes == 4  # the selected suggestion's 4 repeats (2 settings × 2 seeds)


def _few_shot(*overrides: str):
    """The demo at k = 10 and k = 20 per class (5 classes: 50 and 100 training rows), 10 epochs."""
    from contrasweep.spec.load import apply_override
    from contrasweep.search.registry import validate

    raw = yaml.safe_load((ROOT / "search_spaces" / "demo.yaml").read_text())
    del raw["fixed"]["batch_size"]
    for item in ("data.k=[10, 20]", "fixed.epochs=10", *overrides):
        apply_override(raw, item)
    sweep = validate(raw)
    prepared = [SimpleNamespace(stats={"train": {"n": 5 * v.data["k"]}, "validation": {"n": 40}, "test": {"n": 200}})
                for v in sweep.variants]
    return sweep, prepared


def test_the_plan_prints_each_settings_optimiser_steps_and_warns_under_the_floor():
    """Issue 55: 10 epochs of batch 16 are 40 steps at k = 10 (4 an epoch) and 70 at k = 20: one
    warning line names both, the floor and what gives more. ``fixed.max_steps: 200`` trains 200
    steps in both (50 and 29 epochs: the cost model's epochs) and the warning goes."""
    from contrasweep.runner.plan_steps import MIN_STEPS
    from contrasweep.runner.plan_lines import describe
    from contrasweep.runner.sweep_plan import plan

    sweep, prepared = _few_shot("fixed.batch_size=16")
    found = plan(sweep, prepared, CALIBRATION, {"CPU": 2.0})
    assert found.setting_steps == {"k=10": [40, 40], "k=20": [70, 70]} and found.as_json()["setting_steps"]
    lines = describe(sweep, found, {"CPU": 2.0}, "this machine")
    assert "optimiser steps per trial: k=10 40, k=20 70" in lines
    warnings = [line for line in lines if line.startswith("warning:")]
    assert len(warnings) == 1 and MIN_STEPS == 100
    assert warnings[0].startswith("warning: trials train as few as 40 (k=10), 70 (k=20) optimiser steps, under the "
                                  "floor of 100")
    assert all(word in warnings[0] for word in ("fixed.epochs", "batch_size", "fixed.max_steps=100"))

    sweep, prepared = _few_shot("fixed.batch_size=16", "fixed.max_steps=200")
    found = plan(sweep, prepared, CALIBRATION, {"CPU": 2.0})
    assert found.setting_steps == {"k=10": [200, 200], "k=20": [200, 200]}
    assert sorted({(c.variant, c.epochs, c.steps) for c in found.costs}) == [(0, 50, 200), (1, 29, 200)]
    assert found.steps_total == 200 * found.trials
    lines = describe(sweep, found, {"CPU": 2.0}, "this machine")
    assert "optimiser steps per trial: k=10 200, k=20 200" in lines and not any(x.startswith("warning:") for x in lines)
    # validated every 10 epochs (eval_every): 5 and 3 validations instead of 50 and 29, cheaper by the rest
    sparse = plan(*_few_shot("fixed.batch_size=16", "fixed.max_steps=200", "fixed.eval_every=10"), CALIBRATION, {"CPU": 2.0})
    saved = {a.variant: a.seconds - b.seconds for a, b in zip(found.costs, sparse.costs)}
    assert saved[0] > saved[1] > 0  # ASHA's rungs (1, 2, 4, 8, 16, 32) are validated too: 50 - 10 at k=10, 29 - 8 at k=20
    # resume states every 5 epochs (checkpoint_every), at the rungs, the last: at validated epochs only
    assert {(c.variant, c.resume_states) for c in found.costs} == {(0, 16), (1, 11)}
    assert {(c.variant, c.resume_states) for c in sparse.costs} == {(0, 11), (1, 8)}
    # a searched batch size: each setting's fewest and most (the reported point, which sets none,
    # trains at the default batch of 32: 2 and 4 steps an epoch); a cut last epoch reads only its steps' rows
    sweep, prepared = _few_shot("grid.batch_size=[8, 16]")
    assert plan(sweep, prepared, CALIBRATION, {"CPU": 2.0}).setting_steps == {"k=10": [20, 70], "k=20": [40, 130]}
    from contrasweep.runner.sweep_plan import rows_trained

    assert rows_trained({"batch_size": 16, "max_steps": 10}, 50) == 2 * 50 + 2 * 16


def test_the_plan_counts_the_test_passes_of_what_is_reported():
    """LaCon Sec. 3.1's CE grid, lr 3 × batch size 5: the selected configuration and its slices are at
    most 1 + 2 + 4 = 7 of 15 configurations; ``all`` tests every trial, in the trials."""
    from contrasweep.runner.sweep_plan import plan
    from contrasweep.search.registry import reported_configurations
    from contrasweep.spec.load import load_spec

    ce = load_spec(str(ROOT / "search_spaces" / "ce.yaml"), ["sweep.seeds=[0, 1, 2]"])
    assert reported_configurations(ce) == 7 and len(ce.grid_points()) == 15
    reported = plan(ce, _prepared(ce), CALIBRATION, {"CPU": 2.0})
    every = plan(load_spec(str(ROOT / "search_spaces" / "ce.yaml"), ["sweep.seeds=[0, 1, 2]", "evaluation.test=all"]),
                 _prepared(ce), CALIBRATION, {"CPU": 2.0})
    assert (reported.test_passes, every.test_passes) == (21, 45)
    # one copy of each kept model: of the 7 reported configurations those whose weights the sweep keeps
    # (tracking.pruning): the 2 best (keep_models: 2) and the reported point, × 3 seeds
    assert reported.kept_bytes == every.kept_bytes == (2 + 1) * 3 * 1000
    every_model = plan(load_spec(str(ROOT / "search_spaces" / "ce.yaml"), ["sweep.seeds=[0, 1, 2]", "tracking.keep_models=all"]),
                       _prepared(ce), CALIBRATION, {"CPU": 2.0})
    assert every_model.kept_bytes == 45 * 1000
    assert reported.estimated_seconds < every.estimated_seconds
    # a grid of blocks: counted for the point with the most neighbours (SupCL-Seq's dropout sets tie batch sizes)
    supcl = load_spec(str(ROOT / "search_spaces" / "supcl_seq.yaml"), [])
    assert 1 <= reported_configurations(supcl) <= len(supcl.grid_points())


def test_the_disk_bound_follows_what_the_sweep_folder_keeps():
    """``disk_bytes`` (tracking.pruning): 3 best folders per live trial (paused at a rung too, under
    group ASHA) + the repeats of each setting's keep_models + 1 best configurations and of the
    reported point; a resume state per live trial and one more per running one. LaCon's 15,000-trial
    grid at MiniLM's sizes (88.4 MB of best weights, 264 MB a resume state) fits in 10 GB on 2 CPUs."""
    from contrasweep.runner.sweep_plan import plan
    from contrasweep.spec.load import load_spec

    minilm = {**CALIBRATION, "weights_bytes": 88_400_000, "resume_bytes": 264_000_000}
    lacon = load_spec(str(ROOT / "search_spaces" / "lacon.yaml"), [])
    found = plan(lacon, _prepared(lacon), minilm, {"CPU": 2.0})
    assert found.trials == 15_000 and found.concurrency == 1
    live = 10  # group ASHA keeps a whole group of 10 seeds live, one running
    assert found.disk_bytes == (3 * live + 3 * 10 + 10) * 88_400_000 + (live + 1) * 264_000_000
    assert found.disk_bytes <= 10e9
    # no pauses (no scheduler): only the running trials are live; no reported point: none kept for it
    demo = load_spec(str(ROOT / "search_spaces" / "lacon.yaml"),
                     ["sweep.scheduler=none", "tracking.keep_models=0", "sweep.max_concurrent=2"])
    small = plan(demo, _prepared(demo), CALIBRATION, {"CPU": 2.0})
    assert small.concurrency == 2 and small.disk_bytes == (3 * 2 + 2 * 10 + 10) * 1000 + (2 + 2) * 3000


def test_a_run_opens_with_its_size_and_a_large_one_with_plans_estimate_and_the_smoke_test(cache_dir):
    """issue 57: `contrasweep run search_spaces/lacon.yaml` started 15,000 trials without a word."""
    from contrasweep.runner.size_line import LARGE_TRIALS, size_lines
    from contrasweep.runner.plan_lines import clock
    from contrasweep.runner.sweep_plan import plan
    from contrasweep.spec.load import load_spec

    demo = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), [])
    (line,) = size_lines(demo, _prepared(demo), {"CPU": 2.0}, None)  # no plan kept a calibration: none here
    assert line.startswith("4 trials to run: 2 configurations × 2 repeats, 2 at a time (`contrasweep plan SPEC`")
    (line,) = size_lines(demo, _prepared(demo), {"CPU": 2.0}, None, calibration=CALIBRATION)  # one plan kept
    assert line.startswith("4 trials to run: 2 configurations × 2 repeats, 2 at a time; plan's estimate: ")
    lacon = load_spec(str(ROOT / "search_spaces" / "lacon.yaml"), ["sweep.max_concurrent=1"])
    assert registry.total_trials(lacon) > LARGE_TRIALS
    first, second = size_lines(lacon, _prepared(lacon), {"CPU": 2.0}, None, calibration=CALIBRATION)
    found = plan(lacon, _prepared(lacon), CALIBRATION, {"CPU": 2.0}, tsne=False)
    assert first.startswith(f"{found.trials:,} trials to run: {found.configurations:,} configurations × "
                            f"{found.repeats} repeats, 1 at a time; plan's estimate: {clock(found.estimated_seconds)} on "
                            "this machine")
    assert "--smoke-test (1 epoch, at most 2 trials" in second and "Ctrl-C keeps its state" in second


def test_the_cost_model_by_hand():
    from contrasweep.runner.sweep_plan import concurrency, makespan, resume_states
    from contrasweep.spec.sweep import Sweep
    from trainables.calibration import fixed_and_per_row

    def sweep(cpu=1.0, gpu=0.0, workers=1, max_concurrent=4):
        return Sweep(method="ce", max_concurrent=max_concurrent, resources={"cpu": cpu, "gpu": gpu, "workers": workers})

    assert concurrency(sweep(), {"CPU": 2.0}) == 2  # the CPUs bound it
    assert concurrency(sweep(max_concurrent=1), {"CPU": 16.0}) == 1  # max_concurrent bounds it
    assert concurrency(sweep(cpu=2.0, workers=2), {"CPU": 16.0}) == 4
    assert concurrency(sweep(gpu=0.25, max_concurrent=8), {"CPU": 16.0, "GPU": 1.0}) == 4  # 4 trials share a GPU
    assert concurrency(sweep(cpu=4.0), {"CPU": 2.0}) == 1  # never 0: Ray would wait for resources
    # FIFO on the first free slot, each slot's process started first
    assert makespan([10, 10, 10], 2) == 20 and makespan([10, 1, 1, 1], 2, start=5) == 15
    assert makespan([3, 3, 3, 3], 4, start=1) == 4 and makespan([], 2) == 0
    # an evaluation's fixed seconds and seconds per row from a pass over n rows and one over 3n
    assert fixed_and_per_row(2.0 + 32 * 0.01, 32, 2.0 + 96 * 0.01, 96) == pytest.approx((2.0, 0.01))
    assert fixed_and_per_row(1.0, 32, 0.9, 96) == pytest.approx((0.0, 1.0 / 32))  # no line: all per row
    # resume states: every checkpoint_every epochs, at the scheduler's pauses, and the last epoch
    assert resume_states(10, 5, []) == 2 and resume_states(3, 5, [1, 2]) == 3 and resume_states(7, 5, [4]) == 3


def test_measured_fixed_costs_replace_the_defaults_in_the_estimate():
    """The demo's estimate by hand with measured fixed costs (``contrasweep.runner.fixed_costs``):
    the sweep's (driver's imports + Ray's start + the tracker's end + the summary and figures),
    each slot's process start, and each trial's besides its loop; the console names them."""
    from contrasweep.runner.plan_lines import describe
    from contrasweep.runner.sweep_plan import SWEEP_END_S, cost_trials, makespan, plan, sizes_of, test_costs
    from contrasweep.spec.load import load_spec

    demo = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), [])
    fixed = {"driver_s": 4.0, "ray_start_s": 5.0, "end_s": 1.0, "worker_start_s": 6.0, "trial_s": 0.5,
             "when": 1_800_000_000.0}
    found = plan(demo, _prepared(demo), CALIBRATION, {"CPU": 2.0}, tsne=False, fixed=fixed)
    default = plan(demo, _prepared(demo), CALIBRATION, {"CPU": 2.0}, tsne=False)
    trials = [c.seconds for c in cost_trials(demo, sizes_of(_prepared(demo)), CALIBRATION, trial_overhead=0.5)]
    tests = test_costs(demo, sizes_of(_prepared(demo)), CALIBRATION, found.configurations)
    assert found.estimated_seconds == pytest.approx(4.0 + 5.0 + 1.0 + SWEEP_END_S + makespan(trials, 2, 6.0)
                                                    + makespan(tests, min(2, len(tests)), 6.0))
    assert found.estimated_seconds < default.estimated_seconds  # the defaults: 22 s, 12 s, 2 s
    assert found.as_json()["fixed"] == fixed and default.as_json()["fixed"] == {}
    lines = describe(demo, found, {"CPU": 2.0}, "this machine")
    assert lines[-1].startswith("fixed costs measured on this machine at ") and "sweep 12.0 s" in lines[-1]
    assert "a trial process's start 6.0 s, 0.50 s per trial" in lines[-1]
    assert describe(demo, default, {"CPU": 2.0}, "this machine")[-1].endswith("(defaults: not measured on this machine)")
    # counted nouns, and the load the estimate assumes and measures (issue 57: 40 s planned, 89.5 s beside other work)
    assert lines[0].startswith("4 trials = 2 configurations × 2 repeats (1 setting); method ce")
    (wall,) = [line for line in lines if line.startswith("estimated wall time: ")]
    assert wall.endswith("every trial training all its epochs, with nothing else running there")  # not measured
    from contrasweep.runner.plan_lines import busy_cpus

    busy = busy_cpus(0.2)
    assert 0.0 <= busy <= (os.cpu_count() or 1) + 0.01
    wall = describe(demo, found, {"CPU": 2.0}, "this machine", 1.5)[-3]
    assert wall.endswith(f"with nothing else running (1.5 of {os.cpu_count()} CPU{'s' if os.cpu_count() > 1 else ''} busy "
                         "with other work when measured; other work there would slow it)")
    assert describe(demo, found, {"CPU": 2.0}, "10.0.0.1:6379")[-3].endswith("with nothing else running there")
    one = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), ["grid.lr=[3.0e-5]"])
    first = describe(one, plan(one, _prepared(one), CALIBRATION, {"CPU": 2.0}), {"CPU": 2.0}, "this machine")[0]
    assert first.startswith("2 trials = 1 configuration × 2 repeats (1 setting)")


@pytest.fixture(scope="module")
def flavor_cases():
    from test_model_flavor import CASES

    return CASES


def test_calibration_runs_the_real_loop_for_every_method(flavor_cases, tiny_model_dir):
    """Every registered method calibrates on the tiny model (its own data kind); the per-row
    figures are the loop's own phase times, the sizes those of the folders it wrote."""
    from helpers import loop_config, multilabel_tables, toy_tables

    from trainables.calibration import calibrate
    from trainables.registry import get_method

    single, multi = toy_tables(tiny_model_dir, n_per_class=8), multilabel_tables(tiny_model_dir)
    for name, hp in flavor_cases:
        data = multi if get_method(name).label_kind == "multi" else single
        config = {**loop_config(tiny_model_dir, epochs=5, **hp), "method": name, "num_labels": data["num_labels"],
                  "metric": f"val/{get_method(name).metric_names[0]}"}
        c = calibrate(config, data, steps=2, eval_rows=16)
        assert c["train_row_s"] > 0 and c["eval_row_s"] > 0 and c["eval_fixed_s"] >= 0, name
        assert c["rows"]["train"] == min(2 * config["hp"]["batch_size"], data["tables"]["train"].num_rows)
        assert c["rows"]["validation"] == min(16, data["tables"]["validation"].num_rows)
        assert c["rows"]["test"] == min(48, data["tables"]["test"].num_rows)
        assert c["resume_bytes"] > c["weights_bytes"] > 0 and c["write_byte_s"] > 0, name
        assert c["measured_s"] < 20, name


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    env["CONTRASWEEP_CACHE"] = str(tmp_path / "cache")
    return env


def _cli(args: list[str], tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contrasweep", *args], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=timeout)


def test_bad_input_is_one_line(tmp_path):
    for args, expected in ((["plan", "missing.yaml"], "missing.yaml"),
                           (["plan", str(ROOT / "search_spaces" / "demo.yaml"), "--set", "sweep.nope=1"], "sweep.nope")):
        done = _cli(args, tmp_path)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("contrasweep: error:"), done.stderr
        assert expected in lines[0] and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_tiny_sweeps_plan_counts_its_trials_and_estimates_its_wall_time(tiny_model_dir, tmp_path):
    """The plan, then the sweep it plans (a real local Ray and MLflow, as a user runs them): the
    trials it counted are the trials that ran, and the estimate is within a factor 1.5 of the
    command's wall time (issue 41). Here the sweep's fixed overheads dominate (Ray's start, the
    trial processes' imports, per-trial bookkeeping): the plan measures them on this machine
    (``contrasweep.runner.fixed_costs``), whose speed varies between sessions (the same run took
    38.2 s and 21.3 s on two machines of 2026-11-26 against one estimate of 41-44 s from constants);
    a second plan keeps the first one's measurement. docs/performance.md holds the estimate's
    accuracy on real sweeps."""
    spec = write_spec(tmp_path / "tiny.yaml", tiny_model_dir, grid={"lr": [1.0e-3, 1.0e-4, 3.0e-4]},
                      fixed={"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0}, sweep={"scheduler": "none"})
    done = _cli(["plan", str(spec), "--json", "--no-tsne"], tmp_path)
    assert done.returncode == 0, done.stderr
    planned = json.loads(done.stdout)
    assert (planned["trials"], planned["configurations"], planned["repeats"]) == (6, 3, 2)
    assert planned["epochs_total"] == 18 and planned["steps_total"] == 18 * math.ceil(20 / 8)
    assert [(d["train"], d["validation"]) for d in planned["data"]] == [(20, 20)]  # k = 4 of 5 classes

    started = time.perf_counter()
    done = _cli(["run", str(spec), "--name", "tiny", "--no-tsne"], tmp_path)
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    trials = read_record(tmp_path / "sweeps" / "tiny" / "tracking.json")["trials"]
    assert len(trials) == planned["trials"]
    ratio = planned["estimated_seconds"] / wall
    print(f"plan {planned['estimated_seconds']:.1f} s, run {wall:.1f} s, ratio {ratio:.2f}")
    assert 1 / 1.5 <= ratio <= 1.5, (planned["estimated_seconds"], wall, planned["fixed"])
    assert planned["fixed"]["trial_s"] > 0 and planned["fixed"]["ray_start_s"] > 0 and not planned["fixed"]["kept"]
    # the run opened with its size and the plan's estimate, from the calibration the plan kept (issue 57)
    from contrasweep.runner.plan_lines import clock

    assert (f"[contrasweep] 6 trials to run: 3 configurations × 2 repeats, 2 at a time; plan's estimate: "
            f"{clock(planned['estimated_seconds'])} on this machine") in done.stderr, done.stderr[:3000]

    done = _cli(["plan", str(spec)], tmp_path)  # the text form: one line per part, ours only
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 9 and all(x.startswith("[contrasweep] ") for x in lines)
    assert lines[8].startswith("[contrasweep] fixed costs measured on this machine at ") and "(kept from then)" in lines[8]
    assert lines[0].startswith("[contrasweep] 6 trials = 3 configurations × 2 repeats (1 setting)")
    test_rows = planned["data"][0]["test"]
    assert lines[1].startswith(f"[contrasweep] data: train 20 / validation 20 / test {test_rows} rows; ")  # issue 70
    # 3 epochs × 3 steps: the steps per trial, and under the floor of 100 a one-line warning
    assert lines[3] == "[contrasweep] optimiser steps per trial: 9" and lines[4].startswith("[contrasweep] warning: ")
    assert "estimated wall time" in lines[6] and "2 trials at a time" in lines[6]


def test_the_status_lines_eta_is_the_plans_model_scaled_by_the_trials_that_ended(monkeypatch):
    """units: the plan's relative trial costs (``trial_units``); the first trial to end sets the
    seconds per unit; the trials not ended, less what the running ones have done, over the slots.
    A tracker pickled before the ETA unpickles without one."""
    from contrasweep.console import progress as module
    from contrasweep.runner.sweep_plan import trial_units
    from contrasweep.spec.load import load_spec

    now = [0.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    p = module.Progress(total=4, metric="val/accuracy", units=[1.0, 1.0, 2.0, 2.0], slots=2)
    p.trial_started("a", 3)
    p.trial_started("b", 3)
    assert p.eta() is None  # nothing ended yet
    now[0] = 10.0
    p.trial_ended("a", "FINISHED", "complete", 0.5, 1, 3, 1)
    assert p.eta() == pytest.approx((5 * 10.0 - 10.0) / 2)  # b (1 unit, 10 s in), then 2 + 2 units at 10 s each
    # resumed with 2 of 4 trials ended before: the trial ending now is the third (2 units)
    resumed = module.Progress(total=4, metric="val/accuracy", units=[1.0, 1.0, 2.0, 2.0], slots=1)
    resumed.done = 2
    resumed.trial_started("c", 3)
    now[0] = 30.0
    resumed.trial_ended("c", "FINISHED", "complete", 0.5, 1, 3, 3)
    assert resumed.eta() == pytest.approx(2 * (20.0 / 2))  # 10 s per unit, 2 units left
    restored = pickle.loads(pickle.dumps(module.Progress(total=4, metric="val/accuracy")))  # as Tune keeps it
    assert restored.eta() is None and restored.units == []
    # the demo's units: its 4 trials cost alike (same epochs and data), training rows weigh most
    demo = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), [])
    units = trial_units(demo, _prepared(demo))
    # (a grid over one hyperparameter: a report shows every configuration, so each trial tests itself)
    assert registry.tests_in_trials(demo)
    assert len(units) == 4 and len(set(units)) == 1 and units[0] == pytest.approx(3 * 40 + 0.22 * (3 * 40 + 200))
    # two searched hyperparameters: the trials leave the 200 test rows to the test phase, unless evaluation.test: all
    two = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), ["grid.weight_decay=[0.0, 0.1]"])
    assert not registry.tests_in_trials(two) and trial_units(two, _prepared(two))[0] == pytest.approx(3 * 40 + 0.22 * (3 * 40))
    every = load_spec(str(ROOT / "search_spaces" / "demo.yaml"), ["grid.weight_decay=[0.0, 0.1]", "evaluation.test=all"])
    assert trial_units(every, _prepared(every))[0] == pytest.approx(3 * 40 + 0.22 * (3 * 40 + 200))


def _tickets(path: Path, per_class: int = 60) -> Path:
    """A user's CSV as issue 70 had it: ``message`` and ``intent``, 4 intents × ``per_class`` rows."""
    import csv

    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["message", "intent"])
        for intent in ("billing", "delivery", "refund", "account"):
            writer.writerows([f"ticket {i} about my {intent} question", intent] for i in range(per_class))
    return path


def test_the_plan_prints_each_data_variants_split_sizes_and_unused_rows(tiny_model_dir, cache_dir, tmp_path):
    """Issue 70 (4), docs/spec.md's worked example ("How the splits are carved"): 240 rows of 4
    classes, no splits of their own, few_shot k = 16: 6 + 12 of each class's 60 carved to
    validation and test (48 test rows), 16 + 16 of the 42 left drawn for train and validation
    (the draw's validation replaces the carved one): 64 / 64 / 48, and 40 + 24 = 64 unused. At
    k = 20: 80 / 80 / 48, 32 unused; each setting's 2 data repeats (data.seed) in one line;
    ``plan --json`` has every variant's."""
    from contrasweep.runner.inputs import prepare_data, rows_line
    from contrasweep.runner.plan_lines import data_lines, describe
    from contrasweep.runner.sweep_plan import plan
    from contrasweep.spec.load import load_spec

    source = _tickets(tmp_path / "tickets.csv")
    data = {"source": str(source), "text": "message", "label": "intent", "protocol": "few_shot", "k": 16}
    spec = write_spec(tmp_path / "one.yaml", tiny_model_dir, data=data)
    raw = yaml.safe_load(spec.read_text())
    del raw["data"]["test_fraction"]  # the defaults: validation_fraction 0.1, test_fraction 0.2
    spec.write_text(yaml.safe_dump(raw))
    sweep = load_spec(str(spec), [])
    prepared = prepare_data(sweep)
    assert [p.unused for p in prepared] == [64] and prepared[0].source_rows == 240
    found = plan(sweep, prepared, CALIBRATION, {"CPU": 2.0})
    assert found.data == [{"variant": 0, "label": "", "setting": "", "train": 64, "validation": 64, "test": 48,
                           "unused": 64}]
    lines = describe(sweep, found, {"CPU": 2.0}, "this machine")
    assert lines[1] == "data: train 64 / validation 64 / test 48 rows; 64 of the source's 240 labelled rows unused"
    assert rows_line(prepared) == "train 64 / validation 64 / test 48 rows"  # run's first line, as before
    assert json.loads(json.dumps(found.as_json()))["data"] == found.data

    sweep = load_spec(str(spec), ["data.k=[16, 20]", "data.seed=[0, 1]"])
    found = plan(sweep, prepare_data(sweep), CALIBRATION, {"CPU": 2.0})
    assert [(d["label"], d["train"], d["validation"], d["test"], d["unused"]) for d in found.data] == [
        ("k=16 seed=0", 64, 64, 48, 64), ("k=16 seed=1", 64, 64, 48, 64),
        ("k=20 seed=0", 80, 80, 48, 32), ("k=20 seed=1", 80, 80, 48, 32)]
    assert describe(sweep, found, {"CPU": 2.0}, "this machine")[1:3] == [
        "data k=16 (2 data repeats): train 64 / validation 64 / test 48 rows; 64 of the source's 240 labelled rows unused",
        "data k=20 (2 data repeats): train 80 / validation 80 / test 48 rows; 32 of the source's 240 labelled rows unused"]

    # full: 168 / 24 / 48, every row used; repeats that disagree, and a cache entry that did not count its
    # source's rows, line by line
    sweep = load_spec(str(spec), ["data.protocol=full", "data.k=null"])
    (full,) = plan(sweep, prepare_data(sweep), CALIBRATION, {"CPU": 2.0}).data
    assert (full["train"], full["validation"], full["test"], full["unused"]) == (168, 24, 48, 0)
    assert data_lines([full]) == ["data: train 168 / validation 24 / test 48 rows; all 240 labelled source rows used"]
    odd = [{"variant": 0, "label": "k=4 seed=0", "setting": "k=4", "train": 8, "validation": 8, "test": 5, "unused": None},
           {"variant": 1, "label": "k=4 seed=1", "setting": "k=4", "train": 8, "validation": 8, "test": 6, "unused": 1}]
    assert data_lines(odd) == ["data k=4 seed=0: train 8 / validation 8 / test 5 rows",
                               "data k=4 seed=1: train 8 / validation 8 / test 6 rows; 1 of the source's 23 labelled "
                               "rows unused"]
