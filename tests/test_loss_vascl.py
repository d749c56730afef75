"""VaSCL's pieces recomputed by hand from vascl.txt Eq. 1–6 with explicit loops over instances
and neighbours on tiny float64 tensors."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.losses.infonce import info_nce
from trainables.losses.vascl import knn_neighbours, neighbourhood_nce, vascl_loss, virtual_augmentation

torch.set_num_threads(1)
D = 6


def cos(a, b) -> float:
    return float(a @ b / (a.norm() * b.norm()))


def tiny_head(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, 8)).double()


def knn_by_hand(e, k) -> list[list[int]]:
    out = []
    for i in range(len(e)):
        others = sorted((j for j in range(len(e)) if j != i), key=lambda j: -cos(e[i], e[j]))
        out.append(others[:k])
    return out


def nce_by_hand(a, p, negs, tau) -> float:
    num = math.exp(cos(a, p) / tau)
    return -math.log(num / (num + sum(math.exp(cos(a, n) / tau) for n in negs)))


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- N(i)

@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_knn_matches_brute_force(seed, k):
    e = torch.randn(7, D, dtype=torch.float64, generator=gen(seed))
    got = knn_neighbours(e, k)
    assert got.shape == (7, k) and got.dtype == torch.long
    assert [sorted(r) for r in got.tolist()] == [sorted(r) for r in knn_by_hand(e, k)]


def test_knn_excludes_self_even_with_duplicate_rows():
    base = torch.randn(3, D, dtype=torch.float64, generator=gen(3))
    e = torch.cat([base, base, base[:1]])                 # row 0 appears three times
    for k in range(1, len(e)):
        nb = knn_neighbours(e, k)
        for i, row in enumerate(nb.tolist()):
            assert i not in row and len(set(row)) == k
            # the selected similarities are the k largest among the others (ties allowed)
            others = sorted((cos(e[i], e[j]) for j in range(len(e)) if j != i), reverse=True)
            assert sorted((cos(e[i], e[j]) for j in row), reverse=True) == pytest.approx(others[:k])
    assert set(knn_neighbours(e, 2)[0].tolist()) == {3, 6}  # its duplicates, not itself


def test_knn_has_no_gradient():
    e = torch.randn(4, D, dtype=torch.float64, requires_grad=True)
    assert not knn_neighbours(e, 2).requires_grad


@pytest.mark.parametrize("k", [0, -1, 4, 9])
def test_knn_bad_k_raises(k):
    with pytest.raises(ValueError, match=rf"K={k} must be in \[1, M−1\] for a batch of M=4"):
        knn_neighbours(torch.randn(4, D), k)


# ---------------------------------------------------------------- Eq. 2

@pytest.mark.parametrize("tau", [0.05, 0.7])
def test_neighbourhood_nce_matches_equation_2(tau):
    g = gen(4)
    a, p = torch.randn(2, 5, 3, dtype=torch.float64, generator=g)
    n = torch.randn(5, 4, 3, dtype=torch.float64, generator=g)
    got = neighbourhood_nce(a, p, n, tau)
    assert got.shape == (5,)
    for i in range(5):
        assert got[i].item() == pytest.approx(nce_by_hand(a[i], p[i], n[i], tau), rel=1e-10)


def test_neighbourhood_nce_without_negatives_is_zero():
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    p, no_negatives = torch.randn(3, 4, dtype=torch.float64), torch.zeros(3, 0, 4, dtype=torch.float64)
    got = neighbourhood_nce(a, p, no_negatives, 0.1)
    assert torch.all(got == 0)
    got.sum().backward()
    assert torch.all(a.grad == 0)


# ---------------------------------------------------------------- Eq. 3

def augmentation_by_hand(e, nb, head, tau, delta, steps, seed):
    """Per-row loop: own autograd call per instance, by-hand normalisation and projection."""
    noise = torch.randn(e.shape, dtype=e.dtype, generator=gen(seed))
    rows = []
    for i in range(len(e)):
        d = noise[i] * (delta / noise[i].norm())
        z_i = head(e[i]).detach()
        negs = [head(e[k]).detach() for k in nb[i]]
        for _ in range(steps):
            d = d.clone().requires_grad_(True)
            a = head(e[i] + d)
            num = torch.exp(a @ z_i / (a.norm() * z_i.norm()) / tau)
            den = num + sum(torch.exp(a @ n / (a.norm() * n.norm()) / tau) for n in negs)
            (g,) = torch.autograd.grad(-torch.log(num / den), d)
            d = d.detach()
            if g.norm() > 0:
                d = d + delta * g / g.norm()
                d = d * (delta / d.norm())
        rows.append(d)
    return torch.stack(rows)


def neighbourhood_objective(e, nb, head, tau, d) -> torch.Tensor:
    z = head(e).detach()
    return neighbourhood_nce(head(e + d), z, z[nb], tau).detach()


@pytest.mark.parametrize("steps", [0, 1, 3])
@pytest.mark.parametrize("delta", [0.3, 15.0])
def test_augmentation_matches_per_row_loop_and_has_norm_delta(steps, delta):
    head = tiny_head(5)
    e = torch.randn(6, D, dtype=torch.float64, generator=gen(5))
    nb = knn_neighbours(e, 3)
    got = virtual_augmentation(e, nb, head, 0.1, delta, steps, gen(11))
    assert not got.requires_grad
    assert torch.allclose(got.norm(dim=1), torch.full((6,), delta, dtype=torch.float64), rtol=0, atol=1e-9)
    want = augmentation_by_hand(e, nb.tolist(), head, 0.1, delta, steps, 11)
    assert torch.allclose(got, want, rtol=1e-9, atol=1e-9)


def test_steps_zero_is_the_random_start():
    e = torch.randn(5, D, dtype=torch.float64, generator=gen(6))
    got = virtual_augmentation(e, knn_neighbours(e, 2), tiny_head(6), 0.05, 2.0, 0, gen(7))
    noise = torch.randn(5, D, dtype=torch.float64, generator=gen(7))
    assert torch.allclose(got, 2.0 * noise / noise.norm(dim=1, keepdim=True), rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("tau", [0.05, 0.5])
def test_one_ascent_step_increases_the_neighbourhood_loss(seed, tau):
    """Checked PER ROW (non-decreasing) and strictly on the sum, at a Δ small relative to ‖e_i‖:
    row i of the objective depends on δ_i alone (row-wise head, detached targets), and to first
    order the projected step cannot decrease it (see ``virtual_augmentation``'s docstring); a
    row whose gradient is 0 (all ReLUs dead) keeps its δ and its loss. At Δ = 15 on a head this
    small the step is far outside the linear regime and is NOT guaranteed to increase every row,
    so that case is not asserted."""
    head = tiny_head(100 + seed)
    e = torch.randn(6, D, dtype=torch.float64, generator=gen(seed))
    nb = knn_neighbours(e, 3)
    start = virtual_augmentation(e, nb, head, tau, 0.1, 0, gen(seed))
    moved = virtual_augmentation(e, nb, head, tau, 0.1, 1, gen(seed))
    before = neighbourhood_objective(e, nb, head, tau, start)
    after = neighbourhood_objective(e, nb, head, tau, moved)
    assert torch.all(after >= before)
    assert after.sum() > before.sum()


def test_augmentation_is_deterministic_and_leaves_no_grad():
    head = tiny_head(7)
    e = torch.randn(5, D, dtype=torch.float64, generator=gen(8), requires_grad=True)
    nb = knn_neighbours(e, 2)
    a = virtual_augmentation(e, nb, head, 0.05, 15.0, 2, gen(9))
    b = virtual_augmentation(e, nb, head, 0.05, 15.0, 2, gen(9))
    c = virtual_augmentation(e, nb, head, 0.05, 15.0, 2, gen(10))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert all(p.grad is None for p in head.parameters()) and e.grad is None
    head.eval()
    with torch.no_grad():
        inside = virtual_augmentation(e, nb, head, 0.05, 15.0, 2, gen(9))
    assert torch.equal(inside, a)
    assert all(p.grad is None for p in head.parameters())


def test_zero_gradient_row_keeps_its_delta():
    def constant_head(x):  # output independent of the input: ∂ℓ/∂δ = 0 exactly
        return 0 * x[..., :3] + torch.tensor([1.0, 2.0, 3.0], dtype=x.dtype)

    e = torch.randn(4, D, dtype=torch.float64, generator=gen(12))
    nb = knn_neighbours(e, 2)
    start = virtual_augmentation(e, nb, constant_head, 0.1, 3.0, 0, gen(13))
    assert torch.equal(virtual_augmentation(e, nb, constant_head, 0.1, 3.0, 2, gen(13)), start)


# ---------------------------------------------------------------- Eq. 6

def vascl_by_hand(e, ep, head, tau, k, d_star) -> tuple[float, float]:
    m = len(e)
    with torch.no_grad():
        z = [head(e[i]) for i in range(m)]
        zp = [head(ep[i]) for i in range(m)]
        zs = [head(e[i] + d_star[i]) for i in range(m)]
    instance = 0.0
    for i in range(m):
        negs = [v for j in range(m) if j != i for v in (z[j], zp[j])]
        instance += nce_by_hand(z[i], zp[i], negs, tau) + nce_by_hand(zp[i], z[i], negs, tau)
    neighbourhood = 0.0
    for i, nb in enumerate(knn_by_hand(e, k)):
        negs = [z[kk] for kk in nb] + [zs[kk] for kk in nb]   # N_A(i) = {k, k*}
        neighbourhood += nce_by_hand(z[i], zs[i], negs, tau) + nce_by_hand(zs[i], z[i], negs, tau)
    return instance / (2 * m), neighbourhood / (2 * m)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("k,steps,tau", [(1, 1, 0.05), (3, 1, 0.5), (5, 2, 0.1)])
@pytest.mark.parametrize("neighbour_grad", [True, False])
def test_vascl_matches_equation_6(seed, k, steps, tau, neighbour_grad):
    head = tiny_head(20 + seed)
    g = gen(seed)
    e = torch.randn(6, D, dtype=torch.float64, generator=g)
    ep = e + 0.1 * torch.randn(6, D, dtype=torch.float64, generator=g)
    out = vascl_loss(e, ep, head, tau, k, 4.0, steps, neighbour_grad, gen(50 + seed))
    d_star = virtual_augmentation(e, knn_neighbours(e, k), head, tau, 4.0, steps, gen(50 + seed))
    instance, neighbourhood = vascl_by_hand(e, ep, head, tau, k, d_star)
    assert out["instance"].item() == pytest.approx(instance, rel=1e-10)
    assert out["instance"].item() == pytest.approx(info_nce(head(e), head(ep), tau).item(), rel=1e-12)
    assert out["neighbourhood"].item() == pytest.approx(neighbourhood, rel=1e-10)
    assert out["loss"].item() == pytest.approx(instance + neighbourhood, rel=1e-10)


def test_neighbour_grad_switch():
    head = tiny_head(30)
    encoder = torch.nn.Linear(4, D).double()
    x = torch.randn(6, 4, dtype=torch.float64, generator=gen(30))
    e = encoder(x)
    ep = e + 0.1 * torch.randn(6, D, dtype=torch.float64, generator=gen(31))
    head_params = list(head.parameters())

    on = vascl_loss(e, ep, head, 0.1, 2, 2.0, generator=gen(32))
    assert all(p.grad is None for p in head_params)  # the δ search left nothing behind
    g_e, g_w = torch.autograd.grad(on["neighbourhood"], [e, encoder.weight], retain_graph=True)
    assert g_e.abs().sum() > 0 and g_w.abs().sum() > 0  # reaches the encoder through e

    off = vascl_loss(e, ep, head, 0.1, 2, 2.0, neighbour_grad=False, generator=gen(32))
    assert off["loss"].item() == pytest.approx(on["loss"].item(), rel=1e-12)  # same value
    g_e, g_w = torch.autograd.grad(off["neighbourhood"], [e, encoder.weight], allow_unused=True,
                                   retain_graph=True)
    assert all(g is None or torch.all(g == 0) for g in (g_e, g_w))
    g_head = torch.autograd.grad(off["neighbourhood"], head_params, retain_graph=True)
    assert all(g.abs().sum() > 0 for g in g_head[::2])  # both Linear weights still learn
    off["loss"].backward()  # the instance term still trains the encoder
    assert encoder.weight.grad.abs().sum() > 0


def test_clean_grad_switch_treats_clean_z_as_constants():
    head = tiny_head(33)
    e = torch.randn(6, D, dtype=torch.float64, generator=gen(33)).requires_grad_(True)
    ep = e.detach() + 0.1 * torch.randn(6, D, dtype=torch.float64, generator=gen(34))
    params = list(head.parameters())
    paper = vascl_loss(e, ep, head, 0.1, 2, 2.0, generator=gen(35))
    code = vascl_loss(e, ep, head, 0.1, 2, 2.0, generator=gen(35), clean_grad=False)
    assert code["loss"].item() == pytest.approx(paper["loss"].item(), rel=1e-12)  # same value

    # by hand: Eq. 5 with the clean z_i, z_k detached, z* = h(e + δ*) live
    nb = knn_neighbours(e, 2)
    d_star = virtual_augmentation(e, nb, head, 0.1, 2.0, 1, gen(35))
    z_c, z_s = head(e).detach(), head(e + d_star)
    negs = torch.cat([z_c[nb], z_s[nb]], dim=1)
    manual = (neighbourhood_nce(z_c, z_s, negs, 0.1) + neighbourhood_nce(z_s, z_c, negs, 0.1)).sum() / 12
    assert code["neighbourhood"].item() == pytest.approx(manual.item(), rel=1e-12)
    want = torch.autograd.grad(manual, [e, *params])
    got = torch.autograd.grad(code["neighbourhood"], [e, *params])
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    full = torch.autograd.grad(paper["neighbourhood"], [e, *params])
    assert any(not torch.allclose(f, g) for f, g in zip(full, got))  # the paper's gradient differs


def test_vascl_bad_k_and_float32():
    e = torch.randn(4, D, generator=gen(40))
    head = tiny_head(40).float()
    with pytest.raises(ValueError, match="K=16 must be in"):
        vascl_loss(e, e, head)  # default K = 16 needs M ≥ 17
    with pytest.raises(ValueError, match="M=1"):
        vascl_loss(e[:1], e[:1], head, k=1)
    out = vascl_loss(e, e + 0.01, head, k=3)  # paper defaults τ = 0.05, Δ = 15 in float32
    assert all(torch.isfinite(v) for v in out.values())
