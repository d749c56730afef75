"""What a finished sweep chose (docs/architecture.md, "Tracking, registry and reports"): each
setting's best configuration (best mean validation metric over complete repeat groups,
``contrasweep.tracking.aggregate.select``) on the sweep run (``best_config/...`` metrics and a
tag naming its configuration run), and that configuration's best repeat in the model registry
(``contrasweep.tracking.models``), once per setting and run.

May import: ``contrasweep.tracking.aggregate``, ``contrasweep.tracking.models``,
``contrasweep.tracking.runs_view``, ``contrasweep.tracking.rows``, ``contrasweep.tracking.store``,
``contrasweep.tracking.verdict`` (a selection that did not learn says so in the registry),
``contrasweep.folder.record``, ``contrasweep.spec``.
"""

from __future__ import annotations

from contrasweep.folder.record import TrackingState
from contrasweep.spec.objective import Objective
from contrasweep.tracking.aggregate import groups_of, select, selection_key, summary
from contrasweep.tracking.models import has_checkpoint, register
from contrasweep.tracking.rows import metric_entity, slug
from contrasweep.tracking.runs_view import best_config_columns, publish
from contrasweep.tracking.store import trial_runs
from contrasweep.tracking.verdict import LEARNED_TAG, Verdict, not_learned_text


class Selection:
    def __init__(self, client, state: TrackingState, sweep_name: str, variants: tuple, metric: str, mode: str):
        """``variants``: the sweep's data variants (``contrasweep.spec.static.VariantStatic``)."""
        self.client, self.state, self.sweep_name = client, state, sweep_name
        self.variants, self.metric, self.mode = variants, metric, mode

    def best_to_parent(self, parent_run_id: str, found: list | None = None) -> None:
        """The parent run holds each setting's best configuration: its aggregates, and a tag
        naming its run; its best repeat goes into the registry. ``found``: the sweep's repeat
        groups where the caller has every one (``RunTree.closed_groups``); else every trial
        run is read back from MLflow, page by page."""
        found = groups_of(trial_runs(self.client, parent_run_id)) if found is None else found
        metric = self.metric[len("best/") :] if self.metric.startswith("best/") else self.metric
        configs = self.state.data.get("configs", {})
        shown = []
        for setting, group in select(found, metric, self.mode).items():
            prefix = f"best_config/{slug(setting)}/" if setting else "best_config/"
            self.client.log_batch(
                parent_run_id, metrics=[metric_entity(prefix + k, v) for k, v in summary(group).items()]
            )
            if setting:  # the unprefixed keys are in the view from the start
                shown += best_config_columns(prefix, metric)
            if group.group in configs:
                self.client.set_tag(
                    parent_run_id,
                    f"contrasweep.best_config{'.' + slug(setting) if setting else ''}",
                    configs[group.group],
                )
            judged = self.state.data.get("verdicts", {}).get(group.group)
            if judged is not None:  # did the selected configuration learn (contrasweep.tracking.verdict)
                self.client.set_tag(
                    parent_run_id,
                    f"{LEARNED_TAG}{'.' + slug(setting) if setting else ''}",
                    "yes" if judged["learned"] else "no",
                )
            self.register(parent_run_id, setting, group, selection_key(metric))
        if shown:
            publish(self.client, self.state.data["experiment_id"], shown)

    def register(self, parent_run_id: str, setting: str, group, metric: str) -> None:
        """The best repeat (by its own validation value) of a setting's best configuration into
        the model registry, under the sweep's name; once per setting and run, so a sweep resumed
        after its end registers nothing twice."""
        candidates = [r for r in group.repeats if metric in r["metrics"]]
        if not candidates:
            return
        sign = Objective(metric, self.mode).sign
        best = max(candidates, key=lambda r: sign * r["metrics"][metric])
        done = self.state.data.setdefault("registered", {})
        if done.get(setting, {}).get("run_id") == best["run_id"] or not has_checkpoint(self.client, best["run_id"]):
            return
        entry = next((e for e in self.state.trials.values() if e["run_id"] == best["run_id"]), {})
        data = self.variants[min(entry.get("variant", 0), len(self.variants) - 1)].data
        description = (
            f"{metric}={best['metrics'][metric]:.4f}; configuration mean over "
            f"{len(group.repeats)} repeats: {group.stats(metric)['mean']:.4f}"
        )
        judged = self.state.data.get("verdicts", {}).get(group.group)
        tags = {} if judged is None else {LEARNED_TAG: "yes" if judged["learned"] else "no"}
        if judged is not None and not judged["learned"]:  # registered as the selection, and saying what it is
            description = f"did not learn: {not_learned_text(Verdict.of(judged), metric)}. " + description
        version = register(self.client, self.sweep_name, best["run_id"], setting, data, description, tags)
        done[setting] = {"run_id": best["run_id"], "version": version}
        self.state.save()
        self.client.set_tag(
            parent_run_id,
            f"contrasweep.model{'.' + slug(setting) if setting else ''}",
            f"models:/{self.sweep_name}/{version}",
        )
