"""The two contrastive objectives of SCL-MOO (scl_moo.txt Sec. 2.2) and their CE mixes.

SCL-MOO splits supervised contrastive learning into two objectives that may conflict: pull
same-class embeddings together (ℓ̃pos) and push different-class embeddings apart (ℓ̃neg).
With H the L2-normalised embeddings, M = H Hᵀ the cosine similarities, N_k the number of
batch members of class k and N̄_k = Σ_{k'≠k} N_k' the number of members of other classes:

    ℓ̃pos = −1/C Σ_k 1/N_k Σ_{i: y_i=k} log[ 1/(N_k−1) Σ_{p≠i, y_p=k} exp(M_ip/τ) ]      (Eq. 2)
    ℓ̃neg = +1/C Σ_k 1/N_k Σ_{i: y_i=k} log[ 1/N̄_k   Σ_{n: y_n≠k}    exp(M_in/τ) ]      (Eq. 3)
    ℓ1   = λ ℓ̃pos + (1−λ) L_CE                                                          (Eq. 4)
    ℓ2   = λ ℓ̃neg + (1−λ) L_CE                                                          (Eq. 5)

Each bracket is a log-mean-exp, computed stably as ``logsumexp − log(count)``. The paper's C
is the number of classes; here the class average runs over the classes *present in the
mini-batch*: a class absent from the batch contributes no term, so dividing by the full C
would only shrink the loss by a batch-dependent factor. Further, per-equation conventions
(defined here, tested):

* Eq. 2: a class with a single member in the batch has no positive pair (N_k − 1 = 0); it is
  skipped and not counted in the class average. If no class has two members, ℓ̃pos = 0.
* Eq. 3: every class present counts (single-member classes included: they still have
  negatives). If only one class is present there are no negatives at all and ℓ̃neg = 0.
* Those zeros still depend on ``embeddings`` in the autograd graph (with zero gradient), so
  autograd and DDP see every parameter used.

SHIFT (``nonneg_shift``): cosine similarities lie in [−1, 1], so every log-mean-exp above lies
in [−1/τ, 1/τ] (a mean of exp(x/τ) with x ∈ [−1, 1] lies in [e^{−1/τ}, e^{1/τ}]). Hence
ℓ̃pos + 1/τ ≥ 0 and ℓ̃neg + 1/τ ≥ 0. EPO (Mahapatra & Rajan 2020; trainables/methods/epo.py) balances
the ratios r_j ℓ_j and needs non-negative objectives, while ℓ̃pos and ℓ̃neg are often
negative. Adding the constant 1/τ to each contrastive term leaves every gradient unchanged
and only moves the objectives into the non-negative orthant, where EPO is defined. (It does
change which point of the Pareto front lies on a given preference ray; the paper does not
say how it made its objectives non-negative.) In floating point the shifted term can come out
a few ulps below 0 (identical or antipodal embeddings; −4e-6 seen in float32 at τ = 0.05), so
``scl_moo_objectives`` lifts it to exactly 0 with a detached constant: gradient still untouched.

All functions are pure and vectorised over the batch with masks (no Python loop).

Args (common):
    embeddings: ``[M, d]`` — normalised here, so raw vectors are fine.
    labels: ``[M]`` integer class of each embedding (any integer values).
    temperature: τ > 0 (scl_moo.txt Sec. 3 sweeps τ ∈ {0.1, 0.3, 0.5, 0.7, 0.9}).
"""

from __future__ import annotations

import torch

from trainables.losses.common import cosine, masked_logsumexp, self_mask

__all__ = ["nonneg_shift", "scl_moo_neg", "scl_moo_objectives", "scl_moo_pos"]


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")


def _class_averaged_log_mean_exp(
    embeddings: torch.Tensor, labels: torch.Tensor, temperature: float, same_class: bool
) -> torch.Tensor:
    """1/C' Σ_k 1/N_k Σ_{i: y_i=k} log-mean-exp_{j ∈ S(i)} (M_ij/τ), where S(i) is the other
    members of i's class (``same_class``) or the members of other classes, and C' counts the
    classes whose anchors have a non-empty S(i). Returns a connected 0 when C' = 0."""
    _check_temperature(temperature)
    if embeddings.dim() != 2 or labels.shape != embeddings.shape[:1]:
        raise ValueError(
            f"need embeddings [M, d] and labels [M]; got {tuple(embeddings.shape)} and {tuple(labels.shape)}"
        )
    logits = cosine(embeddings) / temperature
    same = labels[:, None] == labels[None, :]
    members = (same & ~self_mask(len(logits), device=logits.device)) if same_class else ~same  # S(i) as a mask
    count = members.sum(1)  # N_k − 1, or N̄_k
    has_any = count > 0
    # log-mean-exp over S(i). Rows with an empty S(i) get a dummy row of zeros so that
    # logsumexp (and its backward) stays finite; those rows are discarded below.
    lme = masked_logsumexp(logits, members, dim=1, finite_empty=True) - count.clamp_min(1).to(logits.dtype).log()
    # class average without enumerating classes: anchor i weighs 1/N_{y_i}, and the number of
    # classes with a non-empty S is Σ_{i: S(i)≠∅} 1/N_{y_i} (all anchors of a class agree).
    # (the count is summed in float32 whatever the embedding dtype, then rounded: exact)
    class_size = same.sum(1)
    counted = torch.where(has_any, 1.0 / class_size.to(torch.float32), torch.zeros((), device=logits.device))
    n_classes = counted.sum().round().clamp_min(1)
    weighted = lme / class_size.to(lme.dtype)
    total = torch.where(has_any, weighted, torch.zeros_like(weighted)).sum()
    return total / n_classes.to(total.dtype)


def scl_moo_pos(embeddings: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """ℓ̃pos, scl_moo.txt Eq. 2 (intra-class term; minimising it pulls each class together).

    Args:
        embeddings: ``[M, d]`` — normalised here, so raw vectors are fine.
        labels: ``[M]`` integer class of each embedding (any integer values).
        temperature: τ > 0.

    Returns:
        A scalar in [−1/τ, 1/τ]: averaged over the classes with at least two members in the
        batch; 0 (still connected to ``embeddings``) if there is none.

    Raises:
        ValueError: τ ≤ 0, or shapes other than ``[M, d]`` and ``[M]``.
    """
    return -_class_averaged_log_mean_exp(embeddings, labels, temperature, same_class=True)


def scl_moo_neg(embeddings: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """ℓ̃neg, scl_moo.txt Eq. 3 (inter-class term; minimising it pushes classes apart).

    Args:
        embeddings: ``[M, d]`` — normalised here, so raw vectors are fine.
        labels: ``[M]`` integer class of each embedding (any integer values).
        temperature: τ > 0.

    Returns:
        A scalar in [−1/τ, 1/τ]: averaged over every class present in the batch; 0 (still
        connected to ``embeddings``) if only one class is present.

    Raises:
        ValueError: τ ≤ 0, or shapes other than ``[M, d]`` and ``[M]``.
    """
    return _class_averaged_log_mean_exp(embeddings, labels, temperature, same_class=False)


def nonneg_shift(temperature: float) -> float:
    """The constant s = 1/τ with ℓ̃pos + s ≥ 0 and ℓ̃neg + s ≥ 0 (see the module docstring).

    Args:
        temperature: τ > 0.

    Returns:
        s = 1/τ.

    Raises:
        ValueError: τ ≤ 0.
    """
    _check_temperature(temperature)
    return 1.0 / temperature


def _lift_rounding(x: torch.Tensor) -> torch.Tensor:
    """x + max(−x, 0) with the correction detached: the value becomes exactly ≥ 0, the
    gradient is that of x. Only absorbs rounding (a few ulps of 1/τ when an embedding pair is
    identical or antipodal): mathematically ℓ̃ + 1/τ ≥ 0 already."""
    return x + (-x).clamp_min(0).detach()


def scl_moo_objectives(
    embeddings: torch.Tensor, labels: torch.Tensor, ce: torch.Tensor, temperature: float, lam: float, shift: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two SCL-MOO objectives (ℓ1, ℓ2), scl_moo.txt Eqs. 4–5, optionally shifted:

        ℓ1 = λ (ℓ̃pos + s) + (1−λ) L_CE        ℓ2 = λ (ℓ̃neg + s) + (1−λ) L_CE

    with s = 1/τ (``nonneg_shift``) when ``shift`` else 0. The shift does not change any
    gradient; with it both objectives are ≥ 0 whenever ``ce`` ≥ 0 (as cross-entropy is),
    which EPO requires. λ ∈ [0, 1] (scl_moo.txt Sec. 3: best runs use λ = 0.3, τ = 0.3).

    Args:
        embeddings: ``[M, d]`` — normalised here, so raw vectors are fine.
        labels: ``[M]`` integer class of each embedding (any integer values).
        ce: the (scalar) cross-entropy of the same batch, computed by the caller.
        temperature: τ > 0 (scl_moo.txt Sec. 3 sweeps τ ∈ {0.1, 0.3, 0.5, 0.7, 0.9}).
        lam: λ, the weight of the contrastive term.
        shift: add s = 1/τ to each contrastive term (default; needed for EPO, harmless for
            linear scalarisation up to a constant).

    Returns:
        ``(ℓ1, ℓ2)``: two scalars, Eq. 4 and Eq. 5.

    Raises:
        ValueError: λ outside [0, 1], τ ≤ 0, or shapes other than ``[M, d]`` and ``[M]``.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam (λ) must lie in [0, 1], got {lam!r}")
    pos = scl_moo_pos(embeddings, labels, temperature)
    neg = scl_moo_neg(embeddings, labels, temperature)
    if shift:
        s = nonneg_shift(temperature)
        pos, neg = _lift_rounding(pos + s), _lift_rounding(neg + s)
    l1 = lam * pos + (1.0 - lam) * ce
    l2 = lam * neg + (1.0 - lam) * ce
    return l1, l2
