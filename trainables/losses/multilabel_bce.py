"""BCE-based multi-label losses, the "standard" baselines of abalone_multilabel.txt Sec. 4.2.2:
L_BCE, the focal loss L_FCL (Lin et al. 2017) and the asymmetric loss L_ASY (Ridnik et al. 2021).

All three take ``logits`` ``[B, L]`` (one independent sigmoid per label, ŷ = σ(logits)) and the
multi-hot targets ``y`` ``[B, L]`` (float or bool), and share one reduction: the MEAN over all
B·L entries, i.e. the paper's −1/N Σ_i 1/L Σ_j (Sec. 4.2.2). (Ridnik et al.'s reference code
sums instead; multiply by B·L to compare.) Every log is taken in log-sigmoid form, so the
losses stay finite and exact for logits of any size (no ε clamping):
log ŷ = logσ(x), log(1 − ŷ) = logσ(−x).

* ``bce_loss``   — −[y log ŷ + (1 − y) log(1 − ŷ)].
* ``focal_loss`` — −[y (1 − ŷ)^γ log ŷ + (1 − y) ŷ^γ log(1 − ŷ)], the sigmoid focal loss
  exactly as printed in Sec. 4.2.2 (no α class weight: the paper's formula has none);
  γ = 2 in all the paper's experiments (App. A). γ = 0 gives ``bce_loss``.
* ``asymmetric_loss`` — −[y (1 − ŷ)^{γ+} log ŷ + (1 − y) ŷ_m^{γ−} log(1 − ŷ_m)] with the
  shifted probability ŷ_m = max(ŷ − m, 0) on the NEGATIVES only (Ridnik et al. Eq. 3–4:
  "hard-threshold" m discards easy negatives, positives keep ŷ). The printed L_ASY of
  Sec. 4.2.2 garbles the brackets and writes s = max(ŷ − m, 0) for the positive term too; we
  follow Ridnik et al., which the paper cites for it. App. A: γ+ = 0, γ− = 3, m = 0.3.
  log(1 − ŷ_m) = min(log(σ(−x) + m), 0), computed as logaddexp(logσ(−x), log m) (stable).
  With γ+ = γ− = 0 and m = 0 it is ``bce_loss``; with γ+ = γ− = γ and m = 0, ``focal_loss``.
  The focusing weights are differentiated like the rest (no detach).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _check(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if logits.shape != y.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and y {tuple(y.shape)}; allowed: the same [B, L] shape")
    return y.to(logits.dtype)


def _pow(base: torch.Tensor, gamma: float) -> torch.Tensor | float:
    """base^γ for base ≥ 0. γ = 0 gives exactly 1; a zero base gives 0 with a zero gradient
    (for 0 < γ < 1 the plain pow would put ∞·0 = NaN into the backward pass)."""
    if gamma == 0:
        return 1.0
    positive = base > 0
    return torch.where(positive, torch.where(positive, base, 1.0).pow(gamma), 0.0)


def bce_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """L_BCE (Sec. 4.2.2): mean over the B·L entries of −[y logσ(x) + (1 − y) logσ(−x)]."""
    y = _check(logits, y)
    return -(y * F.logsigmoid(logits) + (1 - y) * F.logsigmoid(-logits)).mean()


def focal_loss(logits: torch.Tensor, y: torch.Tensor, gamma: float = 2.0) -> torch.Tensor:
    """L_FCL (Sec. 4.2.2; Lin et al. 2017), sigmoid focal loss with focusing γ ≥ 0, no α.

    Mean over the B·L entries of −[y (1 − ŷ)^γ log ŷ + (1 − y) ŷ^γ log(1 − ŷ)], ŷ = σ(x).
    """
    if gamma < 0:
        raise ValueError(f"gamma={gamma}; allowed: γ ≥ 0")
    y = _check(logits, y)
    p = torch.sigmoid(logits)
    pos = _pow(1 - p, gamma) * F.logsigmoid(logits)
    neg = _pow(p, gamma) * F.logsigmoid(-logits)
    return -(y * pos + (1 - y) * neg).mean()


def asymmetric_loss(
    logits: torch.Tensor, y: torch.Tensor, gamma_pos: float = 0.0, gamma_neg: float = 3.0, clip: float = 0.3
) -> torch.Tensor:
    """L_ASY (Sec. 4.2.2; Ridnik et al. 2021): asymmetric focusing plus probability shifting.

    Mean over the B·L entries of −[y (1 − ŷ)^{γ+} log ŷ + (1 − y) ŷ_m^{γ−} log(1 − ŷ_m)],
    ŷ_m = max(ŷ − m, 0), ``clip`` = m ∈ [0, 1). Defaults are App. A's γ+ = 0, γ− = 3, m = 0.3.
    """
    if gamma_pos < 0 or gamma_neg < 0 or not 0 <= clip < 1:
        raise ValueError(
            f"gamma_pos={gamma_pos}, gamma_neg={gamma_neg}, clip={clip}; allowed: γ+ ≥ 0, γ− ≥ 0, 0 ≤ m < 1"
        )
    y = _check(logits, y)
    p = torch.sigmoid(logits)
    pos = _pow(1 - p, gamma_pos) * F.logsigmoid(logits)
    if clip > 0:
        p_m = (p - clip).clamp_min(0)
        # 1 − ŷ_m = min(σ(−x) + m, 1)
        log_not_p_m = torch.logaddexp(
            F.logsigmoid(-logits), torch.tensor(math.log(clip), dtype=logits.dtype, device=logits.device)
        ).clamp_max(0)
    else:
        p_m, log_not_p_m = p, F.logsigmoid(-logits)
    neg = _pow(p_m, gamma_neg) * log_not_p_m
    return -(y * pos + (1 - y) * neg).mean()
