"""``contrasweep ui``: the MLflow UI on a sweep's store, the address of its runs table, and a
process group taken down whole (``contrasweep.cli``).

May import: every room of ``contrasweep`` (inside the functions).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from contrasweep.errors import UserError


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
    return serve(command, _log_path(uri, sweep))


def _log_path(uri: str, sweep) -> Path:
    """Where MLflow's own lines go (its INFO logging, its warnings): the sweep's folder, else
    next to a sqlite store, else the working directory. The terminal gets ours alone."""
    if sweep is not None:
        return sweep.path / "mlflow-ui.log"
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):]).resolve().parent / "mlflow-ui.log"
    return Path("mlflow-ui.log").resolve()


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


def serve(command: list[str], log: Path) -> int:
    """Run the MLflow UI in a process group of its own, its output in ``log``, and take it down
    whole (``mlflow ui``, its uvicorn workers and huey) when this process gets SIGTERM or
    SIGINT: a SIGTERM used to leave them serving the port, and a graceful uvicorn kept a
    <defunct> child for 10-20 s, so the group gets SIGKILL after 1.5 s (a read-only UI has
    nothing to save). An MLflow that ends by itself (a port taken) leaves its last line here."""
    import signal

    with open(log, "ab") as out:
        proc = subprocess.Popen(command, env={**os.environ, "PYTHONWARNINGS": "ignore"}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def stop(signum, frame):
        for sig, wait_s in ((signal.SIGTERM, 1.5), (signal.SIGKILL, 5)):
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
    if code:
        lines = log.read_text(errors="replace").strip().splitlines()
        print(f"[contrasweep] MLflow UI exited {code}: {lines[-1] if lines else 'no output'} (all of it: {log})",
              file=sys.stderr, flush=True)
    return code
