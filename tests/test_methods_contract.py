"""A contract every registered method keeps (optuna-style shared tests): on a tiny BERT the
loss is a finite scalar, gradients reach the encoder and the method's own heads, one epoch
through the real loop reports the standard metrics, and a checkpoint restores exactly."""

from __future__ import annotations

import pytest
import torch

from trainables.batches import eval_batches, to_device
from trainables.loop import build_method, load_trained, train
from trainables.gather import StageContext
from trainables.registry import get_method, method_names
from trainables.sessions import LocalSession

from helpers import loop_config, multilabel_tables, toy_tables


# Every registered method, with the settings the tiny 32-wide BERT needs (heads must divide
# 32) and the variants whose parts differ (LaCon-fusion, LaCon without g).
CASES = [
    ("ce", {}),
    ("ce_scl", {}),
    ("lacon", {"heads": 2}),
    ("lacon", {"heads": 2, "fusion": True}),
    ("lacon", {"heads": 1, "use_head": False, "use_lcl": False}),
    ("supcl_seq", {"dropouts": [0.0, 0.1, 0.1]}),
    ("scl_moo", {"moo": "ls"}),
    ("scl_moo", {"moo": "epo"}),
    # representation methods: labels unused in training; a cheap evaluation protocol
    ("simcse", {"eval_kmeans_runs": 2, "probe_splits": 1, "probe_iterations": 20}),
    ("vascl", {"neighbours": 3, "delta": 1.0, "eval_kmeans_runs": 2, "probe_splits": 1, "probe_iterations": 20}),
    # multi-label (ABALONE): a contrastive loss with queue + prototypes, and a BCE-family one
    *(("abalone", {"loss": loss, "queue_size": 16, "proj_dim": 16, "probe_lrs": [0.1], "probe_weight_decays": [1e-2],
                   "probe_epochs": 2, "probe_restarts": 1}) for loss in ("msc", "asl")),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in hp.items())}" for n, hp in CASES]


def test_every_registered_method_is_covered():
    assert {name for name, _ in CASES} == set(method_names())


@pytest.fixture(scope="module")
def tables(tiny_model_dir):
    return {"single": toy_tables(tiny_model_dir, n_per_class=8), "multi": multilabel_tables(tiny_model_dir)}


@pytest.fixture
def data(tables, name):
    return tables[get_method(name).label_kind]


@pytest.mark.parametrize("name, hp", CASES, ids=IDS)
def test_loss_is_finite_and_gradients_reach_everything(name, hp, tiny_model_dir, data):
    config = {**loop_config(tiny_model_dir, **hp), "method": name}
    method = build_method(config, data["num_labels"])
    _, batch = next(eval_batches(data["tables"]["train"], 8))
    out = method(to_device(batch, torch.device("cpu")))
    assert out["loss"].ndim == 0 and torch.isfinite(out["loss"])
    out["loss"].backward()
    encoder_grads = [p.grad for p in method.encoder.parameters() if p.grad is not None]
    assert encoder_grads and any(g.abs().sum() > 0 for g in encoder_grads)
    # a method's own trainable heads all get gradients (SupCL-Seq has none in stage 1)
    heads = [p for n, p in method.named_parameters() if not n.startswith("encoder.") and p.requires_grad]
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in heads)


@pytest.mark.parametrize("name, hp", CASES, ids=IDS)
def test_one_epoch_through_the_loop_and_checkpoint_round_trip(name, hp, tiny_model_dir, data, tmp_path):
    names = get_method(name).metric_names
    config = {**loop_config(tiny_model_dir, epochs=1, **hp), "method": name, "metric": f"val/{names[0]}"}
    session = LocalSession(str(tmp_path))
    train(config, data, session)
    report = session.reports[-1]
    for key in ("epoch", "train/loss", *(f"val/{m}" for m in names), f"best/val/{names[0]}", f"test/{names[0]}"):
        assert key in report
    # the checkpoint holds the model that produced this epoch's validation metrics
    restored = load_trained(session.checkpoints[-1], num_labels=data["num_labels"])
    context = StageContext(data["tables"], data["num_labels"], 16, LocalSession(str(tmp_path / "e")), seed=0, epoch=1)
    metrics = restored.evaluate(context, "validation")
    for m in names:
        assert metrics[m] == pytest.approx(report[f"val/{m}"], abs=1e-9), m
