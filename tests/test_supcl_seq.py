"""SupCL-Seq (supcl_seq.txt Sec. 2): dropout-probability views, Eq. 2 over all views, and the
frozen-encoder linear stage."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from trainables.batches import eval_batches, to_device
from trainables.checkpoints import load_weights, weights_file
from trainables.losses import supcon_loss
from trainables.loop import build_method, train
from trainables.sessions import LocalSession
from trainables.methods.supcl_seq import dropout_probability, full_linear_layer

from helpers import loop_config, toy_tables


@pytest.fixture(scope="module")
def data(tiny_model_dir):
    return toy_tables(tiny_model_dir, n_per_class=8)


def make(tiny_model_dir, data, **hp):
    config = {**loop_config(tiny_model_dir, **hp), "method": "supcl_seq"}
    method = build_method(config, data["num_labels"]).train()
    _, batch = next(eval_batches(data["tables"]["train"], 6))
    return method, to_device(batch, torch.device("cpu"))


def dropout_ps(module):
    return [m.p for m in module.modules() if isinstance(m, torch.nn.Dropout)]


def test_each_view_uses_its_dropout_probability(tiny_model_dir, data):
    method, batch = make(tiny_model_dir, data, dropouts=[0.0, 0.0, 0.3, 0.3])
    before = dropout_ps(method.encoder)
    torch.manual_seed(0)
    views = method.views(batch).view(4, 6, -1)
    assert torch.equal(views[0], views[1])  # p = 0: no noise, identical
    assert not torch.allclose(views[2], views[3])  # p > 0: two different masks
    assert not torch.allclose(views[0], views[2])
    # p = 0 in train mode is the deterministic (eval) encoder
    method.eval()
    torch.testing.assert_close(views[0], method.encode(batch)[0])
    assert dropout_ps(method.encoder) == before  # restored afterwards


def test_dropout_restored_after_an_error(tiny_model_dir, data):
    method, _ = make(tiny_model_dir, data)
    before = dropout_ps(method.encoder)
    with pytest.raises(RuntimeError):
        with dropout_probability(method.encoder, 0.7) as n:
            assert n > 0 and set(dropout_ps(method.encoder)) == {0.7}
            raise RuntimeError("boom")
    assert dropout_ps(method.encoder) == before


def test_loss_is_eq2_over_all_views_with_duplicates(tiny_model_dir, data):
    method, batch = make(tiny_model_dir, data, dropouts=[0.0, 0.0, 0.0], temperature=0.1)
    out = method(batch)
    with dropout_probability(method.encoder, 0.0):
        one = method.encode(batch)[0]  # p = 0 views are all this
    expected = supcon_loss(torch.cat([one] * 3), batch["labels"].repeat(3), 0.1)
    torch.testing.assert_close(out["loss"], expected)
    assert method.views(batch).shape[0] == 3 * len(batch["labels"])  # duplicates kept


@pytest.mark.parametrize("n_classes, absent", [(2, None), (4, None), (4, 2)])
def test_linear_layer_from_sklearn_predicts_like_sklearn(n_classes, absent):
    rng = np.random.default_rng(0)
    y = rng.integers(0, n_classes, 60)
    if absent is not None:
        y[y == absent] = 0
    x = rng.normal(size=(60, 5)) + y[:, None]
    clf = LogisticRegression().fit(x, y)
    weight, bias = full_linear_layer(clf, n_classes, 5)
    assert weight.shape == (n_classes, 5)
    np.testing.assert_array_equal((x @ weight.T + bias).argmax(1), clf.predict(x))


def test_two_stages_through_the_loop(tiny_model_dir, data, tmp_path):
    config = {**loop_config(tiny_model_dir, epochs=2, lr=1e-3, dropouts=[0.0, 0.1]), "method": "supcl_seq"}
    session = LocalSession(str(tmp_path))
    train(config, data, session)
    for report in session.reports:
        # stage 1 (contrastive loss) and stage 2 (linear layer on frozen features) both reported
        assert np.isfinite(report["train/loss"]) and 0.0 <= report["stage2/train_accuracy"] <= 1.0
        assert "stage2/train_loss" in report and "val/accuracy" in report
    # the stage-2 layer is in the checkpoint and is what predicts
    state = load_weights(weights_file(session.checkpoints[-1]))
    assert state["head_weight"].abs().sum() > 0
    # the stage-1 optimiser never sees the stage-2 layer
    method = build_method(config, 2)
    assert not any(n.startswith("head_") for n, _ in method.named_parameters())
