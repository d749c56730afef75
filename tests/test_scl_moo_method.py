"""SCL-MOO as a method (scl_moo.txt Sec. 2.2): LS = Eq. 6, EPO's α from the Gram matrix of the
per-objective gradients, the LP fallback, α/ℓ1/ℓ2 logged per optimiser step, and ℓ1/ℓ2 of a
split (Eq. 4–5) reported by evaluate and selectable as sweep metrics."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import loop_config, toy_tables

import trainables.methods.scl_moo as scl_moo_module
from trainables.batches import eval_batches, to_device
from trainables.methods.ce import CrossEntropy
from trainables.collate import collate_numpy
from trainables.methods.epo import EpoStep, epo_alpha
from trainables.loop import build_method, train
from trainables.losses import scl_moo_objectives
from trainables.sessions import LocalSession


@pytest.fixture(scope="module")
def data(tiny_model_dir):
    return toy_tables(tiny_model_dir, n_per_class=8)


def make(tiny_model_dir, data, **hp):
    config = {**loop_config(tiny_model_dir, **hp), "method": "scl_moo"}
    method = build_method(config, data["num_labels"]).eval()  # eval: no dropout, deterministic
    _, batch = next(eval_batches(data["tables"]["train"], 8, ))
    return method, to_device(batch, torch.device("cpu"))


def objectives(method, batch):
    pooled, _ = method.encode(batch)
    ce = F.cross_entropy(method.classifier(pooled), batch["labels"])
    return scl_moo_objectives(pooled, batch["labels"], ce, method.hp["temperature"], method.hp["lam"], shift=True)


def grads(method, loss):
    params = [p for p in method.parameters() if p.requires_grad]
    return torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)


def test_ls_with_r_1_0_is_training_on_l1(tiny_model_dir, data):
    method, batch = make(tiny_model_dir, data, moo="ls", r1=1.0)
    out = method(batch)
    l1, _ = objectives(method, batch)
    torch.testing.assert_close(out["loss"], l1)
    for a, b in zip(grads(method, out["loss"]), grads(method, l1)):
        if a is not None:
            torch.testing.assert_close(a, b)
    assert float(out["moo/alpha_1"]) == 1.0 and float(out["moo/alpha_2"]) == 0.0


def test_ls_is_eq_6(tiny_model_dir, data):
    method, batch = make(tiny_model_dir, data, moo="ls", r1=0.3)
    l1, l2 = objectives(method, batch)
    torch.testing.assert_close(method(batch)["loss"], 0.3 * l1 + 0.7 * l2)


def test_epo_alpha_comes_from_the_gradient_gram_matrix(tiny_model_dir, data):
    method, batch = make(tiny_model_dir, data, moo="epo", r1=0.1)
    out = method(batch)
    l1, l2 = objectives(method, batch)
    rows = [torch.cat([g.reshape(-1) for g in grads(method, loss) if g is not None]) for loss in (l1, l2)]
    flat = torch.stack(rows).double()
    step = epo_alpha(np.array([l1.item(), l2.item()]), (flat @ flat.T).numpy(), np.array([0.1, 0.9]))
    alpha = [float(out["moo/alpha_1"]), float(out["moo/alpha_2"])]
    np.testing.assert_allclose(alpha, step.alpha, atol=1e-6)
    assert abs(sum(alpha) - 1) < 1e-9 and min(alpha) >= 0
    # the step minimises Σ_j m·α_j·ℓ_j, m = 2
    torch.testing.assert_close(out["loss"], 2 * (alpha[0] * l1 + alpha[1] * l2))
    assert float(out["moo/balance_step"]) == float(step.mode == "balance")


def test_lp_failure_falls_back_to_r_and_says_so(tiny_model_dir, data, monkeypatch, caplog):
    failed = EpoStep(alpha=np.array([0.1, 0.9]), mode="fallback", non_uniformity=1.0, ok=False)
    monkeypatch.setattr(scl_moo_module, "epo_alpha", lambda *a, **k: failed)
    method, batch = make(tiny_model_dir, data, moo="epo", r1=0.1)
    with caplog.at_level(logging.WARNING, logger="contrasweep.scl_moo"):
        out = method(batch)
    assert float(out["moo/lp_fallback"]) == 1.0
    assert [float(out["moo/alpha_1"]), float(out["moo/alpha_2"])] == pytest.approx([0.1, 0.9])
    assert "EPO linear programme failed" in caplog.text


def test_per_step_series_reach_the_report_with_global_steps(tiny_model_dir, data, tmp_path):
    config = {**loop_config(tiny_model_dir, epochs=2, batch_size=8, moo="epo"), "method": "scl_moo"}
    session = LocalSession(str(tmp_path))
    train(config, data, session)
    steps_per_epoch = 2  # 16 training rows / batch 8
    for epoch, report in enumerate(session.reports, start=1):
        series = report["step_metrics"]
        assert set(series) == {"moo/alpha_1", "moo/alpha_2", "moo/l1", "moo/l2"}
        first = (epoch - 1) * steps_per_epoch + 1
        assert [s for s, _ in series["moo/alpha_1"]] == [first, first + 1]
        for (_, a1), (_, a2) in zip(series["moo/alpha_1"], series["moo/alpha_2"]):
            assert a1 >= 0 and a2 >= 0 and a1 + a2 == pytest.approx(1.0)
        assert all(v >= 0 for _, v in series["moo/l1"] + series["moo/l2"])  # shifted: EPO's premise
        # the epoch mean is reported too
        assert report["train/moo/alpha_1"] == pytest.approx(np.mean([v for _, v in series["moo/alpha_1"]]))


# --- evaluate(): ℓ1 and ℓ2 of a split, Eq. 4–5 --------------------------------------------------


def context_for(data, tmp_path):
    from trainables.gather import StageContext

    return StageContext(data["tables"], data["num_labels"], 5, LocalSession(str(tmp_path)), seed=0, epoch=1)


def ce_by_hand(logits: torch.Tensor, labels: torch.Tensor) -> float:
    rows = logits.double().tolist()
    return sum(math.log(sum(math.exp(v) for v in row)) - row[y] for row, y in zip(rows, labels.tolist())) / len(rows)


def test_evaluate_l1_l2_are_eq_4_5_by_hand_over_the_training_sized_batches(tiny_model_dir, data, tmp_path):
    """Batch size 6 on the 16 validation rows: batches of 6, 6 and 4 rows, in the fixed
    shuffle. Each batch's ℓ̃pos, ℓ̃neg (Eq. 2–3, from the float64 hand code of
    test_loss_scl_moo.py), CE, shifted by 1/τ and mixed by λ (Eq. 4–5), then the batch mean."""
    from test_loss_scl_moo import neg_by_hand, pos_by_hand

    tau, lam = 0.3, 0.4
    method, _ = make(tiny_model_dir, data, moo="ls", batch_size=6, temperature=tau, lam=lam)
    method.train()
    metrics = method.evaluate(context_for(data, tmp_path), "validation")
    assert method.training  # evaluate restores the mode it found
    assert list(metrics) == [*CrossEntropy.metric_names, "l1", "l2"]

    table = data["tables"]["validation"]
    order = np.random.default_rng([scl_moo_module.EVAL_ORDER_SEED, 0]).permutation(table.num_rows)
    l1s, l2s = [], []
    method.eval()
    for start in range(0, len(order), 6):
        batch = to_device(collate_numpy(table, order[start:start + 6]), torch.device("cpu"))
        with torch.no_grad():
            pooled, _ = method.encode(batch)
            logits = method.classifier(pooled)
        x, y = pooled.double(), batch["labels"].tolist()
        assert len(set(y)) == 2 or start == 12  # the shuffle mixes the class-sorted split
        ce = ce_by_hand(logits, batch["labels"])
        l1s.append(lam * (pos_by_hand(x, y, tau) + 1 / tau) + (1 - lam) * ce)
        l2s.append(lam * (neg_by_hand(x, y, tau) + 1 / tau) + (1 - lam) * ce)
    assert len(l1s) == 3
    assert metrics["l1"] == pytest.approx(np.mean(l1s), rel=1e-5)
    assert metrics["l2"] == pytest.approx(np.mean(l2s), rel=1e-5)


def test_evaluate_equals_training_step_in_eval_mode_on_one_whole_batch(tiny_model_dir, data, tmp_path):
    """With batch_size ≥ the split, the split is one batch: evaluate's ℓ1, ℓ2 are the values
    training_step computes (eval mode) on that batch, and no graph is kept."""
    method, _ = make(tiny_model_dir, data, moo="epo", r1=0.3, batch_size=64, label_smoothing=0.1)
    metrics = method.evaluate(context_for(data, tmp_path), "validation")
    _, whole = next(eval_batches(data["tables"]["validation"], 64))
    out = method(to_device(whole, torch.device("cpu")))
    assert metrics["l1"] == pytest.approx(float(out["moo/l1"]), rel=1e-6)
    assert metrics["l2"] == pytest.approx(float(out["moo/l2"]), rel=1e-6)
    assert metrics["l1"] >= 0 and metrics["l2"] >= 0  # shifted like the trained objectives
    assert 0.0 <= metrics["accuracy"] <= 1.0


@pytest.mark.parametrize("batch_size", [5, 64])
def test_evaluate_encodes_once_and_its_classification_metrics_are_predicts(tiny_model_dir, data, tmp_path, batch_size,
                                                                           monkeypatch):
    """The classification metrics come from the objectives' own forward pass: the same numbers
    as the generic ``classification_evaluate`` of ``predict``, with one encoder pass per row."""
    from trainables.gather import classification_evaluate

    method, _ = make(tiny_model_dir, data, moo="ls", batch_size=batch_size)
    reference = classification_evaluate(method, data["tables"]["validation"], data["num_labels"], 16,
                                         LocalSession(str(tmp_path / "r")))
    rows = []
    encode = method.encode
    monkeypatch.setattr(method, "encode", lambda batch: rows.append(len(batch["labels"])) or encode(batch))
    metrics = method.evaluate(context_for(data, tmp_path), "validation")
    assert sum(rows) == data["tables"]["validation"].num_rows
    for name in CrossEntropy.metric_names:
        assert metrics[name] == pytest.approx(reference[name], abs=1e-12), name


def test_val_l1_and_l2_are_sweep_metrics_and_accuracy_stays_the_default():
    from contrasweep.spec.load import validate

    def raw(**sweep):
        return {"method": "scl_moo", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4},
                "grid": {"r1": [0.1, 0.9]}, "fixed": {"epochs": 2}, "sweep": {"seeds": [0], **sweep}}

    assert validate(raw()).metric == ["val/accuracy"]
    assert validate(raw(metric="val/l1", mode="min")).metric == ["val/l1"]
    both = validate(raw(metric=["val/l1", "val/l2"], mode=["min", "min"], scheduler="none"))
    assert both.metric == ["val/l1", "val/l2"] and both.mode == ["min", "min"]
