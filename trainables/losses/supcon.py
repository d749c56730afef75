"""Supervised contrastive loss (Khosla et al. 2020, L^sup_out), shared by SupCL-Seq
(supcl_seq.txt Eq. 2), the CE+SCL baseline (Gunel et al. 2021) and the multi-label baseline.

    L = Σ_{i∈I} −1/|P(i)| Σ_{p∈P(i)} log( exp(sim(x_i, x_p)/τ) / Σ_{b∈B(i)} exp(sim(x_i, x_b)/τ) )

with B(i) = I \\ {i} (every other embedding in the batch, all views included) and
P(i) = {p ∈ B(i) : y_p = y_i}. ``sim`` is the inner product of L2-normalised embeddings
(cosine similarity; supcl_seq.txt footnote 2 L2-normalises the pooled embeddings).

Arguments, result and errors: ``supcon_loss``.

Edge cases (defined here, tested): an anchor with no positive (a class seen once, one view)
contributes nothing and is not counted; a batch where no anchor has a positive gives a loss
of 0 that still depends on ``embeddings`` (so autograd and DDP see every parameter used).
"""

from __future__ import annotations

import torch

from trainables.losses.common import cosine, masked_log_softmax, self_mask


def supcon_loss(
    embeddings: torch.Tensor, labels: torch.Tensor, temperature: float = 0.05, reduction: str = "mean"
) -> torch.Tensor:
    """Supervised contrastive loss L^sup_out (Khosla et al. 2020; supcl_seq.txt Eq. 2).

    Args:
        embeddings: ``[M, d]`` — M = batch × views; normalised here, so raw vectors are fine.
        labels: ``[M]`` integer class of each embedding (views carry their anchor's label).
        temperature: τ > 0 (SupCL-Seq default 0.05; Gunel et al. grid 0.1, 0.3, 0.5, 0.7, 0.9).
        reduction: ``"mean"`` (default) divides Eq. 2's sum by the number of anchors that have at
            least one positive, so the scale does not grow with the batch and a λ weighting
            against cross-entropy means the same at batch 8 and 96 (as in Khosla et al.'s
            reference code and Gunel et al.'s per-batch normalisation); ``"sum"`` is Eq. 2 verbatim.

    Returns:
        A scalar: the loss, 0 (still connected to ``embeddings``) where no anchor has a positive.

    Raises:
        ValueError: ``reduction`` is neither ``"mean"`` nor ``"sum"``.
    """
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction {reduction!r}; allowed: 'mean', 'sum'")
    logits = cosine(embeddings) / temperature
    others = ~self_mask(len(logits), device=logits.device)
    # log-softmax over B(i) = everything but i: mask i out of the denominator
    log_prob = masked_log_softmax(logits, others, dim=1)
    positives = (labels[:, None] == labels[None, :]) & others
    n_pos = positives.sum(1)
    has_pos = n_pos > 0
    # -1/|P(i)| Σ_p log_prob[i, p]; zero where P(i) is empty (the where avoids 0·(-inf))
    per_anchor = -torch.where(positives, log_prob, torch.zeros_like(log_prob)).sum(1) / n_pos.clamp_min(1)
    total = (per_anchor * has_pos).sum()
    if reduction == "sum":
        return total
    return total / has_pos.sum().clamp_min(1)
