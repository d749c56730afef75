"""The TorchTrainer path (Ray Train, 2 CPU workers, DDP over gloo) reports the same metric
keys as the in-process path, through the same generic loop. Each worker asks for 0.9 CPU: 2 workers + the trial's own
0.01 CPU must fit the 2 CPUs of this machine."""

from __future__ import annotations

import pytest
from conftest import write_spec
from test_sweep_e2e import _run_sweep

pytestmark = pytest.mark.slow

IGNORED = {"checkpoint_path", "checkpoint_dir_name", "time/epoch_s"}


def test_torchtrainer_path_reports_same_metric_keys(ray_session, tiny_model_dir, cache_dir, tmp_path):
    common = dict(fixed={"epochs": 2}, grid={"lr": [1.0e-3]}, sweep={"seeds": [0], "scheduler": "none"})
    local_spec = write_spec(tmp_path / "local.yaml", tiny_model_dir, **common)
    _, local = _run_sweep(tmp_path, local_spec, "local")
    ddp_spec = write_spec(tmp_path / "ddp.yaml", tiny_model_dir, **{**common, "sweep": {**common["sweep"], "resources": {"cpu": 0.9, "workers": 2}}})
    _, ddp = _run_sweep(tmp_path, ddp_spec, "ddp")
    assert not local[0].error and not ddp[0].error, (local[0].error, ddp[0].error)
    local_keys = {k for k in local[0].metrics if "/" in k} - IGNORED
    ddp_keys = {k for k in ddp[0].metrics if "/" in k} - IGNORED
    assert local_keys == ddp_keys
    assert ddp[0].metrics["epoch"] == 2
    assert "checkpoint_path" in ddp[0].metrics  # rank 0's checkpoint, forwarded by TuneReportCallback


ABALONE = {"loss": "msc", "queue_size": 16, "proj_dim": 16, "probe_lrs": [0.1], "probe_weight_decays": [0.01],
           "probe_epochs": 2}


REPRESENTATION = {"eval_kmeans_runs": 2, "probe_splits": 1, "probe_iterations": 20}


METHODS = [("scl_moo", {"moo": "epo"}), ("supcl_seq", {"dropouts": [0.0, 0.1]}), ("abalone", ABALONE), ("ce_scl", {}),
           ("lacon", {"heads": 2}), ("simcse", REPRESENTATION), ("vascl", {"neighbours": 3, **REPRESENTATION})]


def test_every_method_runs_under_ddp(ray_session, tiny_model_dir, cache_dir, tmp_path):
    """Every method but CE (the first test) on 2 DDP workers, through the loop a distributed
    trial runs (``executor.train_worker``: its configuration built as a sweep builds it, its
    data from the object store), one after another in one TorchTrainer so that Train's worker
    group starts once (about 20 s here; the sweep path around it is the first two tests'). Each
    in-batch contrastive loss all-gathers the batch with its gradients
    (``trainables.global_batch``) inside DDP's forward; EPO all-reduces per-objective gradients
    there too; SupCL-Seq gathers frozen features from both ranks for its second stage; ABALONE
    all-gathers every step's momentum keys into the queue, then fits its linear probe on
    features from both ranks. All must run (no hang) on 2 workers; tests/test_global_batch.py
    checks the numbers."""
    import json

    import yaml
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from contrasweep.runner.inputs import prepare_data, put_data
    from contrasweep.spec.load import load_spec
    from contrasweep.spec.static import SweepStatic
    from contrasweep.spec.trial import trial_hp

    def _every_method(config: dict) -> None:
        """One Ray Train rank: each method's loop in turn, as ``executor.train_worker`` runs one
        (defined here: a test module is not importable on Ray's workers, a nested function is
        pickled by value)."""
        import json

        import ray
        from ray import train as ray_train

        from trainables.loop import train
        from trainables.sessions import TrainSession

        class OneOfSeveral(TrainSession):
            def latest_checkpoint(self):
                return None  # the Train run's checkpoints are the earlier methods'

        rank = ray_train.get_context().get_world_rank()
        for method, loop_config, ref in config["methods"]:
            metrics = train(loop_config, ray.get(ref), OneOfSeveral(f"{config['root']}/{method}/state"))
            if rank == 0:
                with open(f"{config['root']}/{method}.json", "w") as fh:
                    json.dump(metrics, fh, default=float)

    methods = []
    for method, hp in METHODS:
        metric = "val/cluster_acc" if method in ("simcse", "vascl") else "val/accuracy"
        spec = write_spec(tmp_path / f"{method}.yaml", tiny_model_dir, method=method, fixed={"epochs": 1, **hp},
                          grid={"lr": [1.0e-3]}, sweep={"seeds": [0], "scheduler": "none", "metric": metric,
                                                        "resources": {"cpu": 0.9, "workers": 2}})
        if method == "abalone":  # multi-label data, objective micro-F1
            raw = yaml.safe_load(spec.read_text())
            raw["data"] = {"task": "multilabel", "source": "bbc_multilabel", "n_docs": 60}
            raw["sweep"].update(metric="val/micro_f1", mode="max")
            spec.write_text(yaml.safe_dump(raw, sort_keys=False))
        sweep = load_spec(spec)
        prepared = prepare_data(sweep)
        hp = trial_hp({"hp": sweep.grid_trials()[0]}, SweepStatic.of(sweep))
        loop_config = {"method": method, "encoder": {"name": sweep.encoder["name"], "pooling": sweep.encoder["pooling"]},
                       "hp": hp, "metric": sweep.metric[0], "mode": sweep.mode[0], "num_labels": prepared[0].num_labels}
        methods.append((method, loop_config, put_data(prepared)[0]))
    TorchTrainer(_every_method, train_loop_config={"methods": methods, "root": str(tmp_path)},
                 scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.9}),
                 run_config=RunConfig(name="every-method", storage_path=str(tmp_path / "train"))).fit()
    for method, _ in METHODS:
        metrics = json.loads((tmp_path / f"{method}.json").read_text())
        if method == "scl_moo":
            assert metrics["train/moo/lp_fallback"] == 0.0
            assert metrics["train/moo/alpha_1"] + metrics["train/moo/alpha_2"] == pytest.approx(1.0)
            assert [s for s, _ in metrics["step_metrics"]["moo/alpha_1"]] == [1, 2, 3]  # 20 rows (k 4 × 5 classes), batch 8
        elif method == "supcl_seq":
            assert 0.0 <= metrics["stage2/train_accuracy"] <= 1.0
        elif method == "abalone":
            assert metrics["stage2/grid_points"] == 1.0 and 0.0 <= metrics["test/micro_f1"] <= 1.0
            assert metrics["train/loss/msc"] == metrics["train/loss"]
        else:
            metric = "cluster_acc" if method in ("simcse", "vascl") else "accuracy"
            assert metrics["epoch"] == 1 and metrics[f"test/{metric}"] >= 0.0, method
