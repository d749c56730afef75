"""``budget.json``: what a sweep with ``sweep.budget`` has spent (``contrasweep.spec.budget``;
the gate: ``contrasweep.search.budget_gate``), next to its record.

Content: ``slot_hours`` (the budget it was kept to), ``spent_s`` (slot-seconds: each trial's
wall time while it held its slots × its slots, counted up at every result, pause and end),
``ended_n`` and ``ended_s`` (trials that ended and their slot-seconds: the mean is what the gate
expects of the next trial) and ``ended`` (None, or when the budget ended the sweep: ``at``,
``spent_s``, ``not_run`` (the folder names of Tune's trials it ended before they started),
``cut`` (repeat groups with repeats that never started, with the repeats each ran: they close
with those)). The scheduler writes it, whole and atomically; the tracker, the summary and ``extend``
read it. Time a running trial spent after its last result is not in it when the driver is killed:
the budget undercounts by at most one epoch per running trial.

May import: ``contrasweep.folder.record`` (its atomic writer).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from contrasweep.folder.record import write_whole

BUDGET_FILE = "budget.json"
__all__ = ["BUDGET_FILE", "cut_groups", "new_journal", "not_run", "read", "write"]


def read(path: str | os.PathLike) -> dict | None:
    """The journal, or None where the sweep has no budget (no file)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def write(path: str | os.PathLike, journal: dict) -> None:
    """The journal, whole and atomically (a reader never sees half of it)."""
    write_whole(Path(path), json.dumps(journal, indent=1, sort_keys=True).encode())


def new_journal(slot_hours: float) -> dict:
    return {"slot_hours": slot_hours, "spent_s": 0.0, "ended_n": 0, "ended_s": 0.0, "ended": None}


def cut_groups(path: str | os.PathLike) -> dict[str, int]:
    """The repeat groups the budget cut short and the repeats each ran (none where the budget
    has not ended the sweep)."""
    journal = read(path)
    ended = (journal or {}).get("ended")
    return dict(ended["cut"]) if ended else {}


def not_run(path: str | os.PathLike) -> set[str]:
    """The folder names of Tune's trials the budget ended before they started (none where it
    has not ended the sweep)."""
    ended = (read(path) or {}).get("ended")
    return set(ended["not_run"]) if ended else set()
