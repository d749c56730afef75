"""Encoder pooling, method registry and classification metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainables.encoder import load_encoder, pool, resolve_model_path
from contrasweep.errors import SpecError, UserError
from trainables.metrics import classification_metrics
from trainables.registry import get_method, method_names


def test_mean_pooling_ignores_padding():
    states = torch.tensor([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.allclose(pool(states, mask, "mean"), torch.tensor([[2.0, 2.0]]))
    assert torch.allclose(pool(states, mask, "cls"), torch.tensor([[1.0, 1.0]]))


def test_tiny_encoder_shapes_and_padding_invariance(tiny_model_dir):
    enc = load_encoder(tiny_model_dir, "mean").eval()
    ids = torch.tensor([[101, 2204, 102, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    pooled, states = enc(ids, mask)
    assert pooled.shape == (1, 32) and states.shape == (1, 5, 32)
    short, _ = enc(ids[:, :3], mask[:, :3])
    assert torch.allclose(pooled, short, atol=1e-5)  # padding changes nothing


def test_default_encoder_is_the_bundled_minilm():
    path = resolve_model_path("default")
    assert "minilm" in path.lower().replace("-", "").replace("_", "")


def test_unknown_encoder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot load"):
        load_encoder(str(tmp_path / "missing-model"))
    with pytest.raises(UserError, match="pooling"):
        from trainables.encoder import Encoder

        Encoder(torch.nn.Module(), "max")


def test_registry():
    assert "ce" in method_names()
    assert get_method("ce").name == "ce"
    with pytest.raises(SpecError, match="allowed: abalone, ce, ce_scl"):
        get_method("nope")


def test_metrics_against_hand_values():
    y_true = np.array([0, 0, 1, 1])
    y_pred = np.array([0, 1, 1, 1])
    m = classification_metrics(y_true, y_pred, 2)
    assert m["accuracy"] == 0.75
    assert m["f1"] == pytest.approx(0.8)  # class 1: precision 2/3, recall 1
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)  # class 0: p 1, r 1/2 -> 2/3
    assert m["mcc"] == pytest.approx(1 / np.sqrt(3))
    assert "f1" not in classification_metrics(np.array([0, 1, 2]), np.array([0, 1, 2]), 3)


@pytest.mark.parametrize("num_labels", [2, 3, 5, 7])
def test_metrics_equal_scikit_learns_on_random_inputs(num_labels):
    """The confusion-matrix metrics (no scikit-learn in the trial process) against
    ``sklearn.metrics`` in float64: absent classes, constant predictions and perfect ones included."""
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    rng = np.random.default_rng(num_labels)
    labels = list(range(num_labels))
    cases = [(rng.integers(0, num_labels, n), rng.integers(0, num_labels, n)) for n in (1, 2, 9, 40, 301)]
    y = rng.integers(0, num_labels, 50)
    cases += [(y, y), (y, np.zeros_like(y)), (np.zeros_like(y), y), (y, (y + 1) % num_labels),
              (rng.integers(0, 2, 30), rng.integers(0, num_labels, 30))]  # classes 2+ never true
    for y_true, y_pred in cases:
        m = classification_metrics(y_true, y_pred, num_labels)
        assert m["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
        assert m["macro_f1"] == pytest.approx(
            f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0), abs=1e-12)
        assert m["mcc"] == pytest.approx(matthews_corrcoef(y_true, y_pred), abs=1e-12)
        if num_labels == 2:
            assert m["f1"] == pytest.approx(
                f1_score(y_true, y_pred, pos_label=1, average="binary", zero_division=0), abs=1e-12)


def test_a_trial_process_does_not_import_scikit_learn():
    """The trial's import chain (the loop, its sessions, the method's module) leaves scikit-learn,
    scipy and pandas out for the methods whose evaluation needs none of them; the representation
    methods (clustering) and the multi-label one (silhouette, Davies–Bouldin) import scikit-learn
    for their evaluation, and SCL-MOO imports scipy's LP solver inside EPO's step."""
    import subprocess
    import sys

    light = ["ce", "ce_scl", "lacon", "supcl_seq", "scl_moo"]
    code = ("import sys; from trainables.loop import train; from trainables.sessions import TuneSession; "
            "from trainables.registry import get_method; "
            f"[get_method(m) for m in {light!r}]; "
            "print(sorted(m for m in ('sklearn', 'scipy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
