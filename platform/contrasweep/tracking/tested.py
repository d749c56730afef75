"""The test phase's record and its MLflow side (``evaluation.test: reported``;
docs/architecture.md, "Selection and the test split").

After selection the sweep evaluates the test split for the repeats a report shows
(``aggregate.reported``): each setting's selected configuration and, for a grid, its
sensitivity slices. ``tracking.json`` keeps the phase under ``tests``:

* ``reported``: the trial ids of those repeats (``contrasweep.folder.cleanup`` keeps their best
  weights; the others' go when the sweep finishes);
* ``results``: run id -> ``{"metrics", "logged"}``, each written when its evaluation returns and
  before MLflow, so a driver killed meanwhile neither repeats an evaluation nor loses one;
* ``evaluated``: how many evaluations the phase ran, over every session of the sweep;
* ``pruned``: how many reported repeats it could not evaluate, their weights gone while the
  sweep ran (``contrasweep.tracking.pruning``: a report draws them on validation).

The runs then hold the numbers a trial that tested in its last epoch would hold: ``test/*`` on
the trial run (at its last epoch's step), the configuration run's ``mean/``/``std/`` over its
repeats again, the sweep run's ``best_config/...`` again.

May import: ``contrasweep.tracking``, ``contrasweep.folder.record``; MLflow.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from contrasweep.folder.record import MODEL_LOGGED, TrackingState
from contrasweep.tracking.aggregate import Group, groups_of, reported, summary
from contrasweep.tracking.artifacts import logged_weights
from contrasweep.tracking.pruning import PRUNED
from contrasweep.tracking.rows import metric_entity
from contrasweep.tracking.store import trial_runs

TEST_PREFIX = "test/"


@dataclass
class Due:
    """One repeat whose test split is still to be evaluated."""

    run_id: str
    trial_id: str
    name: str
    variant: int
    state_dir: str | None
    best_epoch: int | None


def has_test(metrics: dict) -> bool:
    return any(k.startswith(TEST_PREFIX) for k in metrics)


class TestRecord:
    """The phase over one MLflow client and the sweep's record."""

    def __init__(self, client, state: TrackingState, metric: str, mode: str):
        self.client, self.state, self.metric, self.mode = client, state, metric, mode
        self.tests = state.data.setdefault("tests", {"reported": [], "results": {}, "evaluated": 0})
        self.found: list[Group] = []  # every group of the sweep, as ``plan`` read them

    @property
    def parent_run_id(self) -> str:
        return self.state.data["parent_run_id"]

    def groups(self) -> list[Group]:
        return groups_of(trial_runs(self.client, self.parent_run_id))

    def plan(self, keys: list[str], slices: bool, evaluate: bool) -> tuple[list[Group], list[Due]]:
        """The reported groups (recorded) and, with ``evaluate``, their complete repeats that
        have no ``test/*`` yet, neither in MLflow nor in the record."""
        self.found = self.groups()  # every group of the sweep, read once (the models kept: runner.test_phase.keep)
        chosen = reported(self.found, self.metric, self.mode, keys, slices)
        by_run = {e["run_id"]: (tid, e) for tid, e in self.state.trials.items()}
        runs = [r["run_id"] for g in chosen for r in g.repeats if r["run_id"] in by_run]
        self.tests["reported"] = [by_run[r][0] for r in runs]
        self.state.save()
        if not evaluate:
            return chosen, []
        due, self.tests["pruned"] = [], 0
        for group in chosen:
            for repeat in group.repeats:
                run_id = repeat["run_id"]
                if repeat["outcome"] != "complete" or has_test(repeat["metrics"]) or run_id in self.tests["results"]:
                    continue
                tid, entry = by_run.get(run_id, (run_id, {}))
                if entry.get("weights") == PRUNED and entry.get("model") != MODEL_LOGGED:
                    self.tests["pruned"] += 1  # its weights went while the sweep ran (tracking.pruning)
                    continue
                due.append(
                    Due(
                        run_id,
                        tid,
                        entry.get("name", run_id),
                        int(entry.get("variant", 0)),
                        entry.get("state_dir"),
                        entry.get("best_epoch"),
                    )
                )
        return chosen, due

    def record(self, run_id: str, metrics: dict[str, float]) -> None:
        """An evaluation's result, kept before MLflow sees it."""
        self.tests["results"][run_id] = {"metrics": metrics, "logged": False}
        self.tests["evaluated"] = int(self.tests.get("evaluated", 0)) + 1
        self.state.save()
        self.log(run_id)

    def log(self, run_id: str, late: bool = False) -> None:
        """``test/*`` (and ``time/test_s``) on the trial run, at its last epoch's step. ``late``:
        a killed driver recorded it and may have logged it just before the kill (between MLflow's
        write and the record's ``logged``): logged again only where MLflow lacks it."""
        result = self.tests["results"][run_id]
        entry = next((e for e in self.state.trials.values() if e["run_id"] == run_id), {})
        step = int(entry.get("last_epoch", 0))
        values = [
            metric_entity(k, v, step=step)
            for k, v in result["metrics"].items()
            if isinstance(v, (int, float)) and not math.isnan(float(v))
        ]
        if values and late and any(m.step == step for m in self.client.get_metric_history(run_id, values[0].key)):
            values = []  # MLflow has this batch (one batch: all of it or none)
        if values:
            self.client.log_batch(run_id, metrics=values)
        result["logged"] = True
        self.state.save()

    def catch_up(self) -> int:
        """Results a killed driver recorded but never logged; returns how many."""
        late = [run_id for run_id, r in self.tests["results"].items() if not r.get("logged")]
        for run_id in late:
            self.log(run_id, late=True)
        return len(late)

    def refresh(self, chosen: list[Group]) -> None:
        """Each reported group's aggregates again, now over its repeats' test numbers too
        (the configuration run's ``mean/``, ``std/``, ``n_repeats``)."""
        configs = self.state.data.get("configs", {})
        for group in chosen:
            run_id = configs.get(group.group)
            if run_id is None or not group.complete:
                continue
            (fresh,) = groups_of([self.client.get_run(r["run_id"]) for r in group.repeats])
            self.client.log_batch(run_id, metrics=[metric_entity(k, v) for k, v in summary(fresh).items()])

    def finish(self) -> None:
        self.tests["done"] = True
        self.state.save()

    def weights_files(self, tracking_uri: str, run_id: str) -> dict[str, bytes] | None:
        """The best weights as the trial's MLflow model keeps them (name -> bytes), for a repeat
        whose state folder no longer has them (dropped when the sweep first finished, before an
        extension chose it); None when the store has none either."""
        import mlflow

        folder = logged_weights(self.client, run_id)
        if folder is None:
            return None
        with tempfile.TemporaryDirectory(prefix="contrasweep-weights-") as tmp:
            local = Path(
                mlflow.artifacts.download_artifacts(
                    run_id=run_id, artifact_path=folder, dst_path=tmp, tracking_uri=tracking_uri
                )
            )
            return {f.name: f.read_bytes() for f in local.iterdir() if f.is_file()}
