"""ABALONE as a method (abalone_multilabel.txt Sec. 3, 4.2, 4.3, App. A, App. B): every loss
through the real loop, the App. B step order (queue never holds the current batch, momentum
update after the optimiser step), the linear evaluation of App. A, checkpoints and the
fine-tuning start from a stage-1 checkpoint (Sec. 5.2)."""

from __future__ import annotations

import math
import os
import shutil

import numpy as np
import pytest
import torch

from contrasweep.errors import UserError
from trainables.batches import eval_batches, to_device
from trainables.gather import StageContext
from trainables.loop import build_method, load_trained, train
from trainables.sessions import LocalSession

from trainables import abalone
from trainables.abalone import MultiLabelContrastive, fit_linear_probe

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


# ------------------------------------------------------------------------------- App. B order


def test_queue_never_holds_the_current_batch_and_keeps_the_last_k(tiny_model_dir, data, monkeypatch):
    method = build_method(config(tiny_model_dir, loss="msc", queue_size=10, momentum=1.0), 3).eval()  # no dropout
    seen = []
    real = abalone.msc_loss

    def spy(z, y, *args, queue_z=None, queue_y=None, **kwargs):
        seen.append((queue_z.clone(), queue_y.clone()))
        return real(z, y, *args, queue_z=queue_z, queue_y=queue_y, **kwargs)

    monkeypatch.setattr(abalone, "msc_loss", spy)
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


# ------------------------------------------------------------------------------- checkpoints


def test_checkpoint_restores_queue_prototypes_probe_and_metrics(tiny_model_dir, data, tmp_path):
    cfg = config(tiny_model_dir, loss="msc")
    session = LocalSession(str(tmp_path / "run"))
    train(cfg, data, session)
    report = session.reports[-1]
    saved = torch.load(os.path.join(session.checkpoints[-1], "model.pt"))
    restored = load_trained(session.checkpoints[-1], num_labels=3)
    assert len(restored.queue) == 16  # 48 keys enqueued (the last step's by second_stage), K = 16
    for key in ("queue._z", "queue._y", "prototypes", "probe_weight", "probe_bias", "momentum.projection.0.weight"):
        assert torch.equal(restored.state_dict()[key], saved[key]), key
    assert restored.probe_weight.abs().sum() > 0
    ctx = context(data, tmp_path)
    for split, prefix in (("validation", "val"), ("test", "test")):
        metrics = restored.evaluate(ctx, split)
        assert metrics.keys() == {k.split("/", 1)[1] for k in report if k.startswith(prefix + "/")}
        for name, value in metrics.items():
            assert value == pytest.approx(report[f"{prefix}/{name}"], abs=1e-9), name


def test_resume_continues_exactly(tiny_model_dir, data, tmp_path):
    cfg = config(tiny_model_dir, loss="msc", epochs=2)
    whole = LocalSession(str(tmp_path / "whole"))
    train(cfg, data, whole)
    resumed = LocalSession(str(tmp_path / "resumed"), resume_from=whole.checkpoints[0])
    train(cfg, data, resumed)
    a = torch.load(os.path.join(whole.checkpoints[-1], "model.pt"))
    b = torch.load(os.path.join(resumed.checkpoints[-1], "model.pt"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.reports[-1]["val/micro_f1"] == whole.reports[-1]["val/micro_f1"]


# ------------------------------------------------------------------------------- fine-tuning (Sec. 5.2)


def test_init_from_starts_bce_from_the_stage1_encoder(tiny_model_dir, data, tmp_path):
    stage1 = LocalSession(str(tmp_path / "stage1"))
    train(config(tiny_model_dir, loss="base"), data, stage1)
    ckpt = str(tmp_path / "best_stage1")
    shutil.copytree(stage1.checkpoints[-1], ckpt)
    encoder_state = {k[len("encoder."):]: v for k, v in torch.load(os.path.join(ckpt, "model.pt")).items()
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
    assert metrics["micro_f1"] == pytest.approx(session.reports[-1]["val/micro_f1"], abs=1e-9)


def test_init_from_is_checked(tiny_model_dir, tmp_path):
    with pytest.raises(UserError, match="init_from with loss bce, focal or asl"):
        MultiLabelContrastive.check({"loss": "msc", "init_from": str(tmp_path)}, 32)
    with pytest.raises(UserError, match="no model.pt there"):
        MultiLabelContrastive.check({"loss": "bce", "init_from": str(tmp_path / "missing")}, 32)
    with pytest.raises(UserError, match="init_from with loss bce"):
        build_method(config(tiny_model_dir, loss="bqueue", init_from=str(tmp_path)), 3)


# ------------------------------------------------------------------------------- DDP


class TwoRanks:
    """``torch.distributed`` as rank 0 of 2 sees it: ``all_gather`` puts this rank's tensor first
    and the other rank's second, and insists on equal shapes (as gloo and NCCL do)."""

    def __init__(self, other_z, other_y):
        self.other = [torch.tensor([len(other_z)]), torch.cat([other_z, other_y.float()], 1)]
        self.calls = 0

    def all_gather(self, out, tensor):
        other = self.other[self.calls]
        if self.calls == 1:  # the data: padded to the larger shard
            assert len(tensor) >= len(other)
            other = torch.cat([other, other.new_zeros(len(tensor) - len(other), other.shape[1])])
        assert all(o.shape == tensor.shape for o in out) and other.shape == tensor.shape
        out[0].copy_(tensor)
        out[1].copy_(other)
        self.calls += 1


@pytest.mark.parametrize("n_here, n_there", [(3, 2), (2, 3), (2, 2)])
def test_keys_are_gathered_from_every_rank_in_rank_order(n_here, n_there, monkeypatch):
    import torch.distributed as dist

    z0, y0 = torch.randn(n_here, 4), torch.randint(0, 2, (n_here, 3))
    z1, y1 = torch.randn(n_there, 4), torch.randint(0, 2, (n_there, 3))
    fake = TwoRanks(z1, y1)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "all_gather", fake.all_gather)
    z, y = abalone.gather_from_ranks(z0, y0)
    assert fake.calls == 2  # the sizes, then the padded keys and labels
    torch.testing.assert_close(z, torch.cat([z0, z1]))
    torch.testing.assert_close(y, torch.cat([y0, y1]).float())
    monkeypatch.undo()
    assert abalone.gather_from_ranks(z0, y0)[0] is z0  # no process group: unchanged
