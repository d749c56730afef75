"""contrasweep: run, resume, list and report sweeps, and open the MLflow UI.

User errors print one line (``contrasweep: error: ...``) and exit with status 2, without a
traceback; a sweep interrupted that way loses nothing already finished (resume it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from contrasweep.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contrasweep", description=__doc__.splitlines()[0].split(": ", 1)[1])
    add_global_options(parser, default=None)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="start a sweep from a spec YAML")
    run.add_argument("spec", help="a sweep spec, e.g. search_spaces/ce.yaml")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a spec value, e.g. --set fixed.epochs=3 --set data.k=10 (repeatable)")
    run.add_argument("--name", help="the sweep's name (default: spec name or file stem + time)")
    run.add_argument("--overwrite", action="store_true", help="replace a sweep of the same --name (its folder is "
                     "removed; its MLflow runs stay)")
    run.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite ./mlflow.db)")
    run.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    run.add_argument("--smoke-test", action="store_true", help="1 epoch, 2 trials: check the set-up end to end")
    run.add_argument("--ray-dashboard", action="store_true", help="start the local Ray's dashboard (127.0.0.1) even "
                     "when no trial needs it (distributed trials always have it)")
    run.add_argument("--storage", metavar="URI", help="where checkpoints and Tune state live: a path every node sees or "
                     "s3://bucket/prefix, gs://… (default: sweep.storage, else the sweep folder)")

    resume = sub.add_parser("resume", help="resume an interrupted sweep")
    resume.add_argument("name")
    resume.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    resume.add_argument("--storage", metavar="URI", help="the sweep's storage, to resume on a machine without its folder")
    resume.add_argument("--ray-dashboard", action="store_true", help="start the local Ray's dashboard (127.0.0.1) even "
                        "when no trial needs it")
    extend = sub.add_parser("extend", help="grow a sweep that ran: more seeds or data values (grid), more "
                            "suggestions (optuna, random); only the new trials train")
    extend.add_argument("name")
    extend.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", required=True,
                        help="what grows, e.g. --set sweep.seeds=[0,1,2] --set data.k=[5,20,50] or "
                        "--set sweep.num_samples=60 (repeatable)")
    extend.add_argument("--top", type=int, metavar="K", help="new repeats only for the K best complete configurations "
                        "of each setting by validation mean (default: every complete configuration)")
    extend.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    extend.add_argument("--ray-dashboard", action="store_true", help="start the local Ray's dashboard (127.0.0.1)")
    for sub_parser in (run, resume, extend):
        sub_parser.add_argument("--ray-bind-all", action="store_true", help="let the local Ray's services listen on every "
                                "interface (default: 127.0.0.1 only; token authentication stays on)")
        sub_parser.add_argument("--no-tsne", action="store_true", help="the report written when the sweep finishes "
                                "leaves out the t-SNE map (it loads the model and embeds the test split; "
                                "`contrasweep report NAME` draws it later)")

    plan = sub.add_parser("plan", help="what a sweep will cost before it runs: trials, epochs, steps, disk and an "
                          "estimated wall time (calibrated on this machine in about 20 s)")
    plan.add_argument("spec", help="a sweep spec, e.g. search_spaces/lacon.yaml")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a spec value, as for run (repeatable)")
    plan.add_argument("--address", help="plan for the Ray cluster at this address (default: this machine)")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    plan.add_argument("--no-tsne", action="store_true", help="plan for `run --no-tsne` (the report without its t-SNE map)")

    sub.add_parser("list", help="list sweeps: status, trials ended, best value so far, disk use")

    clean = sub.add_parser("clean", help="free the disk sweeps no longer need (resume states of finished sweeps, "
                           "state folders of stopped trials); best weights and MLflow stay")
    clean.add_argument("names", nargs="*", metavar="NAME", help="the sweeps to clean")
    clean.add_argument("--stopped", action="store_true", help="every sweep that is not running (finished, "
                       "interrupted or failed)")

    report = sub.add_parser("report", help="tables, curves, fronts and t-SNE of a sweep (HTML, logged to MLflow)")
    report.add_argument("name", help="the sweep to report on")
    report.add_argument("--compare", nargs="+", default=[], metavar="OTHER", help="more sweeps in the same tables and curves")
    report.add_argument("--baseline", help="the sweep p-values are computed against (default: the first ce sweep)")
    report.add_argument("--tracking-uri", help="MLflow tracking URI (default: the sweep's own, else sqlite ./mlflow.db)")
    report.add_argument("--out", help="folder for report.html and its files (default: <sweep folder>/report)")
    report.add_argument("--no-tsne", action="store_true", help="skip the t-SNE of the registered model")

    ui = sub.add_parser("ui", help="start the MLflow UI (on 127.0.0.1 unless --host says otherwise) and give the "
                        "address of a sweep's runs table")
    ui.add_argument("name", nargs="?", help="the sweep whose experiment to show (default: the newest sweep tracked in "
                    "the store served)")
    ui.add_argument("--tracking-uri", help="MLflow tracking URI (default: the sweep's own, else sqlite ./mlflow.db)")
    ui.add_argument("--port", type=int, default=5000)
    ui.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1: this machine only; "
                    "MLflow has no authentication, so anyone who reaches another address can read and change every run)")
    for sub_parser in sub.choices.values():  # global options after the subcommand too
        add_global_options(sub_parser, default=argparse.SUPPRESS)
    return parser


def add_global_options(parser: argparse.ArgumentParser, default) -> None:
    """Options every command takes, before or after its name (``contrasweep --root X list`` and
    ``contrasweep list --root X``); a subcommand's copy only overrides when given."""
    parser.add_argument("--root", default=default, help="folder holding the sweeps (default: $CONTRASWEEP_HOME or ./sweeps)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default or False,
                        help="show Ray's and Tune's own output too (always kept in <sweep folder>/driver.log)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command in ("run", "resume", "extend"):  # our lines on the terminal, all of it in driver.log
            from contrasweep.console import Console

            with Console(args.verbose):
                return COMMANDS[args.command](args)
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"contrasweep: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("contrasweep: interrupted; finished trials are kept — `contrasweep resume NAME` continues", file=sys.stderr)
        return 130


def cmd_run(args) -> int:
    from contrasweep.folder import sweeps
    from contrasweep.spec.load import load_spec

    overrides = list(args.overrides)
    if args.smoke_test:
        load_spec(args.spec, overrides)  # the spec as written must be valid: --smoke-test never hides a bad value
        overrides += ["fixed.epochs=1", "sweep.num_samples=2"]
    sweep = load_spec(args.spec, overrides)
    if args.smoke_test:  # its own experiment: smoke runs never mix into comparisons
        sweep.experiment = f"{sweep.experiment}-smoke"
        sweep.raw.setdefault("tracking", {})["experiment"] = sweep.experiment
    if args.storage is not None:
        from contrasweep.spec.load import storage_location

        sweep.storage = storage_location(args.storage, "--storage")
        sweep.raw.setdefault("sweep", {})["storage"] = sweep.storage
    if args.smoke_test:
        _smoke(sweep)
    if args.name is not None:
        from contrasweep.spec.load import _name

        _name(args.name)
    name = args.name or sweeps.default_name(sweep.name or args.spec, smoke=args.smoke_test)
    root = sweeps.sweeps_root(args.root)
    sweeps.ensure_new(root, name, args.overwrite)  # these before Ray is imported: an error within a second
    from contrasweep.run.preflight import services

    services(args.tracking_uri, args.address)  # the default sqlite store needs no probe
    from contrasweep.run.tune import run

    results = run(sweep, name, root, args.tracking_uri, args.address, ray_dashboard=args.ray_dashboard,
                  ray_bind_all=args.ray_bind_all, overwrite=args.overwrite)
    status = sweeps.open_existing(root, name).meta()["status"]
    code = _summary(results, sweep.objective.metric, sweep.objective.mode, name, status, sweep, root)
    _auto_report(root, name, status, tsne=not args.no_tsne)
    return code


def _smoke(sweep) -> None:
    """--smoke-test: 1 epoch (forced above) and at most 2 trials."""
    sweep.grid_limit = 2


def _summary(results, metric: str, mode: str, name: str, status: str, sweep=None, root=None) -> int:
    """The lines a sweep ends with: how it ended and its trials' outcomes, where its folder is
    and how much disk it holds, each setting's best configuration with its validation and test
    metric and its MLflow run, the failures, and what to run next."""
    from contrasweep.console.summary import summary_lines

    lines, errors = summary_lines(results, metric, mode, name, status, sweep, root)
    for line in lines:
        print(line, flush=True)
    if status == "interrupted":
        return 130
    return 1 if errors else 0


def cmd_resume(args) -> int:
    from contrasweep.folder import sweeps
    from contrasweep.spec.load import _name

    root = sweeps.sweeps_root(args.root)
    _name(args.name)  # a name, never a path (no reading, or unpickling, outside the root)
    if not args.storage:
        sweeps.open_existing(root, args.name)  # before Ray is imported: an error within a second
    from contrasweep.run.extend import grow_again, never_started
    from contrasweep.run.tune import resume

    if (root / args.name / "sweep.json").exists() and never_started(sweeps.open_existing(root, args.name)):
        results = grow_again(args.name, root, args.address, args.ray_dashboard, args.ray_bind_all)
    else:
        results = resume(args.name, root, args.address, args.storage, ray_dashboard=args.ray_dashboard,
                         ray_bind_all=args.ray_bind_all)
    sweep_dir = sweeps.open_existing(root, args.name)
    from contrasweep.run.inputs import load_sweep

    sweep = load_sweep(sweep_dir)
    status = sweep_dir.meta()["status"]
    code = _summary(results, sweep.objective.metric, sweep.objective.mode, args.name, status, sweep, root)
    _auto_report(root, args.name, status, tsne=not args.no_tsne)
    return code


def cmd_extend(args) -> int:
    from contrasweep.folder import sweeps
    from contrasweep.spec.load import _name

    root = sweeps.sweeps_root(args.root)
    sweeps.open_existing(root, _name(args.name))  # before Ray is imported: an error within a second
    from contrasweep.run.extend import extend
    from contrasweep.run.inputs import load_sweep

    results = extend(args.name, root, args.overrides, args.top, args.address, ray_dashboard=args.ray_dashboard,
                     ray_bind_all=args.ray_bind_all)
    sweep_dir = sweeps.open_existing(root, args.name)
    sweep, status = load_sweep(sweep_dir), sweep_dir.meta()["status"]
    code = _summary(results, sweep.objective.metric, sweep.objective.mode, args.name, status, sweep, root)
    _auto_report(root, args.name, status, tsne=not args.no_tsne)
    return code


def _auto_report(root, name: str, status: str, tsne: bool = True) -> None:
    """A finished sweep gets its report at once (logged to its parent run); a report that
    fails never fails the sweep: one line says so and how to retry."""
    if status != "finished":
        return
    from contrasweep.folder import sweeps

    sweep_dir = sweeps.open_existing(root, name)
    try:
        from dashboards.report import build

        built = build(sweep_dir.meta()["tracking_uri"], name, sweep_dir.path / "report", tsne=tsne)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are safe in MLflow either way
        print(f"[contrasweep] report not written ({type(exc).__name__}: {exc}); retry with: contrasweep report {name}",
              file=sys.stderr, flush=True)
        return
    print(f"[contrasweep] report: {built.html_path} (also in MLflow: parent run → Artifacts → report/)", flush=True)


def cmd_report(args) -> int:
    from contrasweep.folder import sweeps
    from contrasweep.spec.load import _name
    from contrasweep.tracking.store import default_tracking_uri
    from dashboards.report import build

    root = sweeps.sweeps_root(args.root)
    folder = root / _name(args.name)  # a name, never a path (no reading outside the root)
    meta = sweeps.SweepDir(folder).meta()
    uri = args.tracking_uri or meta.get("tracking_uri") or default_tracking_uri()
    out = args.out or (folder / "report" if meta else f"report-{args.name}")
    built = build(uri, args.name, out, compare=tuple(args.compare), baseline=args.baseline, tsne=not args.no_tsne)
    print(built.main.title)
    print(built.main.text())
    print(f"[contrasweep] report: {built.html_path} ({len(built.sections)} sections; logged to the parent run "
          f"of {args.name!r} under report/)")
    return 0


def cmd_plan(args) -> int:
    import json

    from contrasweep.run import sweep_plan
    from contrasweep.run.checks import check_against_encoder
    from contrasweep.run.inputs import prepare_data
    from contrasweep.run.preflight import services
    from contrasweep.spec.load import load_spec

    sweep = load_spec(args.spec, args.overrides)
    if args.address:
        services(None, args.address)
    check_against_encoder(sweep)
    sweep_plan.quiet()
    prepared = prepare_data(sweep)  # the cache the sweep then reuses
    available = sweep_plan.available_resources(args.address)
    found = sweep_plan.plan(sweep, prepared, sweep_plan.calibrate_first_trial(sweep, prepared), available,
                            tsne=not args.no_tsne)
    if args.json:
        print(json.dumps(found.as_json(), indent=1))
        return 0
    for line in sweep_plan.describe(sweep, found, available, args.address or "this machine"):
        print(f"[contrasweep] {line}")
    return 0


def cmd_list(args) -> int:
    from contrasweep.folder import sweeps

    root = sweeps.sweeps_root(args.root)
    found = sweeps.list_sweeps(root)
    if not found:
        print(f"no sweeps in {root}")
        return 0
    from contrasweep.run.recovery import settle

    notes = [note for note in (settle(s) for s in found) if note]  # dead drivers' sweeps set straight first
    from contrasweep.console.summary import human, listing

    print(f"{'name':36} {'status':12} {'trials':>7}  {'best':24} {'disk':>8}  {'created':19}")
    for s in found:
        row = listing(s)
        print(f"{s.name:36} {row['status']:12} {row['trials']:>7}  {row['best']:24} {human(row['disk']):>8}  "
              f"{row['created']:19}")
    for note in notes:
        print(f"[contrasweep] {note}", file=sys.stderr)
    return 0


def cmd_clean(args) -> int:
    from contrasweep.console.summary import disk_use, human
    from contrasweep.folder import sweeps
    from contrasweep.folder.cleanup import reclaim
    from contrasweep.spec.load import _name

    root = sweeps.sweeps_root(args.root)
    if bool(args.names) == bool(args.stopped):
        raise UserError("clean takes sweep names or --stopped; allowed: `contrasweep clean NAME [NAME ...]` or "
                        "`contrasweep clean --stopped`")
    chosen = [sweeps.open_existing(root, _name(n)) for n in args.names] if args.names else \
        [s for s in sweeps.list_sweeps(root) if s.status() not in ("running", "damaged")]
    for sweep in chosen:
        if sweep.driver()[0] == "alive":
            raise UserError(f"sweep {sweep.name!r} is running ({sweep.driver()[1]}); allowed: clean it once it has ended")
    for sweep in chosen:
        before = disk_use(sweep.path)
        removed = reclaim(sweep)
        print(f"[contrasweep] {sweep.name}: {removed} folders removed, {human(before)} -> {human(disk_use(sweep.path))}")
    return 0


def cmd_ui(args) -> int:
    from contrasweep.run.preflight import is_loopback, local_port
    from contrasweep.tracking.store import artifact_root_for, default_tracking_uri

    sweep = _ui_sweep(args)
    uri = args.tracking_uri or (sweep.meta().get("tracking_uri") if sweep else None) or default_tracking_uri()
    experiment = _experiment_of(sweep, uri)
    if uri.startswith(("http://", "https://")):  # a tracking server serves its own UI
        from contrasweep.tracking.runs_view import runs_url

        print(f"[contrasweep] {uri} is a tracking server with its own UI: "
              f"{runs_url(uri.rstrip('/'), experiment) if experiment else uri}", flush=True)
        return 0
    local_port(args.port, host=args.host)
    if not is_loopback(args.host):
        print(f"[contrasweep] warning: MLflow has no authentication: anyone who can reach {args.host}:{args.port} can "
              "read, change and delete every run; serve on 127.0.0.1 (the default) unless the network is yours",
              file=sys.stderr, flush=True)
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", args.host, "--port", str(args.port),
               # one local user: one worker (MLflow's default of 4 takes minutes to boot on 2 busy cores)
               "--workers", "1"]
    if uri.startswith("sqlite:///"):  # where the sweeps of this store put their artifacts
        command += ["--default-artifact-root", artifact_root_for(uri)]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"[contrasweep] MLflow UI on http://{shown}:{args.port} ({uri})", file=sys.stderr, flush=True)
    if experiment:
        from contrasweep.tracking.runs_view import runs_url

        print(f"[contrasweep] runs of {sweep.name!r} and the other sweeps of its experiment: "
              f"{runs_url(f'http://{shown}:{args.port}', experiment)}", file=sys.stderr, flush=True)
    return serve(command)


def _ui_sweep(args):
    """The sweep ``ui`` shows: the one named, else the newest sweep under the root tracked in
    the store served (None: no such sweep, the UI opens on its experiments list)."""
    from contrasweep.folder import sweeps
    from contrasweep.spec.load import _name
    from contrasweep.tracking.store import default_tracking_uri

    root = sweeps.sweeps_root(args.root)
    if args.name is not None:
        return sweeps.open_existing(root, _name(args.name))
    uri = args.tracking_uri or default_tracking_uri()
    for sweep in reversed(sweeps.list_sweeps(root)):
        try:
            if _experiment_of(sweep, uri):
                return sweep
        except UserError:  # a damaged sweep.json: not this one
            continue
    return None


def _experiment_of(sweep, uri: str) -> str | None:
    """The MLflow experiment id of ``sweep``'s runs in store ``uri`` (its ``tracking.json``)."""
    if sweep is None or sweep.meta().get("tracking_uri") != uri:
        return None
    try:
        return json.loads((sweep.path / "tracking.json").read_text()).get("experiment_id")
    except (OSError, ValueError, AttributeError):
        return None


def serve(command: list[str]) -> int:
    """Run the MLflow UI in a process group of its own and take it down whole (``mlflow ui``,
    its uvicorn workers and huey) when this process gets SIGTERM or SIGINT: a SIGTERM used to
    leave them serving the port."""
    import signal

    proc = subprocess.Popen(command, env=os.environ.copy(), start_new_session=True)

    def stop(signum, frame):
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait_s)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # what mlflow left behind when it ended by itself
    except ProcessLookupError:
        pass
    return code


COMMANDS = {"run": cmd_run, "resume": cmd_resume, "extend": cmd_extend, "plan": cmd_plan, "list": cmd_list, "report": cmd_report, "ui": cmd_ui,
            "clean": cmd_clean}

if __name__ == "__main__":
    sys.exit(main())
