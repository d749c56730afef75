"""Shared fixtures: a tiny random BERT saved as a real Hugging Face model directory (no
download; the tokenizer is the bundled MiniLM's), isolated caches and stores per test.

Every test that has a ``tmp_path`` finds a migrated, empty MLflow sqlite store at
``tmp_path / "mlflow.db"`` (the URI the tests and the CLI's default use there): a copy of one
store migrated once per session, as MLflow's own suite does, instead of ~50 fresh migrations of
a few seconds each. A fixture with a folder of its own calls ``copy_store``.

Sweeps that several tests read run once per session here (``report_sweeps``, ``server_sweep``):
a new claim about a finished sweep is an assertion on one of them, not a sweep of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contrasweep.runner.ray_env import local_ray_environment
from trainables.toy import build_tiny_bert

local_ray_environment()  # the suite's local Ray (ray_session), before a test module imports Ray
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory) -> Path:
    """One MLflow sqlite store, created and migrated by MLflow itself, left empty."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("store-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()  # creates the tables: every migration
    return path


def copy_store(template: Path, folder: Path) -> str:
    """A copy of the session's migrated store as ``folder / "mlflow.db"``; returns its URI. Its
    Default experiment's artifact folder is moved next to the copy, where a store created there
    would put it."""
    import shutil
    import sqlite3

    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "mlflow.db"
    shutil.copyfile(template, target)
    with sqlite3.connect(target) as db:
        db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                   (str(folder.resolve() / "mlruns" / "0"),))
    db.close()
    return f"sqlite:///{target}"


@pytest.fixture(autouse=True)
def _migrated_store_in_tmp_path(request):
    if "tmp_path" not in request.fixturenames:
        yield
        return
    copy_store(request.getfixturevalue("migrated_store"), request.getfixturevalue("tmp_path"))
    yield


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    return str(build_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("CONTRASWEEP_CACHE", str(path))
    return path


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray for the suite (2 CPUs: this machine), started with an explicit address so it
    never attaches to a cluster someone else started here. A CLI command run in this process
    (``contrasweep.cli.main``) finds it up and leaves it running."""
    import ray

    from contrasweep.runner.ray_start import init_ray

    init_ray(None, num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture()
def ray_address(ray_session) -> str:
    """The suite's Ray for a ``contrasweep`` driver in a process of its own to attach to with
    ``--address``, as a user's driver attaches to a cluster (no Ray start per driver). Tests of
    Ray's own start (tests/test_two_instances.py, two cases of tests/test_searcher_resume.py)
    and of a cluster of their own (tests/test_node_failure.py) keep theirs."""
    return ray_session.get_runtime_context().gcs_address


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3 server on 127.0.0.1 (moto's, in a thread of this process) for the tests of
    ``storage: s3://…``; yields ``host:port``."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"{host}:{port}"
    server.stop()


@pytest.fixture()
def s3_storage(s3_endpoint, tmp_path) -> str:
    """An ``s3://`` storage URI in a bucket of its own (credentials and endpoint in the URI, so
    that Ray workers started before the test reach it too)."""
    from pyarrow import fs

    bucket = "t" + format(abs(hash(str(tmp_path))), "x")[:20]
    uri = f"s3://testing:testing@{bucket}/sweeps?endpoint_override={s3_endpoint}&scheme=http&region=us-east-1"
    fs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=s3_endpoint, scheme="http",
                    region="us-east-1", allow_bucket_creation=True).create_dir(bucket)  # users bring their bucket
    return uri


@pytest.fixture(scope="session")
def report_sweeps(ray_session, tiny_model_dir, tmp_path_factory, migrated_store):
    """Two finished tiny sweeps in one store, run once for every test that reads them
    (tests/test_report.py, the data axes, data cache and registered model of
    tests/test_sweep_e2e.py, tests/test_model_serving.py): ``ce-small`` (CE, lr ∈ {1e-3, 1e-4})
    and ``lacon-small`` (LaCon, τ ∈ {0.1, 0.5}), each over k ∈ {2, 3} × 2 split seeds × 1 seed,
    one epoch, two metrics; ``lacon-small`` runs second on the same data, from the cache
    ``ce-small`` wrote. Returns ``(uri, root, folder)``; a test adds assertions here rather than
    a sweep of its own (README, "Development")."""
    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec import load as spec

    tmp = tmp_path_factory.mktemp("report")
    uri = copy_store(migrated_store, tmp)
    root = sweeps.sweeps_root(str(tmp / "sweeps"))
    common = dict(data={"k": [2, 3], "seed": [0, 1]}, fixed={"epochs": 1, "batch_size": 8, "warmup_ratio": 0.0},
                  sweep={"seeds": [0], "scheduler": "none", "metric": ["val/accuracy", "val/macro_f1"],
                         "mode": ["max", "max"]})
    ce = write_spec(tmp / "ce.yaml", tiny_model_dir, **common)
    lacon = write_spec(tmp / "lacon.yaml", tiny_model_dir, method="lacon", reported={"temperature": 0.1},
                       grid={"lr": [1.0e-3], "temperature": [0.1, 0.5]},  # heads: LaCon's default 6 does not divide 32
                       **{**common, "fixed": {**common["fixed"], "heads": 4}})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONTRASWEEP_CACHE", str(tmp / "cache"))
        for path, name in ((ce, "ce-small"), (lacon, "lacon-small")):
            results = tune.run(spec.load_spec(path), name, root, uri, None)
            assert len(results) == 8 and not any(r.error for r in results)
    return uri, root, tmp


UI_SWEEP = "ui-sweep"


@pytest.fixture(scope="session")
def server_sweep(ray_session, tiny_model_dir, tmp_path_factory):
    """A real ``mlflow server`` on 127.0.0.1 (its own sqlite store, artifacts proxied through it as
    a shared server serves them; tests/browser.py) and one real tiny sweep that ``contrasweep run``
    tracked on it over HTTP (CE, one configuration × 2 split repeats, 1 epoch, which also writes
    the report to the sweep run), for the tracking-server and MLflow UI tests. The driver runs in
    the folder ``local`` so that a store falling back to its default would show there. Yields
    ``(server, found)``; ``found`` holds ``experiment_id``, ``{parent,config,trial}_run_id``,
    ``{parent,config,trial}_name``, ``report`` (the artifact path on the sweep run) and ``local``."""
    from browser import mlflow_server

    from contrasweep.cli import main
    from contrasweep.tracking.store import get_client, trial_runs
    from dashboards.trials import parent_runs

    tmp = tmp_path_factory.mktemp("ui-sweep")
    with mlflow_server(tmp / "server", proxy_artifacts=True) as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONTRASWEEP_CACHE", str(tmp / "cache"))
        (tmp / "local").mkdir()
        patch.chdir(tmp / "local")
        spec = write_spec(tmp / "spec.yaml", tiny_model_dir, data={"k": 2, "seed": [0, 1]}, grid={"lr": [1.0e-3]},
                          fixed={"epochs": 1}, sweep={"seeds": [0], "scheduler": "none"})
        terminal, saved = tmp / "fd2.txt", os.dup(2)  # what reaches the terminal past the console (the writer's)
        with open(terminal, "w") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                code = main(["--root", str(tmp / "sweeps"), "run", str(spec), "--name", UI_SWEEP, "--tracking-uri",
                             server.uri])
            finally:
                os.dup2(saved, 2)
                os.close(saved)
        assert code == 0, terminal.read_text()[-3000:]
        patch.undo()
        client = get_client(server.uri)
        parent = parent_runs(server.uri, "tests", UI_SWEEP)[0]
        trial = trial_runs(client, parent.info.run_id)[0]
        config = client.get_run(trial.data.tags["mlflow.parentRunId"])
        yield server, {"experiment_id": parent.info.experiment_id, "parent_run_id": parent.info.run_id,
                       "config_run_id": config.info.run_id, "trial_run_id": trial.info.run_id,
                       "parent_name": parent.info.run_name, "config_name": config.info.run_name,
                       "trial_name": trial.info.run_name, "report": "report/report.html", "local": tmp / "local",
                       "terminal": terminal.read_text(), "driver_log": (tmp / "sweeps" / UI_SWEEP / "driver.log").read_text()}


def write_spec(path: Path, model_dir: str, **sections) -> Path:
    """A small sweep spec on the tiny BERT and BBC News few-shot."""
    import yaml

    spec = {
        "method": "ce",
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4, "test_fraction": 0.05},
        "encoder": {"name": model_dir, "pooling": "mean", "max_length": 32},
        "reported": {"lr": 1.0e-3},
        "grid": {"lr": [1.0e-3, 1.0e-4]},
        "fixed": {"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0},
        "sweep": {"searcher": "grid", "metric": "val/accuracy", "mode": "max", "scheduler": "asha",
                  "seeds": [0, 1], "max_concurrent": 2, "resources": {"cpu": 1}},
        "tracking": {"experiment": "tests"},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
