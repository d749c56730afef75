"""A sweep whose driver died (SIGKILL, a lost machine) is set straight on the next ``contrasweep
list`` or ``resume``: ``sweep.json`` says ``interrupted`` and its MLflow runs still RUNNING end
KILLED, as after Ctrl-C; ``resume`` sets them RUNNING again (``tracking.json``'s
``interrupted_runs``, or their KILLED status when that file is gone: ``contrasweep.tracking.reattach``).
Tune's own saved state that the kill cut off mid-write is set aside (``set_aside_torn_state``).
"""

from __future__ import annotations

import json
import re

from contrasweep.errors import UserError
from contrasweep.folder.sweeps import SweepDir
from trainables.storage import filesystem

# Tune's per-session state files: experiment_state-<time>.json, the searcher's and the
# callbacks' state of the same session (basic-variant-state-, search_gen_state-, searcher-state-)
_SESSION_FILE = re.compile(r"-(\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2})\.(json|pkl)$")
TORN_SUFFIX = ".torn"


def set_aside_torn_state(tune_location: str) -> list[str]:
    """Tune writes its saved state with a plain ``open(path, "w")`` (Ray 2.60,
    ``TuneController.save_to_dir``): a driver killed while writing leaves the session's newest
    files empty or cut short, and ``Tuner.restore``, which takes the newest by name, then
    restored nothing and ran the sweep again from an empty state. Every file of such a session
    is renamed with ``.torn`` so that Tune restores the newest complete session; what ended
    after it, the sweep's own record says (docs/architecture.md, "Resume"). A pickle is torn
    when it lacks its final STOP opcode (nothing is unpickled here), anything else when it does
    not parse as JSON (an empty file included). Returns the names set aside."""
    from pyarrow import fs

    filesys, root = filesystem(tune_location)
    sessions: dict[str, list] = {}
    for info in filesys.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        found = _SESSION_FILE.search(info.base_name) if info.type == fs.FileType.File else None
        if found:
            sessions.setdefault(found.group(1), []).append(info)
    torn = [stamp for stamp, files in sessions.items() if any(_torn(filesys, info) for info in files)]
    names = []
    for stamp in sorted(torn):
        for info in sessions[stamp]:
            filesys.move(info.path, info.path + TORN_SUFFIX)
            names.append(info.base_name)
    return names


def _torn(filesys, info) -> bool:
    """Judged by content, not by name: Tune's searcher states are pickles also where their
    name ends in ``.json`` (``basic-variant-state-``, ``search_gen_state-``)."""
    with filesys.open_input_stream(info.path) as stream:
        data = stream.read()
    if data[:1] == b"\x80":  # a pickle (protocol 2 or later): complete when it ends with STOP
        return not data.endswith(b".")
    try:
        json.loads(data)
    except ValueError:  # empty or cut short (UnicodeDecodeError is a ValueError too)
        return True
    return False


def settle(sweep: SweepDir) -> str | None:
    """Record a dead driver's sweep as interrupted and close its RUNNING runs; a line saying
    what was done (None when the sweep needed nothing). An unreachable store is a line too:
    the sweep stays as it is and the next ``list`` or ``resume`` tries again."""
    try:
        meta = sweep.meta()
    except UserError:
        return None
    if meta.get("status") != "running" or sweep.driver()[0] == "alive":
        return None
    who = sweep.driver()[1]
    try:
        closed = close_runs(sweep, meta)
    except Exception as exc:  # noqa: BLE001 - list goes on with the other sweeps whatever the store says
        from contrasweep.tracking.store import error_line

        return (f"{sweep.name}: its driver is gone ({who}) but its MLflow runs could not be closed "
                f"({type(exc).__name__}: {error_line(str(exc))[:200]})")
    sweep.update_meta(status="interrupted", stopped="the driver died")
    return f"{sweep.name}: its driver is gone ({who}); marked interrupted, {closed} MLflow runs closed as KILLED"


def close_runs(sweep: SweepDir, meta: dict) -> int:
    """End the sweep's RUNNING runs KILLED; the closed ones are remembered for resume."""
    from contrasweep.tracking.reattach import children_of, parent_of, sweep_runs
    from contrasweep.tracking.record import TrackingState
    from contrasweep.tracking.store import get_client

    uri = meta.get("tracking_uri")
    if not uri:
        return 0
    client = get_client(uri)
    state = TrackingState(sweep.path / "tracking.json") if (sweep.path / "tracking.json").exists() else None
    experiment = client.get_experiment_by_name(str((sweep.spec().get("tracking") or {}).get("experiment", "contrasweep")))
    if experiment is None:
        return 0
    runs = sweep_runs(client, experiment.experiment_id, sweep.name)
    parent_id = state.data.get("parent_run_id") if state else None
    if parent_id is None:
        parent = parent_of(runs, meta.get("created"))
        parent_id = parent.info.run_id if parent else None
    if parent_id is None:
        return 0
    mine = [r for r in runs if r.info.run_id == parent_id] + children_of(runs, parent_id)
    running = [r.info.run_id for r in mine if r.info.status == "RUNNING"]
    for run_id in running:
        client.set_terminated(run_id, status="KILLED")
    if state is not None:
        reopen = set(state.data.get("interrupted_runs", [])) | {r for r in running if r != parent_id}
        state.data["interrupted_runs"] = sorted(reopen)
        state.save()
    return len(running)
