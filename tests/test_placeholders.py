"""Placeholder run ids (contrasweep.folder.placeholders): the writer's translation of a call's
arguments, the tracker's in-place remap of its record, and a record loaded with the runs a
killed driver named by placeholders (issue 71: no patch of MLflow's store)."""

from __future__ import annotations

import uuid
from collections import namedtuple

from mlflow.entities import Metric, Param, RunTag

from contrasweep.folder.placeholders import ids_path, load, remap, translate
from contrasweep.folder.record import TrackingState

P1, P2, R1, R2 = (uuid.uuid4().hex for _ in range(4))
IDS = {P1: R1, P2: R2}


def test_a_calls_arguments_are_translated_wherever_they_name_a_placeholder():
    args = (P1,)
    kwargs = {"metrics": [Metric("m", 1.0, 0, 1)], "tags": [RunTag("mlflow.parentRunId", P2), RunTag("k", "v")],
              "params": [Param("lr", "0.001")], "filter_string": f"tags.`mlflow.parentRunId` = '{P2}'",
              "other": R1}
    assert translate(args, IDS) == (R1,)
    out = translate(kwargs, IDS)
    assert [(t.key, t.value) for t in out["tags"]] == [("mlflow.parentRunId", R2), ("k", "v")]
    assert isinstance(out["tags"][0], RunTag) and out["tags"][1] is kwargs["tags"][1]
    assert out["filter_string"] == f"tags.`mlflow.parentRunId` = '{R2}'"
    assert out["metrics"] is kwargs["metrics"] and out["params"] is kwargs["params"] and out["other"] == R1
    Ref = namedtuple("Ref", "run_id name")
    assert translate(Ref(P1, "x"), IDS) == Ref(R1, "x")
    unchanged = {"a": [1, "two", 3.0], "b": ("x" * 40,)}
    assert translate(unchanged, IDS) is unchanged and translate(kwargs, {}) is kwargs


def test_a_record_is_remapped_in_place_keys_values_lists_and_sets():
    entry = {"run_id": P1, "config_key": "k"}
    data = {"parent_run_id": P2, "trials": {"t1": entry}, "configs": {"g": P1},
            "interrupted_runs": [P1, "x"], "results": {P2: {"metrics": {}}}}
    ended = {P1, R2}
    assert remap(data, IDS) and remap(ended, IDS)
    assert data["trials"]["t1"] is entry and entry == {"run_id": R1, "config_key": "k"}
    assert data["parent_run_id"] == R2 and data["configs"] == {"g": R1} and data["interrupted_runs"] == [R1, "x"]
    assert list(data["results"]) == [R2] and ended == {R1, R2}
    assert not remap(data, IDS) and not remap(data, {})  # nothing left to change


def test_a_loaded_record_names_the_runs_the_writer_made_by_their_mlflow_ids(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    state = TrackingState(sweep / "tracking.json")
    state.data.update(parent_run_id=P2)
    state.save()
    state.trials["t1"] = {"run_id": P1, "last_epoch": 1}
    state.save_trial(state.trials["t1"])  # a journal line naming the placeholder
    assert TrackingState(sweep / "tracking.json").data["trials"]["t1"]["run_id"] == P1  # no ids yet: as written
    ids_path(sweep).parent.mkdir()
    ids_path(sweep).write_text(f"{P1} {R1}\n{P2} {R2}\n{P1[:10]}")  # the last line torn by a kill
    assert load(ids_path(sweep)) == IDS
    loaded = TrackingState(sweep / "tracking.json").data
    assert loaded["parent_run_id"] == R2 and loaded["trials"]["t1"]["run_id"] == R1
    other = TrackingState(sweep / "group_asha.json", default={"note": P1})  # another record is its own
    assert other.data == {"note": P1}
