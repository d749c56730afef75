"""LaCon's three objectives (lacon.txt Sec. 2.2–2.4, Eq. 3–7), as pure functions of the
instance representations H [N, d], the label embeddings L [C, d] and the labels y [N].
``sim`` is cosine similarity throughout (Sec. 2.2), so inputs need not be normalised.

* ``icl_loss``  — Eq. 3, and with ``heads = m > 1`` the multi-head ICL′ of Eq. 4: H and L are
  split into m slices of d/m dimensions and the per-head losses are summed (Eq. 4 sums over
  k; it does not average). m must divide d.
* ``lcl_loss``  — Eq. 5 exactly as written: the anchors are the labels present in the batch
  (P), the positives of label p are its instances A(p), and the denominator runs over the
  negatives B(p) only (unlike InfoNCE it does not contain the positive itself). A label whose
  B(p) is empty (every instance in the batch has that label) would divide by an empty sum
  (log of +∞): such anchors are left out and |P| counts only anchors with negatives, so a
  batch holding one class gives LCL = 0. Defined here, tested in tests/test_loss_lacon.py.
* ``ler_loss``  — Eq. 6: the mean over ordered pairs i ≠ j of all C label embeddings of
  exp(1 + sim(L_i, L_j)) − 1, in [0, e² − 1].
* ``lacon_loss`` — Eq. 7, L = L′_ICL + L_LCL + λ·L_LER, as the weighted sum
  w_ICL·L′_ICL + w_LCL·L_LCL + w_LER·L_LER (Eq. 7: w_ICL = w_LCL = 1, w_LER = λ), each part
  returned unweighted for logging. A weight of 0 removes its term (it is not computed and reads
  0): the ablations of Table 3's second block ("w/o L_ICL", "w/o L_LCL", "w/o L_LER") and of
  Table 6 are weights 0.

Cosine logits and the masked log-sum-exp come from ``trainables.losses.common``.
"""

from __future__ import annotations

import torch

from trainables.losses.common import cosine, masked_logsumexp, self_mask


def icl_loss(
    h: torch.Tensor, label_emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1, heads: int = 1
) -> torch.Tensor:
    n, d = h.shape
    if d % heads:
        raise ValueError(f"heads={heads} does not divide the representation size {d}; allowed: a divisor of {d}")
    hk = h.view(n, heads, d // heads).transpose(0, 1)  # [m, N, d/m]
    lk = label_emb.view(label_emb.shape[0], heads, d // heads).transpose(0, 1)  # [m, C, d/m]
    logits = cosine(hk, lk) / temperature  # [m, N, C]
    log_prob = logits.log_softmax(-1)
    picked = log_prob.gather(-1, labels.view(1, n, 1).expand(heads, n, 1))
    return -picked.sum() / n  # Eq. 4: −1/N Σ_k Σ_i


def lcl_loss(h: torch.Tensor, label_emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    logits = cosine(label_emb, h) / temperature  # [C, N]
    classes = torch.arange(label_emb.shape[0], device=h.device)
    positive = labels[None, :] == classes[:, None]  # A(p) as a mask
    negative = ~positive  # B(p)
    log_den = masked_logsumexp(logits, negative, dim=1, keepdim=True)
    valid = positive.any(1) & negative.any(1)  # p ∈ P with B(p) ≠ ∅
    log_ratio = torch.where(positive & valid[:, None], logits - torch.where(valid[:, None], log_den, 0.0), 0.0)
    return -log_ratio.sum() / valid.sum().clamp_min(1)


def ler_loss(label_emb: torch.Tensor) -> torch.Tensor:
    c = label_emb.shape[0]
    if c < 2:
        return label_emb.sum() * 0.0
    sim = cosine(label_emb, label_emb)
    off = ~self_mask(c, device=label_emb.device)
    return (torch.exp(1.0 + sim[off]) - 1.0).mean()


def lacon_loss(
    h: torch.Tensor,
    label_emb: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 0.1,
    heads: int = 1,
    icl_weight: float = 1.0,
    lcl_weight: float = 1.0,
    ler_weight: float = 1.0,
) -> dict[str, torch.Tensor]:
    """Eq. 7 with a weight per term: ``icl_weight``·ICL′ + ``lcl_weight``·LCL + ``ler_weight``·LER
    (the paper: 1, 1 and λ). Returns {"loss", "loss/icl", "loss/lcl", "loss/ler"}, the parts
    unweighted; a part whose weight is 0 is not computed and reads 0 (Table 3's ablations). The
    loss stays connected to ``h`` whatever the weights (autograd and DDP see it used)."""
    zero = h.sum() * 0.0
    parts = {
        "loss/icl": icl_loss(h, label_emb, labels, temperature, heads) if icl_weight else zero,
        "loss/lcl": lcl_loss(h, label_emb, labels, temperature) if lcl_weight else zero,
        "loss/ler": ler_loss(label_emb) if ler_weight else zero,
    }
    loss = icl_weight * parts["loss/icl"] + lcl_weight * parts["loss/lcl"] + ler_weight * parts["loss/ler"]
    return {"loss": loss, **parts}
