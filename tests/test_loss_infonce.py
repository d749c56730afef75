"""The symmetric InfoNCE loss recomputed by hand from vascl.txt Eq. 1 (both ways, Eq. 6),
with explicit loops on tiny float64 tensors."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.losses.infonce import info_nce
from trainables.losses.supcon import supcon_loss

torch.set_num_threads(1)


def cos(a, b) -> float:
    return float(a @ b / (a.norm() * b.norm()))


def by_hand(z, zp, tau) -> float:
    """1/(2M) Σ_i [ℓ_B(z_i, z_i') + ℓ_B(z_i', z_i)], B∖{i,i'} = both views of every other i."""
    m = len(z)
    total = 0.0
    for i in range(m):
        for anchor, positive in ((z[i], zp[i]), (zp[i], z[i])):
            num = math.exp(cos(anchor, positive) / tau)
            negatives = [v for j in range(m) if j != i for v in (z[j], zp[j])]
            assert len(negatives) == 2 * m - 2
            den = num + sum(math.exp(cos(anchor, n) / tau) for n in negatives)
            total += -math.log(num / den)
    return total / (2 * m)


@pytest.mark.parametrize("m", [1, 2, 4])
@pytest.mark.parametrize("tau", [0.05, 0.5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_equation_1_both_ways(m, tau, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(m, 5, dtype=torch.float64, generator=g)
    zp = z + 0.5 * torch.randn(m, 5, dtype=torch.float64, generator=g)
    assert info_nce(z, zp, tau).item() == pytest.approx(by_hand(z, zp, tau), rel=1e-10, abs=1e-12)


def test_symmetric_in_the_two_views():
    torch.manual_seed(3)
    z, zp = torch.randn(2, 4, 6, dtype=torch.float64)
    assert info_nce(z, zp, 0.1).item() == pytest.approx(info_nce(zp, z, 0.1).item(), rel=1e-12)


def test_single_instance_gives_zero_still_in_graph():
    z = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    zp = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    loss = info_nce(z, zp, 0.05)
    assert loss.item() == 0.0 and by_hand(z.detach(), zp.detach(), 0.05) == 0.0
    loss.backward()
    for x in (z, zp):
        assert x.grad is not None and torch.all(x.grad == 0)


def test_gradients_reach_both_inputs_and_scale_invariance():
    torch.manual_seed(4)
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    zp = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    loss = info_nce(z, zp, 0.2)
    loss.backward()
    assert z.grad.abs().sum() > 0 and zp.grad.abs().sum() > 0
    scales = torch.tensor([[0.1], [3.0], [7.0], [0.5]], dtype=torch.float64)
    assert info_nce(z.detach() * scales, zp.detach() * 2.0, 0.2).item() == pytest.approx(loss.item(), rel=1e-12)


def test_equals_supcon_with_instance_labels():
    """Sibling relation stated in the docstring: one positive per anchor, all others negative."""
    torch.manual_seed(5)
    z, zp = torch.randn(2, 3, 5, dtype=torch.float64)
    labels = torch.arange(3).repeat(2)
    assert info_nce(z, zp, 0.1).item() == pytest.approx(supcon_loss(torch.cat([z, zp]), labels, 0.1).item())


def test_float32_stable_at_small_temperature():
    torch.manual_seed(6)
    z = 1e3 * torch.randn(16, 32, dtype=torch.float64)
    zp = -z + torch.randn(16, 32, dtype=torch.float64)  # positives far apart: large loss
    ref = info_nce(z, zp, 0.05)
    got = info_nce(z.float().requires_grad_(True), zp.float(), 0.05)
    assert torch.isfinite(got) and got.item() == pytest.approx(ref.item(), rel=1e-5)
    got.backward()


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="must both be"):
        info_nce(torch.randn(3, 4), torch.randn(2, 4))
