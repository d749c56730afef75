"""A sweep's storage (``sweep.storage`` / ``--storage``): locations, preflight, and a real sweep
whose Tune state and trial state folders live on S3 (a real S3 server, moto's, on 127.0.0.1)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from conftest import write_spec

from contrasweep.errors import UserError
from contrasweep.folder import sweep_storage
from contrasweep.spec.load import SpecError, storage_location
from trainables.storage import display, is_uri, join


def test_locations_join_before_a_uris_query():
    uri = "s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http"
    assert join(uri, "sweep", "tune") == "s3://bucket/prefix/sweep/tune?endpoint_override=127.0.0.1:9000&scheme=http"
    assert join("/data/sweeps", "a", "tune") == "/data/sweeps/a/tune"
    assert join("file:///data/sweeps", "a") == "/data/sweeps/a"
    assert is_uri(uri) and not is_uri("/data") and not is_uri("file:///data")
    assert display(uri) == "s3://bucket/prefix"
    assert display("s3://KEYID:s3cr3t@bucket/p?region=x") == "s3://KEYID:***@bucket/p"  # no secret in messages
    assert display("/data/a@b:c") == "/data/a@b:c"


@pytest.mark.parametrize("bad", ["", "ftp://host/x", 3])
def test_a_storage_pyarrow_cannot_open_is_a_spec_error(bad):
    with pytest.raises(SpecError, match="allowed: a path"):
        storage_location(bad, "sweep.storage")
    assert storage_location("gs://bucket/x", "sweep.storage") == "gs://bucket/x"


def test_a_path_of_this_machine_is_refused_on_a_cluster(tmp_path, monkeypatch):
    sweep_storage.check(None, tmp_path / "s", machines=1)  # one machine: its own folder is fine
    with pytest.raises(UserError, match=r"Ray cluster spans 2 machines.*allowed: --storage s3://"):
        sweep_storage.check(None, tmp_path / "s", machines=2)
    monkeypatch.setattr(sweep_storage, "shared_path", lambda path: True)  # e.g. an NFS mount
    sweep_storage.check(str(tmp_path), tmp_path / "s", machines=2)


def test_shared_path_reads_the_mount_table(tmp_path, monkeypatch):
    table = "server:/export /mnt/shared nfs4 rw 0 0\n/dev/sda1 / ext4 rw 0 0\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: table if str(self) == "/proc/mounts" else "")
    assert sweep_storage.shared_path(Path("/mnt/shared/sweeps"))
    assert not sweep_storage.shared_path(Path("/mnt/sharedx/sweeps"))
    assert not sweep_storage.shared_path(Path("/home/user"))


def test_unreachable_storage_is_one_line_within_the_time_limit(monkeypatch):
    monkeypatch.setattr(sweep_storage, "TIMEOUT_S", 3.0)
    started = time.monotonic()
    with pytest.raises(UserError) as err:  # nothing listens on port 9
        sweep_storage.check("s3://testing:testing@b/x?endpoint_override=127.0.0.1:9&scheme=http&region=us-east-1",
                            Path("/tmp/unused"), machines=1)
    assert time.monotonic() - started < 10
    assert "\n" not in str(err.value) and "storage s3://testing:***@b/x" in str(err.value)


def test_a_missing_bucket_is_refused(s3_endpoint):
    with pytest.raises(UserError, match="cannot be written"):
        sweep_storage.check(f"s3://testing:testing@no-such-bucket/x?endpoint_override={s3_endpoint}&scheme=http"
                            "&region=us-east-1", Path("/tmp/unused"), machines=1)


@pytest.mark.slow
def test_a_sweep_on_s3_keeps_its_state_there_and_resumes_from_it_elsewhere(ray_session, tiny_model_dir, cache_dir,
                                                                            tmp_path, s3_storage):
    from mlflow.tracking import MlflowClient
    from pyarrow import fs as pafs

    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec.identity import key_of
    from contrasweep.spec import load as spec
    from dashboards.trials import parent_runs, trial_runs

    path = write_spec(tmp_path / "s3.yaml", tiny_model_dir, fixed={"epochs": 2},
                      sweep={"seeds": [0], "scheduler": "none", "storage": s3_storage})
    uri, root = f"sqlite:///{tmp_path / 'mlflow.db'}", sweeps.sweeps_root(str(tmp_path / "sweeps"))
    results = tune.run(spec.load_spec(path), "ons3", root, uri, None)
    assert len(results) == 2 and not any(r.error for r in results)
    assert not (root / "ons3" / "tune").exists()  # nothing of Tune's on this machine's sweep folder

    fs, base = pafs.FileSystem.from_uri(s3_storage)
    stored = {info.path[len(base) + 1:] for info in fs.get_file_info(pafs.FileSelector(base, recursive=True))}
    assert {"ons3/tune/tuner.pkl", "ons3/sweep/sweep.json", "ons3/sweep/spec.yaml", "ons3/sweep/tracking.json"} <= stored
    for result in results:  # each repeat's best folder was there: its MLflow model was made from it (below); the
        trial = Path(result.path).name  # finished sweep then dropped it (one copy: MLflow's) and its resume states
        assert f"ons3/tune/{trial}/result.json" in stored
        assert not [p for p in stored if p.startswith(f"ons3/trials/{key_of(result.config)}/state/")], stored
    client = MlflowClient(uri)
    runs = trial_runs(uri, parent_runs(uri, "tests", "ons3")[0].info.run_id)
    assert all({a.path for a in client.list_artifacts(r.info.run_id, "model/artifacts/checkpoint")}
               == {"model/artifacts/checkpoint/model.safetensors", "model/artifacts/checkpoint/meta.json"} for r in runs)
    logged_spec = client.download_artifacts(parent_runs(uri, "tests", "ons3")[0].info.run_id, "spec.yaml", str(tmp_path))
    assert "testing:***@" in Path(logged_spec).read_text() and "testing:testing" not in Path(logged_spec).read_text()

    # another machine: no sweep folder, the same storage and MLflow store
    shutil.rmtree(root / "ons3")
    sweep_dir = tune.open_or_fetch("ons3", root, s3_storage)
    assert sweep_dir.meta()["status"] == "finished" and sweep_dir.storage == s3_storage
    with pytest.raises(UserError, match="already finished"):
        tune.resume("ons3", root, None, s3_storage)
    # a resume on the fetched folder builds a fresh Tuner from the sweep's records: nothing is
    # rerun (no trial in its experiment), MLflow keeps one run per trial (marked unfinished here:
    # a finished sweep is refused above)
    sweep_dir.update_meta(status="interrupted")
    again = tune.resume("ons3", root, None, s3_storage)
    assert len(again) == 0 and sweep_dir.meta()["status"] == "finished"
    assert sweep_dir.meta()["experiments"] == ["tune", "tune-r1"]
    assert len(trial_runs(uri, parent_runs(uri, "tests", "ons3")[0].info.run_id)) == 2
    with pytest.raises(UserError, match="keeps its state in"):
        tune.open_or_fetch("ons3", root, join(s3_storage, "elsewhere"))


@pytest.mark.parametrize("extensions", [[], [{"top": 2}]])
def test_resume_from_storage_reads_the_stage_from_the_fetched_folder(tmp_path, monkeypatch, extensions):
    """``resume --storage`` on a machine with no sweep folder fetches it before it looks at the
    stage: an extension's stage resumes as the extension, any other as the sweep."""
    import argparse
    import json

    from contrasweep.api import actions
    from contrasweep.cli import commands
    from contrasweep.runner import tune

    storage = tmp_path / "store"
    (storage / "grown" / "sweep").mkdir(parents=True)
    (storage / "grown" / "sweep" / "sweep.json").write_text(json.dumps(
        {"status": "interrupted", "storage": str(storage), "extensions": extensions}))
    called = []

    def went_on(kind):
        def go_on(name, root, *args, **kwargs):
            called.append((kind, name, (root / name / "sweep.json").exists()))
            raise KeyboardInterrupt  # stop here: what follows reads a real sweep

        return go_on

    monkeypatch.setattr(actions, "resume_extension", went_on("extension"))
    monkeypatch.setattr(tune, "resume", went_on("sweep"))
    args = argparse.Namespace(root=str(tmp_path / "sweeps"), name="grown", storage=str(storage), address=None,
                              ray_dashboard=False, ray_bind_all=False, allow_changed_method=False, no_tsne=True,
                              verbose=False)
    with pytest.raises(KeyboardInterrupt):
        commands.cmd_resume(args)
    assert called == [("extension" if extensions else "sweep", "grown", True)]
