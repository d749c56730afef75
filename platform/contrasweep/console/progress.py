"""A sweep's progress on the console, fed by the tracker (``MlflowTracker``): a line when a
trial ends (``trials ended 3/8: <its readable name>: <outcome>, <best objective>``), the running
trials' epochs (and batches inside a long epoch or evaluation), and on a terminal a status line
kept current in place (how many trials have ended, each running trial's
epoch and objective or a bar of its progress inside the epoch, the time so far and, once a
trial has ended, the time left by the plan's cost model: ``eta``). Not on a
terminal (a log, CI) the epochs are lines of their own: each trial's first, then at most one
per trial every ``EVERY_S`` seconds.

The tracker is pickled with Tune's state, and this with it: it holds no stream; it writes to
the terminal the console kept (``contrasweep.console``), else to ``sys.stderr``.
"""

from __future__ import annotations

import shutil
import sys
import time

from contrasweep import console

EVERY_S = 30.0


def bar(done: int, total: int, width: int = 10) -> str:
    """``[####------]``: ``done`` of ``total`` drawn in ``width`` cells (ASCII: any terminal)."""
    filled = min(width, max(0, round(width * done / total))) if total > 0 else 0
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class Progress:
    """``units``: each trial's relative cost in the order Tune starts them
    (``contrasweep.runner.sweep_plan.trial_units``), ``slots``: trials at a time; with them the status
    line shows an ETA once a trial has ended (``eta``)."""

    units: list[float]  # set by __setstate__, as a pickled copy's are
    slots: int

    def __init__(self, total: int, metric: str, units: list[float] | None = None, slots: int = 1):
        self.total, self.metric = total, metric
        self.__setstate__({"total": total, "metric": metric, "units": list(units or []), "slots": slots})

    def __getstate__(self):
        return {"total": self.total, "metric": self.metric, "units": self.units, "slots": self.slots}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.begun: dict[str, float] = {}  # running trial name -> when it started (this session)
        self.took: list[float] = []  # seconds of the trials that started and ended in this session
        self.running: dict[str, str] = {}  # trial name -> its status text
        self.names: dict[str, str] = {}  # trial id -> its readable name
        self.shown: dict[str, float] = {}  # trial name -> when its last epoch line was printed
        self.started = time.monotonic()
        self.status_width = 0
        self.done = 0  # trials ended, as the tracker last said

    # -- events from the tracker -------------------------------------------------------
    def trial_started(self, name: str, epochs: int | None, trial_id: str | None = None) -> None:
        self.running[name] = f"{name} starting"
        self.begun.setdefault(name, time.monotonic())
        if trial_id:
            self.names[trial_id] = name
        self._status()

    def trial_phase(self, trial_id: str, phase: str, done: int, total: int) -> None:
        """Inside an epoch (``trainables.phase_progress``): ``training [###-------] 120/400 batches``
        in the status line, ``training: batch 120 of 400`` as a line of its own."""
        name = self.names.get(trial_id)
        if name is None or name not in self.running:
            return
        text = f"{name} {phase}: batch {done} of {total}"
        self.running[name] = f"{name} {phase} {bar(done, total)} {done}/{total} batches"
        if not self._terminal() and time.monotonic() - self.shown.get(name, 0.0) >= EVERY_S:
            self.shown[name] = time.monotonic()
            self._line(f"[contrasweep] {text}")
        self._status()

    def trial_epoch(self, name: str, epoch: int, epochs: int | None, value, done: int) -> None:
        shown = f"{self.metric}={value:.4f}" if isinstance(value, (int, float)) else ""
        text = f"{name} epoch {epoch}/{epochs or '?'} {shown}".rstrip()
        self.running[name] = text
        if not self._terminal() and (name not in self.shown or time.monotonic() - self.shown[name] >= EVERY_S):
            self.shown[name] = time.monotonic()
            self._line(f"[contrasweep] {text}")
        self._status(done)

    def trial_ended(self, name: str, status: str, outcome: str, best, best_epoch, last_epoch: int, done: int) -> None:
        self.running.pop(name, None)
        if name in self.begun:
            self.took.append(time.monotonic() - self.begun.pop(name))
        # the epochs it ran: a throttled epoch line may never have shown the last one
        what = {
            "complete": f"complete ({last_epoch} epoch{'' if last_epoch == 1 else 's'})",
            "stopped": f"stopped after epoch {last_epoch} (ASHA)",
            "failed": f"FAILED after epoch {last_epoch}",
        }.get(outcome, status)
        best_text = (
            f", best {self.metric}={best:.4f}" + (f" at epoch {best_epoch}" if best_epoch else "")
            if isinstance(best, (int, float))
            else ""
        )
        self._line(f"[contrasweep] trials ended {done}/{self.total}: {name}: {what}{best_text}")
        self._status(done)

    def close(self) -> None:
        self._clear()

    def eta(self) -> float | None:
        """Seconds left: the plan's cost model (``units``) scaled by the trials that ended in this
        session (their seconds over their units), for the trials not yet ended, less what the
        running ones have done, over ``slots``. None before a trial has ended here."""
        if not self.took or not self.units:
            return None
        first = max(0, self.done - len(self.took))  # trials end about in the order they start
        ended = sum(self.units[first : self.done]) or 1.0
        per_unit = sum(self.took) / ended
        remaining = sum(self.units[min(self.done, len(self.units)) :]) * per_unit
        running = sum(time.monotonic() - t for t in self.begun.values())
        return max(0.0, remaining - running) / max(1, self.slots)

    # -- output ------------------------------------------------------------------------
    def _stream(self):
        active = console.active()
        if active is not None:
            active.progress = self  # the trials' progress lines come through the console
        return active.terminal_err if active is not None else sys.stderr

    def _terminal(self) -> bool:
        return bool(getattr(self._stream(), "isatty", lambda: False)())

    def _line(self, text: str) -> None:
        self._clear()

        active = console.active()
        if active is not None:
            active.log_write(text + "\n")
        stream = self._stream()
        stream.write(text + "\n")
        stream.flush()

    def _status(self, done: int | None = None) -> None:
        """The one line a terminal keeps current: trials done, each running trial, time."""
        self.done = self.done if done is None else done
        if not self._terminal():
            return
        elapsed = int(time.monotonic() - self.started)
        head = f"[contrasweep] trials ended {self.done}/{self.total}, {elapsed // 60}m{elapsed % 60:02d}s so far"
        left = self.eta()
        if left is not None:
            head += f", ETA ~{int(left) // 60}m{int(left) % 60:02d}s"
        text = " · ".join([head, *self.running.values()])
        width = shutil.get_terminal_size((100, 20)).columns - 1
        text = text[:width]
        stream = self._stream()
        stream.write("\r" + text.ljust(self.status_width))
        stream.flush()
        self.status_width = len(text)

    def _clear(self) -> None:
        if self.status_width and self._terminal():
            stream = self._stream()
            stream.write("\r" + " " * self.status_width + "\r")
            stream.flush()
        self.status_width = 0
