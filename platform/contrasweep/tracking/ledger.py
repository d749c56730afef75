"""What a sweep has finished, as the sweep itself recorded it (docs/architecture.md, "Resume").

Tune saves its experiment state every few seconds; a driver killed after a trial ended and
before the next save restores that trial as unfinished. The tracker writes how each trial
ended to ``tracking.json`` before it tells MLflow (``contrasweep.tracking``; rebuilt from
MLflow's tags when the file is lost), so that record, not Tune's copy, says what finished: a
repeat with the same configuration key (``contrasweep.spec.identity.key_of`` of the trial's config:
its hyperparameters, seed, data variant and, for searchers, its suggestion and repeat index)
is never trained again (``group_asha.MovableFIFO.settle``). A trial that failed is not
finished: ``resume`` retries it.

May import: ``contrasweep.spec.identity``, ``contrasweep.folder.record``.
"""

from __future__ import annotations

from pathlib import Path

from contrasweep.folder.record import read as read_record
from contrasweep.spec.identity import key_of

# Tune trial ids whose end the tracker recorded in this process (``note_ended``): the schedulers
# may then drop them from Tune's saved state (``contrasweep.search.live_trials``).
_ENDED_HERE: set[str] = set()


def finished(tracking_file: str | Path | None) -> dict[str, dict]:
    """configuration key -> the final result recorded for it (``{}`` where none was kept),
    for every trial run the tracker ended FINISHED (complete, or stopped by the scheduler)."""
    return {e["config_key"]: dict(e.get("final") or {}) for e in _trials(tracking_file)
            if e.get("status") == "FINISHED" and e.get("config_key")}


def key(config: dict) -> str:
    """A trial's configuration key, as the tracker records it (``contrasweep.config_key``)."""
    return key_of(config)


def started(tracking_file: str | Path | None) -> dict[str, str]:
    """configuration key -> repeat group of every trial the tracker opened a run for (it started)."""
    return {e["config_key"]: e.get("group", "") for e in _trials(tracking_file) if e.get("config_key")}


def _trials(tracking_file: str | Path | None) -> list[dict]:
    """The record's trial entries (none where there is no readable record)."""
    path = Path(tracking_file) if tracking_file else None
    if path is None or not path.exists():
        return []
    try:
        return list(read_record(path).get("trials", {}).values())
    except (OSError, ValueError):
        return []


def note_ended(trial_id: str) -> None:
    """The tracker has written how ``trial_id`` ended FINISHED to the record (``tracking.json``)."""
    _ENDED_HERE.add(trial_id)


def ended_here(trial_id: str) -> bool:
    """Whether this process recorded ``trial_id``'s FINISHED end (``note_ended``)."""
    return trial_id in _ENDED_HERE

