"""Which process drives a sweep, and whether it is still alive.

``<sweep>/driver.json`` names the driver: host, boot id, pid and the process's start time (so a
pid reused after a reboot or by another program is not mistaken for the driver), and a
heartbeat the driver refreshes every ``HEARTBEAT_S`` seconds. The file goes when the driver
ends in any way it can see (normal end, Ctrl-C, an error); after a SIGKILL or a lost machine it
stays, and ``state`` then says ``dead``: on this host because the process is gone, on another
host because the heartbeat is older than ``STALE_S``. ``contrasweep list`` and ``resume`` use
it to show such a sweep as ``interrupted`` and to close its MLflow runs
(``contrasweep.runner.recovery``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

HEARTBEAT_S = 10.0
STALE_S = 120.0
FILE = "driver.json"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (Linux; [] elsewhere or when gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _started(pid: int) -> str:
    """The process's start time in clock ticks after boot; '' where unknown."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""  # field 22 of proc(5)


def pid_exists(pid: int) -> bool:
    """Whether process ``pid`` lives on this machine (a zombie does not)."""
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def record() -> dict:
    pid = os.getpid()
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "started": _started(pid),
        "heartbeat": time.time(),
    }


def write(folder: Path) -> None:
    path = Path(folder) / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record()))
    os.replace(tmp, path)


def read(folder: Path) -> dict | None:
    try:
        data = json.loads((Path(folder) / FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def state(folder: Path) -> tuple[str, str]:
    """(``alive`` | ``dead`` | ``none``, a phrase naming the driver)."""
    rec = read(folder)
    if rec is None:
        return "none", "no driver recorded"
    pid, host = int(rec.get("pid", -1)), str(rec.get("host", "?"))
    age = time.time() - float(rec.get("heartbeat", 0))
    named = f"pid {pid} on {host}, heartbeat {age:.0f} s ago"
    if host != socket.gethostname():
        return ("dead" if age > STALE_S else "alive"), named
    if rec.get("boot_id") and rec["boot_id"] != _boot_id():
        return "dead", named + " (before a reboot)"
    if not pid_exists(pid):
        return "dead", named
    if rec.get("started") and _started(pid) and rec["started"] != _started(pid):
        return "dead", named + " (the pid now belongs to another process)"
    return "alive", named


class Heartbeat:
    """Names this process as the sweep's driver while the ``with`` block runs."""

    def __init__(self, folder: Path, every_s: float = HEARTBEAT_S):
        self.folder, self.every_s = Path(folder), every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="contrasweep-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        write(self.folder)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                write(self.folder)
            except OSError:  # a full or vanished disk: the sweep reports its own error
                pass

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        (self.folder / FILE).unlink(missing_ok=True)
