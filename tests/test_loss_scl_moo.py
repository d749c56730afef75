"""The SCL-MOO objectives recomputed by hand from scl_moo.txt Eqs. 2–5 (float64)."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.losses.scl_moo import nonneg_shift, scl_moo_neg, scl_moo_objectives, scl_moo_pos


def _log_mean_exp_by_hand(h, i, others, tau):
    return math.log(sum(math.exp(float(h[i] @ h[j]) / tau) for j in others) / len(others))


def pos_by_hand(x: torch.Tensor, y: list[int], tau: float) -> float:
    """Eq. 2: −mean over classes with N_k ≥ 2 of the mean over anchors of the positives' LME."""
    h = [v / v.norm() for v in x]
    class_terms = []
    for k in sorted(set(y)):
        members = [i for i in range(len(y)) if y[i] == k]
        if len(members) < 2:
            continue  # no positive pair in this class
        per_anchor = [_log_mean_exp_by_hand(h, i, [p for p in members if p != i], tau) for i in members]
        class_terms.append(sum(per_anchor) / len(members))
    return -sum(class_terms) / len(class_terms) if class_terms else 0.0


def neg_by_hand(x: torch.Tensor, y: list[int], tau: float) -> float:
    """Eq. 3: +mean over present classes of the mean over anchors of the negatives' LME."""
    h = [v / v.norm() for v in x]
    class_terms = []
    for k in sorted(set(y)):
        members = [i for i in range(len(y)) if y[i] == k]
        others = [n for n in range(len(y)) if y[n] != k]
        if not others:
            continue  # a single class in the batch: no negatives at all
        per_anchor = [_log_mean_exp_by_hand(h, i, others, tau) for i in members]
        class_terms.append(sum(per_anchor) / len(members))
    return sum(class_terms) / len(class_terms) if class_terms else 0.0


LABELS = [
    [0, 1, 0, 1, 0, 1],        # C = 2
    [0, 1, 1, 0, 1, 1, 0],     # C = 2, unbalanced
    [0, 0, 1, 1, 2, 2, 2],     # C = 3
    [2, 0, 1, 0, 2, 1, 0, 2],  # C = 3, shuffled
    [0, 0, 0, 1, 2, 2],        # class 1 has a single example
    [5, 5, -1, 7, 7],          # arbitrary label values, one singleton
    [0, 1, 2],                 # all singletons: ℓpos = 0
    [0, 1],                    # two singletons
    [3, 3, 3],                 # one class only: ℓneg = 0
]


@pytest.mark.parametrize("labels", LABELS)
@pytest.mark.parametrize("tau", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_equations_2_and_3(labels, tau, seed):
    torch.manual_seed(seed)
    x = torch.randn(len(labels), 5, dtype=torch.float64)
    y = torch.tensor(labels)
    pos, neg = scl_moo_pos(x, y, tau), scl_moo_neg(x, y, tau)
    assert pos.item() == pytest.approx(pos_by_hand(x, labels, tau), rel=1e-10, abs=1e-12)
    assert neg.item() == pytest.approx(neg_by_hand(x, labels, tau), rel=1e-10, abs=1e-12)
    # both are averages of log-mean-exps of values in [−1/τ, 1/τ]
    assert abs(pos.item()) <= 1 / tau + 1e-9 and abs(neg.item()) <= 1 / tau + 1e-9


def test_single_member_class_is_skipped_in_pos_but_counts_in_neg():
    torch.manual_seed(3)
    x = torch.randn(5, 4, dtype=torch.float64)
    with_single = scl_moo_pos(x, torch.tensor([0, 0, 1, 1, 2]), 0.3)
    without = scl_moo_pos(x[:4], torch.tensor([0, 0, 1, 1]), 0.3)
    assert with_single.item() == pytest.approx(without.item(), rel=1e-12)  # not averaged over 3 classes
    neg = scl_moo_neg(x, torch.tensor([0, 0, 1, 1, 2]), 0.3)
    assert neg.item() == pytest.approx(neg_by_hand(x, [0, 0, 1, 1, 2], 0.3), rel=1e-12)
    assert neg.item() != pytest.approx(scl_moo_neg(x[:4], torch.tensor([0, 0, 1, 1]), 0.3).item())


def test_one_class_only_gives_zero_neg_connected_and_finite():
    torch.manual_seed(4)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    neg = scl_moo_neg(x, torch.tensor([1, 1, 1, 1]), 0.1)
    assert neg.item() == 0.0 and torch.isfinite(neg)
    assert neg.grad_fn is not None
    neg.backward()
    assert x.grad is not None and torch.all(x.grad == 0)


def test_all_singletons_give_zero_pos_connected_and_finite():
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    pos = scl_moo_pos(x, torch.tensor([0, 1, 2]), 0.1)
    assert pos.item() == 0.0 and pos.grad_fn is not None
    pos.backward()
    assert x.grad is not None and torch.all(x.grad == 0)


@pytest.mark.parametrize("fn", [scl_moo_pos, scl_moo_neg])
@pytest.mark.parametrize("labels", [[0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 2, 2]])
def test_gradients_flow(fn, labels):
    torch.manual_seed(5)
    x = torch.randn(len(labels), 8, dtype=torch.float64, requires_grad=True)
    fn(x, torch.tensor(labels), 0.2).backward()
    assert torch.isfinite(x.grad).all()
    moved = x.grad.abs().sum(1) > 0
    if fn is scl_moo_pos:
        # a single-member class is nobody's positive: Eq. 2 does not touch it
        singles = torch.tensor([labels.count(k) == 1 for k in labels])
        assert torch.equal(moved, ~singles)
    else:
        assert moved.all()  # every embedding is some anchor's negative


def test_scale_invariance_and_float32():
    torch.manual_seed(6)
    x = torch.randn(6, 8, dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    for fn in (scl_moo_pos, scl_moo_neg):
        ref = fn(x, y, 0.3).item()
        assert fn(3.0 * x, y, 0.3).item() == pytest.approx(ref, rel=1e-12)
        assert fn(x.float(), y, 0.3).item() == pytest.approx(ref, rel=1e-5)


def _embeddings_cases():
    """Random, identical and antipodal embeddings (the two ends of the [−1/τ, 1/τ] range)."""
    cases = []
    g = torch.Generator().manual_seed(7)
    for n in (2, 5, 9):
        for _ in range(6):
            x = torch.randn(n, 6, dtype=torch.float64, generator=g)
            y = torch.randint(0, 3, (n,), generator=g)
            cases.append((x, y))
    v = torch.randn(1, 6, dtype=torch.float64, generator=g)
    cases.append((v.repeat(6, 1), torch.tensor([0, 0, 1, 1, 2, 2])))         # identical: ℓpos = −1/τ
    cases.append((torch.cat([v.repeat(3, 1), -v.repeat(3, 1)]), torch.tensor([0, 0, 0, 1, 1, 1])))
    #                                                     antipodal classes: ℓpos = ℓneg = −1/τ
    cases.append((torch.cat([v, -v, v, -v]), torch.tensor([0, 0, 1, 1])))     # antipodal positives
    return cases


@pytest.mark.parametrize("tau", [0.05, 0.1, 0.3, 0.7])
@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_shift_makes_objectives_non_negative(tau, lam):
    for x, y in _embeddings_cases():
        for ce in (0.0, 1e-3, 2.5):
            l1, l2 = scl_moo_objectives(x, y, torch.tensor(ce, dtype=torch.float64), tau, lam)
            assert l1.item() >= 0.0 and l2.item() >= 0.0
        for xx in (x, x.float()):  # float32 rounding as well
            l1, l2 = scl_moo_objectives(xx, y, torch.tensor(0.0), tau, lam)
            assert l1.item() >= 0.0 and l2.item() >= 0.0


def test_extremes_hit_the_bounds():
    tau = 0.1
    v = torch.randn(1, 4, dtype=torch.float64)
    x = torch.cat([v.repeat(2, 1), -v.repeat(2, 1)])
    y = torch.tensor([0, 0, 1, 1])
    assert scl_moo_pos(x, y, tau).item() == pytest.approx(-1 / tau)
    assert scl_moo_neg(x, y, tau).item() == pytest.approx(-1 / tau)
    l1, l2 = scl_moo_objectives(x, y, torch.tensor(0.0, dtype=torch.float64), tau, 1.0)
    assert l1.item() == pytest.approx(0.0, abs=1e-9) and l2.item() == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("labels", [[0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 1], [4, 4, 4]])
def test_shift_leaves_gradients_unchanged(labels):
    torch.manual_seed(8)
    base = torch.randn(len(labels), 5, dtype=torch.float64)
    grads = {}
    for shift in (True, False):
        x = base.clone().requires_grad_(True)
        ce = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
        l1, l2 = scl_moo_objectives(x, torch.tensor(labels), ce, 0.3, 0.4, shift=shift)
        g1 = torch.autograd.grad(l1, (x, ce), retain_graph=True)
        g2 = torch.autograd.grad(l2, (x, ce))
        grads[shift] = g1 + g2
    for a, b in zip(grads[True], grads[False]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-15)


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("shift", [True, False])
def test_objectives_are_equations_4_and_5(lam, shift):
    torch.manual_seed(9)
    labels = [0, 0, 1, 1, 1, 2]
    x = torch.randn(len(labels), 5, dtype=torch.float64)
    tau, ce = 0.3, 1.25
    l1, l2 = scl_moo_objectives(x, torch.tensor(labels), torch.tensor(ce, dtype=torch.float64), tau, lam,
                                shift=shift)
    s = 1 / tau if shift else 0.0
    assert nonneg_shift(tau) == pytest.approx(1 / tau)
    assert l1.item() == pytest.approx(lam * (pos_by_hand(x, labels, tau) + s) + (1 - lam) * ce, rel=1e-10)
    assert l2.item() == pytest.approx(lam * (neg_by_hand(x, labels, tau) + s) + (1 - lam) * ce, rel=1e-10)


def test_bad_arguments():
    x, y = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="temperature"):
        scl_moo_pos(x, y, 0.0)
    with pytest.raises(ValueError, match="temperature"):
        nonneg_shift(-1.0)
    with pytest.raises(ValueError, match="lam"):
        scl_moo_objectives(x, y, torch.tensor(1.0), 0.3, 1.5)
    with pytest.raises(ValueError, match="labels"):
        scl_moo_neg(x, torch.tensor([0, 1]), 0.3)
