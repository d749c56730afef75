"""What a sweep prints (docs/architecture.md, "Console").

The terminal gets contrasweep's own lines (``[contrasweep] …`` and ``contrasweep: error: …``):
the trials' progress and the final summary. Everything else a sweep writes (Tune's status
tables, Ray's and Tune's log lines, the trials' own output that Ray forwards to the driver)
goes to ``<sweep folder>/driver.log`` only, unless ``-v`` asks for all of it on the terminal
too. The log keeps our lines as well, in order, so it reads as the whole story of the run.

Python's streams are replaced while a command runs (``Console``) and the stream handlers the
logging tree already holds (Ray configures its own at import) are pointed at them; output
before the sweep folder exists is kept in memory and written to the log once it does
(``attach_log``).

The room also holds ``progress`` (a sweep's progress lines) and ``summary`` (the final summary
and ``list``'s rows). May import: ``contrasweep.spec``,
``contrasweep.folder`` (the sweep's record), ``contrasweep.tracking``, ``contrasweep.search`` (the
repeat groups' sizes), ``trainables.phase_progress`` (a trial's phase lines). Never ``run`` or ``cli``.
"""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import TextIO

from trainables.phase_progress import parse

OURS = ("[contrasweep]", "contrasweep:")
PROGRESS_MARK = "[contrasweep-progress]"  # trainables.phase_progress.PREFIX (no torch import here)
LOG_FILE = "driver.log"

_active: Console | None = None


class _Filtered(io.TextIOBase):
    """A text stream that copies everything to the log and passes our lines (or all, verbose)
    to the terminal, a whole line at a time."""

    def __init__(self, terminal, console: Console):
        self.terminal, self.console, self._partial = terminal, console, ""

    def write(self, text: str) -> int:
        if PROGRESS_MARK not in text:  # a trial's progress lines are shown, not logged
            self.console.log_write(text)
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            if self.console.progress_line(line):
                continue
            if self.console.verbose or line.lstrip("\r").startswith(OURS):
                self.terminal.write(line.lstrip("\r") + "\n")
        return len(text)

    def flush(self) -> None:
        self.terminal.flush()
        self.console.log_flush()

    def isatty(self) -> bool:  # libraries draw no live bars into a filtered stream
        return False

    def fileno(self) -> int:
        return self.terminal.fileno()

    @property
    def encoding(self):
        return getattr(self.terminal, "encoding", "utf-8")


class Console:
    """``with Console(verbose):`` a command's output filtered as the module says."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self._memory: list[str] = []
        self._log: TextIO | None = None
        self._saved: list = []
        self.progress = None  # the sweep's contrasweep.console.progress.Progress, once it has shown something
        self._ray_was_up = False

    def __enter__(self) -> Console:
        global _active
        self.terminal_out, self.terminal_err = sys.stdout, sys.stderr
        ray = sys.modules.get("ray")
        self._ray_was_up = ray is not None and ray.is_initialized()  # the caller's Ray outlives the command
        out, err = _Filtered(sys.stdout, self), _Filtered(sys.stderr, self)
        for handler in _stream_handlers():
            if handler.stream in (self.terminal_out, self.terminal_err):
                self._saved.append((handler, handler.stream))
                handler.setStream(err if handler.stream is self.terminal_err else out)
        sys.stdout, sys.stderr = out, err
        _active = self
        return self

    def __exit__(self, *exc) -> None:
        global _active
        ray = sys.modules.get("ray")
        # a Ray the command started ends with it (its log monitor printed trial lines after the
        # summary); one that was running in this process before (a notebook's, a test session's)
        # is its owner's to end
        if ray is not None and ray.is_initialized() and not self._ray_was_up:
            ray.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _Filtered) and stream._partial:
                stream.write("\n")
        sys.stdout, sys.stderr = self.terminal_out, self.terminal_err
        for handler, stream in self._saved:
            handler.setStream(stream)
        _active = None
        if self._log is not None:
            self._log.close()

    def progress_line(self, line: str) -> bool:
        """A trial's progress line (``trainables.phase_progress``): handed to the sweep's
        progress display, never printed as it is."""
        if PROGRESS_MARK not in line:
            return False

        parsed = parse(line)
        if parsed is not None and self.progress is not None:
            self.progress.trial_phase(*parsed)
        return True

    # -- the log file ------------------------------------------------------------------
    def attach(self, folder: Path) -> None:
        if self._log is not None:
            return
        self._log = open(Path(folder) / LOG_FILE, "a", encoding="utf-8", errors="replace")
        self._log.write("".join(self._memory))
        self._memory = []

    def log_write(self, text: str) -> None:
        if self._log is None:
            self._memory.append(text)
        else:
            self._log.write(text)

    def log_flush(self) -> None:
        if self._log is not None:
            self._log.flush()

    @property
    def interactive(self) -> bool:
        return bool(getattr(self.terminal_err, "isatty", lambda: False)())


def attach_log(folder: Path) -> None:
    """The running command's log goes to ``folder/driver.log`` from now on (no console: nothing)."""
    if _active is not None:
        _active.attach(folder)


def active() -> Console | None:
    return _active


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers = [logging.getLogger()] + [
        v for v in logging.root.manager.loggerDict.values() if isinstance(v, logging.Logger)
    ]
    # logging's last-resort handler reads sys.stderr when it writes: it follows the console by itself
    return [
        h
        for lg in loggers
        for h in lg.handlers
        if isinstance(h, logging.StreamHandler)
        and not isinstance(h, logging.FileHandler)
        and not isinstance(type(h).__dict__.get("stream"), property)
    ]
