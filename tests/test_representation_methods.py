"""SimCSE and VaSCL as methods (vascl.txt Sec. 3-4): labels never reach training, the
evaluation protocol's split roles, VaSCL's learning rates and its K check."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from contrasweep.errors import UserError
from trainables.batches import eval_batches, to_device
from trainables.gather import StageContext
from trainables.loop import build_method
from trainables.sessions import LocalSession
from trainables.methods.vascl import VaSCL

from helpers import loop_config, toy_tables

CHEAP = {"eval_kmeans_runs": 2, "probe_splits": 1, "probe_iterations": 20}


@pytest.fixture(scope="module")
def data(tiny_model_dir):
    return toy_tables(tiny_model_dir, n_per_class=8)


def make(name, tiny_model_dir, data, **hp):
    return build_method({**loop_config(tiny_model_dir, **CHEAP, **hp), "method": name}, data["num_labels"])


@pytest.mark.parametrize("name, hp", [("simcse", {}), ("vascl", {"neighbours": 3, "delta": 1.0})])
def test_labels_never_reach_training(name, hp, tiny_model_dir, data):
    method = make(name, tiny_model_dir, data, **hp)
    _, batch = next(eval_batches(data["tables"]["train"], 8))
    batch = to_device(batch, torch.device("cpu"))
    torch.manual_seed(0)
    first = method(batch)["loss"]
    torch.manual_seed(0)
    relabelled = method({**batch, "labels": torch.zeros_like(batch["labels"]) + 1})["loss"]
    torch.manual_seed(0)
    unlabelled = method({k: v for k, v in batch.items() if k != "labels"})["loss"]
    assert first.item() == relabelled.item() == unlabelled.item()


def test_vascl_rejects_k_not_below_the_batch():
    VaSCL.check({"neighbours": 7, "batch_size": 8}, 32)
    with pytest.raises(UserError, match=r"neighbours=8 is not allowed with batch_size=8; allowed: 1 <= neighbours <= batch_size - 1"):
        VaSCL.check({"neighbours": 8, "batch_size": 8}, 32)
    with pytest.raises(UserError):
        VaSCL.check({"batch_size": 16}, 32)  # the default K (16) needs a batch of 17 or more


def test_vascl_head_and_backbone_learning_rates(tiny_model_dir, data):
    method = make("vascl", tiny_model_dir, data, neighbours=3, head_lr=5e-4)
    groups = method.param_groups(5e-6, 0.01)
    head = {id(p) for p in method.head.parameters()}
    for group in groups:
        in_head = {id(p) in head for p in group["params"]}
        assert len(in_head) == 1  # a group is all head or all backbone
        assert group["lr"] == (5e-4 if in_head.pop() else 5e-6)
    assert sum(len(g["params"]) for g in groups) == len([p for p in method.parameters() if p.requires_grad])


def test_vascl_one_row_batch_uses_the_instance_term(tiny_model_dir, data):
    method = make("vascl", tiny_model_dir, data, neighbours=3)
    _, batch = next(eval_batches(data["tables"]["train"], 1))
    out = method(to_device(batch, torch.device("cpu")))
    assert torch.isfinite(out["loss"]) and "loss/neighbourhood" not in out


def test_evaluation_split_roles_and_reuse(tiny_model_dir, data, monkeypatch):
    """val/* probes sample from train and score validation; test/* sample from train ∪
    validation and score test; each split is embedded once per epoch."""
    import trainables.methods.representation as rep

    method = make("simcse", tiny_model_dir, data)
    calls, probes = [], []
    original = method.representation
    monkeypatch.setattr(method, "representation", lambda b: (calls.append(len(b["labels"])), original(b))[1])
    monkeypatch.setattr(rep, "few_shot_probe", lambda px, py, tx, ty, *a, **k: probes.append((len(px), len(tx))) or {})
    context = StageContext(data["tables"], 2, 64, LocalSession(), seed=0, epoch=1)
    val = method.evaluate(context, "validation")
    test = method.evaluate(context, "test")
    assert set(val) >= {"cluster_acc", "nmi"} and set(test) >= {"cluster_acc", "nmi"}
    n = {s: data["tables"][s].num_rows for s in ("train", "validation", "test")}
    assert probes == [(n["train"], n["validation"]), (n["train"] + n["validation"], n["test"])]
    assert sorted(calls) == sorted([n["train"], n["validation"], n["test"]])  # one pass per split
    assert 0.0 <= val["cluster_acc"] <= 1.0 and np.isfinite(test["nmi"])
