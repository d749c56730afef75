"""The context managers a driver's launch runs inside (``contrasweep.runner.tune``): environment
variables for a block (``scoped_env``: Tune's settings around ``fit``), a Ctrl-C held until a
new sweep's Tuner is saved (``deferred_ctrl_c``), and whether Tune took a Ctrl-C while it ran
(``ctrl_c_seen``: how ``fit`` tells an interrupted sweep from a finished one), and SIGINT's and
SIGTERM's handlers put back as they were when a driver's call ends (``restored_signals``: a
notebook's kernel keeps its own). Outside the main thread, where Python allows no handler, each
leaves the handlers alone (a sweep run from a thread: ``ctrl_c_seen`` then sees no Ctrl-C).

May import: nothing of the project.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading


@contextlib.contextmanager
def scoped_env(values: dict[str, str]):
    """These environment variables for the duration of the block, then as they were (a test
    process runs many sweeps, made at different versions)."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def deferred_ctrl_c():
    """Yields a function that says whether a Ctrl-C (SIGINT) came inside the block: the first
    is held until the block ends, so that what the block writes (a new sweep's folder and its
    Tuner) is whole; a second ends the block at once (``KeyboardInterrupt``)."""
    asked, before = [], signal.getsignal(signal.SIGINT)
    if not _main_thread():
        yield lambda: False
        return

    def hold(signum, frame):
        if asked:
            raise KeyboardInterrupt
        asked.append(signum)  # (no line here: a write inside a signal handler may re-enter the stream's)

    signal.signal(signal.SIGINT, hold)
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, before)


class _CtrlC:
    """SIGINT's handler while Tune runs, until Tune installs its own: Python's (a
    ``KeyboardInterrupt``). Tune keeps the handler it replaced and puts it back at the first
    Ctrl-C, which it takes as "stop and save"; that handler being this object again after
    ``fit`` is how ``ctrl_c_seen`` knows. Tune's result alone cannot tell: a Ctrl-C before its
    first trial was created left no trial unfinished, and the sweep read as finished."""

    def __call__(self, signum, frame):
        raise KeyboardInterrupt


@contextlib.contextmanager
def ctrl_c_seen():
    """Yields a function that says, once the block has run, whether Tune took a Ctrl-C (SIGINT)
    inside it; SIGINT's handler is as it was afterwards."""
    marker, before, seen = _CtrlC(), signal.getsignal(signal.SIGINT), []
    if not _main_thread():
        yield lambda: False
        return
    signal.signal(signal.SIGINT, marker)
    try:
        yield lambda: bool(seen)
    finally:
        if signal.getsignal(signal.SIGINT) is marker:
            seen.append(True)
        signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def restored_signals():
    """SIGINT's and SIGTERM's handlers as they were before the block, after it (``init_ray`` and
    Tune install their own while a sweep runs)."""
    if not _main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:  # None: a handler not installed from Python, which cannot be put back
                signal.signal(sig, handler)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
