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
* ``lacon_loss`` — Eq. 7: ICL′ + LCL + λ·LER, each part returned for logging; switches
  ``use_icl``/``use_lcl``/``use_ler`` reproduce the ablations of Table 3.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).transpose(-1, -2)


def icl_loss(h: torch.Tensor, label_emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1,
             heads: int = 1) -> torch.Tensor:
    n, d = h.shape
    if d % heads:
        raise ValueError(f"heads={heads} does not divide the representation size {d}; allowed: a divisor of {d}")
    hk = h.view(n, heads, d // heads).transpose(0, 1)                       # [m, N, d/m]
    lk = label_emb.view(label_emb.shape[0], heads, d // heads).transpose(0, 1)  # [m, C, d/m]
    logits = cosine(hk, lk) / temperature                                     # [m, N, C]
    log_prob = logits.log_softmax(-1)
    picked = log_prob.gather(-1, labels.view(1, n, 1).expand(heads, n, 1))
    return -picked.sum() / n  # Eq. 4: −1/N Σ_k Σ_i


def lcl_loss(h: torch.Tensor, label_emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    logits = cosine(label_emb, h) / temperature                               # [C, N]
    classes = torch.arange(label_emb.shape[0], device=h.device)
    positive = labels[None, :] == classes[:, None]                            # A(p) as a mask
    negative = ~positive                                                      # B(p)
    log_den = torch.logsumexp(logits.masked_fill(~negative, float("-inf")), dim=1, keepdim=True)
    valid = positive.any(1) & negative.any(1)                                 # p ∈ P with B(p) ≠ ∅
    log_ratio = torch.where(positive & valid[:, None], logits - torch.where(valid[:, None], log_den, 0.0), 0.0)
    return -log_ratio.sum() / valid.sum().clamp_min(1)


def ler_loss(label_emb: torch.Tensor) -> torch.Tensor:
    c = label_emb.shape[0]
    if c < 2:
        return label_emb.sum() * 0.0
    sim = cosine(label_emb, label_emb)
    off = ~torch.eye(c, dtype=torch.bool, device=label_emb.device)
    return (torch.exp(1.0 + sim[off]) - 1.0).mean()


def lacon_loss(h: torch.Tensor, label_emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.1,
               heads: int = 1, lam: float = 1.0, use_icl: bool = True, use_lcl: bool = True,
               use_ler: bool = True) -> dict[str, torch.Tensor]:
    """Eq. 7. Returns {"loss", "loss/icl", "loss/lcl", "loss/ler"} (disabled parts are 0)."""
    zero = h.sum() * 0.0
    parts = {
        "loss/icl": icl_loss(h, label_emb, labels, temperature, heads) if use_icl else zero,
        "loss/lcl": lcl_loss(h, label_emb, labels, temperature) if use_lcl else zero,
        "loss/ler": ler_loss(label_emb) if use_ler else zero,
    }
    return {"loss": parts["loss/icl"] + parts["loss/lcl"] + lam * parts["loss/ler"], **parts}
