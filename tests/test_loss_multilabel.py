"""ABALONE's multi-label losses recomputed by hand (abalone_multilabel.txt Sec. 3.1, Sec. 3.3
Eq. 1–5, Sec. 4.2.1 ablations, Sec. 4.2.2 BCE baselines) with explicit loops in float64."""

from __future__ import annotations

import math

import pytest
import torch

from trainables.losses.multilabel_bce import asymmetric_loss, bce_loss, focal_loss
from trainables.losses.multilabel_contrastive import bqproto_loss, jaccard_supcon_loss, msc_loss
from trainables.losses.supcon import supcon_loss

torch.set_num_threads(1)

# ---------------------------------------------------------------------------------------------
# by-hand references: plain Python over i (anchor), j (label), l (positive), k (denominator)
# ---------------------------------------------------------------------------------------------


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm()


def _labels(row) -> set[int]:
    return {j for j, v in enumerate(row) if float(v) > 0}


def _items(z, y, qz, qy, protos):
    """Candidates as (vector, label set, is_prototype); the batch comes first."""
    items = [(_unit(z[i]), _labels(y[i]), False) for i in range(len(z))]
    if qz is not None:
        items += [(_unit(qz[k]), _labels(qy[k]), False) for k in range(len(qz))]
    if protos is not None:
        items += [(_unit(protos[j]), {j}, True) for j in range(len(protos))]
    return items


def _jacc(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def base_by_hand(z, y, tau, qz=None, qy=None, protos=None, reduction="mean") -> float:
    """L_Base (Sec. 3.1) over batch ∪ queue ∪ prototypes (prototype c_j has label set {j})."""
    items = _items(z, y, qz, qy, protos)
    total, anchors = 0.0, 0
    for i in range(len(z)):
        zi, yi, _ = items[i]
        others = [k for k in range(len(items)) if k != i]
        denom = sum(math.exp(float(zi @ items[k][0]) / tau) for k in others)
        n_i = sum(_jacc(yi, items[j][1]) for j in others)
        if n_i == 0:
            continue
        s = sum(_jacc(yi, items[j][1]) * math.log(math.exp(float(zi @ items[j][0]) / tau) / denom) for j in others)
        total += -s / n_i
        anchors += 1
    return total / max(anchors, 1) if reduction == "mean" else total / len(z)


def msc_per_anchor(z, y, tau, beta, protos=None, qz=None, qy=None, use_weights=True, reduction="mean"):
    """ℓ(z_i) of Eq. 3 for each anchor (None where undefined), by hand."""
    items = _items(z, y, qz, qy, protos)
    out = []
    for i in range(len(z)):
        zi, yi, _ = items[i]
        denom = 0.0
        for k in range(len(items)):                      # H ∪ C \ z_i, weighted by g (Eq. 1)
            if k == i:
                continue
            g = 1.0 if (items[k][2] or not use_weights) else beta
            denom += g * math.exp(float(zi @ items[k][0]) / tau)
        terms = []
        for j in sorted(yi):                             # j ∈ Δ(z_i)
            pos = []
            for l in range(len(items)):                  # P(j, i) ∪ {c_j}
                if l == i or j not in items[l][1]:
                    continue
                if items[l][2] or not use_weights:
                    f = 1.0                              # Eq. 4, prototype
                else:
                    f = 1.0 / len(yi | items[l][1])      # Eq. 4, instance
                pos.append((l, f))
            n_ij = sum(f for _, f in pos)                # Eq. 5
            if n_ij == 0:
                terms.append(None)
                continue
            terms.append(sum(f * math.log(math.exp(float(zi @ items[l][0]) / tau) / denom) for l, f in pos) / n_ij)
        defined = [t for t in terms if t is not None]
        if reduction == "mean":
            out.append(-sum(defined) / len(defined) if defined else None)
        else:
            out.append(-sum(defined) / len(yi) if yi else 0.0)
    return out


def msc_by_hand(z, y, tau, beta, protos=None, qz=None, qy=None, use_weights=True, reduction="mean") -> float:
    per = msc_per_anchor(z, y, tau, beta, protos, qz, qy, use_weights, reduction)
    defined = [v for v in per if v is not None]
    return sum(defined) / max(len(defined), 1) if reduction == "mean" else sum(defined) / len(z)


# a batch with overlapping label sets, a label-less instance (row 5), an instance sharing no
# label with the batch (row 6, label 4) and a label seen once in the batch (label 3 on row 2)
Y = torch.tensor([[1, 1, 0, 0, 0],
                  [1, 0, 0, 0, 0],
                  [0, 1, 1, 1, 0],
                  [0, 0, 1, 0, 0],
                  [1, 1, 1, 0, 0],
                  [0, 0, 0, 0, 0],
                  [0, 0, 0, 0, 1]], dtype=torch.float64)
QY = torch.tensor([[0, 1, 0, 0, 0],
                   [1, 0, 1, 0, 0],
                   [0, 0, 0, 0, 0],
                   [0, 0, 1, 0, 1]], dtype=torch.float64)


def _data(seed=0, d=6):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(len(Y), d, generator=g, dtype=torch.float64)
    qz = torch.randn(len(QY), d, generator=g, dtype=torch.float64)
    protos = torch.randn(Y.shape[1], d, generator=g, dtype=torch.float64)
    return z, qz, protos


# ---------------------------------------------------------------------------------------------
# L_Base, L_BQueue, L_BQProto
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("queue", [False, True])
@pytest.mark.parametrize("tau", [0.07, 0.5])
@pytest.mark.parametrize("reduction", ["mean", "paper"])
def test_base_and_bqueue_match_by_hand(queue, tau, reduction):
    z, qz, _ = _data()
    q = (qz, QY) if queue else (None, None)
    got = jaccard_supcon_loss(z, Y, tau, *q, reduction=reduction)
    assert got.item() == pytest.approx(base_by_hand(z, Y, tau, *q, reduction=reduction), rel=1e-10)


@pytest.mark.parametrize("queue", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "paper"])
def test_bqproto_matches_by_hand(queue, reduction):
    z, qz, protos = _data(1)
    q = (qz, QY) if queue else (None, None)
    got = bqproto_loss(z, Y, protos, 0.1, *q, reduction=reduction)
    assert got.item() == pytest.approx(base_by_hand(z, Y, 0.1, *q, protos=protos, reduction=reduction), rel=1e-10)


def test_bqproto_prototype_weight_is_jaccard_of_one_hot():
    """Anchor {0, 1} alone with its two prototypes: each prototype weighs J = 1/2, the third
    (label 2) is only a negative, so the loss is −½ Σ_{j∈{0,1}} log softmax(c_j)."""
    g = torch.Generator().manual_seed(3)
    z, protos = torch.randn(1, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)
    s = [float(_unit(z[0]) @ _unit(c)) / 0.2 for c in protos]
    log_den = math.log(sum(math.exp(v) for v in s))
    want = -0.5 * ((s[0] - log_den) + (s[1] - log_den))
    assert bqproto_loss(z, torch.tensor([[1.0, 1.0, 0.0]]), protos, 0.2).item() == pytest.approx(want, rel=1e-12)


def test_base_anchor_without_overlap_is_excluded_or_zero():
    """Rows 5 (no label) and 6 (label 4 alone in the batch) have N(i) = 0: "mean" averages over
    the 5 other anchors, "paper" divides their sum by |B| = 7."""
    z, _, _ = _data(2)
    mean = jaccard_supcon_loss(z, Y, 0.1).item()
    paper = jaccard_supcon_loss(z, Y, 0.1, reduction="paper").item()
    assert paper == pytest.approx(mean * 5 / 7, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# L_MSC
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protos_on", [False, True])
@pytest.mark.parametrize("queue", [False, True])
@pytest.mark.parametrize("use_weights", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "paper"])
def test_msc_matches_equations_2_to_5(protos_on, queue, use_weights, reduction):
    z, qz, protos = _data(4)
    p = protos if protos_on else None
    q = (qz, QY) if queue else (None, None)
    got = msc_loss(z, Y, 0.1, 0.1, p, *q, use_weights=use_weights, reduction=reduction)
    want = msc_by_hand(z, Y, 0.1, 0.1, p, *q, use_weights=use_weights, reduction=reduction)
    assert got.item() == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("tau,beta", [(0.07, 0.3), (1.0, 1.0)])
def test_msc_other_tau_beta_bool_labels(tau, beta):
    z, qz, protos = _data(5)
    got = msc_loss(z, Y.bool(), tau, beta, protos, qz, QY.bool())
    assert got.item() == pytest.approx(msc_by_hand(z, Y, tau, beta, protos, qz, QY), rel=1e-10)


def test_tau_divides_the_denominator_too():
    """Eq. 3 as printed has no /τ below; we use it in both places. With every vector equal,
    every cosine is 1 and the loss is log Σ_k g_k = log(β·(|H|−1) + L) for every τ — without
    /τ below it would be 1/τ − 1 + log(...), depending on τ."""
    z = torch.ones(len(Y), 3, dtype=torch.float64)
    qz, protos = torch.ones(len(QY), 3, dtype=torch.float64), torch.ones(Y.shape[1], 3, dtype=torch.float64)
    h = len(Y) + len(QY)
    for tau in (0.05, 0.1, 0.7):
        got = msc_loss(z, Y, tau, 0.1, protos, qz, QY).item()
        assert got == pytest.approx(math.log(0.1 * (h - 1) + Y.shape[1]), rel=1e-10)


def test_beta_only_changes_the_denominator():
    """Σ_l f/N(i,j) = 1 for every (i, j), so ℓ(z_i) = −(1/n_i) Σ_j Σ_l (f/N)·s_il/τ + log D_i(β)
    with D_i(β) = β Σ_{k∈H\\i} e^{s_ik/τ} + Σ_{c∈C} e^{s_ic/τ}: changing β moves the loss by the
    mean change of log D_i only (the attraction part is untouched)."""
    z, qz, protos = _data(6)
    tau = 0.1
    items = _items(z, Y, qz, QY, protos)
    defined = [i for i, v in enumerate(msc_per_anchor(z, Y, tau, 0.1, protos, qz, QY)) if v is not None]

    def log_d(i, beta):
        zi = items[i][0]
        return math.log(sum((1.0 if it[2] else beta) * math.exp(float(zi @ it[0]) / tau)
                            for k, it in enumerate(items) if k != i))

    for b1, b2 in [(0.1, 0.5), (0.1, 1.0), (0.9, 0.01)]:
        diff = (msc_loss(z, Y, tau, b1, protos, qz, QY) - msc_loss(z, Y, tau, b2, protos, qz, QY)).item()
        want = sum(log_d(i, b1) - log_d(i, b2) for i in defined) / len(defined)
        assert diff == pytest.approx(want, rel=1e-9)


def test_without_prototypes_beta_is_a_constant_shift():
    """No prototypes: every denominator term carries β, so msc(β) = msc(1) + log β, same gradient."""
    z, qz, _ = _data(7)
    za, zb = z.clone().requires_grad_(True), z.clone().requires_grad_(True)
    la, lb = msc_loss(za, Y, 0.1, 0.2, None, qz, QY), msc_loss(zb, Y, 0.1, 1.0, None, qz, QY)
    assert (la - lb).item() == pytest.approx(math.log(0.2), rel=1e-10)
    la.backward(), lb.backward()
    torch.testing.assert_close(za.grad, zb.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("queue", [False, True])
def test_mono_label_reduces_to_jaccard_baseline(queue):
    """Sec. 3.3: f "coincides with the Jaccard similarity in scenarios where labels are balanced".
    Mono-label: Δ(z_i) = {a}, f = 1/|{a}| = 1 on P(a, i) and N(i, a) = |P(a, i)| while J = 1 on
    the same set and N(i) = |P(a, i)|: with no prototypes (c_a would be an extra positive and an
    extra, unweighted, negative) and β = 1 (no repulsion reweighting) ℓ(z_i) is exactly the
    L_Base term; class 3 is seen once (no positive: skipped by both). It is also SupCon."""
    classes = [0, 1, 0, 2, 1, 0, 3, 2]
    y = torch.nn.functional.one_hot(torch.tensor(classes), 4).double()
    g = torch.Generator().manual_seed(8)
    z = torch.randn(len(classes), 5, generator=g, dtype=torch.float64)
    qz = torch.randn(3, 5, generator=g, dtype=torch.float64) if queue else None
    qy = torch.nn.functional.one_hot(torch.tensor([2, 0, 1]), 4).double() if queue else None
    msc = msc_loss(z, y, 0.1, 1.0, None, qz, qy).item()
    assert msc == pytest.approx(jaccard_supcon_loss(z, y, 0.1, qz, qy).item(), rel=1e-10)
    if not queue:
        assert msc == pytest.approx(supcon_loss(z, torch.tensor(classes), 0.1).item(), rel=1e-10)


def test_balanced_multilabel_reduction_and_its_limit():
    """The reduction needs N(i, j) equal over the anchor's labels, not one label per instance:
    for {0,1},{0,1},{0},{1} the anchor {0,1} has N(i,0) = N(i,1) = ½ + ½, so MSC = L_Base
    (no prototypes, β = 1). Make label 0 heavier ({0} twice) and they differ."""
    g = torch.Generator().manual_seed(9)
    z = torch.randn(4, 5, generator=g, dtype=torch.float64)
    balanced = torch.tensor([[1, 1], [1, 1], [1, 0], [0, 1]], dtype=torch.float64)
    for reduction in ("mean", "paper"):
        assert msc_loss(z, balanced, 0.1, 1.0, reduction=reduction).item() == pytest.approx(
            jaccard_supcon_loss(z, balanced, 0.1, reduction=reduction).item(), rel=1e-10)
    unbalanced = torch.tensor([[1, 1], [1, 0], [1, 0], [0, 1]], dtype=torch.float64)
    assert msc_loss(z, unbalanced, 0.1, 1.0).item() != pytest.approx(
        jaccard_supcon_loss(z, unbalanced, 0.1).item(), rel=1e-6)


def test_label_less_instance_is_finite_and_contributes_zero():
    z, qz, protos = _data(10)
    zz = z.clone().requires_grad_(True)
    p = protos.clone().requires_grad_(True)
    per = msc_per_anchor(z, Y, 0.1, 0.1, protos, qz, QY)
    assert per[5] is None  # row 5 has no label
    loss = msc_loss(zz, Y, 0.1, 0.1, p, qz, QY)
    paper = msc_loss(z, Y, 0.1, 0.1, protos, qz, QY, reduction="paper")
    assert torch.isfinite(loss) and loss.item() == pytest.approx(sum(v for v in per if v is not None) / 6, rel=1e-10)
    assert paper.item() == pytest.approx(loss.item() * 6 / 7, rel=1e-10)  # ℓ = 0 counted in 1/|B|
    loss.backward()
    assert torch.isfinite(zz.grad).all() and torch.isfinite(p.grad).all()
    # every label-less batch: 0, still connected to z
    za = z.clone().requires_grad_(True)
    for fn in (lambda: msc_loss(za, torch.zeros_like(Y), 0.1, 0.1, protos),
               lambda: jaccard_supcon_loss(za, torch.zeros_like(Y), 0.1)):
        out = fn()
        assert out.item() == 0.0
        out.backward()
        assert torch.isfinite(za.grad).all()


def test_label_seen_once_prototype_is_its_only_positive():
    """Instance 0 has label 3 only, instance 1 label 0 only, no queue. With prototypes each
    anchor's single positive is its prototype: ℓ(z_i) = −log(e^{s(i,c)/τ} / D_i) with
    D_i = β e^{s(i,other)/τ} + Σ_c e^{s(i,c)/τ}. Without prototypes nothing is defined: 0."""
    g = torch.Generator().manual_seed(11)
    z = torch.randn(2, 4, generator=g, dtype=torch.float64, requires_grad=True)
    protos = torch.randn(4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[0, 0, 0, 1], [1, 0, 0, 0]], dtype=torch.float64)
    tau, beta = 0.1, 0.1
    zn, cn = [_unit(v.detach()) for v in z], [_unit(v.detach()) for v in protos]
    want = 0.0
    for i, own in ((0, 3), (1, 0)):
        d = beta * math.exp(float(zn[i] @ zn[1 - i]) / tau) + sum(math.exp(float(zn[i] @ c) / tau) for c in cn)
        want += -math.log(math.exp(float(zn[i] @ cn[own]) / tau) / d) / 2
    loss = msc_loss(z, y, tau, beta, protos)
    assert loss.item() == pytest.approx(want, rel=1e-12)
    loss.backward()
    assert z.grad.abs().sum() > 0 and protos.grad[[0, 3]].abs().sum() > 0
    none = msc_loss(z, y, tau, beta)
    assert none.item() == 0.0 and torch.isfinite(torch.autograd.grad(none, z)[0]).all()


def test_label_seen_once_in_a_multilabel_anchor_drops_only_that_term():
    """Without prototypes, label 3 of row 2 has no positive (Y above, no queue): the (2, 3)
    term is 0 and "mean" averages row 2 over its labels 1 and 2 only; "paper" keeps 1/|y_2| = 1/3."""
    z, _, _ = _data(12)
    per_mean = msc_per_anchor(z, Y, 0.1, 0.1)
    per_paper = msc_per_anchor(z, Y, 0.1, 0.1, reduction="paper")
    assert per_paper[2] == pytest.approx(per_mean[2] * 2 / 3, rel=1e-12)
    assert msc_loss(z, Y, 0.1, 0.1).item() == pytest.approx(msc_by_hand(z, Y, 0.1, 0.1), rel=1e-10)


def test_gradients_reach_z_and_prototypes_not_the_queue():
    z, qz, protos = _data(13)
    z.requires_grad_(True), protos.requires_grad_(True), qz.requires_grad_(True)
    for loss in (msc_loss(z, Y, 0.1, 0.1, protos, qz, QY), bqproto_loss(z, Y, protos, 0.1, qz, QY)):
        z.grad = protos.grad = None
        loss.backward()
        assert z.grad.abs().sum() > 0 and protos.grad.abs().sum() > 0
        assert qz.grad is None  # detached inside the loss
    # cosine similarity: rescaling changes nothing
    assert msc_loss(z.detach() * 3, Y, 0.1, 0.1, protos.detach() * 0.5, qz.detach() * 2, QY).item() == \
        pytest.approx(msc_loss(z.detach(), Y, 0.1, 0.1, protos.detach(), qz.detach(), QY).item(), rel=1e-12)


def test_float32_large_logits_are_finite():
    torch.manual_seed(14)
    y = (torch.rand(16, 6) < 0.3).float()
    z = torch.randn(16, 8, requires_grad=True)
    loss = msc_loss(z, y, 0.01, 0.1, torch.randn(6, 8), torch.randn(10, 8), (torch.rand(10, 6) < 0.3).float())
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(z.grad).all()


def test_single_instance_no_candidates():
    z = torch.randn(1, 3, requires_grad=True)
    for out in (msc_loss(z, torch.ones(1, 2), 0.1, 0.1), jaccard_supcon_loss(z, torch.ones(1, 2), 0.1)):
        assert out.item() == 0.0
        out.backward()


def test_bad_arguments():
    z, y = torch.randn(3, 4), torch.ones(3, 2)
    with pytest.raises(ValueError, match="allowed"):
        msc_loss(z, y, 0.1, 0.0)
    with pytest.raises(ValueError, match="allowed"):
        msc_loss(z, y, 0.1, 0.1, reduction="sum")
    with pytest.raises(ValueError, match="allowed"):
        jaccard_supcon_loss(z, y, 0.1, queue_z=torch.randn(2, 4))
    with pytest.raises(ValueError, match="allowed"):
        bqproto_loss(z, y, torch.randn(3, 4), 0.1)
    with pytest.raises(ValueError, match="allowed"):
        jaccard_supcon_loss(z, y, 0.0)


# ---------------------------------------------------------------------------------------------
# BCE, focal, asymmetric (Sec. 4.2.2)
# ---------------------------------------------------------------------------------------------


def _sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def bce_family_by_hand(x, y, gamma_pos, gamma_neg, m) -> float:
    """−1/N Σ_i 1/L Σ_j [y (1−p)^γ+ log p + (1−y) p_m^γ− log(1−p_m)], p_m = max(p − m, 0)."""
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            p = _sig(float(x[i, j]))
            if y[i, j]:
                total += (1 - p) ** gamma_pos * math.log(p)
            else:
                pm = max(p - m, 0.0)
                total += pm ** gamma_neg * math.log(1 - pm)
    return -total / x.numel()


LOGITS = torch.tensor([[2.0, -1.0, 0.3, -3.0], [-0.2, 0.9, -2.5, 4.0], [0.0, -0.6, 1.5, -0.1]], dtype=torch.float64)
TARGETS = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 1]], dtype=torch.float64)


def test_bce_by_hand_and_torch():
    assert bce_loss(LOGITS, TARGETS).item() == pytest.approx(bce_family_by_hand(LOGITS, TARGETS, 0, 0, 0), rel=1e-12)
    assert bce_loss(LOGITS, TARGETS.bool()).item() == pytest.approx(
        torch.nn.functional.binary_cross_entropy_with_logits(LOGITS, TARGETS).item(), rel=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 1.0, 2.0])
def test_focal_by_hand(gamma):
    got = focal_loss(LOGITS, TARGETS, gamma).item()
    assert got == pytest.approx(bce_family_by_hand(LOGITS, TARGETS, gamma, gamma, 0), rel=1e-12)
    if gamma == 0:
        assert got == pytest.approx(bce_loss(LOGITS, TARGETS).item(), rel=1e-12)


@pytest.mark.parametrize("gp,gn,m", [(0.0, 3.0, 0.3), (1.0, 4.0, 0.05), (0.0, 0.0, 0.0), (2.0, 2.0, 0.0)])
def test_asymmetric_by_hand_and_reductions(gp, gn, m):
    got = asymmetric_loss(LOGITS, TARGETS, gp, gn, m).item()
    assert got == pytest.approx(bce_family_by_hand(LOGITS, TARGETS, gp, gn, m), rel=1e-12)
    if gp == gn and m == 0:  # γ+ = γ− = γ, m = 0 is the focal loss; γ = 0 is BCE
        assert got == pytest.approx(focal_loss(LOGITS, TARGETS, gp).item(), rel=1e-12)
    if gp == gn == m == 0:
        assert got == pytest.approx(bce_loss(LOGITS, TARGETS).item(), rel=1e-12)


def test_asymmetric_hard_threshold_discards_easy_negatives():
    """A negative with ŷ ≤ m has ŷ_m = 0: no loss and no gradient; positives are not shifted."""
    x = torch.tensor([[-3.0, -3.0]], requires_grad=True)  # ŷ ≈ 0.047 < 0.3
    loss = asymmetric_loss(x, torch.tensor([[0.0, 1.0]]))
    loss.backward()
    assert x.grad[0, 0] == 0 and x.grad[0, 1] < 0
    assert loss.item() == pytest.approx(-math.log(_sig(-3.0)) / 2, rel=1e-6)


def test_bce_family_stable_for_huge_logits_float32():
    x = torch.tensor([[100.0, -100.0, 80.0, -80.0]], requires_grad=True)
    y = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    for fn in (bce_loss, focal_loss, asymmetric_loss, lambda a, b: asymmetric_loss(a, b, 0.5, 0.5, 0.0),
               lambda a, b: asymmetric_loss(a, b, 0.0, 0.5, 0.3)):
        x.grad = None
        out = fn(x, y)
        out.backward()
        assert torch.isfinite(out) and torch.isfinite(x.grad).all()
    assert bce_loss(x, y).item() == pytest.approx((100 + 100) / 4, rel=1e-6)


def test_bce_family_bad_arguments():
    with pytest.raises(ValueError, match="allowed"):
        bce_loss(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="allowed"):
        asymmetric_loss(torch.zeros(2, 3), torch.zeros(2, 3), clip=1.0)
    with pytest.raises(ValueError, match="allowed"):
        focal_loss(torch.zeros(2, 3), torch.zeros(2, 3), gamma=-1)
