"""A Train run that ASHA stopped gives its CPUs back, also when another local Ray runs on the
machine. Ray Train frees a stopped run's placement group through the State API, which finds
its server by auto-detection: next to another local Ray ("multiple active Ray instances") it
asked the newest one, so the stopped run kept its CPUs and the next trial waited forever for
them. ``contrasweep.runner.ray_start.init_ray`` names its own dashboard to every process of its instance
(``RAY_API_SERVER_ADDRESS``; docs/architecture.md, "Facts about the stack").

One distributed sweep (its own local Ray, no ``--address``; 2 workers x 0.9 CPU of the 2) and,
started after its Ray, a second local Ray in another process: the newest instance, which is
the one a regression would ask. The trial after the stopped one needs 1.8 CPUs: it trains only
if the stopped run's workers left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import write_spec

pytestmark = pytest.mark.slow

# a second local Ray, alive until its stdin closes (then it shuts down what it started)
OTHER_RAY = ("import sys, ray\nray.init(address='local', num_cpus=1, include_dashboard=False)\n"
             "print('up', flush=True)\nsys.stdin.read()\nray.shutdown()\n")


def _started(record) -> bool:
    try:
        from contrasweep.folder.record import read

        return bool(read(record)["trials"])
    except (OSError, ValueError, KeyError):
        return False


def test_a_stopped_train_run_frees_its_cpus_next_to_another_ray(tiny_model_dir, cache_dir, tmp_path):
    spec = write_spec(
        tmp_path / "asha.yaml", tiny_model_dir,
        # ASHA (rf 2) on the training loss stops the 1e-8 run early: its loss has not moved,
        # unlike the run before it; the 2e-4 run after it needs its CPUs back (three Train runs:
        # each starts a controller and two workers, about 10 s of imports apiece on 2 cores)
        grid={"lr": [1.0e-3, 1.0e-8, 2.0e-4]}, reported={"lr": 1.0e-3}, fixed={"epochs": 3},
        # each trial's ranks evaluate the test split: no test phase after the sweep (its own
        # process; tests/test_test_phase.py proves it)
        evaluation={"test": "all"},
        sweep={"seeds": [0], "max_concurrent": 1, "metric": "train/loss", "mode": "min", "scheduler": "asha",
               "resources": {"cpu": 0.9, "workers": 2}, "asha": {"grace_period": 1, "reduction_factor": 2.0}},
    )
    # its own local Rays: nothing inherited from a Ray this test process may have started
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = subprocess.Popen([sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "run", str(spec),
                              "--name", "asha", "--tracking-uri", uri, "--no-tsne"],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    other = None
    try:
        record = tmp_path / "sweeps" / "asha" / "tracking.json"
        deadline = time.time() + 300
        while time.time() < deadline and sweep.poll() is None and not _started(record):
            time.sleep(0.2)  # a trial has started: the sweep's Ray is up
        other = subprocess.Popen([sys.executable, "-c", OTHER_RAY], cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = [other.stdout.readline()]
        while lines[-1] and lines[-1].strip() != "up":  # Ray's own start-up lines come first
            lines.append(other.stdout.readline())
        assert lines[-1].strip() == "up", "".join(lines)[-3000:]
        assert sweep.poll() is None, "the sweep ended before the second Ray started"
        out = sweep.communicate(timeout=600)[0]
    finally:
        sweep.kill()
        if other is not None:
            other.stdin.close()
            try:
                other.wait(timeout=60)
            except subprocess.TimeoutExpired:
                other.kill()
    assert sweep.returncode == 0, out[-3000:]
    assert "another Ray instance" not in out
    meta = json.loads((tmp_path / "sweeps" / "asha" / "sweep.json").read_text())
    assert meta["status"] == "finished" and meta["trials"] == 3, meta
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], "tags.`contrasweep.kind` = 'trial'")
    trained = {float(r.data.params["hp.lr"]): (r.data.tags["contrasweep.outcome"], int(r.data.tags["contrasweep.last_epoch"]))
               for r in runs}
    assert trained[1e-8][0] == "stopped" and trained[1e-8][1] < 3, trained  # a Train run ASHA stopped ...
    assert trained[2e-4][1] >= 1, trained  # ... and the run after it got its CPUs
