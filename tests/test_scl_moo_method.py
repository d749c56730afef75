"""SCL-MOO as a method (scl_moo.txt Sec. 2.2): LS = Eq. 6, EPO's α from the Gram matrix of the
per-objective gradients, the LP fallback, and α/ℓ1/ℓ2 logged per optimiser step."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import trainables.scl_moo as scl_moo_module
from trainables.batches import eval_batches, to_device
from trainables.epo import EpoStep, epo_alpha
from trainables.losses import scl_moo_objectives
from trainables.loop import build_method, train
from trainables.sessions import LocalSession

from helpers import loop_config, toy_tables


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
