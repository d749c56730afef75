"""A non-finite validation value is never the best (issue 69, point 5): the first finite one
is, whatever came before it; a trial whose objective is non-finite at every validated epoch
fails, saying so, instead of keeping epoch 1's weights as its "best" and testing them
(``trainables.checkpointing.BestTracker``, ``trainables.loop``; no Ray)."""

from __future__ import annotations

import math
import traceback

import pytest

from trainables.checkpointing import BestTracker
from trainables.checkpoints import StateFolder
from trainables.errors import ObjectiveNotFinite, TrainingDiverged
from trainables.loop import train
from trainables.sessions import LocalSession

from crash import CrashAfter, PruningSession
from helpers import loop_config, toy_tables

NAN, INF = float("nan"), float("inf")


def feed(tracker: BestTracker, values: list[float], first: int = 1) -> list[bool]:
    return [tracker.update({"epoch": epoch, "val/x": value, "val/y": 10.0 * epoch})
            for epoch, value in enumerate(values, first)]


@pytest.mark.parametrize("mode, values, improved, best, epoch", [
    ("max", [NAN, 0.4, NAN, 0.6, 0.5, INF], [False, True, False, True, False, False], 0.6, 4),
    ("min", [NAN, -INF, 0.4, NAN, 0.2, 0.3], [False, False, True, False, True, False], 0.2, 5),
])
def test_a_non_finite_value_is_never_the_best_the_first_finite_one_is(mode, values, improved, best, epoch):
    tracker = BestTracker("val/x", mode)
    assert feed(tracker, values) == improved
    assert (tracker.best_value, tracker.best_epoch) == (best, epoch)
    assert tracker.best_metrics == {"best/val/x": best, "best/val/y": 10.0 * epoch, "best/epoch": epoch}
    assert tracker.failure() is None  # a finite best: nothing to fail for


@pytest.mark.parametrize("mode", ["max", "min"])
def test_only_non_finite_values_leave_no_best_and_a_failure_that_says_why(mode):
    tracker = BestTracker("val/x", mode)
    assert feed(tracker, [NAN, NAN, NAN]) == [False, False, False]
    assert (tracker.best_value, tracker.best_epoch, tracker.best_metrics) == (None, None, {})
    failure = tracker.failure()
    assert isinstance(failure, ObjectiveNotFinite) and isinstance(failure, TrainingDiverged)
    assert str(failure).startswith("val/x was NaN at every one of its 3 validated epochs (1, 2, 3): ")
    mixed = BestTracker("val/x", mode)
    feed(mixed, [NAN, INF, -INF])
    assert str(mixed.failure()).startswith("val/x was not finite (nan, inf, -inf) at every one of its 3 validated epochs")
    assert BestTracker("val/x", mode).failure() is None  # never validated yet: nothing to say


def test_a_state_saved_with_a_nan_best_loads_as_no_best_yet():
    """A resume state written before issue 69 holds a NaN best from epoch 1 (``value > nan``
    was never true after it): it loads as no best, and the next finite value is the best."""
    old = {"best_value": NAN, "best_metrics": {"best/val/x": NAN, "best/val/y": 10.0, "best/epoch": 1}}
    tracker = BestTracker("val/x", "max")
    tracker.load(old)
    assert (tracker.best_value, tracker.best_epoch, tracker.best_metrics) == (None, None, {})
    assert tracker.update({"epoch": 2, "val/x": 0.1}) and tracker.best_epoch == 2
    # the epochs known to have been non-finite travel with the state
    again = BestTracker("val/x", "max")
    again.load(old)
    feed(again, [NAN, NAN], first=2)  # resumed after epoch 1
    assert str(again.failure()).startswith("val/x was NaN at every one of its 3 validated epochs (1, 2, 3)")
    round_trip = BestTracker("val/x", "max")
    round_trip.load(again.state())
    assert str(round_trip.failure()) == str(again.failure())


@pytest.mark.parametrize("mode, values, best", [("max", [NAN, 0.3, INF, 0.5, 0.4], 0.5),
                                                ("min", [NAN, 0.3, -INF, 0.2, 0.4], 0.2)])
def test_the_sweeps_objective_never_prefers_a_non_finite_value(mode, values, best, tmp_path):
    """The driver's side keeps the same rule (``contrasweep.spec.objective.Objective``): the
    tracker's record of a trial's best value (``tracking.json``'s ``best_value``, the console's
    "best …" and the sweep run's live number) is its best finite value, not a NaN epoch 1's."""
    from contrasweep.spec.objective import Objective
    from contrasweep.spec.static import SweepStatic
    from contrasweep.tracking.tracker import MlflowTracker

    objective = Objective("val/accuracy", mode)
    assert objective.better(NAN, None) and objective.better(0.1, NAN) and not objective.better(NAN, 0.1)
    assert objective.best(values) == best and math.isnan(objective.best([NAN, NAN]))

    class Trial:
        trial_id, config, status, run_metadata = "t", {"hp": {"lr": 1e-3}}, "RUNNING", None

    (tmp_path / "sweep").mkdir()
    tracker = MlflowTracker(tmp_path / "sweep", f"sqlite:///{tmp_path / 'mlflow.db'}", "tests", "swp", {"method": "ce"},
                            {"method": "ce"}, "val/accuracy", mode, static=SweepStatic(method="ce"))
    tracker.setup()
    trial = Trial()
    tracker.on_trial_start(0, [trial], trial)
    for epoch, value in enumerate(values, 1):
        tracker.on_trial_result(0, [trial], trial, {"epoch": epoch, "val/accuracy": value, "timestamp": 1_700_000_000})
    trial.status = "TERMINATED"
    tracker.on_trial_complete(0, [trial], trial)
    tracker.on_experiment_end([trial])
    from contrasweep.folder.record import read

    assert read(tmp_path / "sweep" / "tracking.json")["trials"]["t"]["best_value"] == best


def nan_validation(monkeypatch, epochs: set[int]):
    """The method's validation accuracy is NaN at ``epochs`` (as ``val/sts_spearman`` is when
    every cosine is the same); its other metrics and the test split stay as they are."""
    from trainables.base import Method

    original = Method.evaluate

    def evaluate(self, context, split):
        out = original(self, context, split)
        if split == "validation" and context.epoch in epochs:
            out["accuracy"] = NAN
        return out

    monkeypatch.setattr(Method, "evaluate", evaluate)


def test_a_nan_first_epoch_is_not_kept_as_the_best(tiny_model_dir, tmp_path, monkeypatch):
    nan_validation(monkeypatch, {1})
    session = PruningSession(str(tmp_path / "state"))
    train(loop_config(tiny_model_dir, epochs=4, lr=3e-3), toy_tables(tiny_model_dir), session)
    finite = {r["epoch"]: r["val/accuracy"] for r in session.reports if not math.isnan(r["val/accuracy"])}
    best_epoch = max(finite, key=lambda e: (finite[e], -e))
    last = session.reports[-1]
    assert "best/epoch" not in session.reports[0]  # no best after a NaN epoch 1 alone
    assert (last["best/epoch"], last["best/val/accuracy"]) == (best_epoch, finite[best_epoch])
    assert "test/accuracy" in last and StateFolder(session.state_dir).failure() is None
    assert StateFolder(session.state_dir).names("best") == [f"best-e{best_epoch:04d}"]


def test_a_trial_whose_objective_is_nan_at_every_epoch_fails_with_the_reason_recorded(tiny_model_dir, tmp_path,
                                                                                       monkeypatch):
    """NaN at each of 4 epochs, across a kill after epoch 2 and a resume: the trial reports
    every epoch (no best/*, no test evaluation of weights no epoch earned), then fails with
    ``ObjectiveNotFinite`` naming the metric and all 4 epochs; the state folder keeps the
    failure, so a retry fails at once; the tracker's ``contrasweep.error`` is that line."""
    from contrasweep.tracking.rows import failure_tags

    nan_validation(monkeypatch, {1, 2, 3, 4})
    data = toy_tables(tiny_model_dir, n_per_class=8)
    config = loop_config(tiny_model_dir, epochs=4, checkpoint_every=1)
    first = CrashAfter(str(tmp_path / "state"), 2)
    with pytest.raises(RuntimeError, match="killed"):
        train(config, data, first)
    resumed = LocalSession(str(tmp_path / "state"), resume_from=first.checkpoints[-1])
    with pytest.raises(ObjectiveNotFinite) as raised:
        train(config, data, resumed)
    message = str(raised.value)
    assert message.startswith("val/accuracy was NaN at every one of its 4 validated epochs (1, 2, 3, 4): "), message
    reports = first.reports + resumed.reports
    assert [r["epoch"] for r in reports] == [1, 2, 3, 4]
    assert not [k for r in reports for k in r if k.startswith(("best/", "test/"))]
    folder = StateFolder(resumed.state_dir)
    assert folder.failure() == {"error": "ObjectiveNotFinite", "message": message, "epoch": 4}
    assert folder.names("best") == []  # no weights kept as "best"

    retry = LocalSession(str(tmp_path / "state"), resume_from=resumed.checkpoints[-1])  # Tune's max_failures
    with pytest.raises(ObjectiveNotFinite, match="an earlier attempt of this trial; not trained again"):
        train(config, data, retry)
    assert retry.reports == []

    class Errored:  # what the tracker reads of a Tune trial that raised: its error file
        error_file = str(tmp_path / "error.txt")

    (tmp_path / "error.txt").write_text("Failure # 1\n" + "".join(traceback.format_exception(raised.value)))
    tags = failure_tags(Errored())
    assert tags == {"contrasweep.error": f"trainables.errors.ObjectiveNotFinite: {message}"}, tags


NAN_METHOD = '''
import torch
import torch.nn.functional as F
from torch import nn
from trainables.base import Method


class NanAccuracy(Method):
    """CE whose validation accuracy is NaN (as a Spearman correlation of constant cosines is)."""

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        self.classifier = nn.Linear(encoder.hidden_size, num_labels)

    def training_step(self, batch):
        return {"loss": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])}

    @torch.no_grad()
    def predict(self, batch):
        return self.classifier(self.encode(batch)[0])

    def evaluate(self, context, split):
        out = super().evaluate(context, split)
        return {**out, "accuracy": float("nan")} if split == "validation" else out
'''


@pytest.mark.slow
def test_a_sweep_fails_the_trial_whose_objective_is_never_finite(ray_address, tiny_model_dir, cache_dir, tmp_path):
    """Through the CLI, attached to the suite's Ray: a user's method whose val/accuracy is NaN at
    both epochs. The trial is FAILED in MLflow with ``contrasweep.error`` naming the metric and
    its 2 epochs (outcome failed, no test metric, each epoch logged once), in the console
    summary, and in sweep.json; its retry (max_failures 1) fails at once; exit status 1."""
    import json
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    from conftest import write_spec

    (tmp_path / "nan_method.py").write_text(NAN_METHOD)
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, method="nan_method.py:NanAccuracy", reported={},
                      grid={"lr": [1.0e-3]}, fixed={"epochs": 2, "batch_size": 8, "warmup_ratio": 0.0},
                      sweep={"seeds": [0], "scheduler": "none", "max_concurrent": 1, "max_failures": 1},
                      evaluation={"test": "all"})
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = subprocess.run([sys.executable, "-m", "contrasweep", "--root", str(tmp_path / "sweeps"), "run", str(spec),
                          "--name", "nanval", "--tracking-uri", uri, "--address", ray_address, "--no-tsne"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 1, log[-4000:]
    assert "1 trial: 0 complete, 0 stopped early, 1 failed" in out.stdout, out.stdout[-2000:]
    reason = "ObjectiveNotFinite: val/accuracy was NaN at every one of its 2 validated epochs (1, 2): "
    failed = [line for line in out.stdout.splitlines() if line.startswith("[contrasweep] failed: ")]
    assert len(failed) == 1 and reason in failed[0], failed
    assert json.loads((tmp_path / "sweeps" / "nanval" / "sweep.json").read_text())["status"] == "failed"

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tests")
    [trial] = client.search_runs([experiment.experiment_id], "tags.`contrasweep.kind` = 'trial'")
    assert (trial.info.status, trial.data.tags["contrasweep.outcome"]) == ("FAILED", "failed")
    assert reason in trial.data.tags["contrasweep.error"], trial.data.tags["contrasweep.error"]
    assert "contrasweep.error_step" not in trial.data.tags
    assert not [k for k in trial.data.metrics if k.startswith(("test/", "best/"))], sorted(trial.data.metrics)
    assert [m.step for m in client.get_metric_history(trial.info.run_id, "train/loss")] == [1, 2]
    [trial_dir] = (tmp_path / "sweeps" / "nanval" / "tune").glob("run_trial_*")
    errors = (trial_dir / "error.txt").read_text()
    assert "Failure # 2" in errors and "not trained again" in errors, errors[-2000:]
