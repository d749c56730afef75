"""What each ``contrasweep`` command does (``contrasweep.cli`` parses the arguments and imports
this module when one of these commands runs). ``run``, ``resume``, ``extend`` and ``list`` call the
Python API (``contrasweep.api``), so the command line and a notebook say and do the same; those
import Ray's side (``contrasweep.runner.tune``) only after their checks, so a bad name or spec answers
within a second. The report's module (scipy, matplotlib) is imported only where a report is built.
"""

from __future__ import annotations

import json
import sys

from contrasweep.api import actions, launch
from contrasweep.api.reading import LIST_COLUMNS, sweep_rows
from contrasweep.api.sweep import run_ids
from contrasweep.console.quiet import quiet_libraries
from contrasweep.console.summary import disk_use, human
from contrasweep.errors import UserError
from contrasweep.folder import sweeps
from contrasweep.folder.cleanup import reclaim
from contrasweep.spec.load import _name
from contrasweep.tracking.credentials import check_uri
from contrasweep.tracking.store import default_tracking_uri


def cmd_run(args) -> int:
    _, code = actions.run_sweep(
        args.spec,
        args.overrides,
        name=args.name,
        root=args.root,
        tracking_uri=args.tracking_uri,
        address=args.address,
        storage=args.storage,
        smoke_test=args.smoke_test,
        overwrite=args.overwrite,
        tsne=not args.no_tsne,
        verbose=args.verbose,
        ray_dashboard=args.ray_dashboard,
        ray_bind_all=args.ray_bind_all,
    )
    return code


def cmd_resume(args) -> int:
    _, code = actions.resume_sweep(
        args.name,
        root=args.root,
        address=args.address,
        storage=args.storage,
        allow_changed_method=args.allow_changed_method,
        tsne=not args.no_tsne,
        verbose=args.verbose,
        ray_dashboard=args.ray_dashboard,
        ray_bind_all=args.ray_bind_all,
    )
    return code


def cmd_extend(args) -> int:
    _, code = actions.extend_sweep(
        args.name,
        args.overrides,
        top=args.top,
        root=args.root,
        address=args.address,
        allow_changed_method=args.allow_changed_method,
        tsne=not args.no_tsne,
        verbose=args.verbose,
        ray_dashboard=args.ray_dashboard,
        ray_bind_all=args.ray_bind_all,
    )
    return code


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
        run_ids=run_ids(root, [args.name, *args.compare], uri),
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


def cmd_plan(args) -> int:
    found = launch.plan(
        args.spec, args.overrides, address=args.address, remeasure=args.remeasure, tsne=not args.no_tsne
    )
    print(json.dumps(found.data, indent=1) if args.json else str(found))
    return 0


def cmd_list(args) -> int:
    rows, notes = sweep_rows(args.root)  # dead drivers' sweeps set straight first
    if not rows:
        print(f"no sweeps in {sweeps.sweeps_root(args.root)}")
        return 0
    cells = [tuple(human(v) if k == "disk" else v for k, v in row.items()) for row in rows]
    header = tuple("selected configuration" if c == "selected" else c for c in LIST_COLUMNS)
    for line in table(header, cells, right=(2, 8)):
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
