"""VaSCL: neighbourhood-constrained contrastive learning with virtual augmentation
(vascl.txt Sec. 3, Eq. 1–6; App. A), as pure functions of the pooled sentence representations
e = f(x) and a contrastive head h.

Notation: M instances per batch, e_i ∈ R^d the encoder output (pooled, App. A footnote 1), h the
contrastive head (App. A: a two-layer MLP of sizes d × d and d × 128, built and owned by the
caller), z_i = h(e_i), sim = cosine similarity, τ the temperature.

* ``knn_neighbours``  — N(i): the K rows of e most cosine-similar to e_i among the OTHER M − 1
  instances (Sec. 3.2, display above Eq. 2). Discrete, so computed without gradient.
* ``neighbourhood_nce`` — the per-instance log-ratio of Eq. 2 for given anchor, positive and an
  explicit set of negatives per anchor:
      ℓ(a, p; {n}) = −log( e^{s(a,p)/τ} / ( e^{s(a,p)/τ} + Σ_n e^{s(a,n)/τ} ) ).
  Eq. 2 uses it with negatives {z_k}_{k∈N(i)}; Eq. 5 with the augmented neighbourhood
  N_A(i) = {k, k*}_{k∈N(i)}.
* ``virtual_augmentation`` — δ* of Eq. 3: δ_i* = argmax_{‖δ_i‖₂ ≤ Δ} ℓ_N(i)(h(e_i + δ_i), z_i),
  found by projected normalised gradient ascent from isotropic Gaussian noise (footnote 2).
* ``vascl_loss`` — Eq. 6: the symmetric instance term (Eq. 1 both ways, ``info_nce``) plus the
  symmetric neighbourhood term (Eq. 5) on e* = e + δ* (Eq. 4):
      L = 1/(2M) Σ_i [ ℓ_B(z_i, z_i') + ℓ_B(z_i', z_i) + ℓ_NA(i)(z_i, z_i*) + ℓ_NA(i)(z_i*, z_i) ].

Hyper-parameters (App. A): τ = 0.05 (as SimCSE); Δ = 15 for DistilRoBERTa and RoBERTa-base,
30 for RoBERTa-large; batch size 1024. The paper does not state K; the default K = 16 is the
``--topk`` default of the public VaSCL code. The learning rates (5e-4 for the head, 5e-6 for
the backbone, Adam, constant) and the head's architecture are the caller's business.

Edge cases (defined here, tested in tests/test_loss_vascl.py):
* K must lie in [1, M − 1]; otherwise ``knn_neighbours`` (hence ``vascl_loss``) raises
  ValueError — so VaSCL needs M ≥ 2, and a last batch smaller than K + 1 must be dropped or K
  lowered by the caller (no silent clamping: the neighbourhood size is a hyper-parameter).
* Duplicate rows of e (the same sentence twice in a batch) are legitimate neighbours of each
  other; an instance is never its own neighbour.
* A row of δ whose ascent gradient is exactly 0 (e.g. a dead ReLU head) keeps its δ.
* The head is called as given (no train/eval switching): a head with dropout or running
  statistics would see the extra forward passes of the ascent. App. A's MLP has neither.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from trainables.losses.common import cosine, self_mask
from trainables.losses.infonce import info_nce

Head = Callable[[torch.Tensor], torch.Tensor]


def knn_neighbours(e: torch.Tensor, k: int) -> torch.Tensor:
    """N(i) for every i: ``[M, k]`` indices of the k rows of ``e`` ([M, d]) with the highest
    cosine similarity to e_i, excluding i itself (its own similarity is masked to −∞, so even a
    duplicate row of i is preferred to i). Order within a row: most similar first; ties are
    broken by ``torch.topk``. No gradient. Raises ValueError unless 1 ≤ k ≤ M − 1."""
    m = e.shape[0]
    if not 1 <= k <= m - 1:
        raise ValueError(f"K={k} must be in [1, M−1] for a batch of M={m} (N(i) holds K of the other M−1 instances)")
    with torch.no_grad():
        sim = cosine(e.detach()).masked_fill(self_mask(m, device=e.device), float("-inf"))
        return sim.topk(k, dim=1).indices


def neighbourhood_nce(
    anchor: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Per-instance Eq. 2: ``[M]`` of −log( e^{s(a_i,p_i)/τ} / (e^{s(a_i,p_i)/τ} + Σ_n e^{s(a_i,n)/τ}) )
    for anchor ``[M, d']``, positive ``[M, d']`` and negatives ``[M, Kn, d']`` (row i's own
    negatives), s = cosine. Kn = 0 gives 0 (the positive alone), still in the graph."""
    a = F.normalize(anchor, dim=-1)
    pos = (a * F.normalize(positive, dim=-1)).sum(-1, keepdim=True) / temperature  # [M, 1]
    neg = torch.einsum("md,mkd->mk", a, F.normalize(negatives, dim=-1)) / temperature  # [M, Kn]
    return torch.logsumexp(torch.cat([pos, neg], dim=1), dim=1) - pos.squeeze(1)


def virtual_augmentation(
    e: torch.Tensor,
    neighbours: torch.Tensor,
    head: Head,
    temperature: float,
    delta: float,
    steps: int = 1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """δ* of Eq. 3, ``[M, d]``, detached, every row of L2 norm Δ (``delta``).

    Start: isotropic Gaussian noise (footnote 2), each row rescaled to norm Δ; drawn with
    ``torch.randn(generator=generator)`` on the generator's device, so a seeded generator makes
    the result deterministic. Then ``steps`` times, gradient ASCENT on
    Σ_i ℓ_N(i)(z_i^δ, z_i) (Eq. 2) with anchor z_i^δ = h(e_i + δ_i), positive z_i = h(e_i) and
    negatives z_k = h(e_k), k ∈ N(i) (``neighbours``, [M, K]). e and the z's are constants: only
    δ moves. Since the head acts row-wise, row i of the summed loss's gradient is ∂ℓ_N(i)/∂δ_i,
    so one vectorised backward gives every row its own ascent direction. Step per row:

        δ_i ← δ_i + Δ · g_i/‖g_i‖,   then   δ_i ← Δ · δ_i/‖δ_i‖.

    Eq. 3 constrains ‖δ_i‖₂ ≤ Δ; we project onto the sphere ‖δ_i‖₂ = Δ rather than into the
    ball, as the issue asks: the maximiser of an ascent problem sits on the boundary unless the
    loss peaks inside the ball, and a fixed-norm δ makes Δ the augmentation *strength* App. A
    tunes (15 / 30), independent of the gradient's magnitude. To first order the step never
    decreases ℓ_N(i) (the new direction normalise(δ̂_i + ĝ_i) has a larger inner product with g_i
    than δ̂_i unless they coincide). A row with g_i = 0 (or, measure-zero, δ_i + Δĝ_i = 0) keeps
    its δ_i. ``steps = 0`` returns the random start.

    Gradients are taken with ``torch.autograd.grad`` w.r.t. δ only (no ``.grad`` is left on the
    head's parameters) inside ``torch.enable_grad()``, so the function works inside
    ``torch.no_grad()`` and in train or eval mode alike.
    """
    if steps < 0:
        raise ValueError(f"steps={steps}; allowed: an integer ≥ 0")
    e = e.detach()
    device = generator.device if generator is not None else e.device
    noise = torch.randn(e.shape, generator=generator, dtype=e.dtype, device=device).to(e.device)
    d = delta * F.normalize(noise, dim=-1)
    if steps == 0:
        return d
    with torch.enable_grad():
        z = head(e).detach()
        z_neighbours = z[neighbours]  # [M, K, d']
        for _ in range(steps):
            d = d.detach().requires_grad_(True)
            objective = neighbourhood_nce(head(e + d), z, z_neighbours, temperature).sum()
            (g,) = torch.autograd.grad(objective, d)
            d = d.detach()
            g_norm = g.norm(dim=-1, keepdim=True)
            stepped = d + delta * g / g_norm.clamp_min(torch.finfo(g.dtype).tiny)
            s_norm = stepped.norm(dim=-1, keepdim=True)
            projected = delta * stepped / s_norm.clamp_min(torch.finfo(g.dtype).tiny)
            d = torch.where((g_norm > 0) & (s_norm > 0), projected, d)
    return d.detach()


def vascl_loss(
    e: torch.Tensor,
    e_prime: torch.Tensor,
    head: Head,
    temperature: float = 0.05,
    k: int = 16,
    delta: float = 15.0,
    steps: int = 1,
    neighbour_grad: bool = True,
    generator: torch.Generator | None = None,
    clean_grad: bool = True,
) -> dict[str, torch.Tensor]:
    """Eq. 6 for one batch.

    Args:
        e, e_prime: ``[M, d]`` pooled representations of the same M sentences from two forward
            passes with independent dropout (the positive pair of Eq. 1).
        head: the contrastive head h, ``[*, d] → [*, d']``.
        temperature: τ of Eq. 1, 2 and 5 (0.05).
        k: K, the neighbourhood size, 1 ≤ K ≤ M − 1 (default 16, see the module docstring).
        delta: Δ of Eq. 3 (App. A: 15 base encoders, 30 large).
        steps: ascent steps for δ* (``virtual_augmentation``; 1 by default).
        neighbour_grad: whether the neighbourhood term's gradient reaches the encoder through e
            (see below).
        generator: seeds the Gaussian start of δ.
        clean_grad: whether the neighbourhood term differentiates through the clean
            representations z_i, z_k as well as through z_i*, z_k* (see below).

    Computation: z = h(e), z' = h(e'); instance = ``info_nce(z, z', τ)`` (Eq. 1 both ways,
    already 1/(2M) Σ); N(i) = ``knn_neighbours(e, K)``; δ* = ``virtual_augmentation``;
    e* = e + δ* (Eq. 4), z* = h(e*); negatives of i = {z_k, z_k*}_{k∈N(i)} (N_A(i), 2K of them,
    each neighbour's augmentation found in its own neighbourhood); neighbourhood =
    1/(2M) Σ_i [ℓ_NA(i)(z_i, z_i*) + ℓ_NA(i)(z_i*, z_i)] (Eq. 5, anchor and positive swapped, the
    same negatives); loss = instance + neighbourhood (Eq. 6).

    Returns ``{"loss", "instance", "neighbourhood"}``, the two parts already divided by 2M so
    that they sum to ``loss``.

    ``neighbour_grad`` (default True): Eq. 6 is minimised over all parameters, and
    z_i* = h(e_i + δ_i*) depends on the encoder through e_i = f(x_i) just as z_i does; nothing
    in Sec. 3 stops that gradient, and the paper's analysis (Sec. 4: a more dispersed
    representation space *of the encoder*) relies on the neighbourhood term shaping f, not only
    h. So by default the gradient reaches the encoder through e (in z_i, z_k, z_i*, z_k*). δ* itself
    is a constant (adversarial-training convention: the argmax is not differentiated through),
    and N(i) is discrete. With False, e is detached inside the neighbourhood term: only the head
    learns from it and the encoder sees the instance term alone — an ablation switch, not the
    paper's method.

    ``clean_grad`` (default True, the paper): Eq. 5 is ℓ_NA(i)(z_i*, z_i) + ℓ_NA(i)(z_i, z_i*)
    with z_i = h(e_i) the same trainable quantity as in Eq. 1, and Eq. 6 sums both into one
    objective, so the neighbourhood term differentiates through the clean z_i, z_k as well as
    through z_i*, z_k*. The authors' public code computes the clean representations of this
    term without gradient, so only the augmented side z* carries it; ``clean_grad=False``
    reproduces that (z_i and z_k enter as constants: the same loss value, a different
    gradient). The paper's text is the default because it is what the equations say and the
    code's choice is not discussed there; the switch is one ``detach``.
    """
    if e.shape != e_prime.shape or e.ndim != 2:
        raise ValueError(f"e {tuple(e.shape)} and e_prime {tuple(e_prime.shape)} must both be [M, d]")
    m = e.shape[0]
    z = head(e)
    instance = info_nce(z, head(e_prime), temperature)
    neighbours = knn_neighbours(e, k)  # [M, K]
    d_star = virtual_augmentation(e, neighbours, head, temperature, delta, steps, generator)
    e_n = e if neighbour_grad else e.detach()
    z_n = z if neighbour_grad else head(e_n)
    if not clean_grad:  # the authors' code: clean z as constants in the neighbourhood term
        z_n = z_n.detach()
    z_star = head(e_n + d_star)  # Eq. 4 through h
    negatives = torch.cat([z_n[neighbours], z_star[neighbours]], dim=1)  # N_A(i): [M, 2K, d']
    both_ways = neighbourhood_nce(z_n, z_star, negatives, temperature) + neighbourhood_nce(
        z_star, z_n, negatives, temperature
    )
    neighbourhood = both_ways.sum() / (2 * m)
    return {"loss": instance + neighbourhood, "instance": instance, "neighbourhood": neighbourhood}
