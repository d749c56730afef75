"""The sweep's MLflow writer lock, ``mlflow_wal/lock`` (``contrasweep.tracking.writer``): one
writer of a sweep applies calls at a time; the lock file names its holder (pid and host), and a
replay that waits for it gives up after ``LOCK_WAIT_S`` with one line.

May import: ``contrasweep.tracking.store`` (its error) and the standard library.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from contrasweep.tracking.store import StoreWriteError

WAL_DIR = "mlflow_wal"
# How long ``replay_log`` waits for an earlier writer of the sweep to finish before it stops with
# one line (a writer stuck on its store is not waited for longer; a writer itself waits for ever).
LOCK_WAIT_S = 300.0


@contextlib.contextmanager
def drained(sweep_dir: str | os.PathLike, timeout_s: float | None = None):
    """Hold the sweep's writer lock, waiting ``timeout_s`` (``LOCK_WAIT_S``) at most for a
    writer still applying its calls; then ``StoreWriteError``, one line naming the lock, its
    holder and what to do (nothing is replayed beside that writer)."""
    lock = Path(sweep_dir).resolve() / WAL_DIR / "lock"
    if not lock.exists():
        yield
        return
    timeout_s = LOCK_WAIT_S if timeout_s is None else timeout_s
    fd = os.open(lock, os.O_RDWR)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreWriteError(
                        f"the MLflow writer lock {lock} is still held by {holder(fd)} after "
                        f"{timeout_s:g} s; allowed: let it finish (or end it), then `contrasweep "
                        "list` again"
                    ) from None
                time.sleep(0.1)
        hold(fd)
        yield
    finally:
        os.close(fd)


def hold(fd: int) -> None:
    """Name this process in the lock file it has just locked (``holder``)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}".encode(), 0)


def holder(fd: int) -> str:
    """Who holds a lock: the pid and host its holder wrote in it (``hold``)."""
    try:
        pid, host = os.pread(fd, 256, 0).decode().split(maxsplit=1)
        return f"pid {int(pid)} on {host.strip()}"
    except (ValueError, UnicodeDecodeError, OSError):
        return "a process that did not name itself in it"
