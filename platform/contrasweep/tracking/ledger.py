"""What a sweep has finished, as the sweep itself recorded it (docs/architecture.md, "Resume").

Tune saves its experiment state every few seconds; a driver killed after a trial ended and
before the next save restores that trial as unfinished. The tracker writes how each trial
ended to ``tracking.json`` before it tells MLflow (``contrasweep.tracking``; rebuilt from
MLflow's tags when the file is lost), so that record, not Tune's copy, says what finished: a
repeat with the same configuration key (``contrasweep.spec.identity.key_of`` of the trial's config:
its hyperparameters, seed, data variant and, for searchers, its suggestion and repeat index)
is never trained again: every driver's searcher leaves it out (docs/architecture.md, "Resume"). A
trial that failed is not finished: ``resume`` retries it. A record that exists but cannot be read
stops its reader with a ``UserError`` (``unreadable``; ``resume`` checks before Ray starts,
``check_readable``), never reads as "nothing finished".

May import: ``contrasweep.errors``, ``contrasweep.spec.identity``, ``contrasweep.folder.record``.
"""

from __future__ import annotations

from pathlib import Path

from contrasweep.errors import UserError
from contrasweep.folder.record import read as read_record
from contrasweep.spec.identity import key_of


def finished(tracking_file: str | Path | None) -> dict[str, dict]:
    """configuration key -> the final result recorded for it (``{}`` where none was kept),
    for every trial run the tracker ended FINISHED (complete, or stopped by the scheduler)."""
    return {
        e["config_key"]: dict(e.get("final") or {})
        for e in _trials(tracking_file)
        if e.get("status") == "FINISHED" and e.get("config_key")
    }


def unfinished(tracking_file: str | Path | None) -> list[dict]:
    """The Tune configs of repeats that started and whose end the record does not hold (no
    entry of the same key ended FINISHED), in the order they started: a later driver hands them
    out again (their loops go on from their state folders), even where its searcher's own
    journal already holds their end (a kill between the two writes)."""
    trials = _trials(tracking_file)
    done = {e.get("config_key") for e in trials if e.get("status") == "FINISHED"}
    out, seen = [], set()
    for entry in trials:
        key = entry.get("config_key")
        if "status" not in entry and "config" in entry and key not in done and key not in seen:
            seen.add(key)
            out.append(entry["config"])
    return out


def key(config: dict) -> str:
    """A trial's configuration key, as the tracker records it (``contrasweep.config_key``)."""
    return key_of(config)


def ended(tracking_file: str | Path | None) -> dict[str, str]:
    """configuration key -> how the repeat ended (``FINISHED`` where any of its trials did, else
    the last end recorded), whichever driver ran it: a repeat whose trial a resumed searcher issued
    again and the scheduler settled at once has two entries and counts once."""
    out: dict[str, str] = {}
    for e in _trials(tracking_file):
        if "status" in e and e.get("config_key") and out.get(e["config_key"]) != "FINISHED":
            out[e["config_key"]] = e["status"]
    return out


def started(tracking_file: str | Path | None) -> dict[str, str]:
    """configuration key -> repeat group of every trial the tracker opened a run for (it started)."""
    return {e["config_key"]: e.get("group", "") for e in _trials(tracking_file) if e.get("config_key")}


def check_readable(tracking_file: str | Path | None) -> None:
    """A record that exists can be read (``unreadable`` where not); a missing one is fine
    (the tracker rebuilds it from MLflow). ``resume`` asks before Ray starts."""
    _trials(tracking_file)


def _trials(tracking_file: str | Path | None) -> list[dict]:
    """The record's trial entries (none where there is no record). A record that exists but
    cannot be read is never read as none: that would train every finished repeat again."""
    path = Path(tracking_file) if tracking_file else None
    if path is None or not path.exists():
        return []
    try:
        trials = read_record(path).get("trials", {})
        if not isinstance(trials, dict):
            raise TypeError("its trials are not a JSON object")
        return list(trials.values())
    except UnicodeDecodeError:
        raise unreadable(path, "not UTF-8 text") from None
    except ValueError as exc:  # json's JSONDecodeError
        raise unreadable(path, f"not JSON: {exc}") from None
    except OSError as exc:
        raise unreadable(path, exc.strerror or type(exc).__name__) from None
    except (AttributeError, KeyError, TypeError) as exc:  # JSON, but not a record's object (or journal line)
        raise unreadable(path, f"not a sweep record: {exc}") from None


def unreadable(path: Path, why: str) -> UserError:
    """One line: the record, what is wrong with it, and what to do (a missing record is
    rebuilt from MLflow's tags by the resumed tracker: ``contrasweep.tracking.reattach``)."""
    name = path.parent.name
    return UserError(
        f"sweep {name!r}: its record {path} cannot be read ({why}); read as empty it would train every "
        f"finished repeat again, so the sweep stops here; allowed: the record contrasweep wrote (restore "
        f"it), or move it aside (`mv {path} {path}.unreadable`) and `contrasweep resume {name}` rebuilds it "
        "from the sweep's runs in MLflow"
    )
