"""The demo's console as a user sees it (issue 57): README command 1's spec (on the tiny BERT),
run by a real ``contrasweep run`` driver, stopped by SIGTERM (what Kubernetes and Slurm send a
job they preempt) once a trial has ended, and finished by ``contrasweep resume``.

- SIGTERM ends the run as Ctrl-C does: one line, exit status 143, no native signal dump, the
  sweep ``interrupted`` with its state kept; ``resume`` finishes it with each repeat trained and
  logged once (MLflow's runs, the sweep folder).
- Nothing is left in the system's temporary folder (a trial's session folder, Ray's copy of a
  restored checkpoint, a reported pointer, the driver's staged files: ``LITTER``; the report's
  MLflow downloads of the spec and of the t-SNE map's weights, 87 MB a sweep with MiniLM).
- Every line both commands print is one that docs/cli.md's Console table explains (``LINES``
  below reads the table), and so is every line of the demo output docs/cli.md quotes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI_DOC = ROOT / "docs" / "cli.md"
# what trials and drivers left in the temp folder before issue 57
LITTER = ("contrasweep-ckpt-", "checkpoint_tmp_", "contrasweep-restore-", "contrasweep-pointer-", "contrasweep-ship-")


NOT_OURS = ("ray", "_ray", "torchinductor_", "pytest-of-")  # Ray's session, torch's compile cache, pytest's


def litter() -> set[str]:
    """The temp folder's entries but Ray's, torch's and pytest's own: what a sweep leaves must
    be none of them (``LITTER`` names what trials left before issue 57; MLflow's downloads for the
    report, ``tmp*``, too)."""
    import tempfile

    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if not p.name.startswith(NOT_OURS)}


def documented() -> list[re.Pattern]:
    """docs/cli.md's Console table: its first column's line beginnings, ``…`` for what varies."""
    text = CLI_DOC.read_text()
    table = text.split("| a line that begins", 1)[1].split("\n\n", 1)[0]
    patterns = []
    for row in table.splitlines()[2:]:
        for start in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            patterns.append(re.compile("^" + ".*?".join(re.escape(part) for part in start.split("…"))))
    return patterns


def undocumented(output: str, patterns: list[re.Pattern]) -> list[str]:
    ours = [line for line in output.splitlines() if line.startswith(("[contrasweep]", "contrasweep:"))]
    return [line for line in ours if not any(p.match(line) for p in patterns)]


def test_the_console_table_explains_every_line_of_the_quoted_demo():
    patterns = documented()
    assert len(patterns) >= 25
    quoted = CLI_DOC.read_text().split("prints, from its first line to its last:", 1)[1].split("```text", 1)[1]
    quoted = quoted.split("```", 1)[0]
    assert len(quoted.splitlines()) >= 20 and undocumented(quoted, patterns) == []
    assert undocumented("[contrasweep] something nobody explains\n", patterns) == ["[contrasweep] something nobody explains"]


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if text in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not printed: {path.read_text(errors='replace')[-3000:]}")


@pytest.mark.slow
def test_the_demo_stopped_by_sigterm_and_resumed_prints_only_explained_lines(ray_address, tiny_model_dir, cache_dir,
                                                                             tmp_path):
    from contrasweep.tracking.store import KIND_TAG, get_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env.update(CONTRASWEEP_HOME=str(tmp_path / "sweeps"), CONTRASWEEP_PROGRESS_S="0.001")
    common = ["--address", ray_address, "--no-tsne"]
    before = litter()
    first = tmp_path / "run.out"
    with first.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "contrasweep", "run", str(ROOT / "search_spaces" / "demo.yaml"), "--name", "demo",
             "--tracking-uri", uri, "--set", f"encoder.name={tiny_model_dir}", "--set", "encoder.max_length=32",
             *common], cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            _wait_for(first, "[contrasweep] trials ended 1/4: ", proc)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=120) == 143
        finally:
            if proc.poll() is None:
                proc.kill()
    ran = first.read_text()
    assert "SIGTERM received" not in ran and "Traceback" not in ran and "PC: @" not in ran, ran
    assert "[contrasweep] sweep 'demo' interrupted: " in ran and "[contrasweep] continue with: contrasweep resume demo" in ran
    folder = tmp_path / "sweeps" / "demo"
    assert json.loads((folder / "sweep.json").read_text())["status"] == "interrupted"

    resumed = subprocess.run([sys.executable, "-m", "contrasweep", "resume", "demo", "--address", ray_address],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # its report: t-SNE too
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = resumed.stdout + resumed.stderr
    assert "[contrasweep] resuming sweep 'demo': " in again and "[contrasweep] sweep 'demo' finished: 4 trials" in again
    client = get_client(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=100)
    trials = [r for r in runs if r.data.tags.get(KIND_TAG) == "trial"]
    assert len(trials) == 4 and all(r.info.status == "FINISHED" for r in trials)
    assert len({r.data.tags["contrasweep.config_key"] for r in trials}) == 4  # each repeat once
    assert litter() - before == set()  # nothing in the temp folder: trials, drivers, the report (issue 57)
    patterns = documented()
    assert undocumented(ran, patterns) == [] and undocumented(again, patterns) == [], ran + again
    # no library progress bar (issue 70: transformers' "Writing model shards: 100%|…|")
    assert not re.search(r"\d+%\||Writing model shards|Loading weights", ran + again), ran + again
    # what the demo shows, in order: its first line, its size, trial lines, the summary
    ours = [line for line in ran.splitlines() if line.startswith("[contrasweep]")]
    assert ours[0].startswith("[contrasweep] sweep 'demo': method=ce searcher=grid scheduler=asha seeds=[0, 1]; data:")
    assert ours[1].startswith("[contrasweep] 4 trials to run: 2 configurations × 2 repeats, 2 at a time")
    # progress inside an epoch (when a batch outlasts $CONTRASWEEP_PROGRESS_S: timing decides) says what it counts
    assert not re.search(r"(training|evaluating) \d+/\d+$", ran + again, re.MULTILINE), ran + again
