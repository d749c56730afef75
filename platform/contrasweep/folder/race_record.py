"""``race.json``: a racing sweep's journal (``sweep.racing``; ``contrasweep.search.racing``),
next to its record. The race's searcher writes it the moment a repeat
ends and before Tune's callbacks hear of it (Tune tells the searcher first), so a driver killed
at any moment resumes the race where it was: every repeat that ended keeps its value, and no
elimination is undone. The tracker reads it to close an eliminated configuration's run.

Content: ``repeats`` (group -> repeat id -> its value and outcome), ``out`` (group -> why it
left the race: ``eliminated`` (``contrasweep.tracking.store.ELIMINATED``) with the round, the Holm-adjusted p-value and
``best``, the configuration it was shown worse than: the round's best wherever that comparison
shows it (``contrasweep.search.racing.Verdict.reason``), or ``stopped``/``failed`` with the repeats
it had), ``targets`` (setting -> repeats every configuration still racing runs before the next
round), ``rounds`` (setting -> each judged round: its best mean, every p-value, ``than`` (whom
each is against; absent in journals written before issue 69, never read back), who left),
``needed`` (trials the race may still run) and ``total`` (the sweep's trials without racing).

Kept as ``folder.record`` keeps ``tracking.json``: a snapshot and a journal of one line per
change (``open_journal``, ``save_key``), so a repeat's end costs one appended line, not the whole
file (issue 54); read it with ``read`` (or ``record.Follower``), never the snapshot alone.

May import: ``contrasweep.folder.record`` (the journal) and the standard library.
"""

from __future__ import annotations

import os
from pathlib import Path

from contrasweep.folder.record import GENERATION, TrackingState

RACE_FILE = "race.json"


def new_journal() -> dict:
    return {"repeats": {}, "out": {}, "targets": {}, "rounds": {}, "needed": None, "total": None}


def open_journal(path: str | os.PathLike) -> TrackingState:
    """The journal to write: its ``data`` the content, ``save_key`` one change, ``save`` all of it."""
    return TrackingState(Path(path), new_journal())


def read(path: str | os.PathLike) -> dict | None:
    """The journal, or None where the sweep does not race (no file)."""
    if not Path(path).exists():
        return None
    data = TrackingState(Path(path), new_journal()).data
    data.pop(GENERATION, None)
    return data


def write(path: str | os.PathLike, journal: dict) -> None:
    """The journal, whole and atomically (a reader never sees half of it)."""
    record = open_journal(path)
    record.data = journal
    record.save()


def ran(journal: dict) -> int:
    """Repeats that ended in the race."""
    return sum(len(repeats) for repeats in journal["repeats"].values())
