"""A worker node dies mid-sweep on a real two-node Ray cluster.

The test starts the cluster itself: two ``ray start --block`` processes on this machine, each
with its own temp dir and ports (1 CPU each), and runs ``contrasweep run --address`` against it
in a process of its own, after ``contrasweep plan --address`` for the same cluster. While a trial trains on the worker node, the worker node's raylet is
SIGKILLed (its workers exit with it). Expected: Tune's retry (``sweep.max_failures``) restores
that trial from its last reported checkpoint on the surviving head node, so it redoes at most
``checkpoint_every`` epochs; the sweep finishes; the trial that ran on the head is not rerun;
MLflow holds one run per trial with each epoch once.

Both nodes run on one machine, so the sweep folder is storage every node reaches
(``contrasweep.folder.sweep_storage.check`` counts machines, not nodes).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import write_spec

from contrasweep.runner.preflight import free_port

pytestmark = pytest.mark.slow

EPOCHS, CHECKPOINT_EVERY = 10, 2


# Token authentication on every node and in the driver, with a token of the test's own: a
# `ray start --head` turns token mode on by itself only where ~/.ray/auth_token exists, and a
# `ray start --address` never does, so the worker node joined only when an earlier test's
# ray.init had left RAY_AUTH_MODE=token in this process (the test failed when run alone).
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def clean_env() -> dict[str, str]:
    """This process may have started the suite's own local Ray: its address must not leak into
    the cluster's processes or the sweep's driver."""
    dropped = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN_PATH",
               "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")  # the local Ray's one-machine mode refuses a second node
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, **AUTH}


def start_node(args: list[str], temp_dir: str, log: Path) -> subprocess.Popen:
    """``ray start … --block`` in a session of its own (its process group holds the node)."""
    command = [str(Path(sys.executable).parent / "ray"), "start", *args, "--num-cpus", "1", "--temp-dir", temp_dir,
               "--dashboard-agent-listen-port", str(free_port()), "--disable-usage-stats", "--block"]
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=clean_env(),
                            start_new_session=True)


def wait_for(predicate, what: str, timeout: float = 90.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) for every process of this machine (/proc)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(entry)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return out


def raylet_of(temp_dir: str) -> int | None:
    for pid, (_, cmdline) in processes().items():
        if cmdline.split(" ", 1)[0].endswith("/raylet") and f"--raylet_socket_name={temp_dir}/" in cmdline:
            return pid
    return None


def descendants(root: int) -> set[int]:
    parents = {pid: ppid for pid, (ppid, _) in processes().items()}
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def stop(node: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(node.pid, sig)
        except ProcessLookupError:
            return
        try:
            node.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
    # the group may outlive its leader (raylet, agents): make sure nothing keeps running
    try:
        os.killpg(node.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture()
def two_nodes(tmp_path):
    """(head address, worker temp dir) of a running two-node cluster; stopped afterwards."""
    # short temp dirs: Ray's Unix sockets live under them (107-byte path limit)
    head_dir, worker_dir = tempfile.mkdtemp(prefix="cs-head-"), tempfile.mkdtemp(prefix="cs-node-")
    nodes = []
    try:
        nodes.append(start_node(["--head", "--port", str(free_port()), "--dashboard-host", "127.0.0.1",
                                 "--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port())],
                                head_dir, tmp_path / "head.log"))
        address_file = Path(head_dir) / "ray_current_cluster"
        address = wait_for(lambda: address_file.is_file() and address_file.read_text().strip(), "the head node")
        nodes.append(start_node(["--address", address], worker_dir, tmp_path / "worker.log"))
        wait_for(lambda: "Ray runtime started" in (tmp_path / "worker.log").read_text(), "the worker node")
        wait_for(lambda: raylet_of(worker_dir), "the worker node's raylet")
        yield address, worker_dir
    finally:
        for node in reversed(nodes):
            stop(node)
        for folder in (head_dir, worker_dir):
            shutil.rmtree(folder, ignore_errors=True)


def results(trial_dir: Path) -> list[dict]:
    path = trial_dir / "result.json"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # the driver is writing this line now
    return rows


def mlflow_runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tests")
    return client.search_runs([experiment.experiment_id]) if experiment else []


def test_a_worker_node_killed_mid_trial_is_survived(two_nodes, tiny_model_dir, cache_dir, tmp_path):
    from mlflow.tracking import MlflowClient

    address, worker_dir = two_nodes
    spec = write_spec(
        tmp_path / "s.yaml", tiny_model_dir,
        data={"source": "bbc_news", "protocol": "few_shot", "k": 64, "test_fraction": 0.05},
        grid={"lr": [1.0e-3, 5.0e-4, 2.0e-4]}, reported={"lr": 1.0e-3},
        fixed={"epochs": EPOCHS, "batch_size": 8, "warmup_ratio": 0.0, "checkpoint_every": CHECKPOINT_EVERY},
        # one trial per node (1 CPU each); one retry after a failure (the default, said here)
        sweep={"seeds": [0], "scheduler": "none", "max_concurrent": 2, "resources": {"cpu": 1}, "max_failures": 1},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # first the plan for this cluster (contrasweep plan --address): its resources, read from the
    # head (one CPU per node), give two trials at a time
    planned = subprocess.run([sys.executable, "-m", "contrasweep", "plan", str(spec), "--address", address],
                             cwd=tmp_path, capture_output=True, text=True, env=clean_env(), timeout=300)
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr[-2000:]
    assert f"with 2 trials at a time on {address} (2 CPU)" in planned.stdout, planned.stdout
    tune_dir = tmp_path / "sweeps" / "nodes" / "tune"
    started = time.time()
    driver = subprocess.Popen(
        [sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "run", str(spec), "--name", "nodes",
         "--address", address, "--tracking-uri", uri, "--no-tsne"],
        cwd=tmp_path, stdout=(tmp_path / "driver.log").open("w"), stderr=subprocess.STDOUT, env=clean_env())
    killed = None
    try:
        # kill the worker node while a trial there has reported its 3rd epoch and is not done
        while driver.poll() is None and killed is None and time.time() - started < 300:
            raylet = raylet_of(worker_dir)
            on_worker = descendants(raylet) if raylet else set()
            for trial_dir in tune_dir.glob("run_trial_*") if tune_dir.is_dir() else []:
                rows = results(trial_dir)
                if rows and rows[-1]["pid"] in on_worker and 3 <= rows[-1]["epoch"] < EPOCHS:
                    os.kill(raylet, signal.SIGKILL)
                    killed = {"trial": trial_dir, "pid": rows[-1]["pid"], "epoch": rows[-1]["epoch"],
                              "runs": len(mlflow_runs(uri)), "at_s": time.time() - started}
                    break
            time.sleep(0.1)
        driver.wait(timeout=600)
    finally:
        driver.kill()
    wall = time.time() - started
    log = (tmp_path / "driver.log").read_text()
    assert killed, f"no trial reached epoch 3 on the worker node:\n{log[-3000:]}"
    assert driver.returncode == 0, log[-4000:]
    meta = json.loads((tmp_path / "sweeps" / "nodes" / "sweep.json").read_text())
    assert meta["status"] == "finished" and meta["trials"] == 3 and meta["errors"] == 0, meta

    # the killed trial: resumed from a resume state (not from scratch) in another process, on
    # the head node; at most checkpoint_every epochs redone; every epoch up to the last
    # (the killed process may still report the epoch it was finishing: results go straight to the driver)
    rows = results(killed["trial"])
    epochs = [(r["epoch"], r["pid"] == killed["pid"]) for r in rows]
    before = [epoch for epoch, there in epochs if there]
    after = [epoch for epoch, there in epochs if not there]
    assert before == list(range(1, len(before) + 1)) and before[-1] >= killed["epoch"], epochs
    resumed_at = after[0]
    redone = before[-1] - resumed_at + 1
    assert 1 < resumed_at and 0 <= redone <= CHECKPOINT_EVERY, epochs
    assert after == list(range(resumed_at, EPOCHS + 1)), epochs

    # the other trials ran once, each epoch once, in one process
    for trial_dir in tune_dir.glob("run_trial_*"):
        if trial_dir != killed["trial"]:
            rows = results(trial_dir)
            assert [r["epoch"] for r in rows] == list(range(1, EPOCHS + 1)) and len({r["pid"] for r in rows}) == 1

    # MLflow: the sweep's run, a run per configuration and one per trial, each epoch logged once
    runs = mlflow_runs(uri)
    kinds = [r.data.tags.get("contrasweep.kind") for r in runs]
    assert sorted(kinds) == ["configuration"] * 3 + ["sweep"] + ["trial"] * 3, kinds
    client = MlflowClient(uri)
    for run in runs:
        assert run.info.status == "FINISHED", (run.info.run_name, run.info.status)
        if run.data.tags.get("contrasweep.kind") == "trial":
            steps = [m.step for m in client.get_metric_history(run.info.run_id, "val/accuracy")]
            assert sorted(steps) == list(range(1, EPOCHS + 1)), (run.info.run_name, steps)
    print(f"\n[node failure] killed after epoch {before[-1]} ({killed['at_s']:.1f} s), resumed at epoch "
          f"{resumed_at}: {redone} epoch(s) redone; MLflow runs {killed['runs']} at the kill, {len(runs)} after; "
          f"sweep wall time {wall:.1f} s")
