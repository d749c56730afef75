"""``contrasweep extend`` (contrasweep.runner.extend) on a real local Ray, MLflow store and Optuna study:
a grid sweep grown by a training seed trains exactly the new repeats and ends with one sweep run,
C configuration runs with n_repeats 2 and 2C trial runs, all FINISHED, the earlier trials never
trained again; a new data.k adds a setting with its own selection and registry alias; --top 1
trains only each setting's best configuration's new repeat; an Optuna sweep of 3 suggestions
extended to 5 ends with one study of 5 COMPLETE trials; every refused change is exit 2 with one
line and changes nothing."""

from __future__ import annotations

import json

import pytest
from conftest import write_spec
from contrasweep.folder.record import read as read_record
from contrasweep.spec.identity import key_of

pytestmark = pytest.mark.slow


def _runs(client, name: str, kind: str) -> list:
    exp = client.get_experiment_by_name("tests").experiment_id
    return client.search_runs([exp], filter_string=f"tags.`contrasweep.sweep` = '{name}' and "
                                                   f"tags.`contrasweep.kind` = '{kind}'", max_results=500)


def _trained(root, name: str, experiment: str) -> int:
    """Tune trials of one experiment of the sweep that reported at least one epoch."""
    folder = root / name / experiment
    return sum(1 for f in folder.glob("run_trial_*/result.json") if f.read_text().strip())


def _extend(main, capsys, root, uri, name, *args) -> int:
    code = main(["--root", str(root), "extend", name, *args, "--no-tsne"])
    _extend.out = capsys.readouterr().out
    return code


def test_a_grid_sweep_grows_by_seeds_settings_and_top(ray_session, tiny_model_dir, tmp_path, cache_dir, capsys,
                                                      monkeypatch):
    from contrasweep.cli import main
    from contrasweep.folder import sweeps
    from contrasweep.tracking import store
    from contrasweep.tracking.store import get_client

    # every MLflow read of the driver and the report pages (issue 69): one run a page, below every
    # count here, so that selection, the test phase, extension (--top) and the report read each page
    monkeypatch.setattr(store, "PAGE_SIZE", 1)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(tmp_path / "sweeps"))
    spec = write_spec(tmp_path / "g.yaml", tiny_model_dir, data={"k": [4]}, fixed={"epochs": 1, "batch_size": 8},
                      sweep={"scheduler": "none", "seeds": [0]})
    assert main(["--root", str(root), "run", str(spec), "--name", "g", "--tracking-uri", uri, "--no-tsne"]) == 0
    client = get_client(uri)
    first = {r.info.run_id: r for r in _runs(client, "g", "trial")}
    assert len(first) == 2

    # one more training seed: exactly the two new repeats train, in a new experiment
    assert _extend(main, capsys, root, uri, "g", "--set", "sweep.seeds=[0, 1]") == 0
    assert _trained(root, "g", "tune-ext1") == 2 and _trained(root, "g", "tune") == 2
    assert "sweep 'g' finished: 2 trials (its extension 1, contrasweep extend): 2 complete" in _extend.out
    assert "best configuration [k=4]: lr=" in _extend.out and "(2 repeats)" in _extend.out  # over all its repeats
    trials, configs = _runs(client, "g", "trial"), _runs(client, "g", "configuration")
    assert len(_runs(client, "g", "sweep")) == 1 and len(configs) == 2 and len(trials) == 4
    assert all(r.info.status == "FINISHED" for r in trials + configs + _runs(client, "g", "sweep"))
    assert sorted(r.data.metrics["n_repeats"] for r in configs) == [2.0, 2.0]
    assert sorted(r.data.tags["contrasweep.seed"] for r in trials) == ["0", "0", "1", "1"]
    for run_id in first:  # the earlier trials were not trained again: one value per epoch
        assert len(client.get_metric_history(run_id, "val/accuracy")) == 1
    parent = _runs(client, "g", "sweep")[0]
    assert parent.data.tags["contrasweep.extended"] == "1"
    assert json.loads(parent.data.tags["contrasweep.extension.1"])["overrides"] == ["sweep.seeds=[0, 1]"]
    assert sweeps.open_existing(root, "g").meta()["status"] == "finished"

    # a new data.k: a setting of its own, with its own selection and registry alias
    assert _extend(main, capsys, root, uri, "g", "--set", "data.k=[4, 8]") == 0
    assert _trained(root, "g", "tune-ext2") == 4
    parent = _runs(client, "g", "sweep")[0]
    assert parent.data.tags["contrasweep.model.k_8"].startswith("models:/g/")
    aliases = dict(client.get_registered_model("g").aliases)
    assert {"best-k4", "best-k8"} <= set(aliases)
    assert "best_config/k_8/mean/best/val/accuracy" in parent.data.metrics
    from dashboards.source import load

    assert load(uri, "g").spec["data"]["k"] == [4, 8]  # the report reads the grown spec

    # --top 1: one more seed for each setting's best configuration only; the driver stops before
    # Tune wrote anything of the extension's experiment (Ctrl-C at its start): resume runs it again
    best = {s: parent.data.tags[f"contrasweep.best_config.{s}"] for s in ("k_4", "k_8")}
    from contrasweep.runner import tune
    from contrasweep.runner.extend import in_extension

    tracker = tune.tracker

    def interrupted(*args, **kwargs):  # after the configuration runs reopened, before the Tuner was made
        raise KeyboardInterrupt

    tune.tracker = interrupted
    try:
        assert _extend(main, capsys, root, uri, "g", "--set", "sweep.seeds=[0, 1, 2]", "--top", "1") == 130
    finally:
        tune.tracker = tracker
    assert in_extension(root, "g") and sweeps.open_existing(root, "g").tune_name == "tune-ext3"  # nothing of Tune's ran
    assert main(["--root", str(root), "resume", "g", "--no-tsne"]) == 0
    assert "[contrasweep] resuming sweep 'g': " in capsys.readouterr().err  # the same extension, a fresh Tuner
    assert sweeps.open_existing(root, "g").tune_names[-2:] == ["tune-ext3", "tune-ext3-r1"]
    assert _trained(root, "g", "tune-ext3-r1") == 2
    configs = {r.info.run_id: r for r in _runs(client, "g", "configuration")}
    assert len(configs) == 4 and len(_runs(client, "g", "trial")) == 4 + 4 + 2
    assert sorted(r.data.metrics["n_repeats"] for r in configs.values()) == [2.0, 2.0, 3.0, 3.0]
    assert {configs[run_id].data.metrics["n_repeats"] for run_id in best.values()} == {3.0}
    assert all(r.info.status == "FINISHED" and r.data.tags["contrasweep.outcome"] == "complete" for r in configs.values())
    record = load(uri, "g")  # the report's read: every configuration with every repeat, across 10 pages
    assert sorted(len(g.repeats) for g in record.groups) == [2, 2, 3, 3], [(g.group, g.outcomes) for g in record.groups]
    assert all(g.complete for g in record.groups)
    assert record.parent.info.run_id == parent.info.run_id
    assert main(["--root", str(root), "list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    (row,) = [r for r in rows if r.startswith("g ")]
    # the columns align whatever the status text (issue 57: finished+ext3 pushed the rest right)
    assert row.index("finished+ext3") == header.index("status") and row.index("val/") == header.index("validation")


def test_an_optuna_sweep_grows_its_study(ray_session, tiny_model_dir, tmp_path, cache_dir, capsys):
    import optuna
    from optuna.trial import TrialState

    from contrasweep.cli import main
    from contrasweep.folder import sweeps

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(tmp_path / "sweeps"))
    spec = write_spec(tmp_path / "o.yaml", tiny_model_dir, grid={}, reported={},
                      search={"lr": {"loguniform": [1.0e-4, 1.0e-2]}}, fixed={"epochs": 1, "batch_size": 8},
                      sweep={"searcher": "optuna", "scheduler": "none", "seeds": [0], "num_samples": 3})
    assert main(["--root", str(root), "run", str(spec), "--name", "o", "--tracking-uri", uri, "--no-tsne"]) == 0
    assert _extend(main, capsys, root, uri, "o", "--set", "sweep.num_samples=5") == 0
    assert _trained(root, "o", "tune-ext1") == 2
    studies = optuna.get_all_study_summaries(f"sqlite:///{root / 'o' / 'optuna.db'}")
    assert [s.study_name for s in studies] == ["o"]
    trials = optuna.load_study(study_name="o", storage=f"sqlite:///{root / 'o' / 'optuna.db'}").trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 5
    assert len({t.params["lr"] for t in trials}) == 5  # the new suggestions are new points
    for args, expected in ((["--set", "sweep.seeds=[0, 1]"], "sweep.seeds cannot grow in an optuna sweep"),
                           (["--set", "sweep.num_samples=4"], "sweep.num_samples=4 is not larger than the 5")):
        code = main(["--root", str(root), "extend", "o", *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and expected in err[0], (args, err)


def test_refused_growth_is_one_line(ray_session, tiny_model_dir, tmp_path, cache_dir, capsys):
    from contrasweep.cli import main
    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec.load import load_spec

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(tmp_path / "sweeps"))
    spec = write_spec(tmp_path / "r.yaml", tiny_model_dir, fixed={"epochs": 1, "batch_size": 8},
                      sweep={"scheduler": "none", "seeds": [0]})
    tune.run(load_spec(str(spec), []), "r", root, uri, None)
    folder = root / "r"
    before = (folder / "spec.yaml").read_text(), (folder / "sweep.json").read_text()
    capsys.readouterr()
    for args, expected in (
        (["--set", "grid.lr=[0.001, 0.01]"], "extend cannot change grid.lr"),
        (["--set", "method=ce_scl"], "extend cannot change method"),
        (["--set", "fixed.epochs=2"], "extend cannot change fixed.epochs"),
        (["--set", "sweep.seeds=[1, 2]"], "sweep.seeds=[1, 2] leaves out [0] that the sweep ran"),
        (["--set", "sweep.num_samples=9"], "sweep.num_samples cannot grow in a grid sweep"),
        (["--set", "data.k=[4, 8]"], "data.k=4 ran as one value, not as a setting axis"),
        (["--set", "sweep.seeds=[0]"], "nothing to extend"),
        (["--set", "data.k=4", "--set", "sweep.seeds=[0, 1]", "--top", "0"], "--top 0 is not allowed"),
        (["--set", "data.seed=[0, 1]", "--top", "1", "--set", "fixed.batch_size=4"], "extend cannot change fixed.batch_size"),
    ):
        code = main(["--root", str(root), "extend", "r", *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and expected in err[0], (args, err)
    code = main(["--root", str(root), "extend", "nope", "--set", "sweep.seeds=[0, 1]"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no sweep named 'nope'" in err[0]
    assert ((folder / "spec.yaml").read_text(), (folder / "sweep.json").read_text()) == before  # nothing changed
    assert not (folder / "tune-ext1").exists()


def test_an_interrupted_sweep_resumes_before_it_grows_and_a_killed_extension_resumes(ray_address, tiny_model_dir, cache_dir,
                                                                                     tmp_path):
    """Real drivers attached to the suite's Ray (``--address``), SIGKILLed mid-epoch: first the sweep itself (``extend`` resumes it, then
    grows it), then the extension (``resume`` finishes it). Nothing trains twice; MLflow ends
    with one sweep run, 2 configuration runs of 2 repeats and 4 trial runs, each epoch logged once.
    The method is a user's (issue 56): ``examples/ce_supcon.py`` copied outside the repository and
    named by its path in the spec. Changed between the kill and ``extend``, it is refused in one
    line (exit 2, nothing started); ``--allow-changed-method`` goes on, and every run records the
    method's path and hash, those trained by the new code both hashes."""
    import hashlib
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from contrasweep.tracking.store import get_client

    epochs = 3
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    folder = tmp_path / "sweeps" / "x"
    method_file = tmp_path / "ce_supcon.py"
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "ce_supcon.py", method_file)
    spec = write_spec(tmp_path / "x.yaml", tiny_model_dir, method="./ce_supcon.py:CESupCon", data={"k": 2},
                      fixed={"epochs": epochs, "batch_size": 8, "checkpoint_every": 1},
                      sweep={"scheduler": "none", "seeds": [0], "max_concurrent": 1},
                      evaluation={"test": "all"})  # each trial tests itself: no test-phase process per driver

    def start(*args) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "contrasweep", *args, "--address", ray_address], cwd=tmp_path,
                                env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def trials() -> dict:
        try:
            return read_record(folder / "tracking.json")["trials"]
        except (OSError, ValueError, KeyError):
            return {}

    def kill_mid_epoch(proc, known: set, experiment: str = "tune") -> None:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            if (folder / experiment).is_dir() and any(tid not in known and "status" not in e and 1 <= e.get("last_epoch", 0) < epochs
                   for tid, e in trials().items()):
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=120)

    kill_mid_epoch(start("run", str(spec), "--name", "x", "--tracking-uri", uri, "--no-tsne"), set())
    started = hashlib.sha256(method_file.read_bytes()).hexdigest()
    method_file.write_text(method_file.read_text() + "# changed after the kill\n")
    changed = hashlib.sha256(method_file.read_bytes()).hexdigest()
    before = (folder / "sweep.json").read_text()
    for command in (["resume", "x"], ["extend", "x", "--set", "sweep.seeds=[0, 1]"]):  # each refused, one line
        refused = subprocess.run([sys.executable, "-m", "contrasweep", *command, "--address", ray_address], cwd=tmp_path,
                                 env=env, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
        assert refused.stderr.strip().splitlines() == [
            f"contrasweep: error: method '{method_file}:CESupCon' of sweep 'x' changed since the sweep last ran "
            f"({method_file}: sha256 {started[:12]} when it last ran, {changed[:12]} now); allowed: restore the file, or "
            "--allow-changed-method to go on with the new code (its runs then record both hashes)"]
    assert not (folder / "tune-ext1").exists() and (folder / "sweep.json").read_text() == before  # nothing started
    proc = start("extend", "x", "--set", "sweep.seeds=[0, 1]", "--no-tsne", "--allow-changed-method")
    kill_mid_epoch(proc, set(), "tune-ext1")  # once resumed and grown: a new repeat, in the extension's experiment
    assert sum("status" in e for e in trials().values()) == 2  # the two first repeats, finished by the resume
    done = subprocess.run([sys.executable, "-m", "contrasweep", "resume", "x", "--no-tsne", "--address", ray_address],
                          cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    client = get_client(uri)
    exp = client.get_experiment_by_name("tests").experiment_id
    runs = client.search_runs([exp], filter_string="tags.`contrasweep.sweep` = 'x'", max_results=100)
    kinds = {}
    for run in runs:
        kinds.setdefault(run.data.tags["contrasweep.kind"], []).append(run)
    assert {k: len(v) for k, v in kinds.items()} == {"sweep": 1, "configuration": 2, "trial": 4}
    assert all(r.info.status == "FINISHED" for r in runs)
    assert sorted(r.data.metrics["n_repeats"] for r in kinds["configuration"]) == [2.0, 2.0]
    for run in kinds["trial"]:  # every epoch logged once
        assert [m.step for m in client.get_metric_history(run.info.run_id, "val/accuracy")] == list(range(1, epochs + 1))
    # each driver ran its own Tune experiment: the first stage's two repeats in tune/ and the
    # resume's tune-r1/, the extension's two new ones in tune-ext1/ and its resume's tune-ext1-r1/
    def repeats(pattern: str) -> set:
        return {key_of(json.loads(line)["config"]) for path in folder.glob(f"{pattern}/run_trial_*/result.json")
                for line in path.read_text().splitlines()}

    assert len(repeats("tune")) == 1 and len(repeats("tune") | repeats("tune-r1")) == 2
    assert len(repeats("tune-ext1*")) == 2 and not repeats("tune-ext1*") & (repeats("tune") | repeats("tune-r1"))
    meta = json.loads((folder / "sweep.json").read_text())
    assert meta["experiments"] == ["tune", "tune-r1", "tune-ext1", "tune-ext1-r1"], meta["experiments"]
    assert meta["status"] == "finished" and len(meta["extensions"]) == 1
    assert meta["method"]["sha256"] == started and [c["sha256"] for c in meta["method_changes"]] == [changed]
    # every run names the method and its hash; what the new code trained carries the first hash too
    for run in runs:
        tags = run.data.tags
        assert tags["contrasweep.method.path"] == f"{method_file}:CESupCon"
        assert tags["contrasweep.method.file"] == str(method_file)
        assert tags["contrasweep.method.sha256"] in (started, changed)
        assert tags.get("contrasweep.method.sha256_at_start") == (started if tags["contrasweep.method.sha256"] == changed
                                                                   else None)
    assert kinds["sweep"][0].data.tags["contrasweep.method.sha256"] == started
    new_code = [r for r in kinds["trial"] if r.data.tags["contrasweep.method.sha256"] == changed]
    assert {r.data.tags["contrasweep.seed"] for r in new_code} >= {"1"}  # the new repeats, at least
    assert all(r.info.run_name.startswith("CESupCon") for r in kinds["trial"])
    # the runs table's method column: the class; its path in a param of its own (issue 70)
    for run in kinds["sweep"] + kinds["trial"]:
        assert (run.data.params["method"], run.data.params["method_path"]) == ("CESupCon", f"{method_file}:CESupCon")
    listed = subprocess.run([sys.executable, "-m", "contrasweep", "list"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    header, row = listed.stdout.splitlines()[:2]
    # the finished sweep: its method by its class, its selected lr, its test metric, no "so far"
    assert row.split()[:4] == ["x", "finished+ext1", "4/4", "CESupCon"] and "so far" not in listed.stdout, listed.stdout
    assert row[header.index("selected configuration"):].split()[0] in ("lr=0.001", "lr=0.0001"), listed.stdout
    assert row[header.index("test"):].startswith("test/accuracy 0."), listed.stdout
