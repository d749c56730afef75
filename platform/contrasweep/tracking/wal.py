"""The MLflow writer's write-ahead log (``contrasweep.tracking.writer``): its session folders,
named and replayed in the order they were written, and a replay that is idempotent on every store.

A sweep's log is ``mlflow_wal/<session>/``: one session per writer, ``<n>.wal`` segments of
length-prefixed pickles (``frames``) and ``done``, the number of the last call applied.

* **Order.** A session is named ``<ns>-<pid>`` (``new_session``): ``ns`` the wall clock in
  nanoseconds, raised past the newest session already there so that a clock set back (or
  another machine's, on shared storage) cannot put it before them. ``replay`` orders sessions by
  ``(ns, pid)`` read as numbers (``session_order``), never by their names as text: the folders
  written before this rule are named ``<pid>-<ns>``, and as text a pid of 100123 sorts before
  one of 99999 (issue 69). Both forms read the same way: of a name's two numbers, the wall
  clock is the larger (a pid is below 2**32, a time in ns since 2001 above 10**18).
* **Idempotence.** A replayed call may have been applied already (the writer is killed between
  applying a call and noting it in ``done``, or an earlier replay failed part-way). Params,
  tags, a status, dataset inputs and a run the driver named (``run_ids.made_run``, which looks
  the run up first: in ``mlflow_wal/ids``, then by its tag) are the same when set twice on every
  MLflow store; metric rows are not: the SQL store skips a row already there, but the file store
  (``file:`` or a plain path) and a tracking server on one append it again, doubling a metric's
  history. So a replayed ``log_batch`` drops every metric already in its run's history (same
  key, step, timestamp and value: ``client.get_metric_history``, read once per run and key
  during a replay) instead of relying on the store, and ``replay`` notes each call it applies in
  the session's ``done``, so a replay that fails part-way starts the next one where it stopped.

May import: ``contrasweep.tracking.frames``, ``.run_ids`` and the standard library (MLflow's
client is the caller's).
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

from contrasweep.tracking.frames import frames
from contrasweep.tracking.run_ids import Ids, made_run

_NAME = re.compile(r"(\d+)-(\d+)")


def session_order(folder: Path) -> tuple:
    """A session folder's place in the replay order: ``(ns, pid)`` as numbers, for its name in
    either form (``<ns>-<pid>``, or ``<pid>-<ns>`` as written before); a folder named otherwise
    goes after them all, by name."""
    match = _NAME.fullmatch(folder.name)
    if match is None:
        return (1, 0, 0, folder.name)
    first, second = int(match[1]), int(match[2])
    return (0, max(first, second), min(first, second), folder.name)


def sessions(wal: Path, own: Path | None = None) -> list[Path]:
    """The sweep's log sessions (``own`` left out), oldest first."""
    return sorted((p for p in wal.iterdir() if p.is_dir() and p != own), key=session_order)


def new_session(wal: Path) -> Path:
    """A new session folder, after every session already in ``wal`` in the replay order."""
    wal.mkdir(parents=True, exist_ok=True)
    newest = max((session_order(p)[1] for p in sessions(wal)), default=0)
    session = wal / f"{max(time.time_ns(), newest + 1):020d}-{os.getpid()}"
    session.mkdir()
    return session


def replay(client, wal: Path, own: Path | None, ids: Ids | None = None) -> int:
    """Apply, in the order they were written, the logged calls earlier writers of the sweep did
    not (``done`` says how far each got, and is moved on here as each call is applied); each
    session's folder goes once applied. Returns the calls applied."""
    ids = Ids(wal) if ids is None else ids
    count = 0
    history: dict[tuple[str, str], set] = {}  # (run, metric key) -> its rows, read once
    for session in sessions(wal, own):
        fd = os.open(session / "done", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                done = int(os.pread(fd, 64, 0) or b"0")
            except ValueError:
                done = 0
            for segment in sorted(session.glob("*.wal")):
                for seq, name, args, kwargs in frames(segment):
                    if seq > done:
                        apply_again(client, ids, name, args, kwargs, history)
                        os.pwrite(fd, b"%020d" % seq, 0)
                        count += 1
        finally:
            os.close(fd)
        remove(session)
    return count


def apply(client, ids: Ids, name: str, args: tuple, kwargs: dict, replaying: bool = False):
    """One call of the driver's, as MLflow's client takes it, every placeholder it names
    translated (``run_ids.Ids``); ``made_run`` for a run the driver named."""
    if name == "create_run" and "run_id" in kwargs:
        kwargs = dict(kwargs)
        placeholder = kwargs.pop("run_id")
        (experiment_id,) = ids.translate(args)  # its one positional argument (QueuedClient.create_run)
        return made_run(client, ids, experiment_id, run_id=placeholder, replaying=replaying, **ids.translate(kwargs))
    return getattr(client, name)(*ids.translate(args), **ids.translate(kwargs))


def apply_again(client, ids: Ids, name: str, args: tuple, kwargs: dict, history: dict | None = None):
    """``apply`` of a call that may have been applied already: a replayed one (``replay``), or one
    whose first try failed without an answer (a tracking server that went away:
    ``contrasweep.tracking.outage``). A ``log_batch`` goes without the metric rows its run
    already has (``history``: the rows read so far, by run and key); a run's creation looks for
    the run first (``made_run``)."""
    if name == "log_batch":
        args, kwargs = _unlogged(client, {} if history is None else history, ids.translate(args), ids.translate(kwargs))
    return apply(client, ids, name, args, kwargs, replaying=True)


def _unlogged(client, history: dict, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A replayed ``log_batch`` without the metric rows its run already has (see the module)."""
    run_id = args[0] if args else kwargs["run_id"]
    metrics = args[1] if len(args) > 1 else kwargs.get("metrics")
    if not metrics:
        return args, kwargs
    fresh = []
    for metric in metrics:
        rows = history.get((run_id, metric.key))
        if rows is None:
            rows = history[(run_id, metric.key)] = {_row(m) for m in client.get_metric_history(run_id, metric.key)}
        if _row(metric) not in rows:
            rows.add(_row(metric))
            fresh.append(metric)
    if len(args) > 1:
        return (args[0], fresh, *args[2:]), kwargs
    return args, {**kwargs, "metrics": fresh}


def _row(metric) -> tuple:
    value = float(metric.value)
    return (int(metric.timestamp), int(metric.step), "nan" if math.isnan(value) else value)


def remove(folder: Path) -> None:
    """A session folder and its files."""
    for file in folder.iterdir():
        file.unlink(missing_ok=True)
    folder.rmdir()
