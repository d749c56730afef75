"""The generic loop on a learnable toy task with a tiny random BERT (no Ray)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from trainables.checkpoints import StateFolder, load_weights, resume_name, weights_file
from trainables.loop import load_trained, train
from trainables.sessions import LocalSession

import crash
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


class CrashAfter(crash.CrashAfter):
    """A session whose process 'dies' right after the n-th epoch was reported."""

    error = Crash


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


@pytest.mark.parametrize("method", ["ce", "supcl_seq"])
def test_gradient_checkpointing_trains_the_same_steps(method, tiny_model_dir, tmp_path):
    """Hugging Face's gradient checkpointing recomputes the encoder's activations in the backward
    pass, replaying dropout's random state and, for SupCL-Seq's views, each dropout rate as it was
    in the forward pass: the same losses, weights and validation as without."""
    from types import SimpleNamespace

    from trainables.errors import SpecError
    from trainables.loop import checkpoint_activations

    data = toy_tables(tiny_model_dir)
    reports = []
    for on in (False, True):
        s = LocalSession(str(tmp_path / f"gc{on}"))
        extra = {"dropouts": [0.0, 0.1, 0.3]} if method == "supcl_seq" else {}
        train({**loop_config(tiny_model_dir, epochs=2, gradient_checkpointing=on, **extra), "method": method}, data, s)
        reports.append(s.reports)
    assert all(a["train/loss"] > 0 for a in reports[0])
    for plain, checkpointed in zip(*reports):
        for key in ("train/loss", "val/accuracy", "val/macro_f1"):
            assert checkpointed[key] == pytest.approx(plain[key], abs=1e-5)
    from trainables.loop import build_method

    built = [build_method(loop_config(tiny_model_dir, gradient_checkpointing=on), 2).encoder.backbone for on in (False, True)]
    assert [b.is_gradient_checkpointing for b in built] == [False, True]
    with pytest.raises(SpecError, match="gradient_checkpointing=true is not allowed for Module"):
        checkpoint_activations(SimpleNamespace(backbone=torch.nn.Module()))


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


@pytest.fixture
def steps_taken(monkeypatch):
    """Every optimiser step's batch (its input ids, in order), counted at ``TrainStep``."""
    from trainables.step import TrainStep

    taken = []
    original = TrainStep.__call__

    def counted(self, batch):
        taken.append(batch["input_ids"].clone())
        return original(self, batch)

    monkeypatch.setattr(TrainStep, "__call__", counted)
    return taken


@pytest.mark.parametrize("max_steps, per_epoch", [(4, [4]), (12, [6, 6]), (14, [6, 6, 2])])
def test_max_steps_trains_exactly_that_many_optimiser_steps(max_steps, per_epoch, steps_taken, tiny_model_dir, tmp_path):
    """48 rows in batches of 8 (6 steps an epoch): ``max_steps`` overrides ``epochs`` (1 here) as
    Hugging Face's Trainer does: ceil(max_steps / 6) epochs, the last cut after the steps left
    (fewer than one epoch; a multiple of an epoch; not one), the batches those of whole epochs
    in order, ``train/steps`` the steps so far, and the linear schedule at 0 after the last step."""
    data = toy_tables(tiny_model_dir)
    session = LocalSession(str(tmp_path / "a"))
    train(loop_config(tiny_model_dir, epochs=1, max_steps=max_steps, warmup_ratio=0.25), data, session)
    assert len(steps_taken) == max_steps
    assert [r["epoch"] for r in session.reports] == list(range(1, len(per_epoch) + 1))
    assert [r["train/steps"] for r in session.reports] == [sum(per_epoch[: i + 1]) for i in range(len(per_epoch))]
    assert session.reports[-1]["lr"] == pytest.approx(0.0) and all(r["lr"] > 0 for r in session.reports[:-1])
    assert "test/accuracy" in session.reports[-1]  # the cut epoch is the trial's last
    whole = list(steps_taken)
    steps_taken.clear()
    train(loop_config(tiny_model_dir, epochs=3), data, LocalSession(str(tmp_path / "b")))  # the same batch order
    assert all(torch.equal(a, b) for a, b in zip(whole, steps_taken[:max_steps]))


def test_epochs_for_resolves_max_steps_as_the_loop_does():
    from trainables.params import epochs_for, steps_in_epoch, steps_per_epoch, total_steps

    assert steps_per_epoch(48, 8) == 6 and steps_per_epoch(20, 16) == 2 and steps_per_epoch(7, 8) == 1
    assert epochs_for({"epochs": 10}, 48) == 10 and epochs_for({}, 48) == 10  # max_steps 0 (default): epochs decides
    assert epochs_for({"epochs": 10, "max_steps": 0, "batch_size": 8}, 48) == 10
    assert [epochs_for({"epochs": 1, "max_steps": n, "batch_size": 8}, 48) for n in (1, 6, 7, 12, 14)] == [1, 1, 2, 2, 3]
    # the few-shot case: N = 20 and N = 100 in batches of 16 train the same 200 steps
    assert epochs_for({"max_steps": 200, "batch_size": 16}, 20) == 100 and epochs_for({"max_steps": 200, "batch_size": 16}, 100) == 29
    assert total_steps({"epochs": 3, "batch_size": 8}, 20) == 9 and total_steps({"max_steps": 14, "batch_size": 8}, 48) == 14
    assert [steps_in_epoch({"max_steps": 14, "batch_size": 8}, 48, e) for e in (1, 2, 3, 4)] == [6, 6, 2, 0]
    assert [steps_in_epoch({"epochs": 2, "batch_size": 8}, 20, e) for e in (1, 2, 3)] == [3, 3, 0]


def test_a_max_steps_trial_resumed_mid_way_trains_the_same_steps(steps_taken, tiny_model_dir, tmp_path):
    """Killed after epoch 2 of 3 (6 + 6 + 2 steps), resumed from its resume state: it trains the 2
    steps left on the restored schedule and ends where an uninterrupted trial ends."""
    data = toy_tables(tiny_model_dir)
    config = loop_config(tiny_model_dir, epochs=1, max_steps=14, warmup_ratio=0.25, checkpoint_every=1)
    first = CrashAfter(str(tmp_path / "a"), 2)
    with pytest.raises(Crash):
        train(config, data, first)
    resumed = LocalSession(str(tmp_path / "b"), resume_from=first.checkpoints[-1])
    train(config, data, resumed)
    assert len(steps_taken) == 14 and [r["epoch"] for r in resumed.reports] == [3]
    assert resumed.reports[-1]["train/steps"] == 14 and resumed.reports[-1]["lr"] == pytest.approx(0.0)
    interrupted = list(steps_taken)
    steps_taken.clear()
    straight = LocalSession(str(tmp_path / "c"))
    train(config, data, straight)
    assert len(steps_taken) == 14 and all(torch.equal(a, b) for a, b in zip(interrupted, steps_taken))
    for key in ("train/loss", "train/steps", "val/accuracy", "best/val/accuracy", "test/accuracy", "best/epoch"):
        assert straight.reports[-1][key] == pytest.approx(resumed.reports[-1][key], abs=1e-5)
    last = [load_weights(weights_file(StateFolder(s.state_dir).path(resume_name(3)))) for s in (resumed, straight)]
    assert last[0].keys() == last[1].keys() and all(torch.allclose(last[0][k], last[1][k], atol=1e-6) for k in last[0])


def test_a_reported_pointer_is_written_in_the_trials_state_folder(tiny_model_dir, tmp_path, monkeypatch):
    """Issue 57: the pointer a report hands Tune was a ``contrasweep-pointer-*`` in the system's
    temp folder, removed after the report: a trial process Tune ended inside its report left it
    (400 here). It is now ``.pointer.tmp`` in the trial's state folder, where a leftover is
    removed by the next report or prune."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    seen = []

    class Watching(LocalSession):
        def report(self, metrics, checkpoint_dir):
            if checkpoint_dir is not None:
                seen.append(checkpoint_dir)
                (Path(checkpoint_dir).parent / ".pointer.tmp" / "stale").mkdir(exist_ok=True)  # what a kill would leave
            super().report(metrics, checkpoint_dir)

    session = Watching(str(tmp_path / "trial"))
    train(loop_config(tiny_model_dir, epochs=2, checkpoint_every=1), toy_tables(tiny_model_dir), session)
    assert len(seen) == 2 and all(Path(p) == Path(session.state_dir) / ".pointer.tmp" for p in seen)
    assert list(folder.iterdir()) == [] and not (Path(session.state_dir) / ".pointer.tmp").exists()


def test_a_session_that_never_writes_leaves_no_temporary_folder(tmp_path, monkeypatch):
    """Issue 57: every trial's TuneSession made an empty ``contrasweep-ckpt-*`` in the system's
    temp folder (2,342 after a day of sweeps); a LocalSession makes one only when it writes."""
    import tempfile

    from trainables.sessions import TuneSession

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    sessions = [TuneSession(str(tmp_path / "state")), LocalSession()]
    assert [s.all_gather(1) for s in sessions] == [[1], [1]] and list(folder.iterdir()) == []
    assert sessions[0].state_dir == str(tmp_path / "state") and list(folder.iterdir()) == []
    assert sessions[1].state_dir.startswith(str(folder / "contrasweep-ckpt-"))  # written to: made then
    assert len(list(folder.iterdir())) == 1
