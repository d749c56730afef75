"""Checkpoints sized to their job and the test split evaluated once (trainables.checkpoints,
trainables.loop): what is written when, what a pointer holds, what pruning keeps, resuming
between full states, and the test evaluation on the best validation epoch's weights (no Ray)."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest
import torch

from trainables import loop
from trainables.checkpoints import (
    META_FILE,
    STATE_FILE,
    WEIGHTS_FILE,
    StateFolder,
    best_folder,
    best_of_trial,
    drop_resume_states,
    load_weights,
    remove_state,
    weights_file,
)
from trainables.loop import load_trained, train
from trainables.sessions import LocalSession
from trainables.storage import join

import crash
from crash import PruningSession
from helpers import loop_config, toy_tables


class CrashAfter(crash.CrashAfter):
    prune = True  # as Tune and Train sessions do


@pytest.fixture
def count_test_evaluations(monkeypatch):
    """Counts ``evaluate(context, "test")`` calls and records the weights each one saw."""
    from trainables.base import Method

    calls = []
    original = Method.evaluate

    def evaluate(self, context, split):
        if split == "test":
            calls.append({k: v.clone() for k, v in self.state_dict().items()})
        return original(self, context, split)

    monkeypatch.setattr(Method, "evaluate", evaluate)
    return calls


def test_test_split_evaluated_once_on_the_best_epochs_weights(tiny_model_dir, tmp_path, count_test_evaluations):
    data = toy_tables(tiny_model_dir)
    session = PruningSession(str(tmp_path))
    train(loop_config(tiny_model_dir, epochs=5, lr=3e-3, checkpoint_every=2), data, session)
    assert len(count_test_evaluations) == 1
    last = session.reports[-1]
    best_epoch = int(last["best/epoch"])
    folder = StateFolder(session.state_dir)
    assert folder.names("best") == [f"best-e{best_epoch:04d}"]  # older bests pruned
    best = load_weights(folder.path(folder.names("best")[0]) / WEIGHTS_FILE)
    seen = count_test_evaluations[0]
    assert all(torch.equal(seen[k], best[k]) for k in best)
    # the same number as evaluating the saved best model afresh
    model = load_trained(str(folder.path(folder.names("best")[0])))
    from trainables.gather import classification_evaluate

    again = classification_evaluate(model, data["tables"]["test"], 2, 32, LocalSession(str(tmp_path / "x")))
    assert last["test/accuracy"] == pytest.approx(again["accuracy"])


def test_what_is_written_and_kept(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    session = PruningSession(str(tmp_path))
    config = loop_config(tiny_model_dir, epochs=7, checkpoint_every=3)
    config["checkpoint_at"] = [1]  # a rung where a scheduler may pause the trial
    train(config, data, session)
    # pointers only at epochs with a full state: 1 (rung), 3, 6 (every 3), 7 (last)
    pointers = [json.load(open(os.path.join(c, META_FILE))) for c in session.checkpoints]
    assert [p["epoch"] for p in pointers] == [1, 3, 6, 7]
    for c in session.checkpoints:  # a pointer is kilobytes: the meta, nothing else
        assert os.listdir(c) == [META_FILE] and os.path.getsize(os.path.join(c, META_FILE)) < 20_000
    folder = StateFolder(session.state_dir)
    assert folder.names("resume") == ["resume-e0007"]  # the newest: a restore goes on from it
    resume = folder.path("resume-e0007")
    assert sorted(os.listdir(resume)) == [WEIGHTS_FILE, STATE_FILE]
    state = torch.load(resume / STATE_FILE, weights_only=False)
    assert {"optimizer", "scheduler", "scaler", "tracker", "rng", "epoch", "best"} <= set(state)
    # the weights file holds the model once: its size is the parameters' and buffers' bytes
    model = load_trained(session.checkpoints[-1])
    tensor_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert tensor_bytes <= os.path.getsize(resume / WEIGHTS_FILE) < tensor_bytes + 100_000
    assert not list(folder.root.glob(".*.tmp"))
    # a resume state at the best epoch shares the best folder's weights file (one copy on disk)
    best = folder.path(pointers[-1]["best"]) / WEIGHTS_FILE
    linked = os.path.samefile(best, resume / WEIGHTS_FILE)
    assert linked == (pointers[-1]["best"] == "best-e0007")
    # the best folder follows from the trial folder and the reported best epoch (what the tracker logs)
    assert best_of_trial(session.state_dir, int(session.reports[-1]["best/epoch"])) == folder.path(pointers[-1]["best"])


def test_kill_between_full_states_redoes_at_most_checkpoint_every_epochs(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    killed = CrashAfter(str(tmp_path / "a"), 5)
    with pytest.raises(RuntimeError):
        train(loop_config(tiny_model_dir, epochs=6, checkpoint_every=2), data, killed)
    assert [json.load(open(os.path.join(c, META_FILE)))["epoch"] for c in killed.checkpoints] == [2, 4]
    resumed = PruningSession(str(tmp_path / "a"), resume_from=killed.checkpoints[-1])  # same trial folder
    train(loop_config(tiny_model_dir, epochs=6, checkpoint_every=2), data, resumed)
    assert [r["epoch"] for r in resumed.reports] == [5, 6]
    straight = PruningSession(str(tmp_path / "b"))
    train(loop_config(tiny_model_dir, epochs=6, checkpoint_every=2), data, straight)
    for key in ("train/loss", "best/val/accuracy", "best/epoch", "test/accuracy"):
        assert resumed.reports[-1][key] == pytest.approx(straight.reports[-1][key], abs=1e-5)


class OnStorage(CrashAfter):
    """A trial whose state folder is a storage URI (S3), like a Tune trial on a cluster."""

    def __init__(self, root, n, location, **kwargs):
        super().__init__(root, n, **kwargs)
        self.location = location

    @property
    def state_dir(self):
        return self.location


def test_a_kill_on_s3_storage_resumes_on_another_node(tiny_model_dir, tmp_path, s3_storage):
    """State folders on S3: a trial killed after epoch 3 resumes from the bucket alone (the node
    cache emptied: another machine) and ends where an uninterrupted local run ends."""
    data = toy_tables(tiny_model_dir)
    config = loop_config(tiny_model_dir, epochs=4, checkpoint_every=2)
    location = join(s3_storage, "trial", "state")
    killed = OnStorage(str(tmp_path / "a"), 3, location)
    with pytest.raises(RuntimeError):
        train(config, data, killed)
    for thread in threading.enumerate():  # the killed trial's last best-weights upload (a real kill ends it)
        if thread.name == "contrasweep-best-weights":
            thread.join()
    shutil.rmtree(StateFolder(location).root)  # nothing of it on "this" node any more
    resumed = OnStorage(str(tmp_path / "b"), 99, location, resume_from=killed.checkpoints[-1])
    train(config, data, resumed)
    assert [r["epoch"] for r in resumed.reports] == [3, 4]
    straight = PruningSession(str(tmp_path / "c"))
    train(config, data, straight)
    for key in ("train/loss", "best/val/accuracy", "best/epoch", "test/accuracy"):
        assert resumed.reports[-1][key] == pytest.approx(straight.reports[-1][key], abs=1e-5)
    assert StateFolder(location).names("resume") == ["resume-e0004"]  # the newest, in the bucket
    assert load_trained(resumed.checkpoints[-1]) is not None  # the pointer's best folder, from the bucket


def test_restored_after_the_last_epoch_reports_the_test_metrics_again(tiny_model_dir, tmp_path, count_test_evaluations):
    data = toy_tables(tiny_model_dir)
    first = PruningSession(str(tmp_path))
    train(loop_config(tiny_model_dir, epochs=2, checkpoint_every=1), data, first)
    again = PruningSession(str(tmp_path), resume_from=first.checkpoints[-1])
    train(loop_config(tiny_model_dir, epochs=2, checkpoint_every=1), data, again)
    assert [r["epoch"] for r in again.reports] == [2] and again.checkpoints == []
    assert again.reports[0]["test/accuracy"] == pytest.approx(first.reports[-1]["test/accuracy"])


def test_a_pointer_to_a_pruned_resume_state_goes_on_from_the_newer_one(tiny_model_dir, tmp_path, count_test_evaluations):
    """The driver was killed before Tune saved the newer pointer (pruning keeps only the newest
    resume state): the restore from the older pointer goes on from the newest state instead of
    failing on the missing one."""
    data = toy_tables(tiny_model_dir)
    first = PruningSession(str(tmp_path))
    train(loop_config(tiny_model_dir, epochs=4, checkpoint_every=2), data, first)
    assert StateFolder(first.state_dir).names("resume") == ["resume-e0004"]
    again = PruningSession(str(tmp_path), resume_from=first.checkpoints[0])  # the epoch-2 pointer
    train(loop_config(tiny_model_dir, epochs=4, checkpoint_every=2), data, again)
    assert [r["epoch"] for r in again.reports] == [4]
    assert again.reports[0]["test/accuracy"] == pytest.approx(first.reports[-1]["test/accuracy"])


def test_pointer_best_folder_and_legacy_files_resolve(tiny_model_dir, tmp_path):
    data = toy_tables(tiny_model_dir)
    session = PruningSession(str(tmp_path / "run"))
    train(loop_config(tiny_model_dir, epochs=1), data, session)
    folder = best_folder(session.checkpoints[-1])
    assert folder is not None and folder.name == "best-e0001"
    assert weights_file(session.checkpoints[-1]) == folder / WEIGHTS_FILE
    assert weights_file(folder / WEIGHTS_FILE) == folder / WEIGHTS_FILE
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    torch.save(load_weights(folder / WEIGHTS_FILE), legacy / "model.pt")
    (legacy / META_FILE).write_text((folder / META_FILE).read_text())
    a, b = load_trained(str(legacy)), load_trained(str(folder))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert best_folder(tmp_path / "nowhere") is None
    with pytest.raises(FileNotFoundError, match="no trained weights"):
        load_trained(str(tmp_path))


def test_a_resume_state_at_the_best_epoch_links_the_best_weights(tmp_path):
    folder = StateFolder(tmp_path / "state")
    layer = torch.nn.Linear(2, 2)
    weights = {k: v.clone() for k, v in layer.state_dict().items()}
    best = folder.path(folder.write_best(weights, 3, {"epoch": 3})) / WEIGHTS_FILE
    linked = folder.path(folder.write_resume(layer, {}, 3, same_weights=best)) / WEIGHTS_FILE
    assert os.path.samefile(best, linked)
    written = folder.path(folder.write_resume(layer, {}, 4, same_weights=tmp_path / "missing")) / WEIGHTS_FILE
    assert not os.path.samefile(best, written)
    assert all(torch.equal(load_weights(written)[k], weights[k]) for k in weights)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_prune_removes_interrupted_writes_and_remove_state_frees_the_folder(where, tmp_path, request):
    """The same on a local path and on S3 (a real S3 server: uploads, a completion marker, listing
    and deletion through pyarrow.fs)."""
    location = str(tmp_path / "trial" / "state") if where == "local" else request.getfixturevalue("s3_storage")
    folder = StateFolder(location)
    weights = {"w": torch.ones(3)}
    for epoch in (1, 2, 3):
        folder.write_best(weights, epoch, {"epoch": epoch})
    (folder.root / ".resume-e0004.abc.tmp").mkdir()  # a write killed half-way
    folder.prune({"best-e0003", "best-e0001"})
    assert folder.names("best") == ["best-e0001", "best-e0003"]
    assert not list(folder.root.glob(".*.tmp"))
    for epoch in (2, 4):
        folder.write_resume(torch.nn.Linear(2, 2), {"best": "best-e0003"}, epoch)
    assert drop_resume_states(location) == 2  # a trial that ended keeps its best folders only
    assert folder.names("resume") == [] and folder.names("best") == ["best-e0001", "best-e0003"]
    if where == "s3":  # another node: an empty cache, everything read from the bucket
        shutil.rmtree(folder.root)
        assert StateFolder(location).names("best") == ["best-e0001", "best-e0003"]
        assert torch.equal(load_weights(best_of_trial(location, 3) / WEIGHTS_FILE)["w"], weights["w"])
        assert best_of_trial(location, 2) is None
    assert remove_state(location) > 0 and not folder.root.exists()
    assert StateFolder(location).names("best") == [] and remove_state(location) == 0


def test_checkpoint_every_is_a_loop_parameter():
    param = loop.LOOP_PARAMS["checkpoint_every"]
    assert param.coerce("checkpoint_every", 3) == 3
    with pytest.raises(Exception, match="checkpoint_every"):
        param.coerce("checkpoint_every", 0)


class _Payload:
    """What a tampered checkpoint could hold: unpickling it would run a command."""

    def __reduce__(self):
        import os

        return (os.system, ("touch pwned",))


def test_a_resume_state_is_read_without_running_code(tmp_path, monkeypatch):
    """Resume states load with torch's weights-only unpickler (numpy arrays allowed for the
    RNG state): a real one round-trips, one holding an object that runs code is refused and
    the code never runs."""
    import pickle
    import random

    import numpy as np
    import torch

    from trainables.checkpoints import load_state, rng_state

    monkeypatch.chdir(tmp_path)
    good = {"optimizer": {"state": {0: {"exp_avg": torch.ones(2)}}, "param_groups": [{"lr": 1e-3, "params": [0]}]},
            "tracker": {"best": 0.5, "epoch": 2}, "epoch": 2, "rng": rng_state(), "best": "best-e0002"}
    torch.save(good, tmp_path / "good.pt")
    loaded = load_state(tmp_path / "good.pt")
    assert loaded["epoch"] == 2 and loaded["tracker"] == good["tracker"]
    np.testing.assert_array_equal(loaded["rng"]["numpy"][1], good["rng"]["numpy"][1])
    random.setstate(loaded["rng"]["python"])  # a state Python takes back
    assert random.getstate() == good["rng"]["python"]

    torch.save({**good, "extra": _Payload()}, tmp_path / "bad.pt")
    with pytest.raises(pickle.UnpicklingError):
        load_state(tmp_path / "bad.pt")
    assert not (tmp_path / "pwned").exists()


class ResumesNewest(CrashAfter):
    resume_newest = True  # as Tune and Train sessions do: the trial's folder may be newer than Ray's pointer


@pytest.mark.parametrize("pointer", ["stale", "none"])
def test_a_stale_or_missing_pointer_goes_on_from_the_folders_newest_state(pointer, tiny_model_dir, tmp_path):
    """Tune's saved state is older than the trial's folder (the driver died after the trial had
    written newer resume states): the restart goes on from the newest one, re-reports that
    epoch (the driver may never have logged it), and ends where an uninterrupted run ends."""
    data = toy_tables(tiny_model_dir)
    config = loop_config(tiny_model_dir, epochs=5, checkpoint_every=1)
    killed = ResumesNewest(str(tmp_path / "a"), 4)
    with pytest.raises(RuntimeError):
        train(config, data, killed)
    assert StateFolder(killed.state_dir).names("resume")[-1] == "resume-e0004"
    resumed = ResumesNewest(str(tmp_path / "a"), 99, resume_from=killed.checkpoints[1] if pointer == "stale" else None)
    train(config, data, resumed)
    assert [r["epoch"] for r in resumed.reports] == [4, 5]  # epoch 4 again (its saved metrics), then 5
    assert resumed.reports[0]["val/accuracy"] == pytest.approx(killed.reports[3]["val/accuracy"])
    straight = PruningSession(str(tmp_path / "b"))
    train(config, data, straight)
    for key in ("train/loss", "best/val/accuracy", "best/epoch", "test/accuracy"):
        assert resumed.reports[-1][key] == pytest.approx(straight.reports[-1][key], abs=1e-5)
    local = PruningSession(str(tmp_path / "a"))  # a plain session resumes only what it is given
    train(loop_config(tiny_model_dir, epochs=1, checkpoint_every=1), data, local)
    assert [r["epoch"] for r in local.reports] == [1]
