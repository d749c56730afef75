"""Resume is exact for every searcher (docs/architecture.md, "Resume"): real `contrasweep run`
processes on a real local Ray and a real MLflow sqlite store, with the tiny BERT, interrupted
(SIGKILL the moment a trial has just finished, before Tune's periodic save can know it; or
mid-epoch; or Ctrl-C), resumed, interrupted again during the resume and resumed again. Every
assertion reads MLflow, the Optuna study and the sweep folder, never the console alone:

- one sweep run, one configuration run per suggestion (grid point) and setting, one trial run
  per repeat, all FINISHED, each epoch logged once; a configuration run's mean/std/n are those
  of exactly its repeats;
- a repeat that had finished is never trained again (its metrics were all logged before the
  kill); a running one goes on from its last resume state (at most the epoch it was in is
  trained again);
- the Optuna study holds exactly one finished trial per suggestion (COMPLETE, or PRUNED where
  group ASHA stopped the group), nothing RUNNING, and the suggestions made before the kill keep
  their values.

The cases cover each searcher with one and two seeds and both schedulers (each searcher with
both seed counts, each seed count and scheduler with every searcher kind), each killed at
both points; the interrupted sweeps are shared between the assertions. The ASHA cases test
in every trial (``evaluation.test: all``: no test phase after the sweep, whose own resume
tests/test_test_phase.py proves); the others test the selected configuration after the
resumed sweep, as a sweep does by default.

The drivers of most cases attach with ``--address`` to the suite's Ray (``ray_session``), as a
user's drivers attach to a cluster: killing a driver then leaves Ray running (and its session
folder, from which the resumed driver copies Tune's last result lines of the killed one into the
sweep folder). Two cases (``OWN_RAY``) start their own local Ray in every driver,
so a SIGKILL takes Ray down with the driver: both paths stay proven."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import contrasweep as cs
from conftest import write_spec
from contrasweep.folder.record import read as read_record
from contrasweep.spec.identity import key_of

pytestmark = pytest.mark.slow

SUGGESTIONS = 3  # grid points or searcher suggestions
EPOCHS = 3
LIVE = 2  # sweep.max_concurrent (and group ASHA's live limit: groups of at most 2 repeats)


def _spec(tmp_path: Path, model_dir: str, searcher: str, seeds: list[int], scheduler: str) -> Path:
    sweep = {"searcher": "optuna" if searcher == "moo" else searcher, "scheduler": scheduler, "seeds": seeds,
             "max_concurrent": LIVE, "num_samples": SUGGESTIONS, "asha": {"grace_period": 1, "reduction_factor": 2.0}}
    sections = {"grid": {"lr": [1.0e-3, 5.0e-4, 1.0e-5]}, "search": None}
    if searcher != "grid":
        sections = {"grid": None, "search": {"lr": {"loguniform": [1.0e-5, 1.0e-2]}}}
    if searcher == "moo":
        sweep.update(metric=["val/accuracy", "val/macro_f1"], mode=["max", "max"])
    # the ASHA cases evaluate the test split in every trial (evaluation.test: all), so a resumed
    # trial tests itself; the others test the selected configuration after the resumed sweep
    evaluation = {"test": "all" if scheduler == "asha" else "reported"}
    return write_spec(tmp_path / "spec.yaml", model_dir, data={"k": 2}, fixed={"epochs": EPOCHS, "checkpoint_every": 1},
                      sweep=sweep, evaluation=evaluation, **sections)


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    return env


def _start(args: list[str], tmp_path: Path, address: str | None) -> subprocess.Popen:
    attach = ["--address", address] if address else []
    return subprocess.Popen([sys.executable, "-m", "contrasweep", *args, *attach], cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _trials(folder: Path) -> dict:
    try:
        return read_record(folder / "tracking.json")["trials"]
    except (OSError, ValueError, KeyError):
        return {}


def _interrupt(proc: subprocess.Popen, folder: Path, total: int, at: str, how: str,
               also: Callable[[Path], object] = lambda _: True) -> dict:
    """Wait for the moment, then SIGKILL the driver's process group or send it SIGINT; returns
    what the sweep's record held then. ``mid-epoch``: a trial has logged an epoch in this
    process and is not finished; ``finished``: a trial has just ended in this process, once
    every trial has been created (no new trial makes Tune save its state any more, so its last
    save, up to TUNE_GLOBAL_CHECKPOINT_S old, may still call that trial running: the case the
    sweep's own record is for). ``also``: a further condition on the sweep folder."""
    start = {tid: e.get("last_epoch", 0) for tid, e in _trials(folder).items()}
    ended_before = sum(e.get("status") == "FINISHED" for e in _trials(folder).values())
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        trials = _trials(folder)
        ended = sum(e.get("status") == "FINISHED" for e in trials.values())
        if at == "finished" and ended > ended_before and ended >= total - LIVE + 1:
            break
        if at == "mid-epoch" and any("status" not in e and 1 <= e.get("last_epoch", 0) < EPOCHS
                                     and e.get("last_epoch", 0) > start.get(tid, 0) for tid, e in trials.items()
                                     ) and also(folder):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before it could be interrupted:\n" + proc.stdout.read()[-3000:]
    if how == "kill":
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == (130 if how == "sigint" else -signal.SIGKILL), out[-3000:]
    return {"at": time.time(), "trials": _trials(folder), "out": out, "results": _results(folder)}


def _results(folder: Path) -> dict[str, int]:
    """Tune trial id -> lines in its result.json (Tune appends one per report, restored or not)."""
    out = {}
    for path in folder.glob("tune*/*/result.json"):  # every driver's Tune experiment
        tid = next((t for t in _trials(folder) if t in path.parent.name), None)
        if tid:
            out[tid] = len(path.read_text().splitlines())
    return out


def _reported_at(folder: Path, tid: str) -> list[float]:
    """When each line of a Tune trial's result.json was reported (Tune's own ``timestamp``)."""
    (path,) = [p for p in folder.glob("tune*/*/result.json") if tid in p.parent.name]
    return [float(json.loads(line)["timestamp"]) for line in path.read_text().splitlines()]


def _tune_state(folder: Path) -> dict[str, tuple]:
    """Tune's own files at the top of tune/ (tuner.pkl, each session's state) -> (mtime, bytes);
    a session set aside as torn no longer has its name."""
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (folder / "tune").iterdir()
            if p.is_file() and p.suffix in (".json", ".pkl")}


def _drop_tune_state(folder: Path) -> list[str]:
    """Delete Tune's own saved state of every experiment the sweep's drivers ran (tuner.pkl,
    each session's experiment, searcher and generator state): no driver reads it back."""
    gone = [p for p in folder.glob("tune*/*") if p.is_file() and p.suffix in (".json", ".pkl")]
    for path in gone:
        path.unlink()
    return [p.name for p in gone]


def _after_ctrl_c(tmp_path: Path, folder: Path) -> None:
    """Ctrl-C: the sweep is `interrupted` and nothing in MLflow claims to be running (the sweep,
    the cut trial's run and its configuration's run end KILLED; resume reopens them)."""
    assert json.loads((folder / "sweep.json").read_text())["status"] == "interrupted"
    at_stop = [(r.data.tags.get("contrasweep.kind"), r.info.status) for r in _runs(tmp_path)]
    assert {("sweep", "KILLED"), ("trial", "KILLED"), ("configuration", "KILLED")} <= set(at_stop), at_stop
    assert all(status != "RUNNING" for _, status in at_stop), at_stop


def _lost_and_moved(tmp_path: Path, folder: Path) -> Path:
    """After a SIGKILL: `list` sees the dead driver, shows the sweep interrupted and closes its
    RUNNING runs KILLED; then tracking.json is lost and the folder moved to another root (resume
    finds its runs again by their MLflow tags, and Tune's pickles follow the folder)."""
    listed = subprocess.run([sys.executable, "-m", "contrasweep", "list"], cwd=tmp_path, env=_env(tmp_path),
                            capture_output=True, text=True)
    assert listed.stdout.split(folder.name)[1].split()[0] == "interrupted", listed.stdout + listed.stderr
    assert f"{folder.name}: its driver is gone" in listed.stderr
    statuses = [(r.data.tags.get("contrasweep.kind"), r.info.status) for r in _runs(tmp_path)]
    assert ("sweep", "KILLED") in statuses and all(s != "RUNNING" for _, s in statuses), statuses
    (folder / "tracking.json").unlink()
    moved = tmp_path / "moved" / folder.name
    moved.parent.mkdir()
    os.rename(folder, moved)
    return moved


def _console(out: str, total: int, tmp_path: Path, folder: Path) -> None:
    """The last resume's console: our own lines only (Tune's and Ray's are in driver.log),
    ending with the summary."""
    lines = out.splitlines()
    assert len(lines) < 60 and all(line.startswith(("[contrasweep]", "contrasweep:")) for line in lines), out
    assert f"sweep 'sweep' finished: {total} trials: " in out and ", 0 failed" in out, out
    assert f"folder: {folder}" in out and "MLflow runs table: http://127.0.0.1:5000/#/experiments/" in out, out
    from test_demo_console import documented, undocumented

    assert undocumented(out, documented()) == [], out  # every line is one docs/cli.md's Console table explains
    assert "Trial status" in (folder / "driver.log").read_text()
    # the report written at the end, without its t-SNE map (--no-tsne: the map loads the model)
    assert f"[contrasweep] report: {folder / 'report' / 'report.html'}" in out, out
    html = (folder / "report" / "report.html").read_text()
    assert "<h2>Results<" in html and "t-SNE" not in html and not (folder / "report" / "tsne.png").exists()
    if folder.parent.name == "moved":
        assert not (tmp_path / "sweeps" / folder.name).exists()  # nothing wrote to the old folder


def _client(tmp_path: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")


def _runs(tmp_path: Path) -> list:
    client = _client(tmp_path)
    return client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=5000)


def _study(folder: Path):
    import optuna

    return optuna.load_study(study_name=folder.name, storage=f"sqlite:///{folder / 'optuna.db'}")


CASES = [  # (searcher, seeds, scheduler, first interruption: mid-epoch, second: a trial just finished)
    ("grid", [0], "asha", "sigint", "kill"),
    ("grid", [0, 1], "none", "kill", "kill"),  # + `list` after the kill, tracking.json lost, the folder moved
    ("random", [0], "none", "kill", "kill"),
    ("random", [0, 1], "asha", "kill", "sigint"),
    ("optuna", [0], "asha", "kill", "kill"),
    ("optuna", [0, 1], "none", "kill", "kill"),
    ("moo", [0], "none", "kill", "kill"),
    ("moo", [0, 1], "asha", "kill", "kill"),
]
OWN_RAY = {("grid", 2), ("moo", 1)}  # (searcher, seeds): every driver starts a local Ray of its own
# (searcher, seeds): before the last resume, the second driver's newest experiment state is cut
# short, as a kill during Tune's copy leaves it: nothing reads it (each driver builds a fresh
# Tuner from the sweep's records, docs/architecture.md "Resume")
TORN = {("grid", 1)}
# (searcher, seeds): before each resume, every Tune experiment's saved state is deleted (tuner.pkl,
# the sessions' files): the sweep's records alone resume it
GONE = {("optuna", 1)}


@pytest.fixture()
def address(request):
    """The suite's Ray for the drivers to attach to, or None where they start their own."""
    searcher, seeds = request.node.callspec.params["searcher"], request.node.callspec.params["seeds"]
    if (searcher, len(seeds)) in OWN_RAY:
        return None
    return request.getfixturevalue("ray_address")


@pytest.mark.parametrize("searcher,seeds,scheduler,first,second", CASES,
                         ids=[f"{c[0]}-{len(c[1])}seed-{c[2]}" for c in CASES])
def test_interrupted_twice_resumes_exactly(searcher, seeds, scheduler, first, second, address, tiny_model_dir,
                                           cache_dir, tmp_path, monkeypatch):
    if (searcher, len(seeds)) in GONE:
        monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "1")  # Tune saves its state every second: there is some to delete
    spec = _spec(tmp_path, tiny_model_dir, searcher, seeds, scheduler)
    name = "sweep"
    folder = tmp_path / "sweeps" / name
    total = SUGGESTIONS * len(seeds)
    gone = (searcher, len(seeds)) in GONE
    cuts = [_interrupt(_start(["run", str(spec), "--name", name], tmp_path, address), folder, total, "mid-epoch", first)]
    root = []
    if first == "sigint":
        _after_ctrl_c(tmp_path, folder)
        # the trial cut mid-epoch is counted "interrupted", never "stopped early" (ASHA's word)
        assert re.search(r"trials?: \d+ complete, \d+ stopped early, [1-9]\d* interrupted, 0 failed", cuts[0]["out"]), cuts[0]["out"][-3000:]
    if (searcher, len(seeds)) == ("grid", 2):
        folder = _lost_and_moved(tmp_path, folder)
        root = ["--root", str(folder.parent)]
    study_at_kill = _study(folder).get_trials(deepcopy=False) if searcher != "grid" else []
    if gone:
        assert _drop_tune_state(folder), "Tune saved no state to delete"
    saved = _tune_state(folder)
    cuts.append(_interrupt(_start([*root, "resume", name], tmp_path, address), folder, total, "finished", second))
    assert f"[contrasweep] resuming sweep '{name}': " in cuts[-1]["out"], cuts[-1]["out"][-3000:]  # its opening line
    if root:
        assert "re-attached to MLflow run" in cuts[-1]["out"], cuts[-1]["out"][-3000:]
    if (searcher, len(seeds)) in TORN:
        newest = max((folder / "tune-r1").glob("experiment_state-*.json"))
        newest.write_bytes(newest.read_bytes()[:100])
    if gone:
        _drop_tune_state(folder)
    resumed = _start([*root, "resume", name, "--no-tsne"], tmp_path, address)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out[-3000:]
    outs = [c["out"] for c in cuts] + [out]
    _console(out, total, tmp_path, folder)

    meta = json.loads((folder / "sweep.json").read_text())
    assert meta["status"] == "finished" and meta["experiments"] == ["tune", "tune-r1", "tune-r2"], meta
    assert (meta["trials"], meta["errors"]) == (total, 0), meta  # the sweep's count, not the last driver's (issue 69)
    runs = _runs(tmp_path)
    kinds = sorted(r.data.tags.get("contrasweep.kind") for r in runs)
    assert kinds == ["configuration"] * SUGGESTIONS + ["sweep"] + ["trial"] * total, kinds
    assert {r.info.status for r in runs} == {"FINISHED"}, [(r.info.run_name, r.info.status) for r in runs]
    trials = [r for r in runs if r.data.tags["contrasweep.kind"] == "trial"]
    assert len({r.data.tags["contrasweep.config_key"] for r in trials}) == total  # one run per repeat
    read = cs.load(name, root=folder.parent)  # the Python API sees every trial of the three drivers (issue 72)
    assert sorted(read.trials()["run_id"]) == sorted(r.info.run_id for r in trials)
    assert read.configurations()["repeats"].tolist() == [len(seeds)] * SUGGESTIONS and read.status == "finished"
    client = _client(tmp_path)
    for run in trials:  # every epoch it trained, logged once
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val/accuracy")]
        assert sorted(steps) == list(range(1, int(run.data.tags["contrasweep.last_epoch"]) + 1)), (run.info.run_name, steps)
    for config in (r for r in runs if r.data.tags["contrasweep.kind"] == "configuration"):
        members = [r for r in trials if r.data.tags["mlflow.parentRunId"] == config.info.run_id]
        assert len(members) == len(seeds) and config.data.metrics["n_repeats"] == len(seeds)
        if config.data.tags["contrasweep.outcome"] == "complete":
            values = [r.data.metrics["best/val/accuracy"] for r in members]
            assert config.data.metrics["mean/best/val/accuracy"] == pytest.approx(np.mean(values))
            if len(values) > 1:
                assert config.data.metrics["std/best/val/accuracy"] == pytest.approx(np.std(values, ddof=1))
    # the test split: every complete repeat tested itself (ASHA cases), or after the sweep the
    # repeats of the selected configuration (a searcher) or of the selected one's slice along lr
    # (a grid: here every point) were tested
    tested = {r.data.tags["mlflow.parentRunId"] for r in trials if "test/accuracy" in r.data.metrics}
    if scheduler == "asha":
        assert all("test/accuracy" in r.data.metrics for r in trials if r.data.tags["contrasweep.outcome"] == "complete")
    else:
        assert len(tested) == (SUGGESTIONS if searcher == "grid" else 1), tested
    parent = next(r for r in runs if r.data.tags["contrasweep.kind"] == "sweep")
    assert max(m.value for m in client.get_metric_history(parent.info.run_id, "trials/ended")) == total

    # a repeat that had finished is never trained again: all its metrics predate the
    # interruption, and Tune never ran it again (every line of its result.json was reported
    # before the interruption; on a Ray that outlives the driver, the resumed driver may copy
    # in lines the killed one had written to Ray's session folder but not yet to the sweep's)
    by_key = {r.data.tags["contrasweep.config_key"]: r for r in trials}
    results = _results(folder)
    for cut in cuts:
        for tid, entry in cut["trials"].items():
            if entry.get("status") == "FINISHED":
                reported = _reported_at(folder, tid)
                assert len(reported) >= cut["results"].get(tid, 0) and max(reported) <= cut["at"], (
                    tid, entry["name"], cut["results"], results, reported, cut["at"])
                run = by_key[entry["config_key"]]
                stamps = [m.timestamp for key in ("val/accuracy", "epoch")
                          for m in client.get_metric_history(run.info.run_id, key)]
                assert max(stamps) / 1000 < cut["at"], run.info.run_name
    # a running repeat goes on from its last resume state (checkpoint_every 1), whichever
    # driver's trial runs it: Tune's own records of a repeat (one result.json per driver that ran
    # it) show at most the epoch it was in trained again, per interruption
    epochs_of: dict[str, list] = {}
    for result in folder.glob("tune*/*/result.json"):
        for line in result.read_text().splitlines():
            report = json.loads(line)
            epochs_of.setdefault(key_of(report["config"]), []).append(report["epoch"])
    # (a repeat group ASHA stopped before it started reports nothing)
    assert epochs_of and set(epochs_of) <= set(by_key), sorted(epochs_of)
    for key, epochs in epochs_of.items():
        assert len(epochs) - len(set(epochs)) <= len(cuts), (key, epochs)
    # each driver writes its own Tune experiment: the first one's files were never rewritten
    after = _tune_state(folder)
    assert gone or "tuner.pkl" in saved
    assert [name for name, state in saved.items() if after.get(name, state) != state] == []
    # the console never counted past the total
    for text in outs:
        for done, of in re.findall(r"\[contrasweep\] trials ended (\d+)/(\d+): ", text):
            assert int(done) <= int(of) == total, text[-3000:]

    if searcher == "grid":
        return
    from optuna.trial import TrialState

    study = _study(folder)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert len(states) == SUGGESTIONS and set(states) <= {TrialState.COMPLETE, TrialState.PRUNED}, states
    outcome = {int(r.data.tags["contrasweep.suggestion"]): r.data.tags["contrasweep.outcome"]
               for r in runs if r.data.tags["contrasweep.kind"] == "trial"}
    for trial in study.trials:  # one tell per suggestion: its repeats' mean of what selection ranks by (issue 69)
        assert sorted(trial.user_attrs) == [f"repeat.{i}" for i in range(len(seeds))]
        assert (trial.state == TrialState.PRUNED) == (outcome[trial.number] == "stopped")
        if trial.state == TrialState.COMPLETE:
            members = [r for r in trials if r.data.tags["contrasweep.suggestion"] == str(trial.number)]
            assert trial.values[0] == pytest.approx(np.mean([r.data.metrics["best/val/accuracy"] for r in members]))
    for before in study_at_kill:  # suggestions made before the kill are kept, not drawn again
        if before.state != TrialState.WAITING:
            assert study.trials[before.number].params == before.params
    if searcher == "moo":
        assert len(study.directions) == 2 and all(len(t.values) == 2 for t in study.trials if t.values)
