"""``contrasweep ui``: the MLflow UI on a sweep's store, the address of its runs table, and a
process group taken down whole (``contrasweep.cli``).

May import: every room of ``contrasweep`` (inside the functions).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from contrasweep.errors import UserError
from contrasweep.folder import sweeps
from contrasweep.folder.record import read as read_record
from contrasweep.runner.preflight import is_loopback, local_port
from contrasweep.spec.load import _name
from contrasweep.tracking.credentials import check_uri
from contrasweep.tracking.runs_view import runs_url
from contrasweep.tracking.store import artifact_root_for, default_tracking_uri


def cmd_ui(args) -> int:
    check_uri(args.tracking_uri)
    sweep = _ui_sweep(args)
    uri = args.tracking_uri or (sweep.meta().get("tracking_uri") if sweep else None) or default_tracking_uri()
    experiment = _experiment_of(sweep, uri)
    if uri.startswith(("http://", "https://")):  # a tracking server serves its own UI
        print(
            f"[contrasweep] {uri} is a tracking server with its own UI: "
            f"{runs_url(uri.rstrip('/'), experiment) if experiment else uri}",
            flush=True,
        )
        return 0
    local_port(args.port, host=args.host)
    if not is_loopback(args.host):
        print(
            f"[contrasweep] warning: MLflow has no authentication: anyone who can reach {args.host}:{args.port} can "
            "read, change and delete every run; serve on 127.0.0.1 (the default) unless the network is yours",
            file=sys.stderr,
            flush=True,
        )
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        args.host,
        "--port",
        str(args.port),
        # one local user: one worker (MLflow's default of 4 takes minutes to boot on 2 busy cores)
        "--workers",
        "1",
    ]
    if uri.startswith("sqlite:///"):  # where the sweeps of this store put their artifacts
        command += ["--default-artifact-root", artifact_root_for(uri)]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"[contrasweep] MLflow UI on http://{shown}:{args.port} ({uri})", file=sys.stderr, flush=True)
    if experiment:
        print(
            f"[contrasweep] runs of {sweep.name!r} and the other sweeps of its experiment: "
            f"{runs_url(f'http://{shown}:{args.port}', experiment)}",
            file=sys.stderr,
            flush=True,
        )
    return serve(command, _log_path(uri, sweep))


def _log_path(uri: str, sweep) -> Path:
    """Where MLflow's own lines go (its INFO logging, its warnings): the sweep's folder, else
    next to a sqlite store, else the working directory. The terminal gets ours alone."""
    if sweep is not None:
        return sweep.path / "mlflow-ui.log"
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :]).resolve().parent / "mlflow-ui.log"
    return Path("mlflow-ui.log").resolve()


def _ui_sweep(args):
    """The sweep ``ui`` shows: the one named, else the newest sweep under the root tracked in
    the store served (None: no such sweep, the UI opens on its experiments list)."""
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
        return read_record(sweep.path / "tracking.json").get("experiment_id")
    except (OSError, ValueError, AttributeError):
        return None


def serve(command: list[str], log: Path) -> int:
    """Run the MLflow UI in a process group of its own, its output in ``log``, and take it down
    whole (``mlflow ui``, its uvicorn workers and huey) when this process gets SIGTERM or
    SIGINT: SIGTERM to the group, SIGKILL after 1.5 s (a read-only UI has nothing to save), and
    the group's stragglers SIGKILLed too. The signal only sets a flag that the main loop polls:
    a handler that waited on the child itself could not (the interrupted ``Popen.wait`` holds
    its lock), so each wait ran to its timeout and the UI took 6-15 s to go. An MLflow that
    ends by itself (a port taken) leaves its last line here."""
    import signal
    import time

    _become_subreaper()
    asked: list[int] = []  # heard from here on: a signal between the start and these would leave the UI running
    signal.signal(signal.SIGTERM, lambda signum, frame: asked.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            command,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    while proc.poll() is None and not asked:
        time.sleep(0.1)
    if asked:
        for sig, wait_s in ((signal.SIGTERM, 1.5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait_s)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what mlflow left behind (its workers), however it ended
    except ProcessLookupError:
        pass
    _reap_all(time.monotonic() + 2)  # gone, not <defunct>, when this returns
    if asked:
        raise SystemExit(128 + asked[0])
    code = proc.returncode
    if code:
        lines = log.read_text(errors="replace").strip().splitlines()
        print(
            f"[contrasweep] MLflow UI exited {code}: {lines[-1] if lines else 'no output'} (all of it: {log})",
            file=sys.stderr,
            flush=True,
        )
    return code


def _become_subreaper() -> None:
    """Orphans of MLflow's workers become this process's children (Linux
    ``PR_SET_CHILD_SUBREAPER``), so that ``_reap_all`` can reap them: left to init, they stayed
    <defunct> for 10-20 s on some machines."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):  # not Linux: init reaps them
        pass


def _reap_all(deadline: float) -> None:
    """Reap every child that has ended, until none is left or ``deadline`` (monotonic) passes."""
    import time

    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left
            return
        if pid == 0:
            time.sleep(0.05)
