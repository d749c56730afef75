"""The sweep's run hierarchy in MLflow (docs/architecture.md, "Data flow"): one sweep run, one
configuration run per repeat group, one run per trial (a repeat) below it, nesting by the tag
``mlflow.parentRunId``. Every run id is kept in the sweep's record (``tracking.json``), so a
resumed sweep re-attaches to the same runs: a trial Tune lost and brought back under a new id
gets its orphaned run back by configuration key, and a run no trial came back for is deleted
at the end, so MLflow holds exactly one run per repeat.

May import: ``contrasweep.tracking.store``, ``contrasweep.tracking.rows``,
``contrasweep.tracking.aggregate``, ``contrasweep.tracking.describe``,
``contrasweep.tracking.reattach``, ``contrasweep.spec``, ``contrasweep.folder.record``,
``contrasweep.tracking.verdict`` (the chance levels on the sweep run),
``contrasweep.folder.placeholders`` (its runs' placeholder ids), ``contrasweep.tracking.closed``
(the groups it closed, for the selection), ``contrasweep.tracking.run_groups`` (its repeat
groups' side: their entries, a trial run's end, a group closed, the runs at the sweep's end).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from contrasweep.folder.placeholders import remap
from contrasweep.folder.record import TrackingState
from contrasweep.spec.identity import config_run_name, identify, key_of, run_name, tags
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import hp_defaults
from contrasweep.tracking.aggregate import Group
from contrasweep.tracking.closed import closed_groups
from contrasweep.tracking.describe import NOTE_TAG, dataset_input, method_params, sweep_description, sweep_tags
from contrasweep.tracking.provenance import METHOD_TAGS, UI_TAGS
from contrasweep.tracking.reattach import rebuild
from contrasweep.tracking.rows import metric_entity, param_entities, spec_yaml
from contrasweep.tracking.run_groups import RunGroups
from contrasweep.tracking.store import CONFIG_KEY_TAG, KIND_TAG, PARENT_TAG, SWEEP_RUN_TAG, VARIANT_TAG
from contrasweep.tracking.verdict import sweep_chance

# the identity tags a configuration run carries (a trial run carries them all)
CONFIG_RUN_TAGS = (
    "contrasweep.method",
    "contrasweep.dataset",
    "contrasweep.protocol",
    "contrasweep.k",
    "contrasweep.n_total",
    "contrasweep.rho",
    "contrasweep.num_classes",
    "contrasweep.config",
    "contrasweep.setting",
    "contrasweep.group",
)


class RunTree(RunGroups):
    """Sweep → configuration → trial runs, over one MLflow client and the sweep's record.
    ``static``: the sweep's fixed part (``contrasweep.spec.static``: to name and tag a trial's
    real hyperparameters); ``group_sizes``: trials per repeat group (``{group: n}``, or one
    number for every group); ``provenance``: which
    code made the runs (``contrasweep.tracking.provenance``), once on the sweep run; a
    configuration or trial run carries only the MLflow UI's user and source columns and what
    differs from the sweep run's (a resume by other code or on another host), and a user's
    method's path and hash (``provenance.METHOD_TAGS``) on every run."""

    def __init__(
        self,
        client,
        state: TrackingState,
        sweep_name: str,
        static: SweepStatic,
        group_sizes: dict[str, int] | int = 1,
        provenance: dict[str, str] | None = None,
        race_file: Path | None = None,
        budget_file: Path | None = None,
    ):
        self.client, self.state, self.sweep_name, self.static = client, state, sweep_name, static
        self.group_sizes = group_sizes
        self.provenance = provenance or {}
        self.run_provenance = dict(self.provenance)  # set by open_parent / reopen
        self.race_file = race_file  # a racing sweep's journal (contrasweep.folder.race_record)
        self.budget_file = budget_file  # a budget's (contrasweep.folder.budget_record)
        self._closed: set[str] = set()  # groups whose configuration run this process closed
        self._index: tuple[dict, dict] | None = None  # (group -> entries, config key -> entries): ``members``
        # run id -> metric -> (step, timestamp, value): the latest of each metric as MLflow keeps it, for the
        # trial runs this process made and logged every row of (``seen``): a group closes without reading them back
        self._latest: dict[str, dict[str, tuple]] = {}
        self._final: dict[str, dict[str, dict]] = {}  # group -> run id -> final metrics, as this process closed it

    def _per_run(self, sweep_run_tags: dict[str, str]) -> None:
        self.run_provenance = {
            k: v
            for k, v in self.provenance.items()
            if k in UI_TAGS or k.startswith(METHOD_TAGS) or sweep_run_tags.get(k) != v
        }

    @property
    def parent_run_id(self) -> str:
        return self.state.data["parent_run_id"]

    # -- the sweep run ------------------------------------------------------------------
    def open_parent(self, experiment_id: str, spec: dict, params: dict, texts: dict[str, str]) -> str:
        """The sweep's run: created with its description, params, spec, data statistics and each
        setting's chance levels (``chance/[<setting>/]val/accuracy``, ...)."""
        run = self.client.create_run(
            experiment_id,
            run_name=self.sweep_name,
            tags={
                **self.provenance,
                **sweep_tags(spec, self.sweep_name),
                NOTE_TAG: sweep_description(spec, self.sweep_name),
            },
        )
        parent = run.info.run_id
        self._per_run(self.provenance)
        self.state.data.update(parent_run_id=parent, experiment_id=experiment_id)
        self.state.save()
        self.client.log_batch(
            parent,
            params=param_entities(params),  # and each setting's chance levels
            metrics=[metric_entity(k, v) for k, v in sweep_chance(self.static).items()],
        )
        self.client.log_text(parent, spec_yaml(spec), "spec.yaml")
        for name, text in texts.items():
            self.client.log_text(parent, text, name)
        return parent

    def reopen(self) -> None:
        """A resumed sweep: its run and the runs Ctrl-C or a dead driver left KILLED run again."""
        self.client.update_run(self.parent_run_id, status="RUNNING")
        from mlflow.entities import RunTag

        have = self.client.get_run(self.parent_run_id).data.tags  # a sweep started by a version that recorded none:
        self.client.log_batch(
            self.parent_run_id,
            tags=[
                RunTag(k, v)
                for k, v in self.provenance.items()
                if k not in have and k != METHOD_TAGS + "sha256_at_start"
            ],
        )
        self._per_run({**self.provenance, **have})
        for run_id in self.state.data.get("interrupted_runs", []):
            self.client.update_run(run_id, status="RUNNING")
        self.state.data.pop("interrupted_runs", None)
        changed = {k: v for k, v in self.provenance.items() if k.startswith(METHOD_TAGS)}
        if METHOD_TAGS + "sha256_at_start" in changed:  # a user's method changed (--allow-changed-method): the
            for entry in self.state.trials.values():  # unfinished runs go on with the new code and say so
                if "status" not in entry:
                    self.client.log_batch(entry["run_id"], tags=[RunTag(k, v) for k, v in changed.items()])

    def reattach(self, experiment_id: str, sweep_dir: Path, metric: str, mode: str) -> None:
        """No ``tracking.json`` (deleted, or lost with a disk): the sweep's runs in MLflow, found
        by their tags, become its content again (``contrasweep.tracking.reattach``)."""
        created = None
        meta_file = Path(sweep_dir) / "sweep.json"
        if meta_file.exists():
            created = json.loads(meta_file.read_text()).get("created")
        data = rebuild(self.client, experiment_id, self.sweep_name, created, metric, mode)
        if data is None:
            return
        self.state.data = data
        self._index = None
        self.state.save()
        print(
            f"[contrasweep] tracking.json was missing: re-attached to MLflow run {data['parent_run_id']} "
            f"({len(data['trials'])} trial runs)",
            file=sys.stderr,
            flush=True,
        )

    # -- trial runs -------------------------------------------------------------------
    def trial_run(self, trial, trials=()) -> str:
        """The run of a Tune trial: its own, a re-attached orphan of the same configuration, or new."""
        entry = self.state.trials.get(trial.trial_id)
        if entry:
            return entry["run_id"]
        key = key_of(trial.config)
        # one run per repeat: the run of a trial the restored experiment lost (unfinished first)
        same = []
        if self._indexed()[1].get(key):  # a configuration that ran before: rare, so the scan is too
            known = {t.trial_id for t in trials}
            same = sorted(
                (tid for tid, e in self.state.trials.items() if tid not in known and e["config_key"] == key),
                key=lambda tid: "status" in self.state.trials[tid],
            )
        if same:  # re-keyed: the record's whole snapshot, so that the old id's entry is gone from it
            entry = self.state.trials.pop(same[0])
            self.client.set_tag(entry["run_id"], "contrasweep.trial_id", trial.trial_id)
            self.state.trials[trial.trial_id] = entry
            self.state.save()
        else:
            entry = self.state.trials[trial.trial_id] = self._new_trial_run(trial, key)
            self.state.save_key("trials", trial.trial_id)
            self._add(entry)
        return entry["run_id"]

    def _new_trial_run(self, trial, key: str) -> dict:
        identity = identify(trial.config, self.static)  # the one decoding of the trial's config
        name = run_name(identity, self.static)
        run = self.client.create_run(
            self.state.data["experiment_id"],
            run_name=name,
            tags={
                **self.run_provenance,
                PARENT_TAG: self._config_run(identity),
                SWEEP_RUN_TAG: self.parent_run_id,
                KIND_TAG: "trial",
                "contrasweep.sweep": self.sweep_name,
                "contrasweep.trial_id": trial.trial_id,
                "contrasweep.group_size": str(self.group_size(identity.group)),
                CONFIG_KEY_TAG: key,
                VARIANT_TAG: str(identity.variant.index),
                **tags(identity, self.static.method),
            },
        )
        self._latest[run.info.run_id] = {}  # every row it gets is seen here (``seen``)
        entry = {
            "run_id": run.info.run_id,
            "config_key": key,
            "last_epoch": 0,
            "group": identity.group,
            "variant": identity.variant.index,
            "name": name,
            "group_size": self.group_size(identity.group),  # `contrasweep list` judges complete groups by it
            "hp": {k: v for k, v in identity.hp.items() if k != "seed"},  # ... and shows the selected one's values
            "config": trial.config,
        }  # what a later driver hands out again while it is unfinished (tracking.ledger)
        storage: Any = getattr(trial, "storage", None)
        if getattr(storage, "experiment_dir_name", None):  # which Tune experiment ran it (the summary counts by it)
            entry["tune"] = storage.experiment_dir_name
        self.client.log_batch(entry["run_id"], params=param_entities(self._trial_params(identity)))
        self.client.log_inputs(entry["run_id"], datasets=[dataset_input(identity.variant)])
        return entry

    def remap(self, ids: dict[str, str]) -> None:
        """The runs this tree knows by a placeholder, by their MLflow ids (``folder.placeholders``)."""
        remap(self._latest, ids)
        remap(self._final, ids)

    def seen(self, run_id: str, rows: list[tuple]) -> None:
        """(key, value, timestamp, step) rows logged to a trial run (``epochs.EpochLog``): kept as
        MLflow's latest value per metric (highest step, then timestamp, then value) for runs made here."""
        known = self._latest.get(run_id)
        if known is None:
            return
        for key, value, stamp, step in rows:
            mark = (step, stamp, value)
            if key not in known or mark > known[key]:
                known[key] = mark

    def _config_run(self, identity) -> str:
        """The configuration run of a repeat group, made when its first repeat starts."""
        configs = self.state.data.setdefault("configs", {})
        if identity.group not in configs:
            own = {k: v for k, v in tags(identity, self.static.method).items() if k in CONFIG_RUN_TAGS}
            run = self.client.create_run(
                self.state.data["experiment_id"],
                run_name=config_run_name(identity, self.static),
                tags={
                    **self.run_provenance,
                    PARENT_TAG: self.parent_run_id,
                    KIND_TAG: "configuration",
                    "contrasweep.sweep": self.sweep_name,
                    "contrasweep.group_size": str(self.group_size(identity.group)),
                    **own,
                },
            )
            configs[identity.group] = run.info.run_id
            hp = {k: v for k, v in identity.hp.items() if k != "seed"}
            self.client.log_batch(run.info.run_id, params=param_entities({"hp": hp, "data": identity.variant.setting}))
            self.state.save_key("configs", identity.group)
        return configs[identity.group]

    def _trial_params(self, identity) -> dict:
        """Every value the trial trains with (defaults, the repeat's seed and its torch threads
        included) and its data."""
        method = self.static.method
        return {
            **method_params(method),
            "hp": {**hp_defaults(method), **identity.plan.hp},
            "data": identity.variant.data,
        }

    def closed_groups(self) -> list[Group] | None:
        """The sweep's repeat groups from the record and the metrics this tree closed them with
        (``tracking.closed.closed_groups``); None where MLflow alone has them all."""
        return closed_groups(self.state.trials, self.static, self._final, self.group_size, self._trial_params)
