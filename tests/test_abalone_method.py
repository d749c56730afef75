"""ABALONE as a method (abalone_multilabel.txt Sec. 3, 4.2, 4.3, App. A, App. B): every loss
through the real loop, the App. B step order (queue never holds the current batch, momentum
update after the optimiser step), the linear evaluation of App. A, checkpoints and the
fine-tuning start from a stage-1 checkpoint (Sec. 5.2)."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
import torch

from contrasweep.errors import UserError
from trainables.batches import eval_batches, to_device
from trainables.checkpoints import META_FILE, WEIGHTS_FILE, best_folder, load_weights, weights_file
from trainables.gather import StageContext
from trainables.loop import build_method, load_trained, train
from trainables.sessions import LocalSession

from trainables.methods import abalone, abalone_losses
from trainables.methods.abalone import MultiLabelContrastive, fit_linear_probe

from helpers import LABELS, multilabel_tables

torch.set_num_threads(1)
CHEAP = {  # a tiny model and a cheap stage-2 grid
    "queue_size": 16, "proj_dim": 16, "head_lr": 1e-3, "probe_lrs": [0.1], "probe_weight_decays": [1e-2, 1e-4],
    "probe_epochs": 3, "probe_restarts": 2,
}


@pytest.fixture(scope="module")
def data(tiny_model_dir):
    return multilabel_tables(tiny_model_dir)


def config(model_dir: str, **hp) -> dict:
    base = {"lr": 1e-3, "batch_size": 8, "epochs": 1, "warmup_ratio": 0.0, "seed": 0, "eval_batch_size": 32, **CHEAP}
    base.update(hp)
    return {"method": "abalone", "encoder": {"name": model_dir, "pooling": "mean"}, "hp": base,
            "metric": "val/micro_f1", "mode": "max", "num_labels": len(LABELS)}


def first_batch(data, n: int = 6, split: str = "train", offset: int = 0) -> dict:
    batches = eval_batches(data["tables"][split].slice(offset), n)
    return to_device(next(batches)[1], torch.device("cpu"))


def context(data, tmp_path, epoch: int = 1) -> StageContext:
    return StageContext(data["tables"], data["num_labels"], 32, LocalSession(str(tmp_path / "ctx")), seed=0,
                        epoch=epoch, data=data)


# ------------------------------------------------------------------------------- the loop


@pytest.mark.parametrize("loss", ["msc", "base", "bqueue", "bqproto", "bce", "focal", "asl"])
def test_every_loss_trains_one_epoch_and_reports_multilabel_metrics(loss, tiny_model_dir, data, tmp_path):
    session = LocalSession(str(tmp_path))
    train(config(tiny_model_dir, loss=loss), data, session)
    report = session.reports[-1]
    assert math.isfinite(report["train/loss"]) and report[f"train/loss/{loss}"] == report["train/loss"]
    for split in ("val", "test"):
        for name in MultiLabelContrastive.metric_names:  # micro/macro-F1, Hamming, head/tail macro-F1
            assert 0.0 <= report[f"{split}/{name}"] <= 1.0, (split, name)
        assert {f"{split}/f1/{label}" for label in LABELS} <= set(report)
    assert "test/davies_bouldin" in report and -1.0 <= report["test/silhouette"] <= 1.0
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for k, v in report.items() if k != "step_metrics")
    if loss in abalone.CONTRASTIVE:  # linear evaluation after the epoch (App. A)
        assert report["stage2/grid_points"] == 2 and report["stage2/train_loss"] > 0
        assert {report[f"stage2/lr/{label}"] for label in LABELS} == {0.1}
        assert {report[f"stage2/weight_decay/{label}"] for label in LABELS} <= {1e-2, 1e-4}
    else:
        assert not any(k.startswith("stage2/") for k in report)


@pytest.mark.parametrize("loss, schedule", [("msc", "cosine"), ("base", "cosine"), ("bce", "linear"), ("asl", "linear")])
def test_lr_schedule_method_is_cosine_for_contrastive_learning_linear_for_bce(loss, schedule, tiny_model_dir):
    """App. A: "a cosine scheduler is used" for contrastive learning, "the standard linear
    scheduler" for the baselines and the fine-tuning; the loop's ``make_scheduler`` follows."""
    from trainables.loop import make_scheduler

    method = build_method(config(tiny_model_dir, loss=loss), 3)
    assert method.lr_schedule() == schedule
    optimizer = torch.optim.AdamW(method.param_groups(1.0, 0.0), lr=1.0)
    scheduler = make_scheduler(optimizer, "method", method, warmup=0, total_steps=4)
    optimizer.step()
    scheduler.step()  # one step of four: cos(π/4) vs 3/4 of the peak
    expected = 0.5 * (1 + math.cos(math.pi / 4)) if schedule == "cosine" else 0.75
    assert scheduler.get_last_lr()[0] == pytest.approx(expected)


# ------------------------------------------------------------------------------- App. B order


def test_queue_never_holds_the_current_batch_and_keeps_the_last_k(tiny_model_dir, data, monkeypatch):
    method = build_method(config(tiny_model_dir, loss="msc", queue_size=10, momentum=1.0), 3).eval()  # no dropout
    seen = []
    real = abalone_losses.msc_loss

    def spy(z, y, *args, queue_z=None, queue_y=None, **kwargs):
        seen.append((queue_z.clone(), queue_y.clone()))
        return real(z, y, *args, queue_z=queue_z, queue_y=queue_y, **kwargs)

    monkeypatch.setattr(abalone_losses, "msc_loss", spy)
    a, b = first_batch(data, 6), first_batch(data, 6, offset=6)
    with torch.no_grad():  # m = 1 and eval mode: the key model gives the same keys every time
        key = lambda batch: method.momentum["projection"](method.momentum["encoder"](  # noqa: E731
            batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])[0])
        ka, kb = key(a), key(b)
    method(a)
    assert seen[-1][0].shape == (0, 16)                         # first step: empty queue
    method(a)                                                   # the same batch again
    assert seen[-1][0].shape == (6, 16)                         # its previous keys only, not its own twice
    torch.testing.assert_close(seen[-1][0], ka)
    torch.testing.assert_close(seen[-1][1], a["labels"].float())
    method(b)                                                   # 12 keys seen, K = 10: the last 10
    assert len(method.queue) == 10 and method.queue.is_full
    torch.testing.assert_close(seen[-1][0], torch.cat([ka[2:], ka]))
    method.flush()                                              # b's keys, after its (absent) optimiser step
    assert len(method.queue) == 10
    torch.testing.assert_close(method.queue.embeddings, torch.cat([ka[2:], kb]))
    torch.testing.assert_close(method.queue.labels, torch.cat([a["labels"][2:], b["labels"]]).float())
    method.flush()                                              # nothing in flight: no change
    torch.testing.assert_close(method.queue.embeddings, torch.cat([ka[2:], kb]))


def test_momentum_update_follows_the_optimiser_step(tiny_model_dir, data):
    method = build_method(config(tiny_model_dir, loss="bqproto", momentum=0.9), 3)
    optimizer = torch.optim.AdamW(method.param_groups(1e-2, 0.0))
    key_before = {k: v.clone() for k, v in method.momentum.state_dict().items()}
    batch = first_batch(data, 8)
    method(batch)["loss"].backward()
    optimizer.step()
    # after the step the key model has not moved yet and the keys are not enqueued ...
    assert all(torch.equal(v, key_before[k]) for k, v in method.momentum.state_dict().items())
    assert len(method.queue) == 0
    query = {"encoder": dict(method.encoder.named_parameters()), "projection": dict(method.projection.named_parameters())}
    method(first_batch(data, 8, offset=8))  # ... the next step applies θ_k ← m·θ_k + (1 − m)·θ, then enqueues
    assert len(method.queue) == 8
    moved = 0
    for part in ("encoder", "projection"):
        for name, p_k in method.momentum[part].named_parameters():
            expected = 0.9 * key_before[f"{part}.{name}"] + 0.1 * query[part][name].detach()
            torch.testing.assert_close(p_k, expected)
            moved += int(not torch.equal(p_k, key_before[f"{part}.{name}"]))
            assert not p_k.requires_grad
    assert moved > 0
    # the momentum model is out of the optimiser, the queue out of the averaged modules
    optimised = {id(p) for g in method.param_groups(1e-2, 0.0) for p in g["params"]}
    assert not optimised & {id(p) for p in method.momentum.parameters()}
    assert not any(n.startswith("queue.") for n, _ in method.momentum.named_buffers())


@pytest.mark.parametrize("loss", ["msc", "bqproto", "bqueue", "base", "asl"])
def test_gradients_reach_encoder_prototypes_and_heads(loss, tiny_model_dir, data):
    method = build_method(config(tiny_model_dir, loss=loss), 3)
    batch = first_batch(data, 8)
    method(batch)
    out = method(first_batch(data, 8, offset=8))  # with keys in the queue (queue losses)
    assert out["loss"].ndim == 0 and torch.isfinite(out["loss"])
    out["loss"].backward()
    trainable = {n: p for n, p in method.named_parameters() if p.requires_grad}
    # every head gets a gradient (the backbone's own unused pooler layer does not)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for n, p in trainable.items()
               if not n.startswith("encoder."))
    assert any(p.grad.abs().sum() > 0 for n, p in trainable.items() if n.startswith("encoder."))
    assert ("prototypes" in trainable) == (loss in ("msc", "bqproto"))
    if "prototypes" in trainable:
        assert trainable["prototypes"].grad.abs().sum() > 0
    assert hasattr(method, "queue") == (loss in ("msc", "bqproto", "bqueue"))
    assert all(not p.requires_grad for n, p in method.named_parameters() if n.startswith("momentum."))
    # parameters other than the backbone train at head_lr (App. A)
    groups = method.param_groups(2e-5, 0.01)
    heads = {id(p) for n, p in trainable.items() if not n.startswith("encoder.")}
    assert all(g["lr"] == (1e-3 if {id(p) for p in g["params"]} <= heads else 2e-5) for g in groups)


# ------------------------------------------------------------------------------- stage 2 (App. A)


def test_linear_probe_is_adamw_logistic_regression_per_label():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5)).astype(np.float32)
    y = np.stack([x[:, 0] > 0, x[:, 1] + x[:, 2] > 0.5], 1).astype(np.int64)
    fit = fit_linear_probe(x, y, x, y, lrs=[0.05], weight_decays=[0.1], epochs=30, batch_size=40, restarts=1, seed=7)
    # the same regressions with torch.optim.AdamW from the same initialisation, full batch
    gen = torch.Generator().manual_seed(7)
    bound = 1 / math.sqrt(5)
    w = torch.nn.Parameter((torch.rand(2, 5, generator=gen) * 2 - 1) * bound)
    b = torch.nn.Parameter((torch.rand(2, generator=gen) * 2 - 1) * bound)
    opt = torch.optim.AdamW([{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}], lr=0.05)
    xt, yt = torch.tensor(x), torch.tensor(y, dtype=torch.float32)
    for _ in range(30):
        opt.zero_grad()
        # one regression per label: the sum over labels keeps each label's gradient its own
        torch.nn.functional.binary_cross_entropy_with_logits(xt @ w.T + b, yt, reduction="none").mean(0).sum().backward()
        opt.step()
    torch.testing.assert_close(fit["weight"][0], w.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(fit["bias"][0], b.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("select", ["label", "joint"])
def test_linear_probe_chooses_grid_points_on_validation(select):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 4)).astype(np.float32)
    y = np.stack([x[:, 0] > 0, x[:, 1] > 0], 1).astype(np.int64)
    fit = fit_linear_probe(x[:60], y[:60], x[60:], y[60:], lrs=[1e-6, 0.5], weight_decays=[0.0], epochs=20,
                           batch_size=16, restarts=3, select=select)
    assert fit["grid"] == [(1e-6, 0.0), (0.5, 0.0)] and fit["choice"] == [1, 1]  # the rate that learns
    assert fit["weight"].shape == (3, 2, 4) and fit["bias"].shape == (3, 2)
    assert fit["val_micro_f1"] > 0.9 and 0 < fit["train_loss"] < math.log(2)


def test_clustering_scores_the_test_split_with_app_d_proportion(tiny_model_dir, data, tmp_path, monkeypatch):
    seen = []
    real = abalone.combination_clustering

    def spy(x, y, **kwargs):
        seen.append((len(x), kwargs))
        return real(x, y, **kwargs)

    monkeypatch.setattr(abalone, "combination_clustering", spy)
    method = build_method(config(tiny_model_dir, loss="bce", cluster_keep_fraction=0.25, cluster_max_points=20), 3)
    ctx = context(data, tmp_path)
    assert "silhouette" not in method.evaluate(ctx, "validation") and not seen  # the test split only
    metrics = method.evaluate(ctx, "test")
    assert seen == [(24, {"keep_fraction": 0.25, "max_points": 20, "seed": 0})]
    assert -1.0 <= metrics["silhouette"] <= 1.0 and metrics["davies_bouldin"] >= 0.0


# ------------------------------------------------------------------------------- checkpoints


def resume_weights(session):
    """The weights of the resume state the session's last reported pointer names."""
    meta = json.load(open(os.path.join(session.checkpoints[-1], META_FILE)))
    return load_weights(os.path.join(session.state_dir, meta["resume"], WEIGHTS_FILE))


def test_checkpoint_restores_queue_prototypes_probe_and_metrics(tiny_model_dir, data, tmp_path):
    cfg = config(tiny_model_dir, loss="msc")
    session = LocalSession(str(tmp_path / "run"))
    train(cfg, data, session)
    report = session.reports[-1]
    saved = load_weights(weights_file(session.checkpoints[-1]))  # the best epoch's weights
    restored = load_trained(session.checkpoints[-1], num_labels=3)
    assert len(restored.queue) == 16  # 48 keys enqueued (the last step's by second_stage), K = 16
    for key in ("queue._z", "queue._y", "prototypes", "probe_weight", "probe_bias", "momentum.projection.0.weight"):
        assert torch.equal(restored.state_dict()[key], saved[key]), key
    assert restored.probe_weight.abs().sum() > 0
    ctx = context(data, tmp_path)
    for split, prefix in (("validation", "best/val"), ("test", "test")):
        metrics = restored.evaluate(ctx, split)
        assert metrics.keys() == {k[len(prefix) + 1:] for k in report if k.startswith(prefix + "/")}
        for name, value in metrics.items():
            assert value == pytest.approx(report[f"{prefix}/{name}"], abs=1e-9), name


def test_resume_continues_exactly(tiny_model_dir, data, tmp_path):
    cfg = config(tiny_model_dir, loss="msc", epochs=2, checkpoint_every=1)
    whole = LocalSession(str(tmp_path / "whole"))
    train(cfg, data, whole)
    resumed = LocalSession(str(tmp_path / "resumed"), resume_from=whole.checkpoints[0])
    train(cfg, data, resumed)
    a, b = resume_weights(whole), resume_weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.reports[-1]["val/micro_f1"] == whole.reports[-1]["val/micro_f1"]


# ------------------------------------------------------------------------------- fine-tuning (Sec. 5.2)


def test_init_from_starts_bce_from_the_stage1_encoder(tiny_model_dir, data, tmp_path):
    stage1 = LocalSession(str(tmp_path / "stage1"))
    train(config(tiny_model_dir, loss="base"), data, stage1)
    ckpt = str(tmp_path / "best_stage1")
    shutil.copytree(best_folder(stage1.checkpoints[-1]), ckpt)
    encoder_state = {k[len("encoder."):]: v for k, v in load_weights(weights_file(ckpt)).items()
                     if k.startswith("encoder.")}
    cfg = config(tiny_model_dir, loss="bce", init_from=ckpt)
    MultiLabelContrastive.check(cfg["hp"], 32)
    method = build_method(cfg, 3)
    assert not all(torch.equal(v, encoder_state[k]) for k, v in method.encoder.state_dict().items())
    method.load_init()
    assert all(torch.equal(v, encoder_state[k]) for k, v in method.encoder.state_dict().items())
    assert int(method.init_loaded) == 1 and not hasattr(method, "projection")
    # through the loop, then the fine-tuned checkpoint reloads without the stage-1 file
    session = LocalSession(str(tmp_path / "ft"))
    train(cfg, data, session)
    shutil.rmtree(ckpt)
    restored = load_trained(session.checkpoints[-1], num_labels=3)
    metrics = restored.evaluate(context(data, tmp_path), "validation")
    assert metrics["micro_f1"] == pytest.approx(session.reports[-1]["best/val/micro_f1"], abs=1e-9)


def test_init_from_is_checked(tiny_model_dir, tmp_path):
    with pytest.raises(UserError, match="init_from with loss bce, focal or asl"):
        MultiLabelContrastive.check({"loss": "msc", "init_from": str(tmp_path)}, 32)
    with pytest.raises(UserError, match="no model.safetensors there"):
        MultiLabelContrastive.check({"loss": "bce", "init_from": str(tmp_path / "missing")}, 32)
    with pytest.raises(UserError, match="init_from with loss bce"):
        build_method(config(tiny_model_dir, loss="bqueue", init_from=str(tmp_path)), 3)


# ------------------------------------------------------------------------------- DDP


def _ddp_rank(rank: int, world: int, init_file: str, cfg: dict, batches: list, out_dir: str) -> None:
    """One of two real processes: DDP over gloo, two optimiser steps on this rank's own shards
    (rank 0 gets 3 rows, rank 1 gets 2: the keys are padded to the larger shard and trimmed),
    then the key queue, key model and labels are written for the parent to compare."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)  # the same initial weights on both ranks, as Ray Train's workers have
        method = build_method(cfg, len(LABELS))
        model = DistributedDataParallel(method, find_unused_parameters=True)  # as sessions.py wraps it
        optimizer = torch.optim.AdamW(method.param_groups(1e-2, 0.0))
        for batch in batches[rank]:
            model(batch)["loss"].backward()
            optimizer.step()
            optimizer.zero_grad()
        method.flush()  # the last step's keys (second_stage does this after every epoch)
        torch.save({"queue_z": method.queue.embeddings, "queue_y": method.queue.labels,
                    "momentum": method.momentum.state_dict()}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_keys_are_gathered_from_both_ranks_of_a_real_ddp_run(tiny_model_dir, data, tmp_path):
    """Two processes, gloo: every rank's queue holds both ranks' keys in rank order after each
    step (MoCo's shared queue), with their labels, and the key models stay identical."""
    import torch.multiprocessing as mp

    cfg = config(tiny_model_dir, loss="msc", queue_size=16, momentum=0.5, classifier_dropout=0.0)
    shards = [(0, 3), (3, 2), (5, 3), (8, 2)]  # (offset, rows): steps 1-2 of rank 0 and of rank 1
    batches = [[first_batch(data, n, offset=o) for o, n in shards[:2]], [first_batch(data, n, offset=o) for o, n in shards[2:]]]
    mp.spawn(_ddp_rank, args=(2, str(tmp_path / "init"), cfg, batches, str(tmp_path)), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    # step 1: rank 0's 3 keys then rank 1's 2; step 2: again 3 then 2 -> 10 in the queue of both
    expected_labels = torch.cat([batches[0][0]["labels"], batches[1][0]["labels"],
                                 batches[0][1]["labels"], batches[1][1]["labels"]]).float()
    for r in ranks:
        assert r["queue_z"].shape == (10, 16)
        torch.testing.assert_close(r["queue_y"], expected_labels)
    torch.testing.assert_close(ranks[0]["queue_z"], ranks[1]["queue_z"])
    assert not torch.equal(ranks[0]["queue_z"][:3], ranks[0]["queue_z"][5:8])  # the key model moved
    for name, value in ranks[0]["momentum"].items():
        torch.testing.assert_close(value, ranks[1]["momentum"][name], msg=name)


def test_gather_without_a_process_group_is_the_identity():
    z, y = torch.randn(3, 4), torch.randint(0, 2, (3, 2))
    assert abalone.global_batch(z, y)[0] is z
