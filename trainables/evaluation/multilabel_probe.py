"""Linear evaluation of a multi-label representation (abalone_multilabel.txt App. A, App. B):
one logistic regression per label on frozen features, a small (lr, weight decay) grid and
restarts, chosen per label on the validation split (``fit_linear_probe``).

Linear evaluation (stage 2, ``second_stage``), "As in SupCon the projection head is discarded to
evaluate the representation space" (App. A) and App. B "Discard the projection head h ...
f_θ.freeze() ∘ p_θ̃": the features are the frozen pooled encoder outputs f(x) (not z). "For each
label we trained logistics regression with learning rate in the set {1, 1e−1, 1e−2} and weight
decay in {1, 1e−1, 1e−2, 1e−4, 1e−6} for a number of 40 epochs. To eliminate sensitivity to
initialization, we trained 3 logistic regressions per label, and the output was computed as the
mean probability. For each label individually, the best parameters for the micro-F1 are kept."
(App. A), with AdamW (Sec. 4.3). ``fit_linear_probe`` trains all grid points × restarts × labels
at once on the features (computed once per epoch and reused across the grid), each logistic
regression with its own AdamW state (the update is elementwise, so one batched update is L·G·R
independent optimisers); bias without weight decay (App. A). Selection on the validation split:
per label (``probe_select: label``, the paper: the grid point with the best F1 of that label,
ties to the lower validation BCE), or one grid point for all labels by validation micro-F1
(``joint``). The chosen weights are buffers ``probe_weight`` [R, L, d] / ``probe_bias`` [R, L]
(saved with every checkpoint, invisible to the stage-1 optimiser); the score of label j is the
mean over the R restarts of σ(w·f(x) + b). Because the grid point is chosen on the validation
split, ``val/*`` of these losses is optimistic (as in the paper, which selects on validation and
reports test).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


def fit_linear_probe(
    x_train,
    y_train,
    x_val,
    y_val,
    lrs,
    weight_decays,
    epochs: int = 40,
    batch_size: int = 32,
    restarts: int = 3,
    threshold: float = 0.5,
    select: str = "label",
    seed: int = 0,
    device: torch.device | str = "cpu",
    betas=(0.9, 0.999),
    eps: float = 1e-8,
) -> dict:
    """One logistic regression per label, per (lr, weight decay) grid point and per restart,
    trained with AdamW on frozen features, then chosen on the validation split (App. A).

    Every regression has its own parameters and AdamW moments; they are updated together in one
    batched (elementwise) step, which is the same as training each alone: the BCE of one label
    and grid point depends only on its own weights. Weight decay is decoupled (AdamW:
    w ← w − lr·wd·w) and not applied to the bias. Init: U(−1/√d, 1/√d) like ``nn.Linear``,
    from ``torch.Generator`` seeded with ``seed`` (the row order of each epoch too), so the fit is
    a function of its inputs (the same on every DDP rank).

    Selection: a label's score is the mean probability of its ``restarts`` regressions;
    ``select="label"`` takes, for each label, the grid point with the best validation F1 of that
    label, ``"joint"`` one grid point for all labels with the best validation micro-F1; ties go
    to the lower validation BCE, then to the earlier grid point (lrs outer, weight decays inner).

    Returns ``weight`` [R, L, d], ``bias`` [R, L], ``grid`` [(lr, wd)], ``choice`` (a grid index
    per label), ``val_micro_f1`` of the chosen probe, ``train_loss`` (its mean BCE on train).
    """
    if select not in ("label", "joint"):
        raise ValueError(f"select={select!r}; allowed: 'label' or 'joint'")
    grid = [(float(lr), float(wd)) for lr in lrs for wd in weight_decays]
    if not grid:
        raise ValueError("empty probe grid; allowed: at least one learning rate and one weight decay")
    x = torch.as_tensor(np.asarray(x_train), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.asarray(y_train), dtype=torch.float32, device=device)
    n, d = x.shape
    n_labels, g, r = y.shape[1], len(grid), restarts
    p = g * r * n_labels  # flat index = ((grid · R) + restart) · L + label
    gen = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / math.sqrt(d)
    w = ((torch.rand(p, d, generator=gen) * 2 - 1) * bound).to(device)
    b = ((torch.rand(p, generator=gen) * 2 - 1) * bound).to(device)
    lr = torch.tensor([lr for lr, _ in grid], device=device).repeat_interleave(r * n_labels)  # [P]
    wd = torch.tensor([wd for _, wd in grid], device=device).repeat_interleave(r * n_labels)
    label_of = torch.arange(p, device=device) % n_labels  # [P]
    state = [torch.zeros_like(w), torch.zeros_like(w), torch.zeros_like(b), torch.zeros_like(b)]
    step = 0
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen).to(device)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            xb, yb = x[idx], y[idx][:, label_of]  # [B, d], [B, P]
            err = (torch.sigmoid(xb @ w.T + b) - yb) / len(idx)  # ∂(mean BCE)/∂logit
            step += 1
            _adamw(w, err.T @ xb, state[0], state[1], lr[:, None], wd[:, None], step, betas, eps)
            _adamw(b, err.sum(0), state[2], state[3], lr, None, step, betas, eps)

    def mean_prob(features: torch.Tensor) -> torch.Tensor:  # [N, G, L]: mean over restarts
        return torch.sigmoid(features @ w.T + b).view(len(features), g, r, n_labels).mean(2)

    tp, fp, fn, val_loss = (torch.zeros(g, n_labels, dtype=torch.float64, device=device) for _ in range(4))
    xv = torch.as_tensor(np.asarray(x_val), dtype=torch.float32, device=device)
    yv = torch.as_tensor(np.asarray(y_val), dtype=torch.float32, device=device)
    for start in range(0, len(xv), 1024):
        prob = mean_prob(xv[start : start + 1024])
        truth = yv[start : start + 1024][:, None, :].expand_as(prob)
        hit = prob >= threshold
        tp += (hit & (truth > 0)).sum(0)
        fp += (hit & (truth == 0)).sum(0)
        fn += (~hit & (truth > 0)).sum(0)
        val_loss += F.binary_cross_entropy(prob.double(), truth.double(), reduction="none").sum(0)
    if select == "label":
        f1 = _f1(tp, fp, fn)  # [G, L]
        best = torch.where(f1 == f1.max(0).values, val_loss, torch.inf).argmin(0)  # [L]
    else:
        micro = _f1(tp.sum(1), fp.sum(1), fn.sum(1))  # [G]
        best = torch.where(micro == micro.max(), val_loss.sum(1), torch.inf).argmin().repeat(n_labels)
    labels = torch.arange(n_labels, device=device)
    weight = w.view(g, r, n_labels, d)[best, :, labels, :].permute(1, 0, 2).contiguous()  # [R, L, d]
    bias = b.view(g, r, n_labels)[best, :, labels].T.contiguous()  # [R, L]
    val_micro = _f1(tp[best, labels].sum(), fp[best, labels].sum(), fn[best, labels].sum())
    train_loss = 0.0
    for start in range(0, n, 1024):
        prob = torch.sigmoid(torch.einsum("nd,rld->nrl", x[start : start + 1024], weight) + bias).mean(1)
        train_loss += float(F.binary_cross_entropy(prob.double(), y[start : start + 1024].double(), reduction="sum"))
    return {
        "weight": weight,
        "bias": bias,
        "grid": grid,
        "choice": best.tolist(),
        "val_micro_f1": float(val_micro),
        "train_loss": train_loss / max(n * n_labels, 1),
    }


def _adamw(param, grad, exp_avg, exp_avg_sq, lr, weight_decay, step, betas, eps) -> None:
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments), with a
    learning rate (and weight decay) per parameter row."""
    beta1, beta2 = betas
    if weight_decay is not None:
        param.mul_(1 - lr * weight_decay)
    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = (exp_avg_sq / (1 - beta2**step)).sqrt_().add_(eps)
    param.sub_(lr / (1 - beta1**step) * exp_avg / denom)


def _f1(tp, fp, fn):
    """2·tp / (2·tp + fp + fn), 0 where nothing is predicted or present (zero_division=0)."""
    den = 2 * tp + fp + fn
    return torch.where(den > 0, 2 * tp / den.clamp_min(1), torch.zeros_like(den))


def probe_seed(seed: int, epoch: int) -> int:
    return (int(seed) * 1_000_003 + int(epoch)) % 2**63
