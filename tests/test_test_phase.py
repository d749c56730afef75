"""``evaluation.test`` on a real local Ray, MLflow store and sweep folder (contrasweep.runner.test_phase).

A grid of lr × weight decay = 3 × 2, one seed: with ``reported`` a report shows 4 configurations
(the selected one and its sensitivity slices) and the test split is evaluated for those whose
weights the sweep kept while it ran (the 2 best by validation, ``tracking.keep_models``; the
others' state folders went as their trials ended: contrasweep.tracking.pruning); with ``all``
for all 6, and the selected configuration's test numbers are the same under both; the report
shows "–" for the configurations without test and the sweep folder keeps no state folder at the end. A driver SIGKILLed in its test phase leaves the sweep interrupted, and ``resume``
evaluates only what is missing (each trial run holds one test value). A random-search sweep
evaluates the selected configuration's repeats only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_spec
from contrasweep.folder.record import read as read_record

pytestmark = pytest.mark.slow

GRID = {"lr": [1.0e-3, 3.0e-4, 1.0e-4], "weight_decay": [0.0, 0.1]}


def _spec(tmp_path: Path, model_dir: str, test: str, **sections) -> Path:
    sections = {"reported": None, "grid": GRID, "fixed": {"epochs": 2, "batch_size": 8, "warmup_ratio": 0.0},
                "sweep": {"scheduler": "none", "seeds": [0]}, "evaluation": {"test": test}, **sections}
    return write_spec(tmp_path / f"{test}.yaml", model_dir, **sections)


def _trial_runs(client, name: str) -> dict[str, object]:
    exp = client.get_experiment_by_name("tests").experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`contrasweep.sweep` = '{name}' and "
                                                   "tags.`contrasweep.kind` = 'trial'", max_results=100)
    return {r.info.run_id: r for r in runs}


def _config_of(run) -> tuple:
    return tuple(run.data.params[f"hp.{k}"] for k in GRID)


def _tested(runs: dict) -> dict[tuple, float]:
    return {_config_of(r): r.data.metrics["test/accuracy"] for r in runs.values() if "test/accuracy" in r.data.metrics}


def _state_folders(folder: Path) -> int:
    return sum(1 for f in folder.glob("tune/run_trial_*/state") if f.is_dir())


def test_reported_tests_the_selected_configuration_and_its_slices(ray_session, tiny_model_dir, tmp_path, cache_dir,
                                                                   capsys):
    from contrasweep.cli import main
    from contrasweep.folder import sweeps
    from contrasweep.tracking.artifacts import logged_weights
    from contrasweep.tracking.store import get_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(tmp_path / "sweeps"))
    address = ray_session.get_runtime_context().gcs_address
    for test in ("reported", "all"):  # "all" keeps every trial's model as it ends; "reported" the default 2
        spec = _spec(tmp_path, tiny_model_dir, test, **({"tracking": {"keep_models": "all"}} if test == "all" else {}))
        assert main(["--root", str(root), "run", str(spec), "--name", test, "--tracking-uri", uri, "--no-tsne"]) == 0
        # a command run where Ray was already up (a notebook's, this session's) leaves it running
        assert ray_session.is_initialized() and ray_session.get_runtime_context().gcs_address == address
    out = capsys.readouterr().out
    client = get_client(uri)
    reported, every = _trial_runs(client, "reported"), _trial_runs(client, "all")
    assert len(reported) == len(every) == 6
    assert len(_tested(every)) == 6
    tested = _tested(reported)
    state = read_record(root / "reported" / "tracking.json")
    assert len(state["tests"]["reported"]) == 4 and state["tests"]["done"]

    # a report shows the selected configuration and the ones differing from it in one value; of
    # those, the test split is evaluated where the weights were kept while the sweep ran: the 2
    # best configurations by validation mean (ties by group key, as the selection breaks them)
    parent = client.get_run(state["parent_run_id"])
    best_run = client.get_run(parent.data.tags["contrasweep.best_config"])
    best = tuple(best_run.data.params[f"hp.{k}"] for k in GRID)
    shown = {c for c in map(_config_of, reported.values()) if sum(a != b for a, b in zip(c, best)) <= 1}
    configs = [client.get_run(run_id) for run_id in state["configs"].values()]
    top2 = {r.info.run_id for r in sorted(configs, key=lambda r: (-r.data.metrics["mean/best/val/accuracy"],
                                                                 r.data.tags["contrasweep.group"]))[:2]}
    kept = {_config_of(run) for run in reported.values() if run.data.tags["mlflow.parentRunId"] in top2}
    assert len(shown) == 4 and best in kept and set(tested) == shown & kept, (tested, shown, kept)
    assert state["tests"]["evaluated"] == len(tested) and state["tests"]["pruned"] == 4 - len(tested)
    pruned = {e["run_id"] for e in state["trials"].values() if e.get("weights") == "pruned"}
    assert pruned == {run_id for run_id, run in reported.items() if _config_of(run) not in kept} and len(pruned) == 4
    # training is seeded: both sweeps select the same configuration, with the same test numbers
    all_state = read_record(root / "all" / "tracking.json")
    all_parent = client.get_run(all_state["parent_run_id"])
    all_best = client.get_run(all_parent.data.tags["contrasweep.best_config"])
    assert tuple(all_best.data.params[f"hp.{k}"] for k in GRID) == best
    assert tested[best] == pytest.approx(_tested(every)[best], abs=1e-6)
    assert parent.data.metrics["best_config/mean/test/accuracy"] == pytest.approx(
        all_parent.data.metrics["best_config/mean/test/accuracy"], abs=1e-6)
    assert best_run.data.metrics["mean/test/accuracy"] == pytest.approx(tested[best])
    assert parent.info.status == "FINISHED" and sweeps.open_existing(root, "reported").meta()["status"] == "finished"
    for run in reported.values():  # one value each, at the trial's last epoch
        history = client.get_metric_history(run.info.run_id, "test/accuracy")
        assert [(h.step) for h in history] == ([2] if _config_of(run) in tested else [])

    # the summary counts the passes, and the repeats whose weights went
    assert (f"test split: {len(tested)} evaluation{'' if len(tested) == 1 else 's'} after selection, for the 4 "
            "repeats a report shows") in out
    assert (f"test split: not evaluated for {4 - len(tested)} repeats a report shows, whose weights went while the "
            "sweep ran (each setting keeps its 2 best configurations'") in out
    assert "test split: each complete trial evaluated it once, at its best epoch (6 trials; evaluation.test: all)" in out
    # MLflow models (tracking.keep_models): the 2 best configurations (a report's other ones have no
    # weights left), or all; one copy of each kept weight file: the sweep folder keeps no state
    # folder once MLflow holds its weights
    expected = {run_id for run_id, run in reported.items() if run.data.tags["mlflow.parentRunId"] in top2}
    assert {run_id for run_id in reported if logged_weights(client, run_id)} == expected and len(expected) == 2
    assert all(logged_weights(client, run_id) for run_id in every)
    assert {state["trials"][tid]["run_id"] for tid in state["tests"]["kept"]} == expected
    assert "MLflow models: 2 of 6 complete trials (the 2 best configurations of each setting and the reported" in out
    assert "MLflow models: 6 of 6 complete trials (every complete trial; tracking.keep_models)" in out
    assert _state_folders(root / "reported") == 0 and _state_folders(root / "all") == 0
    assert "best" in dict(client.get_registered_model("reported").aliases)  # registered once its model was logged

    # the report: "–" for the configurations without test, never a number
    rows = (root / "reported" / "report" / "configurations_reported.md").read_text().splitlines()[4:]
    assert len(rows) == 7 and "| chance level |" in rows[-1], rows  # the configurations, then the chance level
    assert sum(row.split("|")[-4].strip() == "–" for row in rows[:6]) == 6 - len(tested), rows

    # an extension by a seed: its trials skip the test split, and the phase after it evaluates every
    # repeat of what is now reported that has weights (from the MLflow model where the folder dropped
    # them; none where they went while a sweep ran)
    assert main(["--root", str(root), "extend", "reported", "--set", "sweep.seeds=[0, 1]", "--no-tsne"]) == 0
    runs = _trial_runs(client, "reported")
    state = read_record(root / "reported" / "tracking.json")
    shown = {state["trials"][tid]["run_id"] for tid in state["tests"]["reported"]}
    has_weights = {e["run_id"] for e in state["trials"].values() if e.get("weights") != "pruned" or e.get("model") == "logged"}
    assert len(runs) == 12 and len(shown) == 8
    first_tested = {r for r in reported if _config_of(reported[r]) in tested}
    for run_id, run in runs.items():
        history = client.get_metric_history(run_id, "test/accuracy")
        assert len(history) == (1 if (run_id in shown and run_id in has_weights) or run_id in first_tested else 0)
    assert state["tests"]["evaluated"] == len(tested) + len((shown & has_weights) - first_tested)  # none twice
    assert state["tests"]["pruned"] == len(shown - has_weights - first_tested)
    parent = client.get_run(state["parent_run_id"])
    best_run = client.get_run(parent.data.tags["contrasweep.best_config"])
    assert best_run.data.metrics["n_repeats"] == 2 and "mean/test/accuracy" in best_run.data.metrics
    assert parent.data.metrics["best_config/mean/test/accuracy"] == best_run.data.metrics["mean/test/accuracy"]


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    return env


def _tests(folder: Path) -> dict:
    try:
        return read_record(folder / "tracking.json").get("tests") or {}
    except (OSError, ValueError):
        return {}


def test_a_kill_in_the_test_phase_resumes_without_repeating(ray_address, tiny_model_dir, tmp_path, cache_dir):
    from contrasweep.folder import sweeps
    from contrasweep.tracking.store import get_client

    # one evaluation at a time (2 CPUs per trial), on a larger test split: room to kill between two
    # every configuration keeps its weights (keep_models: 6 of 6), so the 4 a report shows are tested
    spec = _spec(tmp_path, tiny_model_dir, "reported", data={"test_fraction": 0.5}, tracking={"keep_models": 6},
                 sweep={"scheduler": "none", "seeds": [0], "max_concurrent": 1, "resources": {"cpu": 2}})
    folder = tmp_path / "sweeps" / "k"
    proc = subprocess.Popen([sys.executable, "-m", "contrasweep", "run", str(spec), "--name", "k", "--no-tsne",
                             "--address", ray_address],
                            cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not _tests(folder).get("results"):
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before its test phase could be killed:\n" + proc.stdout.read()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    at_kill = _tests(folder)
    assert 1 <= len(at_kill["results"]) < 4 and not at_kill.get("done")
    assert sweeps.SweepDir(folder).status() == "interrupted"

    resumed = subprocess.run([sys.executable, "-m", "contrasweep", "resume", "k", "--no-tsne", "--address", ray_address],
                             cwd=tmp_path,
                             env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    done = _tests(folder)
    assert done["done"] and len(done["results"]) == 4 and done["evaluated"] == 4
    for run_id, result in at_kill["results"].items():  # what the killed driver evaluated was kept, not redone
        assert done["results"][run_id]["metrics"] == result["metrics"]
    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = _trial_runs(client, "k")
    assert len(runs) == 6 and len(_tested(runs)) == 4
    for run_id in done["results"]:
        assert len(client.get_metric_history(run_id, "test/accuracy")) == 1
    parent = client.get_run(read_record(folder / "tracking.json")["parent_run_id"])
    assert parent.info.status == "FINISHED" and "best_config/mean/test/accuracy" in parent.data.metrics
    assert sweeps.open_existing(folder.parent, "k").meta()["status"] == "finished"


def test_a_searcher_sweep_tests_the_selected_configuration_only(ray_session, tiny_model_dir, tmp_path, cache_dir):
    """A random-search sweep (3 suggestions × 2 seeds, 4 epochs): the test phase evaluates the
    selected configuration's repeats only; every suggestion is a new point, and each trial trained
    its 4 epochs keeping only its best and its latest Tune checkpoints."""
    from contrasweep.cli import main
    from contrasweep.folder import sweeps
    from contrasweep.tracking.store import get_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(tmp_path / "sweeps"))
    spec = _spec(tmp_path, tiny_model_dir, "reported", grid=None, search={"lr": {"loguniform": [1.0e-5, 1.0e-2]}},
                 fixed={"epochs": 4, "batch_size": 8, "warmup_ratio": 0.0},
                 sweep={"searcher": "random", "num_samples": 3, "scheduler": "none", "seeds": [0, 1]})
    assert main(["--root", str(root), "run", str(spec), "--name", "r", "--tracking-uri", uri, "--no-tsne"]) == 0
    client = get_client(uri)
    runs = _trial_runs(client, "r")
    assert len(runs) == 6
    tested = [r for r in runs.values() if "test/accuracy" in r.data.metrics]
    state = read_record(root / "r" / "tracking.json")
    chosen = client.get_run(client.get_run(state["parent_run_id"]).data.tags["contrasweep.best_config"])
    assert len(tested) == 2 and {r.data.tags["mlflow.parentRunId"] for r in tested} == {chosen.info.run_id}
    assert chosen.data.metrics["n_repeats"] == 2 and "mean/test/accuracy" in chosen.data.metrics
    # the random searcher's suggestions are new points; Tune keeps the best and the latest checkpoint
    assert len({r.data.params["hp.lr"] for r in runs.values()}) == 3
    trial_dirs = sorted((root / "r" / "tune").glob("run_trial_*"))
    assert len(trial_dirs) == 6
    for trial_dir in trial_dirs:
        kept = sorted(p.name for p in trial_dir.glob("checkpoint_*"))
        assert 1 <= len(kept) <= 2, kept  # the best and the latest only
        assert json.loads((trial_dir / "result.json").read_text().splitlines()[-1])["epoch"] == 4


def test_a_result_logged_just_before_a_kill_is_not_logged_again(tmp_path):
    """The killed driver logged a repeat's test numbers and died before its record said so:
    the resumed test phase's catch-up finds them in MLflow and logs nothing twice (the window
    the SIGKILL test above can land in)."""
    from contrasweep.folder.record import TrackingState
    from contrasweep.tracking.rows import metric_entity
    from contrasweep.tracking.store import get_client
    from contrasweep.tracking.tested import TestRecord

    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.create_experiment("t")
    logged, unlogged = (client.create_run(exp).info.run_id for _ in range(2))
    state = TrackingState(tmp_path / "tracking.json")
    state.data["trials"] = {"a": {"run_id": logged, "last_epoch": 3}, "b": {"run_id": unlogged, "last_epoch": 2}}
    record = TestRecord(client, state, "val/accuracy", "max")
    for run_id in (logged, unlogged):
        record.tests["results"][run_id] = {"metrics": {"test/accuracy": 0.5, "test/macro_f1": 0.4}, "logged": False}
    client.log_batch(logged, metrics=[metric_entity("test/accuracy", 0.5, step=3),
                                      metric_entity("test/macro_f1", 0.4, step=3)])
    assert record.catch_up() == 2
    for run_id, step in ((logged, 3), (unlogged, 2)):
        history = client.get_metric_history(run_id, "test/accuracy")
        assert [(m.step, m.value) for m in history] == [(step, 0.5)]
        assert record.tests["results"][run_id]["logged"]
