"""``race.json``: a racing sweep's journal (``sweep.racing``; ``contrasweep.search.racing``),
next to its record. The race's searcher writes it, whole and atomically, the moment a repeat
ends and before Tune's callbacks hear of it (Tune tells the searcher first), so a driver killed
at any moment resumes the race where it was: every repeat that ended keeps its value, and no
elimination is undone. The tracker reads it to close an eliminated configuration's run.

Content: ``repeats`` (group -> repeat id -> its value and outcome), ``out`` (group -> why it
left the race: ``eliminated`` (``contrasweep.tracking.store.ELIMINATED``) with the round, the Holm-adjusted p-value and the round's best,
or ``stopped``/``failed`` with the repeats it had), ``targets`` (setting -> repeats every
configuration still racing runs before the next round), ``rounds`` (setting -> each judged
round: its best, every p-value, who left), ``needed`` (trials the race may still run) and
``total`` (the sweep's trials without racing).

May import: nothing of the project (the standard library).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

RACE_FILE = "race.json"


def new_journal() -> dict:
    return {"repeats": {}, "out": {}, "targets": {}, "rounds": {}, "needed": None, "total": None}


def read(path: str | os.PathLike) -> dict | None:
    """The journal, or None where the sweep does not race (no file)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def write(path: str | os.PathLike, journal: dict) -> None:
    """The journal, whole and atomically (a reader never sees half of it); the budget's too
    (``contrasweep.folder.budget_record``)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    with os.fdopen(fd, "w") as fh:
        json.dump(journal, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def ran(journal: dict) -> int:
    """Repeats that ended in the race."""
    return sum(len(repeats) for repeats in journal["repeats"].values())
