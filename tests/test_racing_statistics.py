"""Racing's statistics (issue 69): the one-sided paired t-test and Holm's correction recomputed by
hand in float64, the vectorised every-pair test against the scalar one, and the documented bound
measured: a round (and a study's judgement) of configurations that are in truth equal eliminates
one at most ``alpha`` of the time, for 2, 10 and 30 of them. The race's rounds: tests/test_racing.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from helpers import equal_rounds as _equal_rounds

from contrasweep.search.racing import holm, judge, paired_p


def test_paired_p_is_the_one_sided_t_test_of_the_differences():
    a = [0.50, 0.55, 0.47, 0.52]
    b = [0.61, 0.60, 0.66, 0.58]
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = d.size
    t = d.mean() / (d.std(ddof=1) / math.sqrt(n))
    by_hand = stats.t.cdf(t, df=n - 1)  # P(T <= t): "a is worse" is a negative mean difference
    assert paired_p(a, b, +1.0) == pytest.approx(by_hand, rel=1e-12)
    # lower is better: the same values now say b is the worse one
    assert paired_p(a, b, -1.0) == pytest.approx(1 - by_hand, rel=1e-12)
    assert paired_p(b, a, -1.0) == pytest.approx(by_hand, rel=1e-12)


def test_paired_p_without_variance_and_with_too_few_repeats():
    assert paired_p([0.2, 0.2, 0.2], [0.6, 0.6, 0.6], +1.0) == 0.0  # worse on every repeat by the same amount
    assert paired_p([0.6, 0.6], [0.6, 0.6], +1.0) == 1.0
    assert paired_p([0.7, 0.8], [0.6, 0.7], +1.0) == 1.0  # better by the same amount
    assert paired_p([0.1], [0.9], +1.0) == 1.0  # one difference: no test
    assert paired_p([0.1, float("nan")], [0.9, 0.8], +1.0) == 1.0


def test_holm_step_down_by_hand():
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03})
    # sorted: a 0.01 x 3 = 0.03; c 0.03 x 2 = 0.06; b 0.04 x 1 = 0.04, kept monotone: 0.06
    assert adjusted == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.6, "b": 0.5}) == pytest.approx({"b": 1.0, "a": 1.0})
    assert holm({}) == {}


def test_judge_names_the_best_mean_and_ties_by_group_key():
    best, p = judge({"g2": [0.5, 0.6, 0.55], "g1": [0.5, 0.6, 0.55], "g3": [0.1, 0.2, 0.15]}, +1.0)
    assert best == "g1"  # equal means: the key that sorts first, as the selection breaks ties
    assert set(p) == {"g2", "g3"} and p["g2"] == 1.0 and p["g3"] == 0.0
    best, _ = judge({"x": [1.0, 2.0], "y": [0.5, 0.7]}, -1.0)  # lower is better
    assert best == "y"


# Monte-Carlo margin: a procedure at exactly alpha (0.05) measured over 3,000 rounds has a
# standard error of sqrt(0.05 · 0.95 / 3000) = 0.004; three of them (0.012) above alpha is passed
# by such a procedure in all but 0.1 % of seeds. The old test (the round's best chosen on the
# repeats it is then tested on) measured 0.096, 0.175 and 0.228 here.
ROUNDS, MARGIN = 3000, 3 * math.sqrt(0.05 * 0.95 / 3000)


@pytest.mark.parametrize("k", [2, 10, 30])
def test_a_round_of_equal_configurations_eliminates_one_at_most_alpha_of_the_time(k):
    """The documented bound: a round eliminates any configuration in truth as good as the best
    with probability at most alpha (Holm over the round's every ordered pair)."""
    rng = np.random.default_rng(69 + k)
    eliminated = 0
    for values in _equal_rounds(k, ROUNDS, rng):
        _, adjusted = judge({f"g{i:02d}": list(v) for i, v in enumerate(values)}, +1.0)
        eliminated += any(p <= 0.05 for p in adjusted.values())
    assert eliminated / ROUNDS <= 0.05 + MARGIN


@pytest.mark.parametrize("k", [2, 10, 30])
def test_a_study_judgement_of_an_equal_suggestion_eliminates_it_at_most_alpha_of_the_time(k):
    """A study's race applies one suggestion's decision per judgement: its k − 1 comparisons
    are the family (``judge_one``); judged among equal ones, it leaves at most alpha of the time."""
    from contrasweep.search.racing import judge_one

    rng = np.random.default_rng(690 + k)
    eliminated = 0
    for values in _equal_rounds(k, ROUNDS, rng):
        p, than = judge_one({f"g{i:02d}": list(v) for i, v in enumerate(values)}, "g00", +1.0, 0.05)
        eliminated += p <= 0.05
    assert eliminated / ROUNDS <= 0.05 + MARGIN


def test_the_vectorised_test_is_the_scalar_one():
    rng = np.random.default_rng(3)
    values = rng.normal(size=(5, 4))
    values[1] = values[0] - 0.2  # no variance: below on every repeat by the same amount
    from contrasweep.search.racing import pairwise_p

    p = pairwise_p(values, -1.0)
    for i in range(5):
        for j in range(5):
            expected = 1.0 if i == j else paired_p(list(values[i]), list(values[j]), -1.0)
            scalar = 1.0 if i == j else float(stats.ttest_1samp(-(values[i] - values[j]), 0.0, alternative="less").pvalue)
            assert p[i, j] == pytest.approx(expected, rel=1e-12, abs=1e-300)
            if i != j and {i, j} != {0, 1}:
                assert p[i, j] == pytest.approx(scalar, rel=1e-9)
    assert p[0, 1] == 0.0 and p[1, 0] == 1.0  # lower is better: 0 is 0.2 higher (worse) on every repeat
