"""LaCon's losses recomputed by hand from lacon.txt Eq. 3–7 with explicit loops (float64)."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.losses.lacon import icl_loss, lacon_loss, lcl_loss, ler_loss


def cos(a, b) -> float:
    return float(a @ b / (a.norm() * b.norm()))


def icl_by_hand(H, L, y, tau, m):
    n, d = H.shape
    dk = d // m
    total = 0.0
    for k in range(m):
        sl = slice(k * dk, (k + 1) * dk)
        for i in range(n):
            num = math.exp(cos(H[i, sl], L[y[i], sl]) / tau)
            den = sum(math.exp(cos(H[i, sl], L[p, sl]) / tau) for p in range(L.shape[0]))
            total += math.log(num / den)
    return -total / n


def lcl_by_hand(H, L, y, tau):
    P = [p for p in range(L.shape[0]) if p in y and any(v != p for v in y)]
    total = 0.0
    for p in P:
        A = [a for a in range(len(y)) if y[a] == p]
        B = [b for b in range(len(y)) if y[b] != p]
        den = sum(math.exp(cos(L[p], H[b]) / tau) for b in B)
        total += sum(math.log(math.exp(cos(L[p], H[a]) / tau) / den) for a in A)
    return -total / len(P) if P else 0.0


def ler_by_hand(L):
    c = L.shape[0]
    vals = [math.exp(1.0 + cos(L[i], L[j])) - 1.0 for i in range(c) for j in range(c) if i != j]
    return sum(vals) / len(vals)


@pytest.fixture()
def batch():
    torch.manual_seed(0)
    H = torch.randn(7, 12, dtype=torch.float64)
    L = torch.randn(4, 12, dtype=torch.float64)
    y = [0, 1, 1, 3, 0, 0, 1]  # label 2 absent from the batch, label 3 seen once
    return H, L, y


@pytest.mark.parametrize("m", [1, 2, 3, 6])
@pytest.mark.parametrize("tau", [0.05, 0.5])
def test_icl_equation_3_and_4(batch, m, tau):
    H, L, y = batch
    assert icl_loss(H, L, torch.tensor(y), tau, m).item() == pytest.approx(icl_by_hand(H, L, y, tau, m), rel=1e-10)


def test_icl_rejects_heads_not_dividing_d(batch):
    H, L, y = batch
    with pytest.raises(ValueError, match="heads=5 does not divide"):
        icl_loss(H, L, torch.tensor(y), 0.1, 5)


@pytest.mark.parametrize("tau", [0.1, 0.3])
def test_lcl_equation_5(batch, tau):
    H, L, y = batch
    assert lcl_loss(H, L, torch.tensor(y), tau).item() == pytest.approx(lcl_by_hand(H, L, y, tau), rel=1e-10)


def test_lcl_two_classes_and_a_class_with_one_example():
    torch.manual_seed(3)
    H, L = torch.randn(3, 4, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    y = [0, 0, 1]
    assert lcl_loss(H, L, torch.tensor(y), 0.2).item() == pytest.approx(lcl_by_hand(H, L, y, 0.2), rel=1e-10)


def test_lcl_one_class_in_batch_is_zero_and_finite():
    H = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    L = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    loss = lcl_loss(H, L, torch.tensor([2, 2, 2, 2]), 0.1)  # B(2) is empty
    assert loss.item() == 0.0
    loss.backward()
    assert torch.isfinite(H.grad).all() and torch.isfinite(L.grad).all()


def test_ler_equation_6_range(batch):
    _, L, _ = batch
    assert ler_loss(L).item() == pytest.approx(ler_by_hand(L), rel=1e-10)
    same = torch.ones(3, 4, dtype=torch.float64)
    assert ler_loss(same).item() == pytest.approx(math.e ** 2 - 1)  # all identical: the maximum
    assert ler_loss(torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)).item() == pytest.approx(0.0)


def test_total_equation_7_and_ablation_switches(batch):
    H, L, y = batch
    yt = torch.tensor(y)
    out = lacon_loss(H, L, yt, 0.1, heads=3, ler_weight=0.4)
    expected = icl_by_hand(H, L, y, 0.1, 3) + lcl_by_hand(H, L, y, 0.1) + 0.4 * ler_by_hand(L)
    assert out["loss"].item() == pytest.approx(expected, rel=1e-10)
    no_lcl = lacon_loss(H, L, yt, 0.1, heads=3, ler_weight=0.4, lcl_weight=0.0)
    assert no_lcl["loss"].item() == pytest.approx(expected - lcl_by_hand(H, L, y, 0.1), rel=1e-10)
    assert no_lcl["loss/lcl"].item() == 0.0


def test_gradients_reach_instances_and_label_embeddings(batch):
    H, L, y = (t.clone().requires_grad_(True) if torch.is_tensor(t) else t for t in batch)
    lacon_loss(H, L, torch.tensor(y), 0.1, heads=2, ler_weight=1.0)["loss"].backward()
    assert H.grad.abs().sum() > 0 and L.grad.abs().sum() > 0
    assert L.grad[2].abs().sum() > 0  # an absent label still moves (ICL denominator, LER)
