"""The sweep's MLflow writes, off Tune's event loop (docs/architecture.md, "Resume"; issue 54).

One process per tracker, the *writer*, owns the MLflow client. The tracker's client is a proxy
(``QueuedClient``) that sends the writer every call, in order, through a pipe. The writes each
trial makes (``log_batch``, ``log_inputs``, ``set_terminated``, ``set_tag``: ``QUEUED``, and
``create_run`` on a SQL or file store or a tracking server, under a placeholder id made here:
``run_ids``) do not wait: the driver goes on with Tune. Every other call (``get_run``, ...) waits for its answer,
which comes after every write queued before it. At 1,000 no-op trials MLflow's SQL store took
about two thirds of the driver's CPU (``benchmarks/paper_scale.py``).

The guarantee the record gives (docs/operations.md: record first, nothing lost or duplicated):

* Each queued call goes to a write-ahead log (``mlflow_wal/<session>/<n>.wal``, length-prefixed
  pickles: ``contrasweep.tracking.wal``) before it is sent, and the writer stores the number of
  the last call it applied in ``done``. The driver deletes a log segment once the writer has
  applied all of it.
* The writer ignores SIGINT and SIGTERM (a terminal's Ctrl-C and a scheduler's preemption reach
  the whole process group): when the driver stops or dies it applies what it has received, then
  exits on the pipe's end.
* A writer killed too (SIGKILL of the group, a lost machine) leaves calls unapplied: the next
  writer of the sweep applies them from the log before anything else (``wal.replay``), session
  by session in the order they were written. A call applied twice is not duplicated, on every
  store: a param, tag or status is set again to the same value, a replayed run creation whose
  run exists is skipped, and a replayed metric row its run already has is dropped by the replay
  itself (the file store would append it again: ``contrasweep.tracking.wal``).
* A writer holds ``mlflow_wal/lock`` while it runs, its pid and host written in it: a resumed
  sweep's writer waits for an earlier one to finish, and so does ``contrasweep.runner.recovery``
  (``replay_log``) for ``writer_lock.LOCK_WAIT_S`` at most; then it stops with one line naming the lock and
  its holder (``StoreWriteError``) rather than replay beside a writer still applying its calls
  (whose later ``set_terminated`` would overwrite the ``KILLED`` set here).
* A store error stops the applying: that call and the ones after it stay in the log, the
  tracker hears of it at its next call (``StoreWriteError``, one of ``store.store_errors``) and
  stops the sweep as Ctrl-C does, and ``resume`` applies them. A tracking server that does not
  answer is not a store error: the writer holds the calls until it does, and says so in a line
  the driver prints (``contrasweep.tracking.outage``).

May import: ``contrasweep.folder.placeholders``, ``contrasweep.tracking.store``, ``.frames``, ``.outage``,
``.run_ids``, ``.wal``, ``.writer_lock`` and the standard library
(MLflow in the writer).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import pickle
import select
import signal
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from contrasweep.folder.placeholders import translate
from contrasweep.tracking.frames import FRAME, receive, send
from contrasweep.tracking.outage import Held, is_server, quick_retries, unreachable
from contrasweep.tracking.run_ids import Ids, Made, RunRef, queued_runs
from contrasweep.tracking.store import StoreWriteError, get_client, store_line
from contrasweep.tracking.wal import apply, apply_again, new_session, remove, replay
from contrasweep.tracking.writer_lock import WAL_DIR, drained, hold

if TYPE_CHECKING:
    import subprocess

QUEUED = frozenset({"log_batch", "log_inputs", "set_terminated", "set_tag"})
PLACEHOLDERS = "placeholders"  # the writer's own call (``QueuedClient.placeholders``), not MLflow's
SEGMENT_BYTES = 1 << 20  # a log segment is closed at this size and deleted once applied
# The writer says how far it has applied every this many queued calls, unasked: the driver's log
# stays bounded where no call waits for an answer (a trial's run is made queued: ``run_ids``).
NOTE_EVERY = 256
_LIVE: dict[Path, QueuedClient] = {}  # this process's running writers, by their sweep's log folder
_SPARE: dict[str, subprocess.Popen[bytes]] = {}  # tracking URI -> a writer started ahead (``prestart``), not yet taken


class QueuedClient:
    """An ``MlflowClient`` whose calls run in the writer process, in order (see the module)."""

    def __init__(self, tracking_uri: str, sweep_dir: str | os.PathLike):
        self.tracking_uri = tracking_uri
        self.wal = Path(sweep_dir).resolve() / WAL_DIR
        _end_live(self.wal)  # a second tracker of the sweep in one process: the first one's driver has stopped
        _LIVE[self.wal] = self
        self.session = new_session(self.wal)  # replayed after every session before it (``wal``)
        self.seq = 0
        self.segments: list[tuple[Path, int]] = []  # (segment, its last call's number), oldest first
        self._fd = self._open_segment()
        spare = _SPARE.pop(tracking_uri, None)
        self._proc = spare if spare is not None and spare.poll() is None else _spawn(tracking_uri)
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both piped (_spawn)
        self._out, self._in = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        send(self._out, pickle.dumps((str(self.wal), str(self.session))))  # the sweep it writes for
        self.pid = self._proc.pid
        self._closed = False
        self._direct = None  # after close: calls made here (``direct``)
        self._ids: dict[str, str] = {}  # after close: the writer's placeholders -> run ids
        self._failed: str | None = None
        self.queued_runs = queued_runs(tracking_uri)
        atexit.register(self.close)

    def create_run(self, experiment_id, start_time=None, tags=None, run_name=None):
        """A new run. On a SQL or file store or a server (``run_ids.queued_runs``) the writer makes
        it in order with the other writes and the driver does not wait: at 1,000 no-op trials the wait
        (for the writes queued before it, then the run) was 44 ms of every trial's 107
        (``benchmarks/paper_scale.py``). Its ``.info.run_id`` is then a placeholder the writer
        translates in every later call (``run_ids``; ``placeholders`` gives the run ids);
        elsewhere MLflow's ``Run``."""
        kwargs = {"start_time": start_time or int(time.time() * 1000), "tags": tags, "run_name": run_name}
        if self._closed or not self.queued_runs:
            return self.__getattr__("create_run")(experiment_id, **kwargs)
        run_id = uuid.uuid4().hex
        self._post("create_run", (experiment_id,), {**kwargs, "run_id": run_id})
        return Made(RunRef(run_id, experiment_id, run_name, kwargs["start_time"]))

    def placeholders(self) -> dict[str, str]:
        """Placeholder -> MLflow run id for every run the writer has made for the sweep, once it
        has applied every call queued before this one (empty where runs are not queued)."""
        if not self.queued_runs:
            return {}
        if self._closed:
            return dict(self._ids)
        return self._call(PLACEHOLDERS, (), {})

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._closed:  # placeholders translated here now (``run_ids``)
            ids = self._ids
            method = getattr(self.direct(), name)
            return lambda *args, **kwargs: method(*translate(args, ids), **translate(kwargs, ids))
        if name in QUEUED:
            return lambda *args, **kwargs: self._post(name, args, kwargs)
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    # -- the driver's side ------------------------------------------------------------------
    def _post(self, name: str, args: tuple, kwargs: dict) -> None:
        self._check()
        self.seq += 1
        frame = pickle.dumps((self.seq, name, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        os.write(self._fd, FRAME.pack(len(frame)) + frame)  # logged before sent
        send(self._out, frame)

    def _call(self, name: str, args: tuple, kwargs: dict):
        self._check()
        send(self._out, pickle.dumps((0, name, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL))
        while True:
            kind, applied, value = pickle.loads(receive(self._in))
            if kind == "failed":
                self._failed = value
                raise StoreWriteError(value)
            if kind == "applied":
                self._applied(applied)
            elif kind == "say":
                _say(value)
            elif kind == "reply":
                self._applied(applied)
                return value
            elif kind == "error":  # this call's own error (e.g. a run that does not exist): raised as MLflow raised it
                self._applied(applied)
                raise value

    def _check(self) -> None:
        """A queued call the writer could not apply: raised here, before anything more is sent.
        The writer's notes of how far it got on its own (``NOTE_EVERY``) are read here too."""
        while self._failed is None and select.select([self._in], [], [], 0)[0]:
            kind, applied, value = pickle.loads(receive(self._in))
            if kind == "failed":
                self._failed = value
            elif kind == "applied":
                self._applied(applied)
            elif kind == "say":
                _say(value)
        if self._failed is not None:
            raise StoreWriteError(self._failed)

    def _roll(self) -> None:
        os.close(self._fd)
        self._fd = self._open_segment()

    def _open_segment(self) -> int:
        """The next log segment, open for appending (the first one from ``__init__``)."""
        path = self.session / f"{len(self.segments):06d}.wal"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.segments.append((path, self.seq))
        return fd

    def _applied(self, applied: int) -> None:
        """The writer has applied every call up to ``applied``: segments wholly applied go."""
        path, _ = self.segments[-1]
        self.segments[-1] = (path, self.seq)
        if os.fstat(self._fd).st_size >= SEGMENT_BYTES:
            self._roll()
        while len(self.segments) > 1 and self.segments[0][1] <= applied:
            self.segments.pop(0)[0].unlink(missing_ok=True)

    def close(self) -> None:
        """Wait until every queued call is applied and end the writer; later calls run in this
        process (``direct``). A failed writer leaves its log for ``resume``."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if _LIVE.get(self.wal) is self:
            del _LIVE[self.wal]
        failed = self._failed
        try:
            send(self._out, pickle.dumps((0, None, (), {})))
            while True:
                kind, _, value = pickle.loads(receive(self._in))
                failed = value if kind == "failed" else failed
                if kind == "say":
                    _say(value)
                if kind == "closed":
                    break
        except (EOFError, OSError):
            failed = failed or "the writer process ended"
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both piped (_spawn)
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._proc.stdout.close()
        os.close(self._fd)
        self._ids = Ids(self.wal).map if self.queued_runs else {}
        if failed is None:
            remove(self.session)

    def direct(self):
        """An MLflow client of this process (after ``close``)."""
        if self._direct is None:
            self._direct = get_client(self.tracking_uri)
        return self._direct


def _say(line: str) -> None:
    """A line of the writer's for the sweep's console (``outage``: the server away and back)."""
    import sys

    print(f"[contrasweep] {line}", file=sys.stderr, flush=True)


def prestart(tracking_uri: str) -> None:
    """Start a writer for ``tracking_uri`` now; the next ``QueuedClient`` of that URI in this
    process takes it. Its MLflow import and store set-up (seconds) then go on beside the data's
    preparation and Ray's start-up instead of before the sweep's first trial."""
    if tracking_uri not in _SPARE:
        _end_spares()  # one at most: a sweep that stopped before its tracker leaves none behind
        _SPARE[tracking_uri] = _spawn(tracking_uri)


def _spawn(tracking_uri: str) -> subprocess.Popen[bytes]:
    """A writer process: its own interpreter (Ray's threads make a fork unsafe; multiprocessing's
    spawn would import the driver's ``__main__`` again), finding this package where the driver does."""
    import subprocess
    import sys

    import contrasweep

    path = os.pathsep.join(p for p in (str(Path(contrasweep.__file__).parents[1]), os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", __name__, tracking_uri],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": path},
    )


@atexit.register
def _end_spares() -> None:
    """A writer never taken ends (it reads the end of its pipe before any sweep)."""
    while _SPARE:
        proc = _SPARE.popitem()[1]
        assert proc.stdin is not None and proc.stdout is not None  # both piped (_spawn)
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


def _end_live(wal: Path) -> None:
    if wal in _LIVE:
        _LIVE[wal].close()


# -- the writer's side ----------------------------------------------------------------------
def serve(tracking_uri: str, inp: int = 0, out: int = 1) -> None:
    """The writer: set up MLflow's client, learn the sweep's folders (the first frame), replay
    what earlier writers of the sweep left, then apply the driver's calls (read from ``inp``,
    answered on ``out``) in order."""
    import logging

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)  # as the driver's (tracker.setup)
    server = is_server(tracking_uri)
    if server:
        quick_retries()  # a server that does not answer is waited out, and said (``outage``)
    client = get_client(tracking_uri)
    if not server:  # a server sets itself up; a request to an
        try:  # unreachable one would wait out MLflow's retries (minutes) before the first real call
            client.search_experiments(max_results=1)  # the store's set-up (a database's tables), before it is needed
        except Exception:  # noqa: BLE001 - said by the first call that needs it
            pass
    try:
        wal, session = pickle.loads(receive(inp))
    except EOFError:  # never taken
        return

    lock = os.open(Path(wal) / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # an earlier writer of this sweep first, however long it takes
    hold(lock)
    done = os.open(Path(session) / "done", os.O_RDWR | os.O_CREAT, 0o644)
    ids = Ids(wal)  # the runs earlier writers of the sweep made, by the driver's placeholders
    failed, applied = None, 0

    def tell(line: str) -> None:
        with contextlib.suppress(OSError):  # a driver that ended reads nothing
            send(out, pickle.dumps(("say", applied, line)))

    held = Held(tracking_uri, inp, tell)
    try:
        try:
            replay(client, Path(wal), Path(session), ids)
        except Exception as exc:
            why = unreachable(exc) if server else None
            if why is None:
                raise
            failed = held.wait_back(lambda: replay(client, Path(wal), Path(session), ids), why)[1]
    except Exception as exc:  # noqa: BLE001 - the store's: said at the driver's first call
        failed = store_line(exc)
    while True:
        try:
            seq, name, args, kwargs = pickle.loads(held.next_frame())
        except EOFError:
            break
        if name is None:  # close: everything before it is applied
            send(out, pickle.dumps(("failed" if failed else "closed", applied, failed)))
            if failed:
                send(out, pickle.dumps(("closed", applied, None)))
            break
        if failed is not None:
            if not seq:
                send(out, pickle.dumps(("failed", applied, failed)))
            continue
        try:
            try:
                value = dict(ids.map) if name == PLACEHOLDERS else apply(client, ids, name, args, kwargs)
            except Exception as exc:
                why = unreachable(exc) if server else None
                if why is None:
                    raise
                again = functools.partial(apply_again, client, ids, name, args, kwargs)  # this call's, bound now
                value, failed = held.wait_back(again, why)
                if failed is not None:
                    with contextlib.suppress(OSError):  # a driver that ended reads nothing
                        send(out, pickle.dumps(("failed", applied, failed)))
                    continue
        except Exception as exc:  # noqa: BLE001
            if seq:  # a queued write: the store's failure; it and what follows stay in the log
                failed = store_line(exc)
                send(out, pickle.dumps(("failed", applied, failed)))
            else:
                send(out, pickle.dumps(("error", applied, _picklable(exc))))
            continue
        if seq:
            applied = seq
            os.pwrite(done, b"%020d" % seq, 0)
            if seq % NOTE_EVERY == 0:
                send(out, pickle.dumps(("applied", applied, None)))
        else:
            send(out, pickle.dumps(("reply", applied, value)))
    os.close(done)
    os.close(lock)


def replay_log(client, sweep_dir: str | os.PathLike, timeout_s: float | None = None) -> int:
    """``wal.replay`` for a sweep whose driver is gone (``contrasweep.runner.recovery``): once its
    writer has applied what it was sent, holding the lock as a writer does (``writer_lock.drained``: a
    ``StoreWriteError`` when that writer has not finished within ``timeout_s``)."""
    wal = Path(sweep_dir) / WAL_DIR
    if not wal.is_dir():
        return 0
    _end_live(wal.resolve())
    with drained(sweep_dir, timeout_s):
        return replay(client, wal, None)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    import sys

    protocol = os.dup(1)  # the answers; whatever prints goes to stderr
    os.dup2(2, 1)
    serve(sys.argv[1], inp=0, out=protocol)
