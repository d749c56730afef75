"""A diverging trial (its training loss NaN or infinite) stops within a few steps, names the
step, leaves a failure record in its state folder, and a retry of it fails at once without
training again (a deterministic divergence would only repeat)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from trainables.checkpoints import FAILURE_DIR, StateFolder
from trainables.errors import TrainingDiverged
from trainables.loop import train
from trainables.optim_steps import DIVERGENCE_CHECK_STEPS, check_finite, run_steps
from trainables.sessions import LocalSession

from helpers import loop_config, toy_tables

# lr 1 with weight decay 10 multiplies every weight by (1 - 1·10) = -9 per step (AdamW's
# decoupled decay): the tiny BERT's loss is finite for a few epochs, then NaN
DIVERGING = {"lr": 1.0, "weight_decay": 10.0, "max_grad_norm": 0.0, "epochs": 6, "batch_size": 4}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_check_names_the_first_non_finite_step(bad):
    losses = [torch.tensor(v) for v in (0.5, 0.4, bad, float("nan"))]
    with pytest.raises(TrainingDiverged, match=rf"train/loss is {bad} at step 12 \(epoch 3\)"):
        check_finite(losses, first_step=10, epoch=3)
    check_finite([torch.tensor(0.5), torch.tensor(1.0e30)], first_step=1, epoch=1)  # large is not diverged


def test_run_steps_stops_within_one_window_of_the_first_nan():
    """The loss is read once per window of DIVERGENCE_CHECK_STEPS steps, so the epoch stops
    in the window where it first goes NaN, not at its end."""
    calls = []

    def step(batch):
        calls.append(1)
        return {"loss": torch.tensor(float("nan") if len(calls) >= 3 else 1.0)}

    batches = ({"x": torch.zeros(1)} for _ in range(10 * DIVERGENCE_CHECK_STEPS))
    with pytest.raises(TrainingDiverged, match=r"at step 103 \(epoch 2\)"):
        run_steps(step, batches, torch.device("cpu"), (), first_step=101, epoch=2)
    assert len(calls) == DIVERGENCE_CHECK_STEPS


def test_a_diverging_trial_fails_and_its_retry_fails_at_once(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir, n_per_class=8)  # 16 rows: 4 steps an epoch
    first = LocalSession(str(tmp_path / "state"))
    with pytest.raises(TrainingDiverged, match=r"train/loss is nan at step \d+ \(epoch \d+\)") as raised:
        train(loop_config(tiny_model_dir, **DIVERGING), data, first)
    step, epoch = map(int, re.search(r"at step (\d+) \(epoch (\d+)\)", str(raised.value)).groups())
    assert 1 < epoch < DIVERGING["epochs"] and (epoch - 1) * 4 < step <= epoch * 4  # the step lies in that epoch
    assert [r["epoch"] for r in first.reports] == list(range(1, epoch))  # finite until then, reported as usual
    assert all(math.isfinite(r["train/loss"]) for r in first.reports)
    record = StateFolder(first.state_dir).failure()
    assert record == {"error": "TrainingDiverged", "message": str(raised.value), "epoch": epoch}
    assert (Path(first.state_dir) / FAILURE_DIR).is_dir()

    # a retry (Tune's max_failures) of the same trial: the same state folder, and nothing trained
    retry = LocalSession(str(tmp_path / "state"))
    with pytest.raises(TrainingDiverged, match="an earlier attempt of this trial; not trained again"):
        train(loop_config(tiny_model_dir, **DIVERGING), data, retry)
    assert retry.reports == []


def test_a_healthy_trial_leaves_no_failure_record(tiny_model_dir, tmp_path):
    session = LocalSession(str(tmp_path / "state"))
    train(loop_config(tiny_model_dir, epochs=1), toy_tables(tiny_model_dir, n_per_class=8), session)
    assert StateFolder(session.state_dir).failure() is None


@pytest.mark.slow
def test_a_sweep_fails_the_diverging_trial_loudly_and_goes_on(ray_address, tiny_model_dir, cache_dir, tmp_path):
    """Through the CLI, attached to the suite's Ray (``--address``): the diverging configuration's trial is FAILED
    in Tune, in MLflow (with the reason and the step) and in the console summary; its retry
    (max_failures 1) fails at once; the other configuration completes; exit status 1."""
    import json
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    from conftest import write_spec

    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, reported={}, grid={"lr": [1.0, 1.0e-3]},
                      fixed={"epochs": 6, "batch_size": 4, "warmup_ratio": 0.0, "weight_decay": 10.0, "max_grad_norm": 0.0},
                      sweep={"seeds": [0], "scheduler": "none", "max_concurrent": 1, "max_failures": 1},
                      evaluation={"test": "all"})  # the healthy trial tests itself: no test-phase process
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = subprocess.run([sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "run", str(spec),
                          "--name", "nan", "--tracking-uri", uri, "--address", ray_address], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 1, log[-4000:]
    assert "2 trials: 1 complete, 0 stopped early, 1 failed" in out.stdout, out.stdout[-2000:]
    failed_lines = [line for line in out.stdout.splitlines() if line.startswith("[contrasweep] failed: ")]
    assert len(failed_lines) == 1 and "TrainingDiverged: train/loss is nan at step" in failed_lines[0], failed_lines
    # named as its trial lines name it (not by Tune's id), with the file that holds its traceback
    assert failed_lines[0].startswith("[contrasweep] failed: ce lr=1 · seed=0: TrainingDiverged: "), failed_lines
    traceback_file = Path(failed_lines[0].rsplit("(traceback: ", 1)[1].rstrip(")"))
    assert traceback_file.name == "error.txt" and "TrainingDiverged" in traceback_file.read_text(), traceback_file
    assert json.loads((tmp_path / "sweeps" / "nan" / "sweep.json").read_text())["status"] == "failed"

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tests")
    trials = client.search_runs([experiment.experiment_id], "tags.`contrasweep.kind` = 'trial'")
    by_lr = {float(r.data.params["hp.lr"]): r for r in trials}
    assert set(by_lr) == {1.0, 1.0e-3}, [r.data.params for r in trials]
    diverged, healthy = by_lr[1.0], by_lr[1.0e-3]
    assert "test/accuracy" in healthy.data.metrics and "test/accuracy" not in diverged.data.metrics
    assert (diverged.info.status, diverged.data.tags["contrasweep.outcome"]) == ("FAILED", "failed")
    assert "TrainingDiverged: train/loss is nan at step" in diverged.data.tags["contrasweep.error"]
    step = int(diverged.data.tags["contrasweep.error_step"])
    assert f"at step {step} " in diverged.data.tags["contrasweep.error"]
    assert (healthy.info.status, healthy.data.tags["contrasweep.outcome"]) == ("FINISHED", "complete")

    # the retry did not train again: each finite epoch reported once, the second failure at once
    [trial_dir] = [d for d in (tmp_path / "sweeps" / "nan" / "tune").glob("run_trial_*")
                   if json.loads((d / "params.json").read_text())["hp"]["lr"] == 1.0]
    epochs = [json.loads(line)["epoch"] for line in (trial_dir / "result.json").read_text().splitlines()]
    steps_per_epoch = 20 // 4  # few-shot k = 4 × 5 BBC topics, batch 4
    assert epochs == list(range(1, len(epochs) + 1)), epochs
    assert (step - 1) // steps_per_epoch + 1 == len(epochs) + 1, (epochs, step)  # it diverged in the next epoch
    errors = (trial_dir / "error.txt").read_text()
    assert "Failure # 2" in errors and "not trained again" in errors, errors[-2000:]
    steps = [m.step for m in client.get_metric_history(diverged.info.run_id, "train/loss")]
    assert steps == epochs  # MLflow holds each finite epoch once
    every = client.search_runs([experiment.experiment_id])
    print(f"\n[nan trial] MLflow runs {sorted((r.data.tags.get('contrasweep.kind'), r.info.status) for r in every)}")
