"""SIGTERM, what Kubernetes and Slurm send a job they preempt before they kill it, ends a
sweep as Ctrl-C does: whatever handles SIGINT at that moment handles it (before Tune runs,
``KeyboardInterrupt``: one line; while Tune runs, Tune's own "stop and save"; then the
summary), so the sweep is ``interrupted`` with its state kept and ``resume`` continues it.
The exit status is 143 (128 + SIGTERM) instead of Ctrl-C's 130.

Ray's core worker installs a native handler for SIGTERM when the driver connects (it prints
pages of stack dumps and ends the process), so ``init_ray`` installs this one again after
``ray.init``. May import: nothing of the project.
"""

from __future__ import annotations

import signal

CTRL_C_EXIT, SIGTERM_EXIT = 130, 143
_received: list[int] = []


def _as_ctrl_c(signum, frame) -> None:
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:  # SIG_DFL / SIG_IGN: Python's own behaviour for a Ctrl-C
        raise KeyboardInterrupt


def take_sigterm() -> None:
    """Handle SIGTERM as SIGINT from now on (main thread only, where signals are handled)."""
    try:
        signal.signal(signal.SIGTERM, _as_ctrl_c)
    except ValueError:  # not the main thread (a sweep started from a thread): Python's default stays
        pass


def interrupted_exit() -> int:
    """The exit status of an interrupted command: 143 after a SIGTERM, else 130."""
    return SIGTERM_EXIT if _received else CTRL_C_EXIT
