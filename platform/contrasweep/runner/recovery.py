"""A sweep whose driver died (SIGKILL, a lost machine) is set straight on the next ``contrasweep
list`` or ``resume``: ``sweep.json`` says ``interrupted`` and its MLflow runs still RUNNING end
KILLED, as after Ctrl-C (once the MLflow writes the driver had queued are applied); ``resume``
sets them RUNNING again (``tracking.json``'s ``interrupted_runs``, or their KILLED status when
that file is gone: ``contrasweep.tracking.reattach``).
A trial process Ray killed for memory ends the driver with one line (``out_of_memory``).
"""

from __future__ import annotations

from contrasweep.errors import UserError
from contrasweep.folder.record import TrackingState
from contrasweep.folder.sweeps import SweepDir
from contrasweep.tracking.reattach import children_of, parent_of, sweep_runs
from contrasweep.tracking.store import error_line, get_client
from contrasweep.tracking.writer import replay_log


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
        return (
            f"{sweep.name}: its driver is gone ({who}) but its MLflow runs could not be closed "
            f"({type(exc).__name__}: {error_line(str(exc))[:200]})"
        )
    sweep.update_meta(status="interrupted", stopped="the driver died")
    return f"{sweep.name}: its driver is gone ({who}); marked interrupted, {closed} MLflow runs closed as KILLED"


def close_runs(sweep: SweepDir, meta: dict) -> int:
    """End the sweep's RUNNING runs KILLED; the closed ones are remembered for resume."""
    uri = meta.get("tracking_uri")
    if not uri:
        return 0
    client = get_client(uri)
    # what its MLflow writer was sent: once that writer has applied it, what a writer killed
    # with the driver had not applied (contrasweep.tracking.writer)
    replay_log(client, sweep.path)
    state = TrackingState(sweep.path / "tracking.json") if (sweep.path / "tracking.json").exists() else None
    experiment = client.get_experiment_by_name(
        str((sweep.spec().get("tracking") or {}).get("experiment", "contrasweep"))
    )
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


def out_of_memory(exc: BaseException, name: str) -> UserError | None:
    """The one line for a sweep whose trial process Ray's memory monitor killed (Tune's
    controller re-raises ``ray.exceptions.OutOfMemoryError`` as a RuntimeError and ends the
    driver: measured, SupCL-Seq's batch of 480 and SimCSE's of 1024 two at a time on 24 GB);
    None for any other error."""
    from ray.exceptions import OutOfMemoryError

    seen: BaseException | None = exc
    chain: set[int] = set()
    while seen is not None and id(seen) not in chain:
        if isinstance(seen, OutOfMemoryError):
            return UserError(
                f"sweep {name!r} stopped: Ray killed a trial's process because this machine ran low on memory (over "
                "95 % of it in use); nothing finished is lost; allowed: fewer trials at once (`--set "
                "sweep.max_concurrent=1` in a new sweep) or a smaller batch_size or eval_batch_size, or "
                f"`contrasweep resume {name}` on a machine with more memory"
            )
        chain.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return None
