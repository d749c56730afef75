"""Running sweeps from Python: ``run``, ``resume``, ``extend`` (each returns the ``Sweep``) and
``plan``. The command line's ``run``, ``resume`` and ``extend`` call the ``*_sweep`` functions
here, which also give the exit status, so both say and do the same: the checks before Ray starts
(a bad name or spec answers within a second), the console (``contrasweep.console.Console``: the
trials' progress and the summary, all of it in the sweep's ``driver.log``), the report of a
finished sweep.

From a notebook: a cell's interrupt (Jupyter's "interrupt the kernel": SIGINT) stops the sweep as
Ctrl-C does (its state kept; ``resume`` continues it) and the call returns the sweep, as
``interrupted``; the SIGINT and SIGTERM handlers are as they were afterwards. A call outside the
main thread installs no handler (Python allows none there).

May import: ``contrasweep.errors``, ``contrasweep.spec``, ``contrasweep.folder``, ``contrasweep.console``,
``contrasweep.runner``, ``contrasweep.search`` (a spec checked by its searcher), ``contrasweep.api.sweep``,
``dashboards`` (the report).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from contrasweep.api.sweep import Sweep, load
from contrasweep.console import Console
from contrasweep.console.quiet import quiet_libraries
from contrasweep.console.summary import summary_lines
from contrasweep.errors import UserError
from contrasweep.folder import sweeps
from contrasweep.runner.checks import method_runs
from contrasweep.runner.driver_context import restored_signals
from contrasweep.runner.extend import extend as extend_run
from contrasweep.runner.extend import in_extension, resume_extension
from contrasweep.runner.inputs import load_sweep
from contrasweep.runner.preflight import services
from contrasweep.runner.ray_env import local_ray_environment
from contrasweep.runner.stop_signal import interrupted_exit, take_sigterm
from contrasweep.search.registry import load_spec
from contrasweep.spec.load import _name, storage_location

Spec = str | os.PathLike | Mapping[str, Any]
Overrides = Mapping[str, Any] | Sequence[str] | None


def set_items(overrides: Overrides) -> list[str]:
    """Overrides as ``--set`` takes them: ``{"sweep.seeds": [0, 1]}`` → ``["sweep.seeds=[0, 1]"]``
    (each value written as YAML, which ``--set`` reads back); a sequence of ``KEY=VALUE`` strings as it is."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise UserError(f"overrides={overrides!r} is one string; allowed: a dict, or a list of 'KEY=VALUE' strings")
    if isinstance(overrides, Mapping):
        return [f"{key}={_yaml(value)}" for key, value in overrides.items()]
    return [str(item) for item in overrides]


def _yaml(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31, allow_unicode=True).strip()
    return text.removesuffix("\n...").strip()  # a scalar's document end


def run_sweep(
    spec: Spec,
    overrides: Overrides = None,
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
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
) -> tuple[Sweep, int]:
    """``run``, and the command line's exit status: 0, 1 (a trial failed), 130/143 (interrupted)."""
    with _driver(address, ray_bind_all, verbose):
        items = set_items(overrides)
        if smoke_test:
            load_spec(spec, items)  # the spec as written must be valid: --smoke-test never hides a bad value
        sweep = load_spec(spec, items, smoke=smoke_test)
        if smoke_test:  # its own experiment: smoke runs never mix into comparisons
            sweep.experiment = f"{sweep.experiment}-smoke"
            sweep.raw.setdefault("tracking", {})["experiment"] = sweep.experiment
        if storage is not None:
            sweep.storage = storage_location(storage, "--storage")
            sweep.raw.setdefault("sweep", {})["storage"] = sweep.storage
        _name(name)
        default = sweep.name or (str(spec) if not isinstance(spec, Mapping) else "sweep")
        chosen = name or sweeps.default_name(default, smoke=smoke_test)
        base = sweeps.sweeps_root(None if root is None else str(root))
        sweeps.ensure_new(base, chosen, overwrite)  # these before Ray is imported: an error within a second

        services(tracking_uri, address, experiment=sweep.experiment)  # the default sqlite store needs no probe
        method_runs(sweep.method)  # a user's method: one step and one prediction, before anything is written
        from contrasweep.runner.tune import run as tune_run  # Ray: only after the checks above

        results = tune_run(
            sweep,
            chosen,
            base,
            tracking_uri,
            address,
            ray_dashboard=ray_dashboard,
            ray_bind_all=ray_bind_all,
            overwrite=overwrite,
        )
        return _ended(results, base, chosen, report, tsne)


def resume_sweep(
    name: str,
    *,
    root: str | Path | None = None,
    address: str | None = None,
    storage: str | None = None,
    allow_changed_method: bool = False,
    report: bool = True,
    tsne: bool = True,
    verbose: bool = False,
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
) -> tuple[Sweep, int]:
    """``resume``, and the command line's exit status."""
    with _driver(address, ray_bind_all, verbose):
        base = sweeps.sweeps_root(None if root is None else str(root))
        _name(name)  # a name, never a path (no reading, or unpickling, outside the root)
        if not storage:
            sweeps.open_existing(base, name)  # before Ray is imported: an error within a second
            method_checked(base, name, resuming=True)
        from contrasweep.runner.tune import open_or_fetch, resume

        if storage:  # perhaps another machine's sweep: fetched first, its stage (extension or not) read from it
            open_or_fetch(name, base, storage)
            method_checked(base, name, resuming=True)
        go_on = resume_extension if in_extension(base, name) else resume
        results = go_on(
            name,
            base,
            address,
            storage,
            ray_dashboard=ray_dashboard,
            ray_bind_all=ray_bind_all,
            allow_changed_method=allow_changed_method,
        )
        return _ended(results, base, name, report, tsne)


def extend_sweep(
    name: str,
    overrides: Overrides,
    *,
    top: int | None = None,
    root: str | Path | None = None,
    address: str | None = None,
    allow_changed_method: bool = False,
    report: bool = True,
    tsne: bool = True,
    verbose: bool = False,
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
) -> tuple[Sweep, int]:
    """``extend``, and the command line's exit status."""
    with _driver(address, ray_bind_all, verbose):
        base = sweeps.sweeps_root(None if root is None else str(root))
        sweeps.open_existing(base, _name(name))  # before Ray is imported: an error within a second
        method_checked(base, name)
        results = extend_run(
            name,
            base,
            set_items(overrides),
            top,
            address,
            ray_dashboard=ray_dashboard,
            ray_bind_all=ray_bind_all,
            allow_changed_method=allow_changed_method,
        )
        return _ended(results, base, name, report, tsne)


class _driver:
    """What a driver runs inside: the libraries' progress bars off, a local Ray's environment
    (where no cluster is named), SIGTERM taken as Ctrl-C, the console (our lines on the terminal,
    all of it in ``driver.log``), and the signal handlers as they were afterwards."""

    def __init__(self, address: str | None, bind_all: bool, verbose: bool) -> None:
        quiet_libraries()
        if not (address or os.environ.get("RAY_ADDRESS")):
            local_ray_environment(bind_all)  # before Ray is imported
        self.signals, self.console = restored_signals(), Console(verbose)

    def __enter__(self) -> Console:
        self.signals.__enter__()
        take_sigterm()  # a preempted job's SIGTERM: as Ctrl-C (contrasweep.runner.stop_signal)
        return self.console.__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            self.console.__exit__(*exc)
        finally:
            self.signals.__exit__(*exc)


def _ended(results: Any, root: Path, name: str, report: bool, tsne: bool) -> tuple[Sweep, int]:
    """The summary a sweep ends with, its report where it finished, and its exit status."""
    folder = sweeps.open_existing(root, name)
    sweep, status = load_sweep(folder), folder.meta()["status"]
    lines, errors = summary_lines(results, sweep.objective.metric, sweep.objective.mode, name, status, sweep, root)
    for line in lines:
        print(line, flush=True)
    if report and status == "finished":
        auto_report(root, name, tsne)
    code = interrupted_exit() if status == "interrupted" else (1 if errors else 0)
    return load(name, root), code


def method_checked(root: Path, name: str, resuming: bool = False) -> None:
    """The user's method of the sweep ``name`` (its folder's spec) trains one step before Ray
    starts (``method_runs``); the folder is left as it is. A spec that cannot be read, or a
    finished sweep ``resume`` refuses, is left to the command's own checks (their one line)."""
    folder = sweeps.SweepDir(root / name)
    try:
        if (resuming and folder.meta().get("status") == "finished") or ":" not in str(folder.spec().get("method", "")):
            return  # a built-in method (no colon): tested already
        sweep = load_sweep(folder)
    except UserError:
        return
    method_runs(sweep.method)


def auto_report(root: Path, name: str, tsne: bool = True) -> None:
    """A finished sweep gets its report at once (logged to its parent run); a report that
    fails never fails the sweep: one line says so and how to retry."""
    sweep_dir = sweeps.open_existing(root, name)
    try:
        from dashboards.report import build  # scipy, matplotlib: only where a report is built

        built = build(sweep_dir.meta()["tracking_uri"], name, sweep_dir.path / "report", tsne=tsne)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are safe in MLflow either way
        print(
            f"[contrasweep] report not written ({type(exc).__name__}: {exc}); retry with: contrasweep report {name}",
            file=sys.stderr,
            flush=True,
        )
        return
    print(f"[contrasweep] report: {built.html_path} (also in MLflow: parent run → Artifacts → report/)", flush=True)
