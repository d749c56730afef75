"""One Exact Pareto Optimal (EPO) search step: the weights α of the per-objective gradients.

Mahapatra & Rajan, "Multi-Task Learning with User Preferences: Gradient Descent with
Controlled Ascent in Pareto Optimization", ICML 2020. SCL-MOO (scl_moo.txt Eq. 7) uses EPO to
reach the Pareto-optimal point whose objectives sit on the preference ray, r_1 ℓ_1 = … = r_m ℓ_m.

Given m non-negative objectives ℓ, a preference r on the simplex and the Gram matrix C = G Gᵀ
of the per-objective gradients (G is m × P), EPO picks α on the simplex; the update direction
is d = Gᵀ α (the parameters move along −d, so (Cα)_j = g_j · d > 0 means ℓ_j decreases to
first order). In a training loop the same direction is obtained by back-propagating the
weighted loss Σ_j m · α_j · ℓ_j with α held constant; the factor m keeps the step size
comparable to that of the un-weighted sum Σ_j ℓ_j (α = 1/m everywhere gives exactly that).

Non-uniformity. With ℓ̂_j = r_j ℓ_j / Σ_i r_i ℓ_i, μ = KL(ℓ̂ ‖ 1/m) = Σ_j ℓ̂_j log(m ℓ̂_j) is 0
exactly on the preference ray. The adjustment a_j = r_j (log(m ℓ̂_j) − μ) is positive for the
objectives that are too large relative to the ray and negative for those that are too small.

Two modes, each a linear program over the simplex (α ≥ 0, Σ α = 1):

* BALANCE (μ > eps, off the ray): maximise αᵀ(Ca), i.e. move towards the ray as fast as
  possible, subject to (Cα)_j ≥ rhs_j. With J = {j : (Ca)_j > 0} and J* = argmax_j r_j ℓ_j:
  if J is non-empty, objectives outside J may not increase faster than the balancing
  direction itself would make them ((Cα)_j ≥ (Ca)_j), objectives in J are unconstrained
  (controlled ascent), and the objectives in J* (the worst off relative to the ray) must not
  increase ((Cα)_j ≥ 0). If J is empty, no objective may increase (Cα ≥ 0).
* DESCENT (μ ≤ eps, on the ray): maximise Σ_j (Cα)_j, i.e. decrease all objectives as much
  as possible, subject to Cα ≥ 0 (no objective increases) and αᵀ(Ca) ≥ min(max_j (Ca)_j, 0)
  (do not drift off the ray).

The algorithm follows the paper's LP formulation; it is solved with scipy's HiGHS
(``scipy.optimize.linprog(method="highs")``) rather than the authors' CVXPY/GLPK. If the LP
fails (it should not: the balance LP is always feasible, the minimum-norm point of the
gradients' convex hull satisfies every constraint), α falls back to r / Σ r (linear
scalarisation with the preference) and the step reports ``ok=False``. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EpoStep", "adjustments", "epo_alpha", "non_uniformity"]

_TINY = np.finfo(np.float64).eps  # ℓ̂ below this counts as 0 in μ and is clipped to it in log


@dataclass
class EpoStep:
    alpha: np.ndarray  # on the simplex, shape (m,)
    mode: str  # "balance" | "descent" | "fallback"
    non_uniformity: float  # μ(r⊙ℓ)
    ok: bool  # False when the LP failed and alpha fell back to r/sum(r)


def _check(losses, r) -> tuple[np.ndarray, np.ndarray]:
    losses = np.asarray(losses, dtype=np.float64).reshape(-1)
    r = np.asarray(r, dtype=np.float64).reshape(-1)
    if losses.size < 1 or losses.shape != r.shape:
        raise ValueError(f"losses and r need the same length m ≥ 1; got {losses.shape} and {r.shape}")
    if not np.all(np.isfinite(losses)):
        raise ValueError(f"EPO needs finite objectives; got losses={losses.tolist()}")
    bad = losses[losses < 0]
    if bad.size:
        raise ValueError(f"EPO needs non-negative objectives; got {bad[0]!r} in losses={losses.tolist()}")
    if not np.all(np.isfinite(r)) or np.any(r < 0) or not r.sum() > 0:
        raise ValueError(f"preference r must be finite, non-negative, with a positive sum; got {r.tolist()}")
    return losses, r


def _relative(losses: np.ndarray, r: np.ndarray) -> np.ndarray:
    """ℓ̂ = r⊙ℓ / Σ r⊙ℓ; uniform when every r_j ℓ_j is 0 (nothing to balance)."""
    rl = r * losses
    total = rl.sum()
    if not total > 0:
        return np.full_like(rl, 1.0 / rl.size)
    return rl / total


def _mu(l_hat: np.ndarray) -> float:
    keep = l_hat > _TINY
    return float(np.sum(l_hat[keep] * np.log(l_hat.size * l_hat[keep])))


def non_uniformity(losses, r) -> float:
    """μ(r⊙ℓ) = KL(ℓ̂ ‖ uniform) ≥ 0, 0 iff r_1 ℓ_1 = … = r_m ℓ_m (terms with ℓ̂_j ≈ 0 dropped)."""
    losses, r = _check(losses, r)
    return _mu(_relative(losses, r))


def adjustments(losses, r) -> tuple[np.ndarray, float]:
    """(a, μ) with a_j = r_j (log(m ℓ̂_j) − μ); ℓ̂_j is clipped at machine epsilon in the log."""
    losses, r = _check(losses, r)
    l_hat = _relative(losses, r)
    mu = _mu(l_hat)
    a = r * (np.log(losses.size * np.clip(l_hat, _TINY, None)) - mu)
    return a, mu


def _solve(objective: np.ndarray, a_ge: np.ndarray, b_ge: np.ndarray) -> np.ndarray | None:
    """argmax objectiveᵀα over the simplex subject to a_ge α ≥ b_ge; None on failure."""
    from scipy.optimize import linprog  # here: only EPO needs it, and it costs a trial ~1.4 s to import

    m = objective.size
    kwargs = {}
    if a_ge.shape[0]:
        kwargs = {"A_ub": -a_ge, "b_ub": -b_ge}  # linprog wants ≤ rows
    try:
        res = linprog(
            -objective, A_eq=np.ones((1, m)), b_eq=np.ones(1), bounds=[(0.0, None)] * m, method="highs", **kwargs
        )
    except ValueError:  # scipy rejects degenerate input rather than reporting a status
        return None
    if res.status != 0 or res.x is None:
        return None
    alpha = np.asarray(res.x, dtype=np.float64)
    if alpha.shape != (m,) or not np.all(np.isfinite(alpha)):
        return None
    alpha = np.clip(alpha, 0.0, None)
    total = alpha.sum()
    if not total > 0:
        return None
    return alpha / total


def epo_alpha(losses, gram, r, eps: float = 1e-4) -> EpoStep:
    """The EPO weights α for objectives ``losses`` (ℓ ≥ 0), Gram matrix ``gram`` = G Gᵀ (m × m)
    and preference ``r`` (≥ 0, positive sum; normalised here). Balance mode when μ(r⊙ℓ) > eps,
    descent mode otherwise; see the module docstring."""
    losses, r = _check(losses, r)
    m = losses.size
    gram = np.asarray(gram, dtype=np.float64)
    if gram.shape != (m, m):
        raise ValueError(f"gram must be square m × m with m = {m}; got shape {gram.shape}")
    if not np.all(np.isfinite(gram)):
        raise ValueError("gram must be finite")
    r = r / r.sum()
    a, mu = adjustments(losses, r)
    ca = gram @ a
    if mu > eps:
        mode = "balance"
        rhs = np.zeros(m) if not np.any(ca > 0) else np.where(ca > 0, -np.inf, ca)
        rl = r * losses
        rhs[rl == rl.max()] = 0.0  # J*: overrides J (no-op when J is empty)
        rows = np.isfinite(rhs)
        alpha = _solve(ca, gram[rows], rhs[rows])
    else:
        mode = "descent"
        a_ge = np.vstack([ca[None, :], gram])
        b_ge = np.concatenate([[min(ca.max(), 0.0)], np.zeros(m)])
        alpha = _solve(gram.sum(axis=0), a_ge, b_ge)  # Σ_j (Cα)_j = (1ᵀC) α
    if alpha is None:
        return EpoStep(alpha=r.copy(), mode="fallback", non_uniformity=mu, ok=False)
    return EpoStep(alpha=alpha, mode=mode, non_uniformity=mu, ok=True)
