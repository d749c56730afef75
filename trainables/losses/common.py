"""The pieces the contrastive losses of this package share, each one computation written once
(as pytorch-metric-learning keeps its reductions in one place):

* ``cosine`` — sim(a_i, b_j) = a_i·b_j / (‖a_i‖ ‖b_j‖) for every row pair, the similarity every
  paper here uses (lacon.txt Sec. 2.2, vascl.txt Eq. 1, supcl_seq.txt footnote 2, scl_moo.txt
  Sec. 2.2); the losses divide it by τ. Zero rows normalise to zero (cosine 0, no NaN).
* ``self_mask`` — True on the diagonal (i, i): an anchor against itself, left out of its own
  denominator (and of its positives).
* ``masked_logsumexp`` — log Σ_{j kept} exp(x_ij) along a row: the denominator of an InfoNCE
  or supervised contrastive log-ratio over a subset of the candidates, or a log-mean-exp's sum
  (scl_moo.txt Eq. 2–3).
* ``masked_log_softmax`` — x_ij − log Σ_{k kept} w_k exp(x_ik) for the kept columns (−∞ on the
  others), with optional log-weights w of the denominator's terms (abalone_multilabel.txt
  Eq. 1's g).

Pure functions of tensors; what they return for a row with nothing kept is stated on each.

May import: torch; nothing of ``trainables``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cosine(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """``[..., n, m]`` cosine similarities of the rows of ``a`` ``[..., n, d]`` and ``b``
    ``[..., m, d]`` (batch dimensions broadcast). ``b=None``: ``a`` against itself, normalised once."""
    a = F.normalize(a, dim=-1)
    b = a if b is None else F.normalize(b, dim=-1)
    return a @ b.transpose(-1, -2)


def self_mask(rows: int, cols: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """``[rows, cols]`` booleans, True at (i, i): where the first ``rows`` candidates are the anchors
    themselves (``cols`` defaults to ``rows``: the square identity)."""
    cols = rows if cols is None else cols
    return torch.arange(rows, device=device)[:, None] == torch.arange(cols, device=device)[None, :]


def masked_logsumexp(
    logits: torch.Tensor, keep: torch.Tensor, dim: int = -1, keepdim: bool = False, finite_empty: bool = False
) -> torch.Tensor:
    """log Σ_{j: keep_j} exp(logits_j) along ``dim``.

    A row with nothing kept gives −∞ (its gradient reaches no entry: every one is masked), or
    with ``finite_empty`` the logsumexp of a row of zeros instead (finite in value and backward;
    a placeholder the caller must discard)."""
    masked = logits.masked_fill(~keep, float("-inf"))
    if finite_empty:
        masked = torch.where(keep.any(dim, keepdim=True), masked, torch.zeros_like(logits))
    return torch.logsumexp(masked, dim=dim, keepdim=keepdim)


def masked_log_softmax(
    logits: torch.Tensor, keep: torch.Tensor, log_weights: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """log( exp(x_ij) / Σ_{k: keep_ik} w_k exp(x_ik) ) for every kept column j, −∞ elsewhere;
    ``log_weights`` (log w, broadcast against ``logits``) weighs the denominator's terms only
    (None: w ≡ 1, the plain log-softmax over the kept columns)."""
    logits = logits.masked_fill(~keep, float("-inf"))
    denominator = logits if log_weights is None else logits + log_weights
    return logits - torch.logsumexp(denominator, dim=dim, keepdim=True)
