"""What each ``contrasweep`` command does (``contrasweep.cli`` parses the arguments and imports
this module when one of these commands runs). ``run``, ``resume`` and ``extend`` import Ray's
side (``contrasweep.run.tune``) only after their checks, so a bad name or spec answers within a
second (a user's method, trained for one step on a toy task first: within seconds); the report's
module (scipy, matplotlib) only where a report is built.

May import: ``contrasweep.errors``, ``contrasweep.spec``, ``contrasweep.folder``, ``contrasweep.tracking``,
``contrasweep.console``, ``contrasweep.run``, ``contrasweep.search`` (a spec checked by its searcher),
``dashboards``.
"""

from __future__ import annotations

import json
import os
import sys

from contrasweep.console.listing import listing
from contrasweep.console.summary import disk_use, human, summary_lines
from contrasweep.errors import UserError
from contrasweep.folder import sweeps
from contrasweep.folder.cleanup import reclaim
from contrasweep.folder.record import read as read_record
from contrasweep.run import fixed_costs, plan_lines, sweep_plan
from contrasweep.run.checks import check_against_encoder, method_runs
from contrasweep.run.extend import extend, in_extension, resume_extension
from contrasweep.run.inputs import data_notes, load_sweep, prepare_data
from contrasweep.run.preflight import services
from contrasweep.run.recovery import settle
from contrasweep.run.stop_signal import interrupted_exit
from contrasweep.search.registry import load_spec
from contrasweep.spec.load import _name, storage_location
from contrasweep.tracking.credentials import check_uri
from contrasweep.tracking.store import default_tracking_uri


def cmd_run(args) -> int:
    overrides = list(args.overrides)
    if args.smoke_test:
        load_spec(args.spec, overrides)  # the spec as written must be valid: --smoke-test never hides a bad value
    sweep = load_spec(args.spec, overrides, smoke=args.smoke_test)
    if args.smoke_test:  # its own experiment: smoke runs never mix into comparisons
        sweep.experiment = f"{sweep.experiment}-smoke"
        sweep.raw.setdefault("tracking", {})["experiment"] = sweep.experiment
    if args.storage is not None:
        sweep.storage = storage_location(args.storage, "--storage")
        sweep.raw.setdefault("sweep", {})["storage"] = sweep.storage
    if args.name is not None:
        _name(args.name)
    name = args.name or sweeps.default_name(sweep.name or args.spec, smoke=args.smoke_test)
    root = sweeps.sweeps_root(args.root)
    sweeps.ensure_new(root, name, args.overwrite)  # these before Ray is imported: an error within a second

    services(args.tracking_uri, args.address, experiment=sweep.experiment)  # the default sqlite store needs no probe
    method_runs(sweep.method)  # a user's method: one step and one prediction, before anything is written
    from contrasweep.run.tune import run  # Ray: only after the checks above (an error within a second)

    results = run(
        sweep,
        name,
        root,
        args.tracking_uri,
        args.address,
        ray_dashboard=args.ray_dashboard,
        ray_bind_all=args.ray_bind_all,
        overwrite=args.overwrite,
    )
    status = sweeps.open_existing(root, name).meta()["status"]
    code = _summary(results, sweep.objective.metric, sweep.objective.mode, name, status, sweep, root)
    _auto_report(root, name, status, tsne=not args.no_tsne)
    return code


def _summary(results, metric: str, mode: str, name: str, status: str, sweep=None, root=None) -> int:
    """The lines a sweep ends with: how it ended and its trials' outcomes, where its folder is
    and how much disk it holds, each setting's best configuration with its validation and test
    metric and its MLflow run, the failures, and what to run next."""
    lines, errors = summary_lines(results, metric, mode, name, status, sweep, root)
    for line in lines:
        print(line, flush=True)
    if status == "interrupted":
        return interrupted_exit()  # 130 after Ctrl-C, 143 after SIGTERM
    return 1 if errors else 0


def cmd_resume(args) -> int:
    root = sweeps.sweeps_root(args.root)
    _name(args.name)  # a name, never a path (no reading, or unpickling, outside the root)
    if not args.storage:
        sweeps.open_existing(root, args.name)  # before Ray is imported: an error within a second
        _method_checked(root, args.name, resuming=True)
    from contrasweep.run.tune import open_or_fetch, resume

    if args.storage:  # perhaps another machine's sweep: fetched first, its stage (extension or not) read from it
        open_or_fetch(args.name, root, args.storage)
        _method_checked(root, args.name, resuming=True)
    go_on = resume_extension if in_extension(root, args.name) else resume
    results = go_on(
        args.name,
        root,
        args.address,
        args.storage,
        ray_dashboard=args.ray_dashboard,
        ray_bind_all=args.ray_bind_all,
        allow_changed_method=args.allow_changed_method,
    )
    sweep_dir = sweeps.open_existing(root, args.name)

    sweep = load_sweep(sweep_dir)
    status = sweep_dir.meta()["status"]
    code = _summary(results, sweep.objective.metric, sweep.objective.mode, args.name, status, sweep, root)
    _auto_report(root, args.name, status, tsne=not args.no_tsne)
    return code


def cmd_extend(args) -> int:
    root = sweeps.sweeps_root(args.root)
    sweeps.open_existing(root, _name(args.name))  # before Ray is imported: an error within a second
    _method_checked(root, args.name)

    results = extend(
        args.name,
        root,
        args.overrides,
        args.top,
        args.address,
        ray_dashboard=args.ray_dashboard,
        ray_bind_all=args.ray_bind_all,
        allow_changed_method=args.allow_changed_method,
    )
    sweep_dir = sweeps.open_existing(root, args.name)
    sweep, status = load_sweep(sweep_dir), sweep_dir.meta()["status"]
    code = _summary(results, sweep.objective.metric, sweep.objective.mode, args.name, status, sweep, root)
    _auto_report(root, args.name, status, tsne=not args.no_tsne)
    return code


def _method_checked(root, name: str, resuming: bool = False) -> None:
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


def _auto_report(root, name: str, status: str, tsne: bool = True) -> None:
    """A finished sweep gets its report at once (logged to its parent run); a report that
    fails never fails the sweep: one line says so and how to retry."""
    if status != "finished":
        return

    sweep_dir = sweeps.open_existing(root, name)
    try:
        from dashboards.report import build

        built = build(sweep_dir.meta()["tracking_uri"], name, sweep_dir.path / "report", tsne=tsne)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are safe in MLflow either way
        print(
            f"[contrasweep] report not written ({type(exc).__name__}: {exc}); retry with: contrasweep report {name}",
            file=sys.stderr,
            flush=True,
        )
        return
    print(f"[contrasweep] report: {built.html_path} (also in MLflow: parent run → Artifacts → report/)", flush=True)


def quiet_libraries() -> None:
    """No library progress bars on the terminal (MLflow's artifact downloads, transformers'
    "Loading weights" and "Writing model shards", datasets' tokenising and saving): set where
    the command starts (``contrasweep.cli.main``), before any of them is imported, so a local
    Ray's workers inherit it too; a user's own setting wins."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers reads it at import
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


def cmd_report(args) -> int:
    quiet_libraries()
    from dashboards.report import build

    root = sweeps.sweeps_root(args.root)
    folder = root / _name(args.name)  # a name, never a path (no reading outside the root)
    check_uri(args.tracking_uri)
    meta = sweeps.SweepDir(folder).meta()
    uri = args.tracking_uri or meta.get("tracking_uri") or default_tracking_uri()
    out = args.out or (folder / "report" if meta else f"report-{args.name}")
    built = build(
        uri,
        args.name,
        out,
        compare=tuple(args.compare),
        baseline=args.baseline,
        tsne=not args.no_tsne,
        run_ids=_sweep_run_ids(root, [args.name, *args.compare], uri),
    )
    if built.baseline is not None:  # what the cells' Δ, interval and p are against, and why that sweep
        print(
            f"[contrasweep] baseline: {built.baseline} ({built.baseline_why}); each other cell: Δ = that sweep − "
            f"{built.baseline} over matched repeats, its confidence interval, and the Wilcoxon p where the repeats "
            "can reach alpha"
        )
    print(built.main.title)
    print(built.main.text())
    where = (
        f"not logged to the sweep run: {built.not_logged}"
        if built.not_logged
        else f"logged to the parent run of {args.name!r} under report/"
    )
    print(f"[contrasweep] report: {built.html_path} ({len(built.sections)} sections; {where})")
    return 0


def _sweep_run_ids(root, names: list[str], uri: str) -> dict[str, str]:
    """Each named sweep's run, as its folder's record names it (tracked in ``uri``): the report
    reads it by id; a sweep without a folder here is found by its tags."""
    found = {}
    for name in names:
        folder = sweeps.SweepDir(root / _name(name))
        if folder.meta().get("tracking_uri") == uri:
            run_id = read_record(folder.path / "tracking.json").get("parent_run_id")
            if run_id:
                found[name] = run_id
    return found


def cmd_plan(args) -> int:
    sweep = load_spec(args.spec, args.overrides)
    if args.address:
        services(None, args.address)
    check_against_encoder(sweep)
    sweep_plan.quiet()
    busy = plan_lines.busy_cpus() if not args.address else None  # other work, before the plan's own
    prepared = prepare_data(sweep)  # the cache the sweep then reuses
    for note in data_notes(prepared):  # as run says them: rows dropped, label spellings, classes a split lacks
        print(f"[contrasweep] data: {note}", file=sys.stderr, flush=True)
    available = sweep_plan.available_resources(args.address)
    calibration = sweep_plan.calibrate_first_trial(sweep, prepared)
    try:
        fixed = fixed_costs.measured(
            sweep.method, sweep_plan.concurrency(sweep, available), args.address, args.remeasure
        )
    except RuntimeError as exc:  # the plan goes on with the fixed costs it was shipped with
        print(f"[contrasweep] {exc}; the plan uses its default fixed costs", file=sys.stderr, flush=True)
        fixed = None
    found = sweep_plan.plan(sweep, prepared, calibration, available, tsne=not args.no_tsne, fixed=fixed)
    if args.json:
        print(json.dumps(found.as_json(), indent=1))
        return 0
    for line in plan_lines.describe(sweep, found, available, args.address or "this machine", busy):
        print(f"[contrasweep] {line}")
    return 0


def cmd_list(args) -> int:
    root = sweeps.sweeps_root(args.root)
    found = sweeps.list_sweeps(root)
    if not found:
        print(f"no sweeps in {root}")
        return 0

    notes = [note for note in (settle(s) for s in found) if note]  # dead drivers' sweeps set straight first

    rows = [
        (
            s.name,
            r["status"],
            r["trials"],
            r["method"],
            r["selected"],
            r["best"],
            r["test"],
            r["learned"],
            human(r["disk"]),
            r["created"],
        )
        for s, r in ((s, listing(s)) for s in found)
    ]
    header = (
        "name",
        "status",
        "trials",
        "method",
        "selected configuration",
        "validation",
        "test",
        "learned",
        "disk",
        "created",
    )
    for line in table(header, rows, right=(2, 8)):
        print(line)
    for note in notes:
        print(f"[contrasweep] {note}", file=sys.stderr)
    return 0


def table(header: tuple, rows: list[tuple], right: tuple = ()) -> list[str]:
    """``header`` and ``rows`` in columns as wide as their widest cell (``right``: right-aligned columns)."""
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(
            str(cell).rjust(w) if i in right else str(cell).ljust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in (header, *rows)
    ]


def cmd_clean(args) -> int:
    root = sweeps.sweeps_root(args.root)
    if bool(args.names) == bool(args.stopped):
        raise UserError(
            "clean takes sweep names or --stopped; allowed: `contrasweep clean NAME [NAME ...]` or "
            "`contrasweep clean --stopped`"
        )
    chosen = (
        [sweeps.open_existing(root, _name(n)) for n in args.names]
        if args.names
        else [s for s in sweeps.list_sweeps(root) if s.status() not in ("running", "damaged")]
    )
    for sweep in chosen:
        if sweep.driver()[0] == "alive":
            raise UserError(
                f"sweep {sweep.name!r} is running ({sweep.driver()[1]}); allowed: clean it once it has ended"
            )
    for sweep in chosen:
        before = disk_use(sweep.path)
        removed = reclaim(sweep)
        print(
            f"[contrasweep] {sweep.name}: {removed} folders removed, {human(before)} -> {human(disk_use(sweep.path))}"
        )
    return 0
