"""The Python API's side that runs things: ``plan``, ``run``, ``resume``, ``extend`` (docs/api.md).
Each takes what its command takes and does what it does (``contrasweep.api.actions``, which the
command line calls too); ``run``, ``resume`` and ``extend`` return the ``Sweep``.

May import: ``contrasweep.spec``, ``contrasweep.runner``, ``contrasweep.search`` (a spec checked by its
searcher), ``contrasweep.api.actions``, ``contrasweep.api.sweep``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrasweep.api import actions
from contrasweep.api.sweep import Sweep
from contrasweep.runner import fixed_costs, plan_lines, sweep_plan
from contrasweep.runner.checks import check_against_encoder
from contrasweep.runner.inputs import data_notes, prepare_data
from contrasweep.runner.preflight import services
from contrasweep.runner.ray_env import local_ray_environment
from contrasweep.search.registry import load_spec


@dataclass
class Plan:
    """What a sweep will cost before it runs (``contrasweep plan``).

    Attributes:
        lines: What ``contrasweep plan`` prints, a line each.
        data: What ``contrasweep plan --json`` prints: trials, configurations, epochs and steps in
            all, disk, the estimated seconds and their parts.
    """

    lines: list[str]
    data: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return "\n".join(self.lines)


def plan(
    spec: str | os.PathLike | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    address: str | None = None,
    remeasure: bool = False,
    tsne: bool = True,
) -> Plan:
    """What a sweep of ``spec`` will cost, measured where it will run (``contrasweep plan``).

    Args:
        spec: A spec file (``search_spaces/demo.yaml``) or the mapping it would hold.
        overrides: ``{"fixed.epochs": 3}`` (each value as ``--set`` would read it), or a list
            of ``KEY=VALUE`` strings.
        address: A Ray cluster's address (``auto``, ``ray://host:10001``); default this machine.
        remeasure: Measure the fixed costs again instead of using the ones saved for this machine.
        tsne: Count the report's t-SNE figure.

    Returns:
        The plan: its lines and its data.

    Raises:
        UserError: a spec or override that is not valid (one line: what is wrong, what is allowed).
    """
    if not (address or os.environ.get("RAY_ADDRESS")):
        local_ray_environment()  # plan probes a local Ray's start
    sweep = load_spec(spec, actions.set_items(overrides))
    if address:
        services(None, address)
    check_against_encoder(sweep)
    sweep_plan.quiet()
    busy = plan_lines.busy_cpus() if not address else None  # other work, before the plan's own
    prepared = prepare_data(sweep)  # the cache the sweep then reuses
    for note in data_notes(prepared):  # as run says them: rows dropped, label spellings, classes a split lacks
        print(f"[contrasweep] data: {note}", file=sys.stderr, flush=True)
    available = sweep_plan.available_resources(address)
    calibration = sweep_plan.calibrate_first_trial(sweep, prepared)
    try:
        fixed = fixed_costs.measured(sweep.method, sweep_plan.concurrency(sweep, available), address, remeasure)
    except RuntimeError as exc:  # the plan goes on with the fixed costs it was shipped with
        print(f"[contrasweep] {exc}; the plan uses its default fixed costs", file=sys.stderr, flush=True)
        fixed = None
    found = sweep_plan.plan(sweep, prepared, calibration, available, tsne=tsne, fixed=fixed)
    lines = plan_lines.describe(sweep, found, available, address or "this machine", busy)
    return Plan([f"[contrasweep] {line}" for line in lines], found.as_json())


def run(
    spec: str | os.PathLike | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    name: str | None = None,
    root: str | Path | None = None,
    tracking_uri: str | None = None,
    address: str | None = None,
    storage: str | None = None,
    smoke_test: bool = False,
    overwrite: bool = False,
    report: bool = True,
    tsne: bool = True,
    verbose: bool = False,
) -> Sweep:
    """Start a sweep and wait for it (``contrasweep run``): the same checks, console and summary.

    Args:
        spec: A spec file (``search_spaces/demo.yaml``) or the mapping it would hold.
        overrides: ``{"sweep.seeds": [0, 1, 2]}`` (each value as ``--set`` would read it), or
            a list of ``KEY=VALUE`` strings.
        name: The sweep's name; default the spec's ``name`` or file name with the time.
        root: The sweeps folder (default ``$CONTRASWEEP_HOME`` or ``./sweeps``).
        tracking_uri: The MLflow store; default ``sqlite:///<cwd>/mlflow.db``. Credentials come
            from MLflow's variables, never the URI.
        address: A Ray cluster's address; default a local Ray, ended with the call.
        storage: Where trials keep their state (``s3://…``, a shared path; ``--storage``).
        smoke_test: One epoch, two trials, an experiment of its own.
        overwrite: Replace a sweep of the same name.
        report: Write the report of a finished sweep (logged to its sweep run).
        tsne: Draw the report's t-SNE figure.
        verbose: Show Ray's and Tune's own output too (it is in ``driver.log`` either way).

    Returns:
        The sweep, ``finished``, or ``interrupted`` after an interrupt of the cell or Ctrl-C
        (``resume`` continues it).

    Raises:
        UserError: a spec, name or store that is not valid, before anything starts.
        KeyboardInterrupt: an interrupt before the sweep's folder was whole (nothing ran).
    """
    return actions.run_sweep(
        spec,
        overrides,
        name=name,
        root=root,
        tracking_uri=tracking_uri,
        address=address,
        storage=storage,
        smoke_test=smoke_test,
        overwrite=overwrite,
        report=report,
        tsne=tsne,
        verbose=verbose,
    )[0]


def resume(
    name: str,
    *,
    root: str | Path | None = None,
    address: str | None = None,
    storage: str | None = None,
    allow_changed_method: bool = False,
    report: bool = True,
    tsne: bool = True,
    verbose: bool = False,
) -> Sweep:
    """Continue an interrupted sweep (``contrasweep resume``): no finished trial runs again.

    Args:
        name: The sweep's name.
        root: The sweeps folder (default ``$CONTRASWEEP_HOME`` or ``./sweeps``).
        address: A Ray cluster's address; default a local Ray, ended with the call.
        storage: Where another machine's sweep is mirrored (``--storage``): fetched first.
        allow_changed_method: Go on although a user's method file changed since the sweep started.
        report: Write the report once it finishes.
        tsne: Draw the report's t-SNE figure.
        verbose: Show Ray's and Tune's own output too.

    Returns:
        The sweep, as ``run`` returns it.

    Raises:
        UserError: no such sweep, or one that cannot be resumed (finished, still running).
    """
    return actions.resume_sweep(
        name,
        root=root,
        address=address,
        storage=storage,
        allow_changed_method=allow_changed_method,
        report=report,
        tsne=tsne,
        verbose=verbose,
    )[0]


def extend(
    name: str,
    overrides: Mapping[str, Any] | Sequence[str],
    *,
    top: int | None = None,
    root: str | Path | None = None,
    address: str | None = None,
    allow_changed_method: bool = False,
    report: bool = True,
    tsne: bool = True,
    verbose: bool = False,
) -> Sweep:
    """Grow a sweep (``contrasweep extend``): more seeds, data values or suggestions; what ran stays.

    Args:
        name: The sweep's name.
        overrides: What grows: ``{"sweep.seeds": [0, 1, 2]}``, ``{"sweep.num_samples": 40}``,
            ``{"sweep.budget.slot_hours": 10}``, or ``KEY=VALUE`` strings.
        top: Give the new seeds only to the best ``top`` configurations of each setting.
        root: The sweeps folder (default ``$CONTRASWEEP_HOME`` or ``./sweeps``).
        address: A Ray cluster's address; default a local Ray, ended with the call.
        allow_changed_method: Go on although a user's method file changed since the sweep started.
        report: Write the report once it finishes.
        tsne: Draw the report's t-SNE figure.
        verbose: Show Ray's and Tune's own output too.

    Returns:
        The sweep, as ``run`` returns it: its tables hold the trials of every driver.

    Raises:
        UserError: an override that grows nothing or changes what ran, or no such sweep.
    """
    return actions.extend_sweep(
        name,
        overrides,
        top=top,
        root=root,
        address=address,
        allow_changed_method=allow_changed_method,
        report=report,
        tsne=tsne,
        verbose=verbose,
    )[0]
