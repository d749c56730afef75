"""The supervised contrastive loss recomputed by hand from supcl_seq.txt Eq. 2 (float64)."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.losses import supcon_loss


def by_hand(x: torch.Tensor, y: list[int], tau: float, reduction: str = "mean") -> float:
    z = [v / v.norm() for v in x]
    total, anchors = 0.0, 0
    for i in range(len(z)):
        B = [b for b in range(len(z)) if b != i]
        P = [p for p in B if y[p] == y[i]]
        if not P:
            continue
        denom = sum(math.exp(float(z[i] @ z[b]) / tau) for b in B)
        total += -1 / len(P) * sum(math.log(math.exp(float(z[i] @ z[p]) / tau) / denom) for p in P)
        anchors += 1
    return total if reduction == "sum" else total / max(anchors, 1)


@pytest.mark.parametrize("labels", [[0, 1, 0, 1, 2, 2], [0, 0, 0, 1], [0, 1], [3, 3]])
@pytest.mark.parametrize("tau", [0.05, 0.3])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_matches_equation_2(labels, tau, reduction):
    torch.manual_seed(0)
    x = torch.randn(len(labels), 5, dtype=torch.float64)
    got = supcon_loss(x, torch.tensor(labels), tau, reduction)
    assert got.item() == pytest.approx(by_hand(x, labels, tau, reduction), rel=1e-10)


def test_class_with_one_example_is_skipped_not_nan():
    torch.manual_seed(1)
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1, 2])  # class 2 has a single example: no positive
    loss = supcon_loss(x, y, 0.1)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(by_hand(x.detach(), y.tolist(), 0.1))
    loss.backward()
    assert torch.isfinite(x.grad).all()


def test_no_positive_anywhere_gives_zero_with_gradient_path():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    loss = supcon_loss(x, torch.tensor([0, 1, 2]), 0.1)
    assert loss.item() == 0.0
    loss.backward()
    assert x.grad is not None and torch.all(x.grad == 0)


def test_gradients_flow_and_scale_invariance():
    torch.manual_seed(2)
    x = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    loss = supcon_loss(x, y, 0.2)
    loss.backward()
    assert x.grad.abs().sum() > 0
    # cosine similarity: rescaling an embedding changes nothing
    assert supcon_loss(x.detach() * 3.0, y, 0.2).item() == pytest.approx(loss.item())


def test_bad_reduction():
    with pytest.raises(ValueError, match="allowed"):
        supcon_loss(torch.randn(2, 2), torch.tensor([0, 0]), 0.1, "max")
