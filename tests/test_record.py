"""The sweep's record (``contrasweep.folder.record``): a trial's change is one appended journal
line, the snapshot is rewritten once the journal is as large, and every reader sees snapshot
and journal together; a journal older than its snapshot, or a torn last line, is never
replayed wrongly."""

from __future__ import annotations

import json

from contrasweep.folder.record import TrackingState, journal_path, read


def _state(tmp_path, trials: int = 3) -> TrackingState:
    state = TrackingState(tmp_path / "tracking.json")
    state.data["parent_run_id"] = "p"
    for i in range(trials):
        state.trials[f"t{i}"] = {"run_id": f"r{i}", "last_epoch": 0}
    state.save()
    return state


def test_a_trial_change_is_one_journal_line_and_readers_see_it(tmp_path):
    state = _state(tmp_path)
    snapshot = (tmp_path / "tracking.json").read_text()
    state.trials["t1"]["last_epoch"] = 2
    state.save_trial(state.trials["t1"])
    state.trials["t3"] = {"run_id": "r3", "last_epoch": 0}
    state.save_key("trials", "t3")
    state.data.setdefault("configs", {})["g"] = "c"
    state.save_key("configs", "g")
    assert (tmp_path / "tracking.json").read_text() == snapshot  # only the journal grew
    lines = journal_path(tmp_path / "tracking.json").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0]) == {"generation": json.loads(snapshot)["journal_generation"]}
    again = read(tmp_path / "tracking.json")
    assert again["trials"]["t1"]["last_epoch"] == 2 and again["trials"]["t3"]["run_id"] == "r3"
    assert again["configs"] == {"g": "c"} and again["parent_run_id"] == "p"
    assert again == state.data


def test_the_snapshot_is_rewritten_once_the_journal_is_as_large(tmp_path, monkeypatch):
    import contrasweep.folder.record as record

    monkeypatch.setattr(record, "MIN_JOURNAL_BYTES", 0)
    state = _state(tmp_path, trials=20)
    size = (tmp_path / "tracking.json").stat().st_size
    journal = journal_path(tmp_path / "tracking.json")
    rewrites = 0
    for epoch in range(1, 40):
        state.trials["t0"]["last_epoch"] = epoch
        before = journal.stat().st_size
        state.save_trial(state.trials["t0"])
        rewrites += journal.stat().st_size < before
        assert journal.stat().st_size <= 2 * size + 200
    assert 1 <= rewrites < 10
    assert read(tmp_path / "tracking.json")["trials"]["t0"]["last_epoch"] == 39


def test_a_journal_older_than_its_snapshot_or_torn_is_not_replayed_wrongly(tmp_path):
    state = _state(tmp_path)
    state.trials["t0"]["last_epoch"] = 5
    state.save_trial(state.trials["t0"])
    journal = journal_path(tmp_path / "tracking.json")
    old_journal = journal.read_bytes()
    # a re-keyed trial: the whole snapshot is saved; a kill before the new journal was written
    # leaves the old one beside it, whose lines would bring the old id back
    state.trials["t9"] = state.trials.pop("t0")
    state.save()
    journal.write_bytes(old_journal)
    assert "t0" not in read(tmp_path / "tracking.json")["trials"]
    # a kill in the middle of an append: the lines before the torn one count
    state = TrackingState(tmp_path / "tracking.json")
    state.trials["t1"]["last_epoch"] = 7
    state.save_trial(state.trials["t1"])
    with open(journal, "ab") as handle:
        handle.write(b'{"section":"trials","key":"t2","val')
    seen = read(tmp_path / "tracking.json")
    assert seen["trials"]["t1"]["last_epoch"] == 7 and seen["trials"]["t2"]["last_epoch"] == 0
    resumed = TrackingState(tmp_path / "tracking.json")  # a resumed driver's next change is not appended to the torn line
    resumed.trials["t2"]["last_epoch"] = 3
    resumed.save_trial(resumed.trials["t2"])
    assert read(tmp_path / "tracking.json")["trials"]["t2"]["last_epoch"] == 3
    assert read(tmp_path / "missing.json") == {}


def test_save_trial_finds_its_entry_by_identity_after_a_re_key_and_a_replaced_record(tmp_path):
    """``save_trial`` journals the entry under its current trial id without scanning the trials
    each time: an index by identity, rebuilt when an entry moved (a trial re-keyed on resume) or
    the record was replaced (re-attached from MLflow)."""
    state = TrackingState(tmp_path / "tracking.json")
    state.data["trials"] = {f"t{i}": {"run_id": f"r{i}"} for i in range(3)}
    state.save()
    entry = state.trials["t1"]
    entry["last_epoch"] = 1
    state.save_trial(entry)
    state.trials["n1"] = state.trials.pop("t1")  # Tune brought the trial back under a new id
    state.save()
    entry["last_epoch"] = 2
    state.save_trial(entry)
    assert TrackingState(tmp_path / "tracking.json").trials["n1"]["last_epoch"] == 2
    state.data = {"parent_run_id": None, "trials": {"x": {"run_id": "r9"}}}  # replaced whole
    state.save()
    other = state.trials["x"]
    other["last_epoch"] = 5
    state.save_trial(other)
    assert TrackingState(tmp_path / "tracking.json").trials == {"x": {"run_id": "r9", "last_epoch": 5}}


def test_a_nested_key_is_one_journal_line_and_another_records_default(tmp_path):
    """Group ASHA's ``group_asha.json`` is a journaled record too (its own default content): a
    rung value or decision, ``data[section][rung][group]``, is one line, replayed into place."""
    path = tmp_path / "group_asha.json"
    state = TrackingState(path, {"values": {}, "decisions": {}})
    assert state.data == {"values": {}, "decisions": {}} and not path.exists()
    state.data["values"].setdefault("1", {})["A"] = {"t1": 0.5}
    state.save_key("values", ("1", "A"))  # the first change: a snapshot (no journal yet)
    state.data["values"]["1"]["A"]["t2"] = 0.7
    state.save_key("values", ("1", "A"))
    state.data["decisions"].setdefault("1", {})["A"] = "continue"
    state.save_key("decisions", ("1", "A"))
    lines = journal_path(path).read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2]) == {"section": "decisions", "key": ["1", "A"], "value": "continue"}
    assert read(path) == {"values": {"1": {"A": {"t1": 0.5, "t2": 0.7}}}, "decisions": {"1": {"A": "continue"}},
                          "journal_generation": 1}


def test_a_follower_reads_only_what_was_appended_and_the_whole_record_after_a_new_snapshot(tmp_path, monkeypatch):
    """``race.json`` is read by the tracker at every trial end: a ``Follower`` takes the journal
    lines appended since its last read (a top-level key too), and the record whole again only
    once a new snapshot replaced it; it always equals a fresh read."""
    from contrasweep.folder import record
    from contrasweep.folder.record import Follower

    path = tmp_path / "race.json"
    follower = Follower(path)
    assert follower.read() is None
    state = TrackingState(path, {"repeats": {}, "needed": None})
    state.save()
    whole = []
    replay = record.TrackingState._replay
    monkeypatch.setattr(record.TrackingState, "_replay", lambda self: (whole.append(1), replay(self)))
    assert follower.read() == read(path)
    for i in range(20):
        state.data["repeats"][f"g{i}"] = {"r0": i}
        state.save_key("repeats", f"g{i}")
        state.data["needed"] = 20 - i
        state.save_key(None, "needed")
        read_before = len(whole)
        assert follower.read() == read(path)
        assert len(whole) - read_before == 1  # the fresh read only: the follower took two new lines
    state.data["needed"] = 0
    state.save()  # a new snapshot: read whole once
    assert follower.read() == read(path) and follower.read()["needed"] == 0
