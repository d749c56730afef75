"""``eval_every``: an epoch between two validations only trains; the next report covers every
epoch since the last (trainables.report_window, trainables.loop), resume states fall on
validated epochs (trainables.checkpointing), and ``plan`` counts validations (trainables.params.validated_epochs,
resume_states; the verdict's union bound: tests/test_chance.py). No Ray."""

from __future__ import annotations

import json
import os

import pytest

from trainables.checkpoints import META_FILE
from trainables.loop import train
from trainables.params import is_validated, resume_states, validated_epochs
from trainables.report_window import STEP_METRICS
from trainables.sessions import LocalSession

from helpers import loop_config, toy_tables
from test_checkpoints import CrashAfter, PruningSession


def test_validated_epochs_and_the_resume_states_they_carry():
    assert validated_epochs(7, 2) == [2, 4, 6, 7] and validated_epochs(6, 3, [1, 5, 9]) == [1, 3, 5, 6]
    assert validated_epochs(5, 1) == [1, 2, 3, 4, 5]
    # the loop's question each epoch and plan's list agree
    for epochs, every, pauses in ((7, 2, ()), (6, 3, (1, 5, 9)), (50, 10, (1, 2, 4, 8, 16, 32))):
        assert [e for e in range(1, epochs + 1) if is_validated(e, epochs, every, pauses)] == validated_epochs(epochs, every, pauses)
    # eval_every 1: a state every checkpoint_every epochs, at the pauses and the last (unchanged)
    assert resume_states(10, 5, [], 1) == 2 and resume_states(7, 5, [4], 1) == 3
    # eval_every 2, checkpoint_every 3, 7 epochs: validated 2, 4, 6, 7; states at 4 (3 passed), 6, 7
    assert resume_states(7, 3, [], 2) == 3
    assert resume_states(100, 5, [], 10) == 10 and resume_states(100, 5, [25], 10) == 11


def test_an_unvalidated_epoch_trains_as_a_validated_one_and_the_next_report_covers_it(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    every = LocalSession(str(tmp_path / "every"))
    train(loop_config(tiny_model_dir, epochs=5), data, every)
    sparse = LocalSession(str(tmp_path / "sparse"))
    train(loop_config(tiny_model_dir, epochs=5, eval_every=2), data, sparse)
    assert [r["epoch"] for r in sparse.reports] == [2, 4, 5]
    assert [r["evaluations"] for r in sparse.reports] == [1, 2, 3]
    assert [r["evaluations"] for r in every.reports] == [1, 2, 3, 4, 5]
    by_epoch = {r["epoch"]: r for r in every.reports}
    for report in sparse.reports:  # the same weights at the same epoch: validation does not touch training
        same = by_epoch[report["epoch"]]
        assert report["val/accuracy"] == pytest.approx(same["val/accuracy"], abs=1e-6)
        assert report["train/steps"] == same["train/steps"]
    # the window's mean loss: over every step since the last report (epochs 1-2: both epochs' steps)
    per_epoch = every.reports[0]["train/steps"]
    window = (by_epoch[1]["train/loss"] + by_epoch[2]["train/loss"]) / 2
    assert sparse.reports[0]["train/loss"] == pytest.approx(window, rel=1e-5) and per_epoch > 0
    # the best of the validated epochs only (its test accuracy: that epoch's weights)
    best = max((2, 4, 5), key=lambda e: (by_epoch[e]["val/accuracy"], -e))
    assert sparse.reports[-1]["best/epoch"] == best
    assert sparse.reports[-1]["best/val/accuracy"] == pytest.approx(by_epoch[best]["val/accuracy"], abs=1e-6)


def test_the_step_series_of_every_epoch_reaches_the_report(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    session = LocalSession(str(tmp_path / "moo"))
    hp = {"epochs": 3, "eval_every": 3, "moo": "ls", "temperature": 0.3, "lam": 0.3, "r1": 0.1}
    train({**loop_config(tiny_model_dir, **hp), "method": "scl_moo"}, data, session)
    assert [r["epoch"] for r in session.reports] == [3]
    series = session.reports[0][STEP_METRICS]
    steps = session.reports[0]["train/steps"]
    assert {k: [s for s, _ in v] for k, v in series.items()} == {k: list(range(1, steps + 1)) for k in series}


def test_the_scheduler_pause_epochs_are_validated(tiny_model_dir, tmp_path):
    session = LocalSession(str(tmp_path / "paused"))
    train({**loop_config(tiny_model_dir, epochs=6, eval_every=4), "checkpoint_at": [1, 3]}, toy_tables(tiny_model_dir), session)
    assert [r["epoch"] for r in session.reports] == [1, 3, 4, 6]


def test_a_kill_resumes_from_the_last_validated_state_exactly(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    config = loop_config(tiny_model_dir, epochs=7, eval_every=2, checkpoint_every=3)
    killed = CrashAfter(str(tmp_path / "a"), 2)
    with pytest.raises(RuntimeError):
        train(config, data, killed)
    assert [r["epoch"] for r in killed.reports] == [2, 4]
    assert [json.load(open(os.path.join(c, META_FILE)))["epoch"] for c in killed.checkpoints] == [4]
    resumed = PruningSession(str(tmp_path / "a"), resume_from=killed.checkpoints[-1])
    train(config, data, resumed)
    assert [r["epoch"] for r in resumed.reports] == [6, 7] and [r["evaluations"] for r in resumed.reports] == [3, 4]
    assert [json.load(open(os.path.join(c, META_FILE)))["epoch"] for c in resumed.checkpoints] == [6, 7]
    straight = PruningSession(str(tmp_path / "b"))
    train(config, data, straight)
    for key in ("train/loss", "val/accuracy", "best/val/accuracy", "best/epoch", "test/accuracy"):
        assert resumed.reports[-1][key] == pytest.approx(straight.reports[-1][key], abs=1e-5)
