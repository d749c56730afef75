"""Symmetric instance-discrimination loss (InfoNCE / NT-Xent) of vascl.txt Eq. 1, used both
ways as in Eq. 6: the SimCSE baseline's whole loss and VaSCL's instance term.

With a batch B = {i, i'}_{i=1}^M of 2M embeddings (z_i and z_i' two views of instance i, e.g.
two forward passes with different dropout masks) and sim = cosine similarity:

    ℓ_B(z_i, z_i') = −log( e^{s(z_i,z_i')/τ} / ( e^{s(z_i,z_i')/τ} + Σ_{j∈B∖{i,i'}} e^{s(z_i,z_j)/τ} ) )  (Eq. 1)

    L = 1/(2M) Σ_i [ ℓ_B(z_i, z_i') + ℓ_B(z_i', z_i) ]                       (the instance half of Eq. 6)

B∖{i,i'} holds BOTH views of every other instance, so each anchor has 2M − 2 negatives and its
denominator runs over 2M − 1 candidates (vascl.txt below Eq. 1: "among all 2M − 1 candidates").
This is Eq. 1 as written and what we compute. Note that SimCSE's public implementation
(Gao et al. 2021) builds an M × M similarity matrix between first and second views only, so
its anchor z_i sees as negatives only the other instances' second views z_j' (M − 1 of them)
and never the other first views; we follow the paper's Eq. 1 (2M − 2), not that code.

Computed as a masked log-softmax over the 2M × 2M cosine logits (self-similarity masked out of
every denominator, as in ``supcon_loss``), with ``logsumexp``: stable in float32 at τ = 0.05
(logits lie in [−1/τ, 1/τ] = [−20, 20]).

Arguments, result and errors: ``info_nce``.

Edge cases (defined here, tested in tests/test_loss_infonce.py): M = 1 has no negatives, the
denominator holds the positive alone and each ℓ_B is −log 1 = 0 exactly; the returned 0 still
depends on ``z`` and ``z_prime`` in the autograd graph (zero gradient), so autograd and DDP see
every parameter used. Zero rows normalise to zero (cosine 0 with everything), no NaN.

Relations: ``supcon_loss`` with labels = instance ids on cat([z, z']) computes the same value
(one positive per anchor); ``trainables.losses.vascl.neighbourhood_nce`` is the same log-ratio
with an explicit per-anchor set of negatives (Eq. 2, 5).
"""

from __future__ import annotations

import torch

from trainables.losses.common import cosine, masked_logsumexp, self_mask

__all__ = ["info_nce"]


def info_nce(z: torch.Tensor, z_prime: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """Symmetric InfoNCE / NT-Xent of two views (vascl.txt Eq. 1, both ways as in Eq. 6).

    Args:
        z: ``[M, d]`` first views (raw vectors; normalised here, cosine is scale invariant).
        z_prime: ``[M, d]`` second views, row i being the positive of row i of ``z``.
        temperature: τ > 0; 0.05 is the SimCSE/VaSCL default.

    Returns:
        A scalar: the mean of the 2M directional losses, i.e. 1/(2M) Σ_i of both directions
        (0, still connected to ``z`` and ``z_prime``, for M = 1).

    Raises:
        ValueError: ``z`` and ``z_prime`` are not both ``[M, d]`` of the same shape.
    """
    if z.ndim != 2 or z.shape != z_prime.shape:
        raise ValueError(f"z {tuple(z.shape)} and z_prime {tuple(z_prime.shape)} must both be [M, d]")
    m = z.shape[0]
    logits = cosine(torch.cat([z, z_prime], dim=0)) / temperature  # [2M, 2M]: rows i, then i'
    # denominator of row a: every column but a itself = its positive + the 2M − 2 negatives
    log_denominator = masked_logsumexp(logits, ~self_mask(2 * m, device=z.device), dim=1)
    positive = (torch.arange(2 * m, device=z.device) + m) % (2 * m)  # i ↔ i'
    log_numerator = logits.gather(1, positive[:, None]).squeeze(1)
    return (log_denominator - log_numerator).mean()
