"""The generic loop on a learnable toy task with a tiny random BERT (no Ray)."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.loop import load_trained, train
from trainables.sessions import LocalSession

from helpers import loop_config, toy_tables


def test_loss_decreases_and_metrics_reported(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    session = LocalSession(str(tmp_path / "ckpt"))
    train(loop_config(tiny_model_dir, epochs=8, lr=3e-3), data, session)
    losses = [r["train/loss"] for r in session.reports]
    assert [r["epoch"] for r in session.reports] == list(range(1, 9))
    assert losses[-1] < losses[0] * 0.7, losses
    last = session.reports[-1]
    for key in ("val/accuracy", "val/macro_f1", "val/mcc", "val/f1", "best/val/accuracy", "best/epoch", "train/loss/ce"):
        assert key in last
    assert "test/accuracy" in last  # test metrics of the best validation epoch, after the last
    assert not any("test/accuracy" in r for r in session.reports[:-1])  # ... and never before
    assert last["best/val/accuracy"] == max(r["val/accuracy"] for r in session.reports)


class Crash(Exception):
    pass


class CrashAfter(LocalSession):
    """A session whose process 'dies' right after the n-th epoch was reported."""

    def __init__(self, root, n):
        super().__init__(root)
        self.n = n

    def report(self, metrics, checkpoint_dir):
        super().report(metrics, checkpoint_dir)
        if len(self.reports) == self.n:
            raise Crash


def test_checkpoint_round_trip_and_resume(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    first = CrashAfter(str(tmp_path / "a"), 2)
    with pytest.raises(Crash):
        train(loop_config(tiny_model_dir, epochs=4, checkpoint_every=2), data, first)
    ckpt = first.checkpoints[-1]

    # the saved model predicts exactly what the trained one did
    model = load_trained(ckpt, num_labels=2)
    from trainables.batches import eval_batches, to_device

    _, batch = next(eval_batches(data["tables"]["validation"], 16))
    scores = model.predict(to_device(batch, torch.device("cpu")))
    assert scores.shape == (16, 2) and torch.isfinite(scores).all()

    # resuming from epoch 2 runs epochs 3..4 only and equals an uninterrupted 4-epoch run
    resumed = LocalSession(str(tmp_path / "b"), resume_from=ckpt)
    train(loop_config(tiny_model_dir, epochs=4, checkpoint_every=2), data, resumed)
    assert [r["epoch"] for r in resumed.reports] == [3, 4]
    straight = LocalSession(str(tmp_path / "c"))
    train(loop_config(tiny_model_dir, epochs=4), data, straight)
    for key in ("train/loss", "val/accuracy", "best/val/accuracy", "test/accuracy", "best/epoch"):
        assert straight.reports[-1][key] == pytest.approx(resumed.reports[-1][key], abs=1e-5)
    # cost metrics: trainable parameters, and training seconds that keep counting across the resume
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert all(r["cost/parameters"] == params for r in first.reports + resumed.reports)
    times = [r["cost/train_s"] for r in first.reports + resumed.reports]
    assert all(b > a > 0 for a, b in zip(times, times[1:])), times
    assert times[-1] < sum(r["time/epoch_s"] for r in first.reports + resumed.reports)  # evaluation excluded


def test_seeded_runs_are_identical(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    runs = []
    for i in range(2):
        s = LocalSession(str(tmp_path / f"s{i}"))
        train(loop_config(tiny_model_dir, epochs=1), data, s)
        runs.append(s.reports[-1]["train/loss"])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("schedule", ["linear", "constant", "cosine", "method"])
def test_lr_schedule_after_warmup(schedule, tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir, n_per_class=8)  # 16 rows, batch 8: 2 steps per epoch
    session = LocalSession(str(tmp_path))
    train(loop_config(tiny_model_dir, epochs=2, lr=1e-3, warmup_ratio=0.25, lr_schedule=schedule), data, session)
    lrs = [r["lr"] for r in session.reports]  # the rate after each epoch's last step
    if schedule == "constant":  # warm-up of 1 step (25 % of 4), then 1e-3 for good
        assert lrs == [pytest.approx(1e-3), pytest.approx(1e-3)]
    elif schedule == "cosine":  # step 2 of 4: a third of the way down the half-cosine
        assert lrs[0] == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi / 3))) and lrs[1] == pytest.approx(0.0)
    else:  # linear decay to 0 at the last step ("method": CE's paper schedules linearly)
        assert lrs[0] == pytest.approx(1e-3 * 2 / 3) and lrs[1] == pytest.approx(0.0)
