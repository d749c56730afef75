"""``tracking.json``: the sweep's record of its MLflow runs (docs/architecture.md, "Resume").
Imports ``contrasweep.folder.placeholders`` and the standard library.

The record is saved several times per trial, and a whole snapshot grows with the sweep (about
1 KB per trial): rewriting it each time made the driver's cost per trial grow with the sweep
(issue 41, ``benchmarks/trial_scale.py``). A change to one trial's entry (or one
configuration's run id) is therefore appended to ``tracking.journal`` (one JSON line); the
snapshot is rewritten when the journal has grown as large as it, and by every ``save``. Each
snapshot carries a generation number and the journal opens with the generation it extends, so a
journal left from before the last snapshot (a driver killed between writing the two) is never
replayed over it. Read the record with ``TrackingState(path).data`` (or ``read``), never the
snapshot file alone.

Its run ids: a run the writer had not made yet when an entry was written is named by its
placeholder; loading maps it through ``mlflow_wal/ids`` (``folder.placeholders``).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from contrasweep.folder.placeholders import ids_path, remap
from contrasweep.folder.placeholders import load as load_ids

GENERATION = "journal_generation"
# a trial entry's "model": its MLflow model holds its best weights, or they were gone when it was kept
MODEL_LOGGED, MODEL_MISSING = "logged", "missing"
MIN_JOURNAL_BYTES = 64 * 1024


def journal_path(path: Path) -> Path:
    return Path(path).with_suffix(".journal")


def _line(obj: Any) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class TrackingState:
    """``tracking.json``: parent run id, trial id -> run id, last epoch logged, best checkpoint.
    ``default``: what a record without a file holds (another journaled record, e.g. group
    ASHA's ``group_asha.json``, gives its own)."""

    def __init__(self, path: Path, default: dict[str, Any] | None = None):
        self.path = Path(path)
        self.journal = journal_path(self.path)
        self.data: dict[str, Any] = default if default is not None else {"parent_run_id": None, "trials": {}}
        self._snapshot_bytes = 0
        self._journal_bytes = 0
        self._tid_of: dict[int, str] = {}  # id(entry) -> trial id (save_trial)
        if self.path.exists():
            text = self.path.read_text()
            self._snapshot_bytes = len(text)
            self.data = json.loads(text)
            self._replay()
            if default is None:  # tracking.json: the runs it names by a placeholder, by their MLflow ids
                remap(self.data, load_ids(ids_path(self.path.parent)))

    def _replay(self) -> None:
        """The trial entries appended since the snapshot (the journal of this generation only;
        a line torn by a kill mid-write ends it)."""
        try:
            raw = self.journal.read_bytes()
        except FileNotFoundError:
            return
        lines = raw.splitlines()
        try:
            header = json.loads(lines[0]) if lines else None
        except ValueError:
            return
        if header != {"generation": self.data.get(GENERATION, 0)}:
            return
        self._journal_bytes = len(raw) if raw.endswith(b"\n") else 0  # torn: the next change saves a snapshot
        for line in lines[1:]:
            try:
                record = json.loads(line)
            except ValueError:
                self._journal_bytes = 0
                break
            section = record["section"]
            place(self.data if section is None else self.data.setdefault(section, {}), record["key"], record["value"])

    def save(self) -> None:
        """The whole record as a new snapshot, then an empty journal of its generation. Atomic
        replace: a SIGKILL mid-write must not leave a torn file behind. One compact
        ``json.dumps`` (the C encoder; ``json.dump`` to a file and ``indent`` take the pure
        Python one)."""
        self.data[GENERATION] = int(self.data.get(GENERATION, 0)) + 1
        text = json.dumps(self.data, separators=(",", ":"))
        write_whole(self.path, text.encode())
        header = _line({"generation": self.data[GENERATION]})
        write_whole(self.journal, header)
        self._snapshot_bytes, self._journal_bytes = len(text), len(header)

    def save_trial(self, entry: dict) -> None:
        """One trial's entry changed (``entry``: the dict in ``trials``). Its trial id comes from
        an index by identity, checked and rebuilt when stale (a re-keyed entry, a replaced
        record): the lookup does not grow with the trials."""
        tid = self._tid_of.get(id(entry))
        if tid is None or self.trials.get(tid) is not entry:
            self._tid_of = {id(v): k for k, v in self.trials.items()}
            tid = self._tid_of.get(id(entry))
        if tid is None:
            self.save()
        else:
            self.save_key("trials", tid)

    def save_key(self, section: str | None, key: str | tuple[str, ...]) -> None:
        """``data[section][key]`` was set (a tuple: ``data[section][k0][k1]…``; section None:
        ``data[key]``): appended to the journal in one write; a new snapshot once the journal is
        as large as the last one (or where there is no journal yet)."""
        if section == "trials":
            assert isinstance(key, str)  # a trial id: a tuple would not index the trials
            self._tid_of[id(self.data[section][key])] = key
        if self._journal_bytes == 0 or self._journal_bytes >= max(self._snapshot_bytes, MIN_JOURNAL_BYTES):
            self.save()
            return
        value = self.data if section is None else self.data[section]
        for part in key if isinstance(key, tuple) else (key,):
            value = value[part]
        line = _line({"section": section, "key": list(key) if isinstance(key, tuple) else key, "value": value})
        fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        self._journal_bytes += len(line)

    @property
    def trials(self) -> dict[str, dict]:
        return self.data["trials"]


def place(section: dict, key: str | list[str], value: Any) -> None:
    """``section[key] = value``; a list key is a path into nested dicts (made where missing)."""
    *above, last = key if isinstance(key, list) else [key]
    for part in above:
        section = section.setdefault(part, {})
    section[last] = value


class Follower:
    """A journaled record read again and again by another part of the same sweep (e.g. the
    tracker reading ``race.json`` at every trial end): each ``read`` takes only the journal lines
    appended since the last one, and the whole record again only when a new snapshot replaced
    it (which happens once the journal is as large as the snapshot), so reading does not grow
    with the sweep. ``read`` returns None where there is no record."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.journal = journal_path(self.path)
        self.data: dict[str, Any] | None = None
        self._files: tuple | None = None  # (snapshot's inode and size, journal's inode) read
        self._offset = 0  # journal bytes taken

    def read(self) -> dict[str, Any] | None:
        try:
            snapshot, journal = os.stat(self.path), os.stat(self.journal)
        except FileNotFoundError:
            return TrackingState(self.path).data if self.path.exists() else None
        files = (snapshot.st_ino, snapshot.st_size, journal.st_ino)
        if files != self._files or journal.st_size < self._offset:
            state = TrackingState(self.path)
            self.data, self._files, self._offset = state.data, files, state._journal_bytes
            if self._offset:
                return self.data
            self._files = None  # a torn journal: read whole next time too
            return self.data
        if journal.st_size > self._offset:
            with open(self.journal, "rb") as fh:
                fh.seek(self._offset)
                raw = fh.read()
            complete = raw[: raw.rfind(b"\n") + 1]
            assert self.data is not None  # read whole before (self._files)
            for line in complete.splitlines():
                record = json.loads(line)
                section = record["section"]
                into = self.data if section is None else self.data.setdefault(section, {})
                place(into, record["key"], record["value"])
            self._offset += len(complete)
        return self.data


def read(path: Path) -> dict[str, Any]:
    """The record's content (snapshot and journal); ``{}`` where there is none."""
    return TrackingState(path).data if Path(path).exists() else {}


def write_whole(path: Path, content: bytes) -> None:
    """``path`` holds ``content`` whole: written beside it, then renamed over it (a kill mid-write
    leaves the old file, never half of the new one)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tracking-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.replace(tmp, path)
    except BaseException:  # e.g. a full disk: no half-written file left beside it
        Path(tmp).unlink(missing_ok=True)
        raise
