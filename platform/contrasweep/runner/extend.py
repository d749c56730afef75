"""Grow a sweep that ran: ``contrasweep extend NAME --set KEY=VALUE ... [--top K]``
(docs/architecture.md, "Extend and resume: one rule").

What may grow: a grid sweep's repeat axes (``sweep.seeds``, ``data.seed``, ``data.split_seed``)
and setting axes (``data.k``, ``data.n_total``, ``data.rho``, ``data.num_classes``) as supersets
of what ran; an ``optuna``/``random`` sweep's ``sweep.num_samples``, larger; any sweep's
``sweep.budget.slot_hours``, larger (or the budget removed): the trials the budget left run.
Anything else is a new sweep. The extension is a new Tune experiment in the sweep's folder
(``tune-extN/``; a resumed one ``tune-extN-rK/``: ``resume_extension``) that holds only the new
trials, tracked by the same record (``tracking.json``) on the same MLflow runs: the trials that
ran are identified by their configuration key, as ``resume`` identifies them, so nothing that
finished trains again. A searcher's study continues with the larger budget (it has been told
every earlier suggestion).

May import: ``contrasweep.runner`` (the Tuner's assembly, the sweep's inputs), ``contrasweep.errors``,
``contrasweep.data``, ``contrasweep.spec``, ``contrasweep.folder``, ``contrasweep.tracking``,
``contrasweep.search``, ``contrasweep.console``; Ray Tune.
"""

from __future__ import annotations

import copy
import json
import sys
import time

from contrasweep import console
from contrasweep.console.summary import resume_line
from contrasweep.errors import UserError
from contrasweep.folder import driver, sweeps
from contrasweep.folder.record import TrackingState
from contrasweep.runner.checks import check_services, method_unchanged
from contrasweep.runner.inputs import load_sweep
from contrasweep.search.grid_search import REPEAT_GROWTH, default_of, shown
from contrasweep.search.registry import SEARCHERS, searcher_of, total_trials
from contrasweep.spec.axes import REPEAT_AXES, keep_order
from contrasweep.spec.load import apply_override
from contrasweep.spec.sweep import Sweep
from contrasweep.spec.text import a, counted
from contrasweep.tracking import writer
from contrasweep.tracking.rows import spec_yaml
from contrasweep.tracking.store import OUTCOME_TAG, get_client

ALLOWED = (
    "allowed: supersets of sweep.seeds, data.seed, data.split_seed, data.k, data.n_total, data.rho, "
    "data.num_classes (grid sweeps), a larger sweep.num_samples (optuna, random sweeps) or a larger "
    "sweep.budget.slot_hours; anything else is a new sweep (`contrasweep run`)"
)
EXTENSION_TAG = "contrasweep.extension.{}"  # on the sweep run: when, the overrides, --top, the new trials
EXTENDED_TAG = "contrasweep.extended"  # on the sweep run: how many extensions


# The spec key of each ``Sweep`` field an extension compares (``_spec_values``); the fields left
# out are derived from these (grid blocks, domains, variants, the raw spec) or set by the CLI.
SPEC_KEYS = {
    **{
        f: f
        for f in ("method", "name", "paper", "data", "encoder", "evaluation", "reported", "grid", "search", "fixed")
    },
    **{
        f: f"sweep.{f}"
        for f in (
            "searcher",
            "metric",
            "mode",
            "num_samples",
            "max_concurrent",
            "max_failures",
            "scheduler",
            "asha",
            "seeds",
            "warm_start",
            "resources",
            "storage",
            "ship",
            "racing",
            "budget",
        )
    },
    "experiment": "tracking.experiment",
    "keep_models": "tracking.keep_models",
}


def _spec_values(sweep: Sweep) -> dict:
    """The validated sweep as spec keys and values, a section's entries one level down
    (``data.k``, ``fixed.epochs``); what an unset key reads as is the validated default."""
    out = {}
    for name, key in SPEC_KEYS.items():
        value = getattr(sweep, name)
        if isinstance(value, dict) and value and "." not in key:
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def check_growth(ran: Sweep, new: Sweep) -> list[str]:
    """The keys an extension grows, from the sweep as it ran (``ran``) and the grown spec,
    validated (``new``): each judged by the sweep's searcher (``Searcher.check_growth``); any
    other change is one ``UserError``."""
    searcher = searcher_of(ran)
    growable = {key for other in SEARCHERS.values() for key in other.growth}
    before, after = _spec_values(ran), _spec_values(new)
    grown = []
    for key in dict.fromkeys([*before, *after]):
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if key == "sweep.budget":  # every searcher: the trials a budget left run with a larger one
            if was is None or (now is not None and now.slot_hours <= was.slot_hours):
                raise UserError(
                    f"sweep.budget can only grow ({shown(was and was.slot_hours)} slot-hours -> "
                    f"{shown(now and now.slot_hours)}); allowed: a larger sweep.budget.slot_hours, or "
                    "sweep.budget=null (no limit)"
                )
            grown.append(key)
            continue
        if key in searcher.growth:
            if searcher.check_growth(key, was, now, ran):
                grown.append(key)
            continue
        if key in growable:
            raise UserError(f"{key} cannot grow in {a(ran.searcher)} sweep ({searcher.cannot_grow}); {ALLOWED}")
        raise UserError(f"extend cannot change {key} ({shown(was)} -> {shown(now)}); {ALLOWED}")
    if not grown:
        raise UserError(f"nothing to extend: the overrides add no seed, data value or suggestion; {ALLOWED}")
    return grown


def grown_sweep(sweep_dir: sweeps.SweepDir, overrides: list[str]) -> tuple[Sweep, Sweep, list[str]]:
    """(the sweep as it ran, the sweep extended, the keys that grow); refused growth is one line."""
    old = load_sweep(sweep_dir)
    new_raw = copy.deepcopy(sweep_dir.spec())
    for item in overrides:
        apply_override(new_raw, item)
    new = load_sweep(sweep_dir, new_raw)  # the grown spec, validated: a bad override is the spec's one line
    grown = check_growth(old, new)
    new.variants = keep_order(new.variants, ran_variants(old, new))
    return old, new, grown


def ran_variants(old: Sweep, new: Sweep) -> list[dict]:
    """The data sections the sweep's trials ran on, by index, with an unset repeat axis that
    the extension lists at its default (``data.seed`` unset ran seed 0)."""
    out = []
    for variant in old.variants:
        data = dict(variant.data)
        for axis in REPEAT_AXES:
            if axis not in data and axis in new.data:
                data[axis] = default_of(f"data.{axis}")
        out.append(data)
    return out


def reopen_groups(client, state: dict, sizes: dict) -> list[str]:
    """The configuration runs that get new repeats run again: their group size grows on them
    and on their trial runs (``aggregate.Group.complete`` reads it), their outcome goes until
    the new repeats have ended (``runs.RunTree.close_group``)."""
    reopened = []
    for group, run_id in state.get("configs", {}).items():
        members = [e for e in state["trials"].values() if e.get("group") == group]
        if sizes.get(group, 0) <= len(members):
            continue
        for member in members:
            client.set_tag(member["run_id"], "contrasweep.group_size", str(sizes[group]))
        client.set_tag(run_id, "contrasweep.group_size", str(sizes[group]))
        if OUTCOME_TAG in client.get_run(run_id).data.tags:
            client.delete_tag(run_id, OUTCOME_TAG)
        client.update_run(run_id, status="RUNNING")
        reopened.append(group)
    return reopened


def extend(
    name: str,
    root,
    overrides: list[str],
    top: int | None,
    address: str | None,
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
    allow_changed_method: bool = False,
):
    """Grow the sweep ``name``; returns Tune's results of the new trials (or of the resume, when
    the sweep was unfinished and did not finish). An unfinished sweep is resumed first."""
    from contrasweep.runner import tune  # Ray: only once the growth was checked

    sweep_dir = sweeps.open_existing(root, name)
    status = sweep_dir.status()
    if status == "running":
        raise UserError(
            f"sweep {name!r} is still running ({sweep_dir.driver()[1]}); allowed: extend it once it has ended"
        )
    if top is not None and top < 1:
        raise UserError(f"--top {top} is not allowed; allowed: a whole number of configurations, 1 or more")
    old, new, grown = grown_sweep(sweep_dir, overrides)
    if top is not None and not set(grown) & set(REPEAT_GROWTH):  # a grid's repeats
        raise UserError(
            "--top chooses which configurations get new repeats; allowed with a larger sweep.seeds, "
            "data.seed or data.split_seed"
        )
    method_unchanged(new, sweep_dir, allow_changed_method)  # last: an allowed change is recorded
    if status != "finished":
        print(f"[contrasweep] sweep {name!r} is {status}: resuming it before it grows", file=sys.stderr, flush=True)
        results = tune.resume(
            name, root, address, ray_dashboard=ray_dashboard, ray_bind_all=ray_bind_all, allow_changed_method=True
        )  # checked above
        if sweep_dir.meta().get("status") != "finished":
            print(
                f"[contrasweep] sweep {name!r} did not finish ({sweep_dir.meta().get('status')}): it did not grow; "
                "extend it once it has finished",
                file=sys.stderr,
                flush=True,
            )
            return results
    entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "overrides": list(overrides), "top": top}
    suggestions = searcher_of(new).new_suggestions(old, new)
    if suggestions:  # a study's larger budget: the searcher draws the new trials
        entry["trials"] = suggestions
    return _grow(sweep_dir, new, entry, address, ray_dashboard, ray_bind_all)


def in_extension(root, name: str) -> bool:
    """Whether the sweep's stage is an extension (``resume`` then runs ``resume_extension``)."""
    sweep_dir = sweeps.SweepDir(root / name)
    return sweep_dir.meta_file.exists() and bool(sweep_dir.meta().get("extensions"))


def resume_extension(
    name: str,
    root,
    address: str | None,
    storage: str | None = None,
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
    allow_changed_method: bool = False,
):
    """``resume`` of a sweep whose stage is an extension: the same extension (``sweep.json``'s last
    entry, ``spec.yaml`` already grown) in a fresh Tuner: what ended is kept, unfinished repeats
    go on from their state folders, re-attached to their runs by configuration key."""
    from contrasweep.runner import tune  # Ray's side

    sweep_dir = tune.open_or_fetch(name, root, storage)
    tune.resumable(sweep_dir)
    sweep = load_sweep(sweep_dir)
    method_unchanged(sweep, sweep_dir, allow_changed_method)
    return _grow(sweep_dir, sweep, None, address, ray_dashboard, ray_bind_all)


def _grow(sweep_dir, new: Sweep, entry: dict | None, address, ray_dashboard, ray_bind_all):
    """Run the extension ``entry`` (None: the sweep's last one, again) as a new Tune experiment."""
    import yaml

    from contrasweep.runner import executor, test_phase, tune  # Ray's side: after the growth was checked
    from contrasweep.runner.slots import start_slots

    meta = sweep_dir.meta()
    tracking_uri = meta["tracking_uri"]
    check_services(new, tracking_uri, address, "the sweep's tracking URI (sweep.json)")
    writer.prestart(tracking_uri)  # MLflow's writer sets up beside Ray's start-up (tracking.writer)
    executor.torch_threads_env()
    record = TrackingState(sweep_dir.path / "tracking.json")
    client = get_client(tracking_uri)
    parent = record.data["parent_run_id"]
    again = entry is None
    entry = meta["extensions"][-1] if entry is None else entry
    top = entry["top"]
    ended = [e for e in record.trials.values() if "status" in e]
    growth = searcher_of(new).extension(new, client, record.data, parent, top, again, sweep_dir.path)
    if growth.trials == 0:
        raise UserError(
            f"sweep {sweep_dir.name!r} has nothing new to train: every trial of the grown grid ran"
            + (f" or belongs to a configuration outside the --top {top}" if top else "")
            + " (stopped or failed configurations get no new repeats); "
            + ALLOWED
        )
    sizes, space = growth.sizes, growth.space
    total = len(ended) + growth.trials if growth.trials is not None else total_trials(new)
    if growth.trials is not None:
        entry["trials"] = entry.get("trials", growth.trials)
    prepared, refs, files = tune.start(new, address, ray_dashboard, ray_bind_all, sweep_dir.storage, sweep_dir.path)
    extensions = meta.get("extensions", []) if again else [*meta.get("extensions", []), entry]
    console.attach_log(sweep_dir.path)
    if again:
        print(resume_line(sweep_dir.path, sweep_dir.name), file=sys.stderr, flush=True)
        tune.arrived(sweep_dir)
    with driver.Heartbeat(sweep_dir.path):
        # the grown spec, where its variants are, the new experiment (tune-extN): what resume reads
        sweep_dir.spec_file.write_text(yaml.safe_dump(new.raw, sort_keys=False))
        sweep_dir.update_meta(
            status="running", total=total, extensions=extensions, variant_order=[v.data for v in new.variants]
        )
        sweep_dir.new_experiment()  # this driver's Tune experiment: tune-extN, or tune-extN-rK when resumed
        reopened = reopen_groups(client, record.data, sizes) if sizes else []
        client.log_text(parent, spec_yaml(new.raw), "spec.yaml")  # what the report reads (dashboards.source)
        client.set_tag(parent, EXTENSION_TAG.format(len(extensions)), json.dumps(entry, sort_keys=True))
        client.set_tag(parent, EXTENDED_TAG, str(len(extensions)))
        regrown = f", {counted(len(reopened), 'configuration')} get new repeats" if reopened else ""
        print(
            f"[contrasweep] sweep {sweep_dir.name!r} grows ({', '.join(entry['overrides'])}"
            f"{f'; --top {top}' if top else ''}): "
            f"{counted(entry['trials'], growth.unit) if 'trials' in entry else 'what the budget left'}{regrown}; "
            f"its extension {len(extensions)}",
            file=sys.stderr,
            flush=True,
        )
        tuner, static = tune.build_tuner(
            new, sweep_dir, prepared, refs, files, tracking_uri, space, sizes, total, growth.queue
        )
        return tune.fit(tuner, sweep_dir, test_phase.after_tune(new, sweep_dir, static, refs), start_slots(new))
