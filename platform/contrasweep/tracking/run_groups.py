"""The repeat groups' side of the sweep's run tree (``contrasweep.tracking.runs.RunTree`` derives
from ``RunGroups``): the record's entries by group and by configuration key, a trial run's end,
a group's configuration run closed once its last repeat has ended (mean, std and n; a race's
elimination, a budget's cut, the verdict on its chance level), and at the sweep's end or stop
the runs no trial came back for deleted, the unfinished ones marked KILLED.

May import: ``contrasweep.folder.record``, ``contrasweep.folder.race_record`` (a race's
eliminations), ``contrasweep.folder.budget_record`` (the groups a budget cut short),
``contrasweep.spec`` (the sweep's fixed part), ``contrasweep.tracking.aggregate``,
``contrasweep.tracking.rows``, ``contrasweep.tracking.store``, ``contrasweep.tracking.verdict``
(did a configuration learn).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from contrasweep.folder import budget_record, race_record
from contrasweep.folder.record import TrackingState
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.aggregate import Group, selection_key, summary
from contrasweep.tracking.rows import metric_entity
from contrasweep.tracking.store import (
    BUDGET_CUT,
    ELIMINATED,
    OUTCOME_TAG,
    RACE_BEST_TAG,
    RACE_P_VALUE_TAG,
    RACE_ROUND_TAG,
)
from contrasweep.tracking.verdict import CHANCE_PREFIX, LEARNED_TAG, P_VALUE_TAG, judge_repeats


class RunGroups:
    """What ``RunTree`` keeps of the repeat groups and how it closes them; ``RunTree.__init__``
    sets the attributes below (their meaning: there)."""

    client: Any
    state: TrackingState
    static: SweepStatic
    group_sizes: dict[str, int] | int
    race_file: Path | None
    budget_file: Path | None
    _closed: set[str]
    _index: tuple[dict, dict] | None
    _latest: dict[str, dict[str, tuple]]
    _final: dict[str, dict[str, dict]]

    def _indexed(self) -> tuple[dict, dict]:
        """The record's entries by repeat group and by configuration key, built once per driver
        and kept as trial runs are made: finding a group's repeats does not grow with the sweep."""
        if self._index is None:
            self._index = ({}, {})
            for entry in self.state.trials.values():
                self._add(entry)
        return self._index

    def _add(self, entry: dict) -> None:
        if self._index is not None:
            self._index[0].setdefault(entry.get("group"), []).append(entry)
            self._index[1].setdefault(entry.get("config_key"), []).append(entry)

    def members(self, group: str | None) -> list[dict]:
        """The record's entries of ``group`` (the same dicts: a re-keyed trial keeps its entry)."""
        return self._indexed()[0].get(group, [])

    def _final_metrics(self, members: list[dict]) -> list[dict[str, float]]:
        """Each member's latest metrics: from ``seen`` for runs this process made, else from MLflow."""
        out = []
        for entry in members:
            known = self._latest.get(entry["run_id"])
            out.append(
                {k: v[2] for k, v in known.items()}
                if known is not None
                else dict(self.client.get_run(entry["run_id"]).data.metrics)
            )
        return out

    def group_size(self, group: str) -> int:
        sizes = self.group_sizes
        return sizes if isinstance(sizes, int) else sizes.get(group, 1)

    def end_trial(self, entry: dict, state_dir: str | None, out: dict[str, dict] | None = None) -> None:
        """A trial's run ends as the record says (outcome, last epoch, why it failed, where its
        state folder is), then its group closes if it was the last repeat."""
        tags = {
            OUTCOME_TAG: entry["outcome"],
            "contrasweep.last_epoch": str(entry.get("last_epoch", 0)),
            **entry["pending"]["tags"],
        }
        if state_dir:
            tags["contrasweep.state_dir"] = state_dir  # where resume finds the checkpoint if the artifact is lost
        if entry.get("model_error"):  # its best weights are plain files: no MLflow model could be built
            tags["contrasweep.model_error"] = entry["model_error"][:500]
        from mlflow.entities import RunTag

        self.client.log_batch(entry["run_id"], tags=[RunTag(k, str(v)) for k, v in tags.items()])
        self.client.set_terminated(entry["run_id"], status=entry["status"])
        del entry["pending"]
        self.state.save_trial(entry)
        out = self.dropped() if out is None else out
        self.close_group(entry.get("group"), out)
        self.close_dropped(out)

    def close_dropped(self, out: dict[str, dict] | None = None) -> None:
        """Close every dropped configuration (``dropped``) whose repeats have all ended."""
        out = self.dropped() if out is None else out
        for group in [g for g in out if g not in self._closed]:
            self.close_group(group, out)

    def dropped(self, race: dict | None = None) -> dict[str, dict]:
        """The configurations that run fewer than all their repeats, and why: a race dropped
        them (``race.json``'s ``out``, or ``race``: that journal, where the caller has read it),
        or the budget ended the sweep before their other repeats started (``budget.json``)."""
        race = race_record.read(self.race_file) if race is None and self.race_file else race
        cut = budget_record.cut_groups(self.budget_file) if self.budget_file else {}
        return {**{g: {"outcome": BUDGET_CUT, "ran": n} for g, n in cut.items()}, **(race["out"] if race else {})}

    def not_run(self, trial) -> bool:
        """Whether the budget ended ``trial`` before it started (``budget.json``'s ``not_run``):
        Tune ends it as a trial, and it gets no run."""
        return self.budget_file is not None and trial.relative_logdir in budget_record.not_run(self.budget_file)

    def expected(self, group: str, out: dict[str, dict]) -> int:
        """The repeats a group runs: all of them, or those it had when a race or the budget dropped it."""
        if group in out:
            return len(self.members(group))
        return self.group_size(group)

    def close_group(self, group: str | None, out: dict[str, dict] | None = None) -> None:
        """Once every repeat of a group has ended: its mean, std and n on the configuration run;
        a configuration the race eliminated says so, with the round and the p-value, and one
        the budget cut short says ``budget``."""
        out = self.dropped() if out is None else out
        config_run = self.state.data.get("configs", {}).get(group)
        members = self.members(group)
        if group is None or config_run is None or len(members) < self.expected(group, out):
            return
        if any("status" not in e for e in members):
            return
        from mlflow.entities import RunTag

        found = Group(group, "", "", {}, size=self.group_size(group))
        for entry, metrics in zip(members, self._final_metrics(members)):
            found.add(entry["outcome"], {"metrics": metrics})
        outcome = "complete" if found.complete else ("stopped" if found.outcomes.get("stopped") else "failed")
        tags = {}
        if out.get(group, {}).get("outcome") == ELIMINATED:
            left = out[group]
            outcome = ELIMINATED
            tags = {
                RACE_ROUND_TAG: str(left["round"]),
                RACE_P_VALUE_TAG: f"{left['p_value']:.3g}",
                RACE_BEST_TAG: self.state.data["configs"].get(left["best"], left["best"]),
            }
        elif (
            out.get(group, {}).get("outcome") == BUDGET_CUT
            and set(found.outcomes) == {"complete"}
            and not found.complete
        ):
            outcome = BUDGET_CUT
        metrics = summary(found)
        if outcome in ("complete", ELIMINATED, BUDGET_CUT):  # did it learn? (contrasweep.tracking.verdict)
            judged = self._judge(group, members, found)
            if judged is not None:
                metrics[CHANCE_PREFIX + selection_key(self.static.metric)] = judged.level
                tags.update(
                    {
                        LEARNED_TAG: "yes" if judged.learned else "no",
                        **({} if math.isnan(judged.p_value) else {P_VALUE_TAG: f"{judged.p_value:.3g}"}),
                    }
                )
        self.client.log_batch(
            config_run,
            metrics=[metric_entity(k, v) for k, v in metrics.items()],
            tags=[RunTag(OUTCOME_TAG, outcome), *(RunTag(k, v) for k, v in tags.items())],
        )
        self.client.set_terminated(config_run, status="FINISHED" if outcome != "failed" else "FAILED")
        self._closed.add(group)
        self._final[group] = {entry["run_id"]: r["metrics"] for entry, r in zip(members, found.repeats)}
        for entry in members:
            self._latest.pop(entry["run_id"], None)

    def _judge(self, group: str, members: list[dict], found: Group):
        """The group's verdict against its repeats' chance levels, kept in the record (``verdicts``)."""
        complete = [(e, r["metrics"]) for e, r in zip(members, found.repeats) if r["outcome"] == "complete"]
        variants = [self.static.variant(e.get("variant", 0)) for e, _ in complete]
        judged = judge_repeats(
            [m for _, m in complete], variants, selection_key(self.static.metric), self.static.mode, self.static.alpha
        )
        if judged is not None:
            self.state.data.setdefault("verdicts", {})[group] = judged.record()
            self.state.save_key("verdicts", group)
        return judged

    def close_open_groups(self) -> None:
        """On resume: a group whose last repeat ended just before the stop gets its aggregates."""
        out = self.dropped()
        for group, run_id in self.state.data.get("configs", {}).items():
            run = self.client.get_run(run_id)
            if run.info.status not in ("FINISHED", "FAILED") or OUTCOME_TAG not in run.data.tags:
                self.close_group(group, out)
            else:
                self._closed.add(group)  # closed before the stop: a race's trial ends need not close it again

    def delete_orphans(self, trials) -> None:
        """Runs never re-attached (their trial was lost and not regenerated) go, and the
        configuration runs none of whose repeats is left."""
        known = {t.trial_id for t in trials}
        for tid in [tid for tid, e in self.state.trials.items() if tid not in known and "status" not in e]:
            self.client.delete_run(self.state.trials.pop(tid)["run_id"])
            self._index = None
        live_groups = {e.get("group") for e in self.state.trials.values()}
        for group in list(self.state.data.get("configs", {})):
            if group not in live_groups:
                self.client.delete_run(self.state.data["configs"].pop(group))

    def mark_interrupted(self) -> None:
        """The sweep stopped with trials unfinished (Ctrl-C): their runs and the configuration
        runs of groups still open end KILLED, so that nothing in MLflow claims to be running;
        ``reopen`` on resume sets them RUNNING again."""
        killed = [e["run_id"] for e in self.state.trials.values() if "status" not in e]
        out = self.dropped()
        for group, run_id in self.state.data.get("configs", {}).items():
            members = self.members(group)
            if any("status" not in e for e in members) or len(members) < self.expected(group, out):
                killed.append(run_id)
        for run_id in killed:
            self.client.set_terminated(run_id, status="KILLED")
        self.state.data["interrupted_runs"] = killed
