"""What the sweep folder keeps of the trials that ended, while the sweep runs (docs/architecture.md,
"What a sweep keeps"): a paper's grid of 15,000 trials must not hold 15,000 models on disk.

No scheduler resumes a trial that ended (``resume`` ends a restored copy from the record), so
its resume states go as it ends (``artifacts.Artifacts.settle``). Its best weights stay while
they can still be selected, kept as an MLflow model or reported:

* while its repeat group is open (a repeat still to end: the group's mean may yet select it);
* while the group is among its setting's ``max(keep_models, 1)`` best complete groups by mean
  validation value so far (``aggregate.rank``: ties as the selection breaks them), which holds
  the selected one and the models the test phase keeps (``kept``);
* for the grid's reported point (``SweepStatic.reported_config``), a group the budget cut short
  (an extension may complete it) and a group with a failed repeat (``resume`` retries that one).

Otherwise the whole state folder goes and the record marks the trial ``weights: pruned``: the
test phase does not evaluate it, and a report draws what it would have shown on test on
validation, labelled so (``dashboards.source.SweepRecord.figure_metric``). Sensitivity slices
are shown on test where their weights are among those kept. With ``keep_models: all`` each
model is logged as its trial ends and its folder goes at once (the test phase and the report
read the model's weights).

The ranking is one sorted list per setting, changed once per group that closes: the work per
trial end does not grow with the sweep. ``Pruner`` reads the record once per driver start and
finishes what a killed driver left undone.

May import: ``contrasweep.folder``, ``contrasweep.spec``, ``contrasweep.tracking.aggregate``,
``contrasweep.tracking.store`` (outcome names); ``trainables`` (the state folder's removal).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

from contrasweep.folder.record import MODEL_LOGGED, TrackingState
from contrasweep.folder.relocation import here
from contrasweep.spec.identity import group_of, setting_label
from contrasweep.spec.objective import Objective
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.aggregate import rank, selection_key
from contrasweep.tracking.store import BUDGET_CUT
from trainables.checkpoints import remove_state

PRUNED = "pruned"  # a trial entry's "weights": its state folder went while the sweep ran


class Pruner:
    """``group_size``: the repeats a group runs and ``members``: the record's entries of a group
    (``runs.RunTree.group_size`` and ``members``); ``dropped``: the groups a race or the budget
    dropped (``runs.RunTree.dropped``)."""

    def __init__(
        self,
        state: TrackingState,
        static: SweepStatic,
        group_size: Callable[[str], int],
        members: Callable[[str], list[dict]],
        dropped: dict[str, dict],
    ):
        self.state, self.static, self.group_size, self.members = state, static, group_size, members
        self.key = selection_key(static.metric)
        self.sign = Objective(static.metric, static.mode).sign
        self.models_logged = static.keep_models == "all"
        self.keep = 1 if self.models_logged else max(1, int(static.keep_models))
        self.reported = (
            {group_of(static.reported_config, setting_label(v)) for v in static.variants}
            if static.reported_config
            else set()
        )
        self.ranked: dict[str, list[tuple]] = {}  # setting -> [(rank, group)], best first
        self.rank_of: dict[str, tuple[str, tuple]] = {}  # group -> (setting, rank)
        groups = {e["group"] for e in state.trials.values() if e.get("group")}
        for group in groups:
            self._settle_group(group, dropped, prune=False)
        for group in groups:  # what a driver killed mid-way left
            if self._closed(group, dropped) and not self._kept(group, dropped):
                self._prune(group)

    def trial_ended(self, entry: dict, dropped: dict[str, dict]) -> None:
        """After the record and MLflow have the trial's end: its group's weights kept or pruned."""
        group = entry.get("group")
        if not group:
            return
        if self.models_logged and entry.get("model") == MODEL_LOGGED and entry.get("state_dir"):
            remove_state(here(entry["state_dir"]))  # MLflow holds its weights: one copy
        self._settle_group(group, dropped, prune=True)

    # -- the rule ---------------------------------------------------------------------------
    def _closed(self, group: str, dropped: dict[str, dict]) -> bool:
        members = self.members(group)
        expected = len(members) if group in dropped else self.group_size(group)
        return len(members) >= expected and all("status" in e for e in members)

    def _exempt(self, group: str, dropped: dict[str, dict]) -> bool:
        return (
            group in self.reported
            or dropped.get(group, {}).get("outcome") == BUDGET_CUT
            or any(e.get("outcome") == "failed" for e in self.members(group))
        )

    def _mean(self, group: str) -> float | None:
        values = []
        for entry in self.members(group):
            value = (entry.get("final") or {}).get(self.key, entry.get("best_value"))
            if entry.get("outcome") != "complete" or value is None or math.isnan(float(value)):
                return None
            values.append(float(value))
        return sum(values) / len(values) if values else None

    def _settle_group(self, group: str, dropped: dict[str, dict], prune: bool) -> None:
        """A group that closed: ranked if complete, then what fell out of its setting's best pruned."""
        if not self._closed(group, dropped) or self._exempt(group, dropped):
            return
        self._unrank(group)
        mean = self._mean(group) if group not in dropped else None
        if mean is None:  # stopped, eliminated, without a value: never selected
            if prune:
                self._prune(group)
            return
        setting = setting_label(self.static.variant(self.members(group)[0].get("variant", 0)))
        place = (rank(self.sign * mean, group), group)
        rows = self.ranked.setdefault(setting, [])
        at = bisect.bisect(rows, place)
        rows.insert(at, place)
        self.rank_of[group] = (setting, place)
        if not prune:
            return
        if at >= self.keep:
            self._prune(group)
        elif len(rows) > self.keep:
            self._prune(rows[self.keep][1])  # it was the setting's last kept group

    def _unrank(self, group: str) -> None:
        if group in self.rank_of:  # an extension reopened and closed it again: a new mean
            setting, place = self.rank_of.pop(group)
            rows = self.ranked[setting]
            rows.pop(bisect.bisect_left(rows, place))

    def _kept(self, group: str, dropped: dict[str, dict]) -> bool:
        if self._exempt(group, dropped):
            return True
        if group not in self.rank_of:
            return False
        setting, place = self.rank_of[group]
        return bisect.bisect_left(self.ranked[setting], place) < self.keep

    def _prune(self, group: str) -> None:
        if group in self.reported:
            return
        for entry in self.members(group):
            if entry.get("outcome") != "complete" or entry.get("weights") == PRUNED:
                continue
            if entry.get("state_dir"):
                remove_state(here(entry["state_dir"]))
            entry["weights"] = PRUNED
            self.state.save_trial(entry)
