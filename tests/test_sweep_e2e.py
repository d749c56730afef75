"""End to end on a real local Ray and a real MLflow sqlite store, with the tiny BERT:
spec -> data cache -> Tune (grid × seeds, ASHA) -> trials -> MLflow (a killed, interrupted or
moved sweep's resume: tests/test_searcher_resume.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import write_spec
from mlflow import MlflowClient

from contrasweep.folder.record import read as read_record
from dashboards.trials import history, parent_runs, trial_runs

pytestmark = pytest.mark.slow


def _run_sweep(tmp_path, spec_path, name):
    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec import load as spec

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tune.run(spec.load_spec(spec_path), name, sweeps.sweeps_root(str(tmp_path / "sweeps")), uri, None)
    return uri, results


def test_grid_sweep_with_asha_tracks_one_nested_run_per_trial(ray_session, tiny_model_dir, cache_dir, tmp_path):
    spec_path = write_spec(tmp_path / "spec.yaml", tiny_model_dir)
    uri, results = _run_sweep(tmp_path, spec_path, "e2e")
    assert len(results) == 4 and not any(r.error for r in results)
    parents = parent_runs(uri, "tests", "e2e")
    assert len(parents) == 1
    runs = trial_runs(uri, parents[0].info.run_id)
    assert len(runs) == 4
    by_trial = {r.data.tags["contrasweep.trial_id"]: r for r in runs}
    assert set(by_trial) == {r.metrics["trial_id"] for r in results}
    for result in results:
        run = by_trial[result.metrics["trial_id"]]
        assert run.info.status == "FINISHED"
        epochs = [step for step, _ in history(uri, run.info.run_id, "val/accuracy")]
        assert epochs == list(range(1, result.metrics["epoch"] + 1))  # one value per epoch
        assert {"hp.lr", "hp.seed", "hp.epochs"} <= set(run.data.params)
        from mlflow.tracking import MlflowClient

        client = MlflowClient(uri)
        files = {f.path for f in client.list_artifacts(run.info.run_id, "model")}
        files |= {f.path for f in client.list_artifacts(run.info.run_id, "model/artifacts/checkpoint")}
        state = Path(result.path) / "state"
        # Tune's own logs as it writes them by default, not its TensorBoard files (tune.tune_loggers)
        assert (Path(result.path) / "result.json").is_file() and (Path(result.path) / "progress.csv").is_file()
        assert not list(Path(result.path).glob("events.out.tfevents*"))
        if run.data.tags["contrasweep.outcome"] == "complete":  # its best weights, tested once at the end
            # its MLflow model, whose artifacts are the best folder itself (no second copy beside it)
            assert {"model/MLmodel", "model/artifacts/checkpoint/model.safetensors",
                    "model/artifacts/checkpoint/meta.json"} <= files
            assert not client.list_artifacts(run.info.run_id, "best_checkpoint")
            assert "test/accuracy" in run.data.metrics
            # one copy of its best weights, its MLflow model's; the sweep finished: nothing resumes it
            assert not state.exists()
        else:  # stopped by ASHA: never a candidate, never tested, its states removed
            assert not files and "test/accuracy" not in run.data.metrics and not state.exists()
    assert {r.data.tags["contrasweep.outcome"] for r in runs} == {"complete", "stopped"}
    # the sweep run's live numbers (its row in the MLflow runs table): one point per ended trial
    client = MlflowClient(uri)
    ended = client.get_metric_history(parents[0].info.run_id, "trials/ended")
    assert sorted((m.step, m.value) for m in ended) == [(n, float(n)) for n in range(1, 5)]
    best_so_far = sorted(client.get_metric_history(parents[0].info.run_id, "best_trial/val/accuracy"), key=lambda m: m.step)
    assert best_so_far[-1].value == max(r.data.metrics["best/val/accuracy"] for r in runs)
    assert all(a.value <= b.value for a, b in zip(best_so_far, best_so_far[1:]))  # a running best never falls
    # the paper's reported setting (lr 1e-3) comes first in the grid, once per seed
    # Tune numbers its trials as they are created: run_trial_<id>_<number>_<config>
    ordered = sorted(results, key=lambda r: int(Path(r.path).name.split("_")[3]))
    assert [(r.config["hp"]["lr"], r.config["hp"]["seed"]) for r in ordered] == [(1e-3, 0), (1e-3, 1), (1e-4, 0), (1e-4, 1)]
    _provenance_on_every_run(client, parents[0], tmp_path)


def _provenance_on_every_run(client, parent, tmp_path):
    """Which code made the runs, once on the sweep run: the commit of the checkout these tests
    run from (and whether its tracked files differ from it), the versions, the spec's sha256 (of
    the spec.yaml logged on the sweep run), user and host; a configuration or trial run carries
    the MLflow UI's user and source columns only (nothing differs from its sweep run's here)."""
    import hashlib
    import socket
    import subprocess
    from importlib import metadata

    repo = str(Path(__file__).resolve().parents[1])
    head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True).stdout.strip()
    spec = Path(client.download_artifacts(parent.info.run_id, "spec.yaml", str(tmp_path))).read_bytes()
    runs = client.search_runs([parent.info.experiment_id], "tags.`contrasweep.sweep` = 'e2e'")
    assert sorted(r.data.tags["contrasweep.kind"] for r in runs) == ["configuration"] * 2 + ["sweep"] + ["trial"] * 4
    tags = next(r for r in runs if r.data.tags["contrasweep.kind"] == "sweep").data.tags
    if head.returncode == 0:
        assert tags["mlflow.source.git.commit"] == head.stdout.strip()
        assert tags["mlflow.source.git.dirty"] == str(bool(changed)).lower()
    else:  # not a git checkout: no commit claimed
        assert "mlflow.source.git.commit" not in tags
    assert tags["contrasweep.host"] == socket.gethostname()
    for package in ("torch", "transformers", "ray", "mlflow", "optuna", "contrasweep"):
        assert tags[f"contrasweep.version.{package}"] == metadata.version(package), package
    assert tags["contrasweep.version.python"].count(".") == 2
    assert tags["contrasweep.spec_sha256"] == hashlib.sha256(spec).hexdigest()
    for run in runs:
        assert run.data.tags["mlflow.source.type"] == "LOCAL" and run.data.tags["mlflow.source.name"]
        assert run.data.tags["mlflow.user"] == tags["mlflow.user"]
        if run.data.tags["contrasweep.kind"] != "sweep":  # once per sweep, not per run
            assert not any(k.startswith(("contrasweep.version.", "mlflow.source.git.")) for k in run.data.tags)
            assert "contrasweep.spec_sha256" not in run.data.tags and "contrasweep.host" not in run.data.tags


def test_data_axes_run_every_variant_and_tag_its_runs(report_sweeps, tiny_model_dir, monkeypatch):
    """The session's ``ce-small`` sweep (tests/conftest.py: lr ∈ {1e-3, 1e-4} × k ∈ {2, 3} ×
    split seeds {0, 1} × seed 0): every data variant ran on its own data, and its runs say which."""
    uri, root, _ = report_sweeps
    runs = trial_runs(uri, parent_runs(uri, "tests", "ce-small")[0].info.run_id)
    assert len(runs) == 8
    seen = set()
    for run in runs:
        k, split = int(run.data.params["data.k"]), int(run.data.params["data.seed"])
        lr = run.data.params["hp.lr"]
        seen.add((lr, k, split))
        assert run.data.metrics["data/train_rows"] == 5 * k  # BBC News has 5 classes: the variant's own data
        assert run.data.tags["contrasweep.k"] == str(k) and run.data.tags["contrasweep.data_seed"] == str(split)
        assert run.info.run_name == f"ce lr={float(lr):g} · k={k} split={split} seed=0"
    assert seen == {(lr, k, split) for lr in ("0.001", "0.0001") for k in (2, 3) for split in (0, 1)}
    groups: dict[str, list] = {}
    for run in runs:  # one group per configuration and k, its two split repeats
        groups.setdefault(run.data.tags["contrasweep.group"], []).append(run)
    assert len(groups) == 4
    for group in groups.values():
        assert sorted(r.data.params["data.seed"] for r in group) == ["0", "1"]
        assert len({(r.data.params["hp.lr"], r.data.params["data.k"]) for r in group}) == 1
    # sweep -> configuration (one per lr and k) -> repeat runs; the configuration holds the repeats' mean
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    parent = parent_runs(uri, "tests", "ce-small")[0]
    configs = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(c.info.run_name for c in configs) == ["ce lr=0.0001 · k=2", "ce lr=0.0001 · k=3",
                                                         "ce lr=0.001 · k=2", "ce lr=0.001 · k=3"]
    for config in configs:
        members = [r for r in runs if r.data.tags["mlflow.parentRunId"] == config.info.run_id]
        assert len(members) == 2 and config.data.metrics["n_repeats"] == 2
        values = [r.data.metrics["best/val/accuracy"] for r in members]
        assert config.data.metrics["mean/best/val/accuracy"] == pytest.approx(np.mean(values))
        assert config.data.metrics["std/best/val/accuracy"] == pytest.approx(np.std(values, ddof=1))
        assert config.data.tags["contrasweep.outcome"] == "complete" and config.info.status == "FINISHED"
    parent = client.get_run(parent.info.run_id)
    for k in (2, 3):
        assert f"best_config/k_{k}/mean/test/accuracy" in parent.data.metrics
        assert parent.data.tags[f"contrasweep.best_config.k_{k}"] in {c.info.run_id for c in configs}
    # the parent describes the sweep; each repeat links the exact data it trained on
    assert parent.data.tags["contrasweep.method"] == "ce" and parent.data.tags["contrasweep.kind"] == "sweep"
    assert parent.data.tags["mlflow.note.content"].startswith("**ce-small**: `ce` sweep.")
    for run in runs:
        (dataset,) = client.get_run(run.info.run_id).inputs.dataset_inputs
        k, split = run.data.params["data.k"], run.data.params["data.seed"]
        assert dataset.dataset.name == f"bbc_news few_shot k={k} seed={split}"
        profile = json.loads(dataset.dataset.profile)
        assert profile["num_rows"]["train"] == 5 * int(k) and profile["num_labels"] == 5
    assert len({r.data.params["data.k"] + r.data.params["data.seed"] for r in runs}) == len(
        {client.get_run(r.info.run_id).inputs.dataset_inputs[0].dataset.digest for r in runs})
    # each setting's best configuration: its best repeat registered under the sweep's name
    from contrasweep.tracking.models import load_registered, registered_versions

    versions = registered_versions(client, "ce-small")
    assert sorted(v.tags["contrasweep.setting"] for v in versions) == ["k=2", "k=3"]
    for version in versions:
        config_run = parent.data.tags[f"contrasweep.best_config.k_{version.tags['contrasweep.setting'][2:]}"]
        assert client.get_run(version.run_id).data.tags["mlflow.parentRunId"] == config_run
        assert json.loads(version.tags["contrasweep.data"])["k"] == int(version.tags["contrasweep.setting"][2:])
    method = load_registered(uri, "ce-small", "best-k2")
    assert method.num_labels == 5 and not method.training
    _registered_pyfunc_model(uri, "ce-small", "best-k2", method, tiny_model_dir, monkeypatch)


def _registered_pyfunc_model(uri, name, alias, method, tiny_model_dir, monkeypatch):
    """The registered version is an MLflow Model: ``models:/<sweep>@<alias>`` loads with
    ``mlflow.pyfunc`` and gives BBC News's class names with the probabilities of the method
    ``load_registered`` rebuilds; its signature is the documented one."""
    import mlflow.pyfunc
    import pandas as pd
    import torch
    from transformers import AutoTokenizer

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    model = mlflow.pyfunc.load_model(f"models:/{name}@{alias}")
    texts = ["the match ended in a late goal", "shares fell after the bank's results", "the film won an award"]
    out = model.predict(pd.DataFrame({"text": texts}))
    names = ["business", "entertainment", "politics", "sports", "tech"]
    assert list(out.columns) == ["label", *(f"prob_{n}" for n in names)]
    assert model.metadata.get_input_schema().input_names() == ["text"]
    enc = AutoTokenizer.from_pretrained(tiny_model_dir)(texts, truncation=True, max_length=32, padding=True,
                                                       return_tensors="pt")
    with torch.no_grad():
        expected = torch.softmax(method.predict(dict(enc)), -1).numpy()
    np.testing.assert_allclose(out[[f"prob_{n}" for n in names]].to_numpy(), expected, rtol=1e-4, atol=1e-6)
    assert list(out["label"]) == [names[i] for i in expected.argmax(1)]


def test_class_count_axis_gives_each_variant_its_own_head(ray_session, tiny_model_dir, cache_dir, tmp_path):
    spec_path = write_spec(tmp_path / "spec.yaml", tiny_model_dir, grid={"lr": [1.0e-3]}, fixed={"epochs": 1},
                           data={"protocol": "num_classes", "k": None, "num_classes": [2, 3], "per_class": 4},
                           sweep={"seeds": [0], "scheduler": "none", "searcher": "grid"})
    uri, results = _run_sweep(tmp_path, spec_path, "classes")
    assert len(results) == 2 and not any(r.error for r in results)
    rows = sorted(int(r.metrics["data/train_rows"]) for r in results)
    assert rows == [8, 12]


def test_asha_stops_or_continues_whole_repeat_groups(ray_session, tiny_model_dir, cache_dir, tmp_path):
    """Two configurations × 2 split repeats × 2 seeds, ASHA at epochs 1 and 2 of 4: every repeat
    of a configuration ends at the same epoch, and the runs say whether they are complete. The
    budget is 7 optimiser steps (``max_steps`` overrides the 10 epochs): 15 rows in batches of 8
    are 4 epochs (2 + 2 + 2 + 1 steps), which the driver's rungs and outcomes count too. Validated
    every 4 epochs (``eval_every``), and at the rungs and the last: epoch 3 only trains."""
    spec_path = write_spec(tmp_path / "spec.yaml", tiny_model_dir, data={"k": 3, "seed": [0, 1]},
                           grid={"lr": [1.0e-3, 1.0e-7]}, fixed={"epochs": 10, "max_steps": 7, "eval_every": 4},
                           sweep={"seeds": [0, 1], "asha": {"grace_period": 1, "reduction_factor": 2.0}})
    uri, results = _run_sweep(tmp_path, spec_path, "groups")
    assert len(results) == 8 and not any(r.error for r in results)
    runs = trial_runs(uri, parent_runs(uri, "tests", "groups")[0].info.run_id)
    groups: dict[str, list] = {}
    for run in runs:
        groups.setdefault(run.data.tags["contrasweep.group"], []).append(run)
    assert len(groups) == 2 and all(len(g) == 4 for g in groups.values())
    for group in groups.values():
        last = {int(r.data.tags["contrasweep.last_epoch"]) for r in group}
        assert len(last) == 1  # the same budget for every repeat
        outcome = {r.data.tags["contrasweep.outcome"] for r in group}
        assert outcome == {"complete" if last == {4} else "stopped"}
        assert {r.data.metrics["data/train_rows"] for r in group} == {15}
        assert {r.data.metrics["train/steps"] for r in group} == ({7} if last == {4} else {2 * min(last)})
        assert {r.data.tags["contrasweep.group_size"] for r in group} == {"4"}
        if last == {4}:  # validated at the rungs (1, 2) and the last; epoch 3's steps reach epoch 4's report
            history = MlflowClient(uri).get_metric_history(group[0].info.run_id, "val/accuracy")
            assert sorted(m.step for m in history) == [1, 2, 4] and group[0].data.metrics["evaluations"] == 3
            steps = MlflowClient(uri).get_metric_history(group[0].info.run_id, "train/steps")
            assert sorted((m.step, m.value) for m in steps) == [(1, 2), (2, 4), (4, 7)]
    decisions = read_record(tmp_path / "sweeps" / "groups" / "group_asha.json")["decisions"]  # snapshot + journal
    assert set(decisions["1"].values()) <= {"continue", "stop"} and len(decisions["1"]) == 2
    assert any(int(g[0].data.tags["contrasweep.last_epoch"]) == 4 for g in groups.values())  # the first group goes on


def test_second_sweep_hits_the_data_cache(report_sweeps):
    """The session's ``lacon-small`` ran after ``ce-small`` on the same data: from its cache."""
    from contrasweep.folder import sweeps

    _, root, _ = report_sweeps
    assert sweeps.open_existing(root, "ce-small").meta()["cache_hit"] is False
    assert sweeps.open_existing(root, "lacon-small").meta()["cache_hit"] is True


def test_optuna_multi_objective_with_seeds_evaluates_reported_first(ray_session, tiny_model_dir, cache_dir, tmp_path):
    import optuna

    spec_path = write_spec(
        tmp_path / "spec.yaml", tiny_model_dir, grid=None, reported={"lr": 1.0e-3},
        search={"lr": {"loguniform": [1.0e-4, 1.0e-2]}, "weight_decay": {"choice": [0.0, 0.01]}},
        fixed={"epochs": 2}, sweep={"searcher": "optuna", "num_samples": 2, "max_concurrent": 2,
                                    "metric": ["val/accuracy", "val/macro_f1"], "mode": ["max", "max"]},
    )
    uri, results = _run_sweep(tmp_path, spec_path, "moo")
    assert len(results) == 4 and not any(r.error for r in results)  # 2 suggestions × 2 seeds
    parent = parent_runs(uri, "tests", "moo")[0]
    runs = trial_runs(uri, parent.info.run_id)
    assert len(runs) == 4
    params = sorted((float(r.data.params["hp.lr"]), int(r.data.params["hp.seed"])) for r in runs)
    assert [p for p in params if p[0] == 1e-3] == [(1e-3, 0), (1e-3, 1)]  # the reported point, once per seed
    study = optuna.load_study(study_name="moo", storage=f"sqlite:///{tmp_path / 'sweeps' / 'moo' / 'optuna.db'}")
    assert len(study.directions) == 2  # one study direction per metric (multi-objective)
    assert study.trials[0].params["lr"] == 1e-3
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials) == 2
