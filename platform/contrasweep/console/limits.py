"""What the two limits on a sweep did, for its summary: the race (``race.json``: configurations
eliminated, trials saved) and the budget (``budget.json``: slot time spent, the trials it ended
before they started, the groups it cut, and a sweep it ended before any configuration completed,
with the budget that would complete one).

May import: ``contrasweep.folder`` (the journals and the record), ``contrasweep.spec.text``,
``contrasweep.tracking.store`` (outcome names).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from contrasweep.folder import budget_record, race_record
from contrasweep.folder.record import read as read_record
from contrasweep.spec.text import counted
from contrasweep.tracking.store import BUDGET_CUT, ELIMINATED


def sweep_meta(folder: Path) -> dict:
    """``sweep.json``, or ``{}`` where it cannot be read."""
    try:
        return json.loads((folder / "sweep.json").read_text())
    except (OSError, ValueError):
        return {}


def race_lines(folder: Path, racing) -> list[str]:
    """What the race did (``race.json``): the configurations it eliminated, and the trials it saved
    against every repeat of every configuration."""
    journal = race_record.read(folder / race_record.RACE_FILE)
    if not journal or journal.get("total") is None:
        return []
    eliminated = sum(1 for o in journal["out"].values() if o["outcome"] == ELIMINATED)
    ran, total = race_record.ran(journal), journal["total"]
    saved = total - ran - (journal.get("needed") or 0)
    return [
        f"[contrasweep] racing (min_repeats {racing.min_repeats}, alpha {racing.alpha:g}): {eliminated} "
        f"configuration{'' if eliminated == 1 else 's'} eliminated; racing saved {saved} of {total} trials "
        f"({ran} ran)"
    ]


def budget_lines(folder: Path, budget, unit: str, selected: bool = True) -> list[str]:
    """What the budget allowed (``budget.json``): the slot time spent, and where it ended the
    sweep, the trials that did not run and how to go on (``nothing_selected`` says it where
    nothing completed: ``selected`` false)."""
    journal = budget_record.read(folder / budget_record.BUDGET_FILE)
    if not journal:
        return []
    spent = f"{journal['spent_s'] / 3600:.3g} of {budget.slot_hours:g} {unit}-hours spent"
    ended = journal.get("ended")
    if not ended:
        return [f"[contrasweep] budget: {spent}"]
    started = len(read_record(folder / "tracking.json").get("trials", {}))
    race = race_record.read(folder / race_record.RACE_FILE)
    if race and race.get("needed") is not None:  # what the race would still have run
        not_run = race["needed"]
    else:
        not_run = max(sweep_meta(folder).get("total", 0) - started, 0)
    cut = len(ended["cut"])
    return [
        f"[contrasweep] budget: {spent}; it ended the sweep: {counted(not_run, 'trial')} did not run"
        + (f", {counted(cut, 'configuration')} cut short (outcome {BUDGET_CUT}, never selected)" if cut else "")
        + (
            f"; the selection is from what completed; to go on: contrasweep extend {folder.name} "
            f"--set sweep.budget.slot_hours=<more than {budget.slot_hours:g}>"
            if selected
            else ""
        )
    ]


def not_run(results, folder: Path | None) -> int:
    """Tune's trials the budget ended before they started (``budget.json``, by their folders' names)."""
    journal = budget_record.read(folder / budget_record.BUDGET_FILE) if folder is not None else None
    if not journal or not journal.get("ended"):
        return 0
    names = set(journal["ended"]["not_run"])
    return sum(1 for r in results if str(r.path).rstrip("/").rsplit("/", 1)[-1] in names)


def nothing_selected(folder: Path, budget, unit: str, repeats: int) -> list[str]:
    """The line of a sweep the budget ended before any configuration completed: no best
    configuration; and the ``extend`` whose budget would complete one:
    ``repeats`` more trials at the mean slot time of the trials that ended (what the gate
    expects of the next one; before any ended, all the time spent is a lower bound of one trial)."""
    journal = budget_record.read(folder / budget_record.BUDGET_FILE)
    if not journal or not journal.get("ended"):
        return []
    per_trial = journal["ended_s"] / journal["ended_n"] if journal.get("ended_n") else journal["spent_s"]
    needed = (journal["spent_s"] + repeats * per_trial) / 3600.0
    hours = max(_round_up(needed), budget.slot_hours * 1.1)
    return [
        f"[contrasweep] nothing selected: the budget ended the sweep before any configuration completed its "
        f"{counted(repeats, 'repeat')}, so there is no best configuration (none to register or compare); to "
        f"complete one (about {per_trial / 3600:.2g} {unit}-hours per trial): contrasweep extend {folder.name} "
        f"--set sweep.budget.slot_hours={_round_up(hours):g}"
    ]


def _round_up(hours: float) -> float:
    """``hours`` rounded up to two significant digits."""
    if hours <= 0:
        return 0.01
    scale = 10 ** (math.floor(math.log10(hours)) - 1)
    return math.ceil(hours / scale - 1e-9) * scale
