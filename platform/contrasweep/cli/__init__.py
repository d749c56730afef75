"""contrasweep: run, resume, extend, plan, list, clean and report sweeps, open the MLflow UI, and
check a method (your own) against the loop's contract.

User errors print one line (``contrasweep: error: ...``) and exit with status 2, without a
traceback; a sweep interrupted that way loses nothing already finished (resume it).
``parser``: the arguments; ``commands``: what each command does; ``ui``: the MLflow UI command;
``check_method``: a method's contract with the loop.
A command's module is imported when that command runs (``COMMANDS``, as pip's command table
does), so ``--help`` and a bad argument answer without importing the data or tracking layers;
every command starts with the libraries' progress bars off (``contrasweep.console.quiet``).

May import: ``contrasweep.api`` (run, resume, extend, list), ``contrasweep.errors``,
``contrasweep.spec``, ``contrasweep.folder``, ``contrasweep.tracking``, ``contrasweep.console``,
``contrasweep.runner``, ``dashboards`` (the
report after a sweep), ``trainables.contract`` (``check-method``).
"""

from __future__ import annotations

import importlib
import os
import sys

from contrasweep.cli.parser import build_parser
from contrasweep.console.quiet import quiet_libraries
from contrasweep.errors import UserError
from contrasweep.runner.ray_env import local_ray_environment
from contrasweep.runner.stop_signal import interrupted_exit

__all__ = ["build_parser", "main"]

# command -> (module, function)
COMMANDS = {
    name: ("contrasweep.cli.commands", f"cmd_{name}")
    for name in ("run", "resume", "extend", "plan", "list", "report", "clean")
} | {"ui": ("contrasweep.cli.ui", "cmd_ui"), "check-method": ("contrasweep.cli.check_method", "cmd_check_method")}


# the commands that may start a local Ray (plan: its probe of Ray's start)
STARTS_RAY = ("run", "resume", "extend", "plan")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in STARTS_RAY and not (args.address or os.environ.get("RAY_ADDRESS")):
        local_ray_environment(getattr(args, "ray_bind_all", False))  # before a command imports Ray
    quiet_libraries()  # before a library is imported
    module, function = COMMANDS[args.command]
    command = getattr(importlib.import_module(module), function)
    try:  # run, resume, extend: the console and SIGTERM as Ctrl-C are the API's (contrasweep.api.actions)
        return command(args)
    except UserError as exc:
        print(f"contrasweep: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "contrasweep: interrupted; finished trials are kept — `contrasweep resume NAME` continues", file=sys.stderr
        )
        return interrupted_exit()


if __name__ == "__main__":
    sys.exit(main())
