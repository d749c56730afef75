"""Wilcoxon over matched repeats equals scipy's; the Pareto set of a hand-made point cloud."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from contrasweep.tracking.aggregate import Group
from dashboards.pareto import pareto_front
from dashboards.significance import matched_values, wilcoxon


def group(name, values, outcome="complete"):
    repeats = [{"run_id": f"{name}{i}", "outcome": outcome, "data_seed": str(i // 2), "split_seed": None,
                "seed": str(i % 2), "metrics": {"test/accuracy": v}} for i, v in enumerate(values)]
    return Group(group=name, setting="", config=name, hp={}, size=len(values), outcomes={outcome: len(values)},
                 repeats=repeats)


def test_wilcoxon_matches_scipy_on_matched_repeats():
    a = group("a", [0.81, 0.79, 0.85, 0.90, 0.77, 0.83])
    b = group("b", [0.78, 0.80, 0.80, 0.84, 0.70, 0.79])
    got = wilcoxon(a, b, "test/accuracy")
    want = stats.wilcoxon([0.81, 0.79, 0.85, 0.90, 0.77, 0.83], [0.78, 0.80, 0.80, 0.84, 0.70, 0.79])
    assert got["n"] == 6 and got["p_value"] == pytest.approx(want.pvalue) and got["statistic"] == pytest.approx(want.statistic)
    assert got["mean_difference"] == pytest.approx(np.mean([0.03, -0.01, 0.05, 0.06, 0.07, 0.04]))


def test_only_repeats_both_arms_ran_are_paired():
    a = group("a", [0.5, 0.6, 0.7])
    b = group("b", [0.4, 0.6])
    assert matched_values(a, b, "test/accuracy") == [(0.5, 0.4), (0.6, 0.6)]
    b.repeats[0]["outcome"] = "stopped"
    assert matched_values(a, b, "test/accuracy") == [(0.6, 0.6)]
    assert math.isnan(wilcoxon(a, b, "test/accuracy")["p_value"])  # one pair: no test
    same = group("c", [0.5, 0.6, 0.7])
    assert math.isnan(wilcoxon(a, same, "test/accuracy")["p_value"])  # no difference at all


def test_pareto_front_of_a_point_cloud():
    # accuracy (max) vs training time (min)
    points = [(0.90, 10.0), (0.85, 5.0), (0.80, 6.0), (0.95, 30.0), (0.90, 12.0), (0.70, 1.0), (float("nan"), 0.1)]
    assert pareto_front(points, ["max", "min"]) == [0, 1, 3, 5]
    assert pareto_front(points, ["max", "max"]) == [3]
    assert pareto_front([(1.0, 1.0), (1.0, 1.0)], ["max", "max"]) == [0, 1]  # ties are both on the front
    with pytest.raises(ValueError, match="allowed 'max' or 'min'"):
        pareto_front(points, ["max", "up"])
