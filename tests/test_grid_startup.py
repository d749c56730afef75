"""A paper-sized grid starts at once and a Ctrl-C in its start-up stops it (issue 54, part 3):
real ``contrasweep run`` drivers on a 5,000-trial grid (500 learning rates × 10 seeds, the tiny
BERT), attached to the suite's Ray as a user's driver attaches to a cluster.

Before the grid's trials reached Tune one at a time (``contrasweep.search.grid_queue``), Tune's
grid generator copied the whole grid once per trial before the first one started (minutes for
``search_spaces/lacon.yaml``'s 15,000), and a Ctrl-C before Tune had created a trial ended the
sweep as ``finished`` with 0 trials (exit 0, a report of nothing). The drivers start with SIGINT
at its default, as a terminal's foreground job does (a job a shell puts in the background
ignores it until Tune installs its own handler). A sweep stopped before Tune ran is started by
``resume``."""

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

LEARNING_RATES = [round(1.0e-5 * (1 + i), 8) for i in range(500)]
SEEDS = list(range(10))  # 500 configurations × 10 seeds = 5,000 trials
FIRST_TRIAL_S = 60  # the bound: the first trial starts within 60 s of the data line
STOP_S = 10  # and a Ctrl-C in the start-up ends the driver within 10 s


def _driver(tmp_path: Path, args: list[str], address: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    return subprocess.Popen([sys.executable, "-u", "-m", "contrasweep", *args, "--address", address, "--no-tsne"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _data_line(proc: subprocess.Popen, opening: str) -> tuple[float, list[str]]:
    """Read the driver's lines up to its opening line (``run``'s data line); returns when it came."""
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith(opening):
            return time.monotonic(), lines
    pytest.fail(f"the driver ended before its line {opening!r}:\n" + "".join(lines)[-3000:])


def _first_trial(proc: subprocess.Popen, folder: Path, lines: list[str], since: float) -> float:
    """Wait for the sweep's record to hold a trial (Tune started it); returns the seconds since ``since``."""
    while not _trials(folder) and proc.poll() is None and time.monotonic() - since < 2 * FIRST_TRIAL_S:
        time.sleep(0.1)
    assert _trials(folder), "no trial started:\n" + "".join(lines)[-3000:]
    return time.monotonic() - since


def _trials(folder: Path) -> dict:
    try:
        return read_record(folder / "tracking.json")["trials"]
    except (OSError, ValueError, KeyError):
        return {}


def _meta(folder: Path) -> dict:
    return json.loads((folder / "sweep.json").read_text())


def _interrupted(proc: subprocess.Popen, lines: list[str]) -> tuple[float, str]:
    """SIGINT, as a terminal's Ctrl-C; returns the seconds to the driver's end and its output."""
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    return time.monotonic() - began, "".join(lines) + out


@pytest.fixture()
def drivers():
    """The drivers a test started, killed (their process groups) if a failed assertion left them running."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def test_a_5000_trial_grid_starts_its_first_trial_at_once_and_a_ctrl_c_in_its_start_up_stops_it(
        tmp_path, tiny_model_dir, ray_address, drivers):
    spec = write_spec(tmp_path / "spec.yaml", tiny_model_dir, reported={"lr": LEARNING_RATES[0]},
                      grid={"lr": LEARNING_RATES}, fixed={"epochs": 1, "batch_size": 8, "warmup_ratio": 0.0},
                      sweep={"seeds": SEEDS}, evaluation={"test": "all"})
    # 1. The first trial starts within a minute of the data line; a Ctrl-C then stops the sweep.
    proc = _driver(tmp_path, ["run", str(spec), "--name", "big"], ray_address)
    drivers.append(proc)
    folder = tmp_path / "sweeps" / "big"
    at, lines = _data_line(proc, "[contrasweep] sweep 'big': method=")
    first_s = _first_trial(proc, folder, lines, at)
    assert first_s <= FIRST_TRIAL_S, f"the first of 5,000 trials started {first_s:.1f} s after the data line"
    _, out = _interrupted(proc, lines)
    assert proc.returncode == 130, out[-3000:]
    assert _meta(folder)["status"] == "interrupted"
    assert _meta(folder)["total"] == 5000

    # 2. A Ctrl-C the moment the data line is out (the Tuner being built): the driver ends within
    # 10 s as interrupted, with the line that says how to go on, and nothing was trained or logged.
    proc = _driver(tmp_path, ["run", str(spec), "--name", "early"], ray_address)
    drivers.append(proc)
    folder = tmp_path / "sweeps" / "early"
    _, lines = _data_line(proc, "[contrasweep] sweep 'early': method=")
    stop_s, out = _interrupted(proc, lines)
    assert proc.returncode == 130, out[-3000:]
    assert stop_s <= STOP_S, f"the driver ended {stop_s:.1f} s after the Ctrl-C:\n{out[-3000:]}"
    assert "[contrasweep] sweep 'early' interrupted: 0 trials" in out, out[-3000:]
    assert "continue with: contrasweep resume early" in out, out[-3000:]
    assert _meta(folder)["status"] == "interrupted"
    assert not _trials(folder) and not list((folder / "tune").glob("run_trial_*"))

    # 3. resume starts it in a fresh Tuner of its own (tune-r1): the grid's first trial
    proc = _driver(tmp_path, ["resume", "early"], ray_address)
    drivers.append(proc)
    at, lines = _data_line(proc, "[contrasweep] resuming sweep 'early': 0/5000 trials ended")
    _first_trial(proc, folder, lines, at)
    _, out = _interrupted(proc, lines)
    assert proc.returncode == 130, out[-3000:]
    assert all(e.get("config_key") for e in _trials(folder).values()) and _meta(folder)["status"] == "interrupted"
    assert list((folder / "tune-r1").glob("experiment_state-*.json")), "Tune saved no state in the resumed sweep"
