"""The command line's arguments: one subparser per command (``contrasweep.cli``).

May import: the standard library only.
"""

from __future__ import annotations

import argparse

DESCRIPTION = (
    "run, resume, extend, plan, list, clean and report sweeps, open the MLflow UI, and check a method "
    "against the loop's contract"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="contrasweep", description=DESCRIPTION)
    add_global_options(parser, default=None)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="start a sweep from a spec YAML")
    run.add_argument("spec", help="a sweep spec, e.g. search_spaces/ce.yaml")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec value, e.g. --set fixed.epochs=3 --set data.k=10 (repeatable)",
    )
    run.add_argument("--name", help="the sweep's name (default: spec name or file stem + time)")
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a sweep of the same --name (its folder is removed; its MLflow runs stay)",
    )
    run.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite ./mlflow.db)")
    run.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    run.add_argument("--smoke-test", action="store_true", help="1 epoch, 2 trials: check the set-up end to end")
    run.add_argument(
        "--ray-dashboard",
        action="store_true",
        help="start the local Ray's dashboard (127.0.0.1) even "
        "when no trial needs it (distributed trials always have it)",
    )
    run.add_argument(
        "--storage",
        metavar="URI",
        help="where checkpoints and Tune state live: a path every node sees or "
        "s3://bucket/prefix, gs://… (default: sweep.storage, else the sweep folder)",
    )

    resume = sub.add_parser("resume", help="resume an interrupted sweep")
    resume.add_argument("name")
    resume.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    resume.add_argument(
        "--storage", metavar="URI", help="the sweep's storage, to resume on a machine without its folder"
    )
    resume.add_argument(
        "--ray-dashboard",
        action="store_true",
        help="start the local Ray's dashboard (127.0.0.1) even when no trial needs it",
    )
    extend = sub.add_parser(
        "extend",
        help="grow a sweep that ran: more seeds or data values (grid), more "
        "suggestions (optuna, random); only the new trials train",
    )
    extend.add_argument("name")
    extend.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        required=True,
        help="what grows, e.g. --set sweep.seeds=[0,1,2] --set data.k=[5,20,50] or "
        "--set sweep.num_samples=60 (repeatable)",
    )
    extend.add_argument(
        "--top",
        type=int,
        metavar="K",
        help="new repeats only for the K best complete configurations "
        "of each setting by validation mean (default: every complete configuration)",
    )
    extend.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS or a local Ray)")
    extend.add_argument("--ray-dashboard", action="store_true", help="start the local Ray's dashboard (127.0.0.1)")
    for sub_parser in (resume, extend):
        sub_parser.add_argument(
            "--allow-changed-method",
            action="store_true",
            help="go on although your own method's "
            "file changed since the sweep last ran (its runs then record both hashes)",
        )
    for sub_parser in (run, resume, extend):
        sub_parser.add_argument(
            "--ray-bind-all",
            action="store_true",
            help="let the local Ray's services listen on every "
            "interface (default: 127.0.0.1 only; token authentication stays on)",
        )
        sub_parser.add_argument(
            "--no-tsne",
            action="store_true",
            help="the report written when the sweep finishes "
            "leaves out the t-SNE map (it loads the model and embeds the test split; "
            "`contrasweep report NAME` draws it later)",
        )

    plan = sub.add_parser(
        "plan",
        help="what a sweep will cost before it runs: trials, epochs, steps, disk and an "
        "estimated wall time (calibrated on this machine in about 20 s)",
    )
    plan.add_argument("spec", help="a sweep spec, e.g. search_spaces/lacon.yaml")
    plan.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec value, as for run (repeatable)",
    )
    plan.add_argument("--address", help="plan for the Ray cluster at this address (default: this machine)")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    plan.add_argument(
        "--no-tsne", action="store_true", help="plan for `run --no-tsne` (the report without its t-SNE map)"
    )
    plan.add_argument(
        "--remeasure",
        action="store_true",
        help="measure the fixed costs (Ray's start, a trial process's start, per-trial bookkeeping) again "
        "instead of using those measured on this machine in the last day",
    )

    sub.add_parser("list", help="list sweeps: status, trials ended, best value so far, disk use")

    clean = sub.add_parser(
        "clean",
        help="free the disk sweeps no longer need (resume states of finished sweeps, "
        "state folders of stopped trials); best weights and MLflow stay",
    )
    clean.add_argument("names", nargs="*", metavar="NAME", help="the sweeps to clean")
    clean.add_argument(
        "--stopped", action="store_true", help="every sweep that is not running (finished, interrupted or failed)"
    )

    report = sub.add_parser("report", help="tables, curves, fronts and t-SNE of a sweep (HTML, logged to MLflow)")
    report.add_argument("name", help="the sweep to report on")
    report.add_argument(
        "--compare", nargs="+", default=[], metavar="OTHER", help="more sweeps in the same tables and curves"
    )
    report.add_argument(
        "--baseline",
        help="the sweep the others are compared with: NAME or one after --compare "
        "(default: the first ce sweep, else the first sweep named)",
    )
    report.add_argument(
        "--tracking-uri", help="MLflow tracking URI (default: the sweep's own, else sqlite ./mlflow.db)"
    )
    report.add_argument("--out", help="folder for report.html and its files (default: <sweep folder>/report)")
    report.add_argument("--no-tsne", action="store_true", help="skip the t-SNE of the registered model")

    ui = sub.add_parser(
        "ui",
        help="start the MLflow UI (on 127.0.0.1 unless --host says otherwise) and give the "
        "address of a sweep's runs table",
    )
    ui.add_argument(
        "name",
        nargs="?",
        help="the sweep whose experiment to show (default: the newest sweep tracked in the store served)",
    )
    ui.add_argument("--tracking-uri", help="MLflow tracking URI (default: the sweep's own, else sqlite ./mlflow.db)")
    ui.add_argument("--port", type=int, default=5000)
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1: this machine only; "
        "MLflow has no authentication, so anyone who reaches another address can read and change every run)",
    )
    check = sub.add_parser(
        "check-method",
        help="check a method (yours: package.module:Class or path/to/file.py:Class) "
        "against the loop's contract on a tiny random BERT, in seconds; exit 1 if a check fails",
    )
    check.add_argument("method", help="a built-in name (ce, lacon, ...), package.module:Class or path/to/file.py:Class")
    check.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a hyperparameter for the check, e.g. --set temperature=0.1 (repeatable)",
    )
    for sub_parser in sub.choices.values():  # global options after the subcommand too
        add_global_options(sub_parser, default=argparse.SUPPRESS)
    return parser


def add_global_options(parser: argparse.ArgumentParser, default) -> None:
    """Options every command takes, before or after its name (``contrasweep --root X list`` and
    ``contrasweep list --root X``); a subcommand's copy only overrides when given."""
    parser.add_argument(
        "--root", default=default, help="folder holding the sweeps (default: $CONTRASWEEP_HOME or ./sweeps)"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default or False,
        help="show Ray's and Tune's own output too (always kept in <sweep folder>/driver.log)",
    )
