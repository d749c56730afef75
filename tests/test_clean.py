"""`contrasweep clean` and `list`'s disk column: a finished sweep's resume states, a stopped
trial's state folder and that of a trial whose MLflow model holds its weights go, the other
best weights and every other file stay; a running sweep is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from contrasweep.folder import driver


def _file(path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)


def _sweep(root, name: str, status: str):
    folder = root / name
    for key, trial in (("kaaa", "run_trial_aaa_0_lr=0.1"), ("kbbb", "run_trial_bbb_1_lr=0.2"),
                       ("kccc", "run_trial_ccc_2_lr=0.3")):
        state = folder / "trials" / key / "state"  # a repeat's state folder, by configuration key
        _file(state / "best-e0002" / "model.safetensors", 1000)
        _file(state / "resume-e0003" / "model.safetensors", 3000)
        _file(state / "resume-e0003" / "train_state.pt", 5000)
        _file(folder / "tune" / trial / "checkpoint_000000" / "meta.json", 10)  # Tune's pointer: kilobytes, kept
    (folder / "spec.yaml").write_text("method: ce\nsweep: {metric: val/accuracy, mode: max}\n")
    (folder / "sweep.json").write_text(json.dumps({"status": status, "created": "2026-11-25T01:00:00", "total": 3}))
    (folder / "tracking.json").write_text(json.dumps({"trials": {
        "aaa": {"config_key": "kaaa", "status": "FINISHED", "outcome": "complete", "best_value": 0.75, "group": "a", "group_size": 1},
        "bbb": {"config_key": "kbbb", "status": "FINISHED", "outcome": "stopped", "best_value": 0.5, "group": "b", "group_size": 1},
        # kept, and its MLflow model holds its best weights (contrasweep.tracking.kept): one copy, MLflow's
        "ccc": {"config_key": "kccc", "status": "FINISHED", "outcome": "complete", "best_value": 0.25, "model": "logged", "group": "c",
                "group_size": 1}},
        "tests": {"done": True, "reported": ["aaa"], "kept": ["aaa", "ccc"]}}))
    return folder


def _cli(root, *args):
    return subprocess.run([sys.executable, "-m", "contrasweep", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=120)


def test_clean_removes_what_it_says_and_nothing_else(tmp_path):
    from contrasweep.console.summary import human

    folder = _sweep(tmp_path, "done", "finished")
    before = {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}
    size_before = human(sum((folder / p).stat().st_size for p in before))
    listed = _cli(tmp_path, "list")
    # the selected configuration so far: the complete one (its 1 repeat), not the stopped one; no
    # verdict on whether it learned in a record without one
    # (a record without the trials' values shows none; nothing tested: "-")
    assert listed.stdout.splitlines()[1].split()[:13] == ["done", "finished", "3/3", "ce", "-", "val/accuracy", "0.7500",
                                                          "(1", "repeat)", "-", "-", *size_before.split()], listed.stdout
    cleaned = _cli(tmp_path, "clean", "done")
    assert cleaned.returncode == 0, cleaned.stderr
    after = {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}
    size_after = human(sum((folder / p).stat().st_size for p in after))
    assert f"done: 3 folders removed, {size_before} -> {size_after}" in cleaned.stdout
    gone = before - after
    assert gone == ({p for p in before if "resume-e0003" in str(p)}
                    | {p for p in before if ("kbbb" in str(p) or "kccc" in str(p)) and "state" in str(p)})
    assert (folder / "trials" / "kaaa" / "state" / "best-e0002" / "model.safetensors").exists()


def test_clean_refuses_a_running_sweep_and_stopped_skips_it(tmp_path):
    running = _sweep(tmp_path, "live", "running")
    driver.write(running)  # this test's process drives it
    done = _sweep(tmp_path, "done", "finished")
    refused = _cli(tmp_path, "clean", "live")
    assert refused.returncode == 2 and "sweep 'live' is running" in refused.stderr
    cleaned = _cli(tmp_path, "clean", "--stopped")
    assert cleaned.returncode == 0 and "live" not in cleaned.stdout and "done:" in cleaned.stdout
    assert any(p.name == "train_state.pt" for p in running.rglob("*"))
    assert not any(p.name == "train_state.pt" for p in done.rglob("*"))
    assert os.path.exists(running / "driver.json")
