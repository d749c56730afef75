"""A sweep read back from MLflow (read only): its parent run, the spec it ran (the parent's
``spec.yaml``, already validated when the sweep started), its repeat groups and each
setting's selected configuration (``contrasweep.tracking.aggregate``: best mean validation metric),
each setting's chance levels and which configurations did not learn (``contrasweep.tracking.verdict``)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import yaml

from contrasweep.data.chance import level_of
from contrasweep.errors import UserError
from contrasweep.spec.names import hp_name, varied_keys
from contrasweep.tracking.aggregate import Group, groups, select, selection_key
from contrasweep.tracking.rows import slug
from contrasweep.tracking.store import (
    BUDGET_CUT,
    ELIMINATED,
    GROUP_TAG,
    KIND_TAG,
    OUTCOME_TAG,
    PARENT_TAG,
    RACE_P_VALUE_TAG,
    RACE_ROUND_TAG,
    get_client,
    search_all,
    search_experiments_all,
)
from contrasweep.tracking.verdict import CHANCE_PREFIX, LEARNED_TAG, P_VALUE_TAG
from trainables.user_methods import short_name

if TYPE_CHECKING:
    from mlflow.entities import Run


@dataclass
class SweepRecord:
    name: str
    tracking_uri: str
    parent: Run  # the sweep run
    spec: dict
    groups: list[Group]
    race: dict = field(default_factory=dict)  # group -> {"round", "p_value"}: the configurations a race eliminated
    cut: set = field(default_factory=set)  # the configurations a budget cut short (sweep.budget)
    learned: dict = field(
        default_factory=dict
    )  # group -> {"learned", "p_value"}: verdicts (contrasweep.tracking.verdict)

    def chance(self, setting: str, metric: str) -> float | None:
        """The chance level of ``metric`` (``test/accuracy``, ``best/val/accuracy``) in ``setting``
        (the sweep run's ``chance/[<setting>/]...`` metrics: the mean over its data variants);
        None for a metric without one or a sweep recorded before them."""
        prefix = CHANCE_PREFIX + (f"{slug(setting)}/" if setting else "")
        metrics = self.parent.data.metrics
        found = {k[len(prefix) :]: v for k, v in metrics.items() if k.startswith(prefix)}
        return level_of(found, metric)

    def at_chance(self, group: Group) -> bool:
        """Whether ``group``'s verdict says it did not learn."""
        return self.learned.get(group.group, {}).get("learned") is False

    @property
    def method(self) -> str:
        return str(self.spec.get("method", ""))

    @property
    def label(self) -> str:
        """The method as tables and figures name it: a built-in's name, a user's class name."""
        return short_name(self.method)

    @property
    def metrics(self) -> list[str]:
        metric = self.spec.get("sweep", {}).get("metric", "val/accuracy")
        return list(metric) if isinstance(metric, list) else [metric]

    @property
    def modes(self) -> list[str]:
        mode = self.spec.get("sweep", {}).get("mode", "max")
        return list(mode) if isinstance(mode, list) else [mode] * len(self.metrics)

    @property
    def metric(self) -> str:
        """The selection metric (the sweep's first): validation, e.g. ``val/accuracy``."""
        return self.metrics[0]

    @property
    def alpha(self) -> float:
        """``evaluation.alpha`` of the spec it ran (0.05 where it set none): the report's level."""
        return float((self.spec.get("evaluation") or {}).get("alpha", 0.05))

    @property
    def mode(self) -> str:
        return self.modes[0]

    @property
    def test_metric(self) -> str:
        """What tables report for a selected configuration: the test counterpart of the
        selection metric (each repeat's test value at its best validation epoch); a metric that
        is not a validation one (``cost/train_s``) is reported as it is."""
        if not self.metric.startswith("val/"):
            return self.metric
        return "test/" + self.metric.split("/", 1)[-1]

    @property
    def varied(self) -> list[str]:
        """Hyperparameters that differ between configurations (grid or search keys)."""
        return varied_keys(self.spec)

    def hp_name(self, name: str) -> str:
        """What the report calls hyperparameter ``name``: its symbol where the method declares
        one, as trial lines and run names do (``contrasweep.spec.names``)."""
        return hp_name(name, self.method)

    @cached_property
    def selected(self) -> dict[str, Group]:
        return select(self.groups, self.metric, self.mode)

    def shown(self, group: Group, metric: str) -> str:
        """The value a table shows for ``group``: ``metric`` if its repeats have it, else the
        best validation value (representation methods report no test twin of every metric),
        which the table marks as validation (``dashboards.tables.Cell``)."""
        return metric if group.values(metric) else selection_key(self.metric)

    def figure_metric(self, plotted: list[Group]) -> str:
        """What a figure of ``plotted`` draws on its y axis: the test metric where every one of
        them was tested, else all of them at their best validation value, and the figure says
        so. Never a mix: with ``evaluation.test: reported`` a searcher tests only the selected
        configuration, and a slice drawn on a test axis would put validation numbers there."""
        if all(group.values(self.test_metric) for group in plotted):
            return self.test_metric
        return selection_key(self.metric)


def find_parent(client, name: str, run_id: str | None = None):
    """The sweep run: ``run_id`` where the sweep's folder names it (``tracking.json``), else the
    newest sweep run tagged with sweep ``name`` in any experiment (every page: it is its sweep's
    oldest run, so its trials push it past the first)."""
    if run_id:
        return client.get_run(run_id)
    found = []
    for exp in search_experiments_all(client):
        runs = search_all(client, [exp.experiment_id], f"tags.`contrasweep.sweep` = '{name}'")
        found += [r for r in runs if PARENT_TAG not in r.data.tags]
    if not found:
        raise UserError(
            f"no sweep {name!r} in MLflow at {client.tracking_uri}; allowed: a sweep name from "
            "`contrasweep list` (and --tracking-uri of the store it was tracked in)"
        )
    return max(found, key=lambda r: r.info.start_time or 0)


def load(tracking_uri: str, name: str, run_id: str | None = None) -> SweepRecord:
    """Sweep ``name`` read back; ``run_id``: its sweep run, where its folder's record names it."""
    import mlflow

    client = get_client(tracking_uri)
    parent = find_parent(client, name, run_id)
    with tempfile.TemporaryDirectory(prefix="contrasweep-spec-") as folder:  # MLflow's own temp folder stays (issue 57)
        path = mlflow.artifacts.download_artifacts(
            run_id=parent.info.run_id, artifact_path="spec.yaml", tracking_uri=tracking_uri, dst_path=folder
        )
        with open(path, encoding="utf-8") as fh:
            spec = yaml.safe_load(fh) or {}
    return SweepRecord(
        name=name,
        tracking_uri=tracking_uri,
        parent=parent,
        spec=spec,
        groups=groups(tracking_uri, parent.info.run_id),
        race=eliminated(client, parent),
        cut={r.data.tags[GROUP_TAG] for r in configuration_runs(client, parent, BUDGET_CUT)},
        learned=verdicts(client, parent),
    )


def configuration_runs(client, parent, outcome: str, tag: str = OUTCOME_TAG) -> list:
    """The sweep's configuration runs whose ``tag`` (default: how they ended) is ``outcome``."""
    return search_all(
        client,
        [parent.info.experiment_id],
        (
            f"tags.`{PARENT_TAG}` = '{parent.info.run_id}' and tags.`{KIND_TAG}` = 'configuration' and "
            f"tags.`{tag}` = '{outcome}'"
        ),
    )


def verdicts(client, parent) -> dict[str, dict]:
    """Each judged configuration's verdict (``contrasweep.tracking.verdict``): learned or not, its p-value."""
    return {
        r.data.tags[GROUP_TAG]: {"learned": answer == "yes", "p_value": float(r.data.tags.get(P_VALUE_TAG, "nan"))}
        for answer in ("yes", "no")
        for r in configuration_runs(client, parent, answer, LEARNED_TAG)
    }


def eliminated(client, parent) -> dict[str, dict]:
    """The configurations a race dropped (``sweep.racing``): their configuration runs' round and p-value."""
    return {
        r.data.tags[GROUP_TAG]: {
            "round": int(r.data.tags[RACE_ROUND_TAG]),
            "p_value": float(r.data.tags[RACE_P_VALUE_TAG]),
        }
        for r in configuration_runs(client, parent, ELIMINATED)
    }
