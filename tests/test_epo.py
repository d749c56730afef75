"""The EPO step (trainables/methods/epo.py): simplex, both modes by hand, a toy run, fallback, input checks."""

from __future__ import annotations

import functools
import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.optimize

from trainables.methods.epo import adjustments, epo_alpha, non_uniformity


def _random_problem(rng: np.random.Generator, on_ray: bool):
    m = int(rng.choice([2, 3]))
    g = rng.normal(size=(m, int(rng.choice([2, 5, 10]))))
    r = rng.dirichlet(np.ones(m)) * 0.9 + 0.1 / m  # positive preference on the simplex
    losses = rng.uniform(0.05, 3.0) / r if on_ray else rng.uniform(0.05, 3.0, size=m)
    return losses, g @ g.T, r


def _rows(mode, losses, gram, r):
    """The LP's inequality rows A α ≥ b, re-derived from the module docstring."""
    a, _ = adjustments(losses, r)
    ca = gram @ a
    if mode == "descent":  # αᵀCa ≥ min(max Ca, 0) and Cα ≥ 0
        return np.vstack([ca[None, :], gram]), np.concatenate([[min(ca.max(), 0.0)], np.zeros(len(ca))])
    rl = r * losses
    b = np.empty(len(ca))
    for j in range(len(ca)):
        if rl[j] == rl.max():
            b[j] = 0.0        # J*: must not increase
        elif not np.any(ca > 0):
            b[j] = 0.0        # J empty: nothing may increase
        elif ca[j] > 0:
            b[j] = -np.inf    # j ∈ J: unconstrained
        else:
            b[j] = ca[j]      # j ∉ J
    return gram, b


def _feasible(alphas, rows, tol):
    """Which rows of ``alphas`` (k × m) satisfy A α ≥ b up to a scaled tolerance."""
    a_ge, b_ge = rows
    slack = tol * (1.0 + np.abs(a_ge).max())
    return np.all(alphas @ a_ge.T >= b_ge - slack, axis=1)


@functools.lru_cache(maxsize=None)
def _simplex_grid(m, n):
    ticks = np.linspace(0, 1, n)
    heads = np.array(list(itertools.product(ticks, repeat=m - 1)))
    heads = heads[heads.sum(1) <= 1 + 1e-12]
    return np.hstack([heads, 1 - heads.sum(1, keepdims=True)])


@pytest.mark.parametrize("on_ray", [False, True])
def test_alpha_on_simplex_feasible_and_optimal(on_ray):
    rng = np.random.default_rng(0 if on_ray else 1)
    for _ in range(200):
        losses, gram, r = _random_problem(rng, on_ray)
        step = epo_alpha(losses, gram, r)
        assert step.ok and step.mode in ("balance", "descent")
        if on_ray:
            assert step.mode == "descent"
        assert np.all(step.alpha >= 0) and step.alpha.sum() == pytest.approx(1.0, abs=1e-12)
        rows = _rows(step.mode, losses, gram, r)
        assert _feasible(step.alpha[None, :], rows, 1e-7).item()
        # no feasible point of a simplex grid beats the LP's objective (brute-force optimality)
        a, _ = adjustments(losses, r)
        c = gram @ a if step.mode == "balance" else gram.sum(0)
        grid = _simplex_grid(len(losses), 201)
        values = grid[_feasible(grid, rows, 0.0)] @ c
        if values.size:
            assert c @ step.alpha >= values.max() - 1e-8 * (1 + abs(values.max()))


def test_descent_by_hand_diagonal_gram():
    # On the ray (r⊙ℓ = [0.5, 0.5]): μ = 0, a = r⊙(log 1 − 0) = 0, Ca = 0 → descent mode.
    # Constraints: αᵀCa = 0 ≥ min(max Ca, 0) = 0 holds; Cα = [4α1, α2] ≥ 0 holds on the simplex.
    # Objective Σ_j (Cα)_j = 4α1 + α2 = 1 + 3α1 → α = [1, 0] (follow the steeper gradient).
    step = epo_alpha([1.0, 1.0], np.array([[4.0, 0.0], [0.0, 1.0]]), [0.5, 0.5])
    assert step.mode == "descent" and step.ok and step.non_uniformity == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(step.alpha, [1.0, 0.0], atol=1e-9)


def test_descent_by_hand_no_objective_may_increase():
    # |g1| = 2, |g2| = 1, g1·g2 = −1 (120° apart). ℓ = [4, 1], r = [0.2, 0.8]: on the ray → descent.
    # Objective (1ᵀC)α = 3α1 + 0α2 wants α1 = 1, but Cα ≥ 0 binds:
    #   (Cα)_1 = 4α1 − α2 ≥ 0 → α1 ≥ 0.2;  (Cα)_2 = −α1 + α2 ≥ 0 → α1 ≤ 0.5.  Hence α = [0.5, 0.5]
    # (d = (g1 + g2)/2 is orthogonal to g2: ℓ1 decreases, ℓ2 is left unchanged to first order).
    step = epo_alpha([4.0, 1.0], np.array([[4.0, -1.0], [-1.0, 1.0]]), [0.2, 0.8])
    assert step.mode == "descent"
    np.testing.assert_allclose(step.alpha, [0.5, 0.5], atol=1e-9)


def test_balance_by_hand_identity_gram():
    # ℓ = [1, 0.1], r = [0.5, 0.5]: r1ℓ1 = 0.5 is ten times r2ℓ2 = 0.05, far off the ray.
    # ℓ̂ = [10/11, 1/11]; μ = Σ ℓ̂ log(2ℓ̂) > 0; a_1 = ½(log(20/11) − μ) > 0 > a_2 = ½(log(2/11) − μ).
    # With C = I, Ca = a, so J = {1} (Ca_1 > 0) and J* = argmax r⊙ℓ = {1}: the rows are
    # (Cα)_1 = α1 ≥ 0 (J* overrides J) and (Cα)_2 = α2 ≥ a_2 (j ∉ J; slack since a_2 < 0).
    # Maximise α·a = α1 a_1 + α2 a_2 over the simplex → all weight on the too-large objective.
    l_hat = np.array([10 / 11, 1 / 11])
    mu = float(np.sum(l_hat * np.log(2 * l_hat)))
    a, mu_got = adjustments([1.0, 0.1], [0.5, 0.5])
    assert mu_got == pytest.approx(mu, rel=1e-12)
    np.testing.assert_allclose(a, 0.5 * (np.log(2 * l_hat) - mu), rtol=1e-12)
    assert a[0] > 0 > a[1]
    step = epo_alpha([1.0, 0.1], np.eye(2), [0.5, 0.5])
    assert step.mode == "balance" and step.ok and step.non_uniformity == pytest.approx(mu)
    np.testing.assert_allclose(step.alpha, [1.0, 0.0], atol=1e-9)


def test_balance_by_hand_controlled_ascent_binds():
    # Conflicting gradients: |g1| = |g2| = 1, g1·g2 = −0.8. ℓ = [1, 0.8], r = [0.5, 0.5].
    # a_1 > 0 > a_2, Ca = [a1 − 0.8a2, −0.8a1 + a2] = [+, −]: J = {1} = J*.
    # Rows: (Cα)_1 = α1 − 0.8α2 ≥ 0 (J*) and (Cα)_2 = −0.8α1 + α2 ≥ Ca_2 (j ∉ J: ℓ2, the too-small
    # objective, may rise, but no faster than along the balancing direction itself).
    # α·Ca grows with α1, so the second row binds: 1 − 1.8α1 = Ca_2 → α1 = (1 − Ca_2)/1.8.
    gram = np.array([[1.0, -0.8], [-0.8, 1.0]])
    a, _ = adjustments([1.0, 0.8], [0.5, 0.5])
    ca = gram @ a
    assert ca[0] > 0 > ca[1] and a[0] > 0 > a[1]
    step = epo_alpha([1.0, 0.8], gram, [0.5, 0.5])
    alpha1 = (1 - ca[1]) / 1.8
    assert 0.5 < alpha1 < 1
    assert step.mode == "balance"
    np.testing.assert_allclose(step.alpha, [alpha1, 1 - alpha1], atol=1e-9)


def test_mode_follows_distance_to_the_ray():
    rng = np.random.default_rng(2)
    for _ in range(50):
        m = int(rng.choice([2, 3]))
        g = rng.normal(size=(m, 6))
        r = rng.dirichlet(np.ones(m)) * 0.8 + 0.2 / m
        # already on the preference ray (r_j ℓ_j all equal): the descent step is taken
        on = rng.uniform(0.1, 2.0) / r
        assert non_uniformity(on, r) == pytest.approx(0.0, abs=1e-12)
        assert epo_alpha(on, g @ g.T, r).mode == "descent"
        # far off the ray (one r_j ℓ_j five times the others): the balance step is taken
        off = on.copy()
        off[rng.integers(m)] *= 5.0
        assert epo_alpha(off, g @ g.T, r).mode == "balance"


def test_non_uniformity():
    assert non_uniformity([2.0, 2.0, 2.0], [1, 1, 1]) == pytest.approx(0.0, abs=1e-15)
    assert non_uniformity([3.0, 0.0], [0.5, 0.5]) == pytest.approx(math.log(2))  # everything on one
    assert non_uniformity([1.0, 3.0], [0.3, 0.7]) == pytest.approx(non_uniformity([10.0, 30.0], [3, 7]))
    assert non_uniformity([0.0, 0.0], [0.5, 0.5]) == 0.0  # nothing to balance


# Toy problem: ℓ_j(θ) = ‖θ − e_j‖² in R². The Pareto set is the segment [e1, e2]; on it, at
# θ = (1−t)e1 + t e2, ℓ1 = 2t² and ℓ2 = 2(1−t)², so r1ℓ1 = r2ℓ2 with r = [0.2, 0.8] at t = 2/3.
E1, E2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
R = np.array([0.2, 0.8])


def _toy_losses(theta):
    return np.array([np.sum((theta - E1) ** 2), np.sum((theta - E2) ** 2)])


@pytest.mark.parametrize("start", [[0.0, -1.0], [2.0, 2.0]])
def test_toy_balance_then_descent_reaches_the_exact_pareto_point(start):
    theta = np.array(start)
    mu_start = non_uniformity(_toy_losses(theta), R)
    modes = []
    for _ in range(200):
        grads = np.stack([2 * (theta - E1), 2 * (theta - E2)])
        step = epo_alpha(_toy_losses(theta), grads @ grads.T, R)
        modes.append(step.mode)
        # minimise Σ_j m α_j ℓ_j with α fixed: the step is −η Σ_j m α_j ∇ℓ_j
        theta = theta - 0.01 * (2 * step.alpha) @ grads
    losses = _toy_losses(theta)
    assert mu_start > 0.15
    assert modes[0] == "balance" and "descent" in modes
    assert non_uniformity(losses, R) < 1e-3 < mu_start / 100
    rl = R * losses
    assert abs(rl[0] - rl[1]) <= 0.05 * rl.mean()  # on the preference ray: r1ℓ1 ≈ r2ℓ2
    t = float(np.clip((theta - E1) @ (E2 - E1) / 2, 0, 1))
    assert np.linalg.norm(theta - (E1 + t * (E2 - E1))) < 0.01  # (near) Pareto optimal
    np.testing.assert_allclose(theta, [1 / 3, 2 / 3], atol=0.01)  # the exact Pareto optimal point


def test_lp_failure_falls_back_to_the_preference(monkeypatch):
    # The balance LP is always feasible (the minimum-norm point of the gradients' convex hull has
    # g_j·d ≥ ‖d‖² ≥ 0 for all j, which satisfies every row) and the simplex keeps it bounded, so
    # a failing solver is simulated instead.
    calls = []

    def failing_linprog(*args, **kwargs):
        calls.append(kwargs.get("method"))
        return SimpleNamespace(status=2, x=None, message="The problem is infeasible.")

    monkeypatch.setattr(scipy.optimize, "linprog", failing_linprog)
    for losses in ([1.0, 0.1], [1.0, 3.0]):  # balance, then descent (on the ray for r ∝ [3, 1])
        step = epo_alpha(losses, np.eye(2), [3.0, 1.0])
        assert calls[-1] == "highs"
        assert not step.ok and step.mode == "fallback"
        np.testing.assert_allclose(step.alpha, [0.75, 0.25])
        assert step.non_uniformity == pytest.approx(non_uniformity(losses, [3.0, 1.0]))

    monkeypatch.setattr(scipy.optimize, "linprog", lambda *a, **k: SimpleNamespace(status=0, x=np.array([np.nan, 1.0])))
    step = epo_alpha([1.0, 0.1], np.eye(2), [0.5, 0.5])
    assert step.mode == "fallback" and not step.ok
    np.testing.assert_allclose(step.alpha, [0.5, 0.5])


def test_tiny_negative_alpha_is_clipped_and_renormalised(monkeypatch):
    monkeypatch.setattr(scipy.optimize, "linprog", lambda *a, **k: SimpleNamespace(status=0, x=np.array([-1e-12, 1.0])))
    step = epo_alpha([1.0, 0.1], np.eye(2), [0.5, 0.5])
    assert step.ok and np.all(step.alpha >= 0) and step.alpha.sum() == 1.0


def test_input_validation():
    with pytest.raises(ValueError, match=r"EPO needs non-negative objectives.*-0\.5"):
        epo_alpha([1.0, -0.5], np.eye(2), [0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative objectives"):
        non_uniformity([-1.0, 1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="finite"):
        epo_alpha([1.0, np.nan], np.eye(2), [0.5, 0.5])
    with pytest.raises(ValueError, match="preference"):
        epo_alpha([1.0, 1.0], np.eye(2), [1.5, -0.5])
    with pytest.raises(ValueError, match="preference"):
        epo_alpha([1.0, 1.0], np.eye(2), [0.0, 0.0])
    with pytest.raises(ValueError, match="square"):
        epo_alpha([1.0, 1.0], np.eye(3), [0.5, 0.5])
    with pytest.raises(ValueError, match="same length"):
        epo_alpha([1.0, 1.0, 1.0], np.eye(3), [0.5, 0.5])
