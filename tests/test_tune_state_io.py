"""What the driver writes of Tune's own files per trial, without growing with the sweep (issue 54):
the save forced before each new trial copies this session's state files only
(``contrasweep.search.live_trials.save_now``), and each trial's ``result.json``/``progress.csv`` go
straight into the sweep's Tune folder (``contrasweep.run.trial_logs``), so that Tune's staging
folder, which its own save copies whole, holds no trial's logs."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

from contrasweep.run.trial_logs import TrialLogs, trial_folder
from contrasweep.search.live_trials import save_now

SESSION = "2026-11-28_19-40-00"


class Syncer:
    def __init__(self):
        self.waited = 0

    def wait(self):
        self.waited += 1


class Controller:
    """Ray 2.60's controller, as far as ``save_now`` reads it."""

    def __init__(self, staging: Path, target: Path, kind: str = "local"):
        self._session_str = SESSION
        self._storage = SimpleNamespace(storage_filesystem=SimpleNamespace(type_name=kind), experiment_fs_path=str(target),
                                        experiment_driver_staging_path=str(staging), syncer=Syncer())
        self.saves = self.forced = 0

    def save_to_dir(self):
        self.saves += 1
        staging = Path(self._storage.experiment_driver_staging_path)
        (staging / f"experiment_state-{SESSION}.json").write_text(json.dumps({"saves": self.saves}))
        (staging / f"searcher-state-{SESSION}.pkl").write_bytes(b"searcher %d" % self.saves)

    def checkpoint(self, force=False):
        self.forced += 1


def test_the_forced_save_copies_this_sessions_state_files_only(tmp_path):
    staging, target = tmp_path / "staging", tmp_path / "sweep" / "tune"
    staging.mkdir()
    (staging / "run_trial_a").mkdir()  # a trial's folder: Tune's own periodic save copies it, this one does not
    (staging / "run_trial_a" / "error.txt").write_text("x")
    (staging / "tuner.pkl").write_bytes(b"big")
    (staging / "experiment_state-2026-11-27_10-00-00.json").write_text("{}")  # an earlier session's
    controller = Controller(staging, target)
    save_now(controller)
    save_now(controller)
    assert sorted(p.name for p in target.iterdir()) == [f"experiment_state-{SESSION}.json", f"searcher-state-{SESSION}.pkl"]
    assert json.loads((target / f"experiment_state-{SESSION}.json").read_text()) == {"saves": 2}
    assert (target / f"searcher-state-{SESSION}.pkl").read_bytes() == b"searcher 2"
    assert controller._storage.syncer.waited == 2 and controller.forced == 0  # Tune's copy, if running, ended first
    # another Tune (no staging state to copy) gets its own forced save
    other = SimpleNamespace(forced=0)
    other.checkpoint = lambda force=False: setattr(other, "forced", other.forced + 1)
    save_now(other)
    assert other.forced == 1


class Trial:
    def __init__(self, root: Path, kind: str = "local"):
        self.config = {"hp": {"lr": 0.1}}
        self.relative_logdir = None
        self.root = root
        self.storage = SimpleNamespace(storage_filesystem=SimpleNamespace(type_name=kind))

    def init_local_path(self):
        self.relative_logdir = self.relative_logdir or "run_trial_t"
        (self.root / "staging" / self.relative_logdir).mkdir(parents=True, exist_ok=True)

    @property
    def local_path(self):
        return str(self.root / "staging" / self.relative_logdir)

    @property
    def path(self):
        return str(self.root / "sweep" / "tune" / self.relative_logdir)


def test_trial_logs_go_to_the_sweep_folder_and_a_restored_trial_appends(tmp_path):
    trial = Trial(tmp_path)
    logs = TrialLogs()
    logs.log_trial_start(trial)
    logs.log_trial_result(1, trial, {"epoch": 1, "val/accuracy": 0.5, "config": trial.config, "best": {"epoch": 1}})
    logs.log_trial_result(2, trial, {"epoch": 2, "val/accuracy": 0.75, "config": trial.config, "best": {"epoch": 2}})
    logs.log_trial_end(trial)
    logs.log_trial_start(trial)  # restored: appends, no second header
    logs.log_trial_result(3, trial, {"epoch": 3, "val/accuracy": 0.8, "config": trial.config, "best": {"epoch": 2}})
    logs.log_trial_end(trial)
    folder = Path(trial.path)
    assert trial_folder(trial) == folder and not any((tmp_path / "staging" / "run_trial_t").iterdir())
    results = [json.loads(line) for line in (folder / "result.json").read_text().splitlines()]
    assert [r["epoch"] for r in results] == [1, 2, 3] and results[0]["config"] == trial.config
    rows = list(csv.DictReader((folder / "progress.csv").open()))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"] and rows[2]["best/epoch"] == "2" and "config" not in rows[0]
    assert json.loads((folder / "params.json").read_text()) == trial.config
    # object storage: the staging folder, which Tune copies up
    remote = Trial(tmp_path / "remote", kind="s3")
    logs.log_trial_start(remote)
    logs.log_trial_result(1, remote, {"epoch": 1})
    logs.log_trial_end(remote)
    assert trial_folder(remote) == Path(remote.local_path) and (Path(remote.local_path) / "result.json").exists()


def _restored_trial(tmp_path: Path, registered: int, kept: list[int]):
    """A real Tune trial (Ray's Trial, StorageContext and checkpoint manager, num_to_keep=2) that
    registered ``registered`` checkpoints, saved and restored through Tune's JSON state, whose
    trial folder then holds only the checkpoint folders ``kept`` (Tune deleted the others after
    the save, or the folders were lost)."""
    from ray import tune
    from ray.train._internal.session import _TrainingResult
    from ray.train._internal.storage import StorageContext
    from ray.tune.execution.placement_groups import PlacementGroupFactory
    from ray.tune.experiment import Trial

    storage = StorageContext(storage_path=str(tmp_path / "sweep"), experiment_dir_name="tune", trial_dir_name="trial_a")
    trial = Trial("run_trial", config={"lr": 0.1}, storage=storage, stub=True, placement_group_factory=PlacementGroupFactory([{"CPU": 1}]),
                  checkpoint_config=tune.CheckpointConfig(num_to_keep=2))
    trial.create_placement_group_factory()  # as Tune does when it adds the trial
    folder = Path(storage.trial_fs_path)
    for index in range(registered):
        (folder / f"checkpoint_{index:06d}").mkdir(parents=True)
        trial.on_checkpoint(_TrainingResult(checkpoint=tune.Checkpoint(str(folder / f"checkpoint_{index:06d}")),
                                            metrics={"epoch": index + 1, "training_iteration": index + 1}))
    trial_json, metadata_json = trial.get_json_state()
    restored = Trial.from_json_state(trial_json, stub=True)
    restored.restore_run_metadata(metadata_json)
    for path in folder.glob("checkpoint_*"):
        if int(path.name.split("_")[1]) not in kept:
            path.rmdir()
    return restored, folder


def test_a_restored_trial_whose_named_checkpoint_tune_deleted_goes_on_from_its_newest(tmp_path):
    """Tune's saved state names checkpoint_000001 (its two kept: 0 and 1); after that save the
    trial reported 2 and 3 and Tune deleted 0 and 1; the driver was killed before its next save.
    The restored trial names checkpoint_000003, the next checkpoint is 4, and nothing names a
    deleted folder (CI of a96875d: 'Could not recover from checkpoint ...')."""
    from contrasweep.search.live_trials import repoint_checkpoint

    trial, folder = _restored_trial(tmp_path, registered=2, kept=[])
    for index in (2, 3):
        (folder / f"checkpoint_{index:06d}").mkdir()
    assert trial.checkpoint.path == str(folder / "checkpoint_000001")
    index_before = trial.storage.current_checkpoint_index

    assert repoint_checkpoint(trial) == str(folder / "checkpoint_000003")
    assert trial.checkpoint.path == str(folder / "checkpoint_000003")
    assert trial.storage.current_checkpoint_index == index_before + 2
    manager = trial.run_metadata.checkpoint_manager
    assert [r.checkpoint.path for r in manager._checkpoint_results] == [str(folder / "checkpoint_000003")]
    assert repoint_checkpoint(trial) is None  # it exists now: left as it is


def test_a_restored_trial_keeps_a_checkpoint_that_exists_and_drops_one_with_no_folder_left(tmp_path):
    from contrasweep.search.live_trials import repoint_checkpoint

    trial, folder = _restored_trial(tmp_path, registered=2, kept=[0, 1])
    assert repoint_checkpoint(trial) is None
    assert trial.checkpoint.path == str(folder / "checkpoint_000001")

    gone, _ = _restored_trial(tmp_path / "other", registered=2, kept=[])
    assert repoint_checkpoint(gone) == ""
    assert gone.checkpoint is None  # Tune starts it without one; the loop resumes from its own state folder
    assert gone.run_metadata.checkpoint_manager._checkpoint_results == []

    never, _ = _restored_trial(tmp_path / "third", registered=0, kept=[])
    assert repoint_checkpoint(never) is None and never.checkpoint is None
