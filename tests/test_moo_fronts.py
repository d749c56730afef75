"""SCL-MOO fronts (dashboards/moo.py) from hand-made repeat groups: points per solver and r,
selection among (τ, λ), front membership, the CSV, the PNG, the preference rays (Eq. 7)."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from contrasweep.tracking.aggregate import Group
from dashboards.moo import CSV_COLUMNS, moo_points, plot_fronts, ray_direction, write_fronts, write_points_csv


def group(moo, r1, l1s, l2s, accs, sel=0.5, tau="0.3", lam="0.3", outcomes=None, setting="k=20"):
    """A repeat group of len(l1s) repeats; ``outcomes`` per repeat (all complete by default)."""
    name = f"{moo}-r{r1}-t{tau}-l{lam}-{sel}"
    outcomes = outcomes or ["complete"] * len(l1s)
    g = Group(group=name, setting=setting, config=name, size=len(l1s),
              hp={"moo": moo, "r1": str(r1), "temperature": tau, "lam": lam, "lr": "1e-05"})
    for i, (a, b, acc, outcome) in enumerate(zip(l1s, l2s, accs, outcomes)):
        g.add(outcome, {"run_id": f"{name}-{i}", "seed": str(i), "metrics": {
            "val/l1": a, "val/l2": b, "test/accuracy": acc, "best/val/accuracy": sel, "val/accuracy": sel}})
    return g


@pytest.fixture()
def groups():
    return [
        group("ls", 0.1, [1.0, 1.2], [3.0, 3.0], [0.70, 0.80]),
        # (ls, 0.5): τ varies; the τ = 0.5 group has the better best/val/accuracy mean and is kept
        group("ls", 0.5, [2.0, 2.0], [2.0, 2.0], [0.60, 0.60], sel=0.8),
        group("ls", 0.5, [2.1, 2.3], [2.0, 2.2], [0.90, 0.80], sel=0.9, tau="0.5"),
        group("ls", 0.7, [3.5, 3.5], [2.5, 2.5], [0.50, 0.50]),       # dominated by (2.2, 2.1)
        group("ls", 0.9, [3.0, 3.0], [1.0, 1.0], [0.75, 0.85]),
        # not complete (one repeat stopped by ASHA): would dominate everything and be chosen, but is ignored
        group("ls", 0.3, [0.1, 0.1], [0.1, 0.1], [0.99, 0.99], sel=0.99, outcomes=["complete", "stopped"]),
        group("ls", 0.1, [0.1, 0.1], [0.1, 0.1], [0.99, 0.99], sel=0.99, outcomes=["complete", "failed"]),
        group("epo", 0.9, [2.5, 2.5], [1.5, 1.5], [0.80, 0.80]),
        group("epo", 0.1, [1.5, 1.5], [2.5, 2.5], [0.70, 0.70]),
        group("epo", 0.5, [2.6, 2.6], [2.6, 2.6], [0.70, 0.70]),      # dominated by both others
    ]


def as_tuples(points):
    return [(p.r1, round(p.l1_mean, 9), round(p.l2_mean, 9), round(p.accuracy_mean, 9), p.n, p.on_front) for p in points]


def test_points_per_solver_and_preference(groups):
    points = moo_points(groups)
    assert list(points) == ["ls", "epo"]
    assert as_tuples(points["ls"]) == [
        (0.1, 1.1, 3.0, 0.75, 2, True),
        (0.5, 2.2, 2.1, 0.85, 2, True),   # the τ = 0.5 group (best mean best/val/accuracy)
        (0.7, 3.5, 2.5, 0.5, 2, False),
        (0.9, 3.0, 1.0, 0.8, 2, True),
    ]
    assert as_tuples(points["epo"]) == [(0.1, 1.5, 2.5, 0.7, 2, True), (0.5, 2.6, 2.6, 0.7, 2, False),
                                        (0.9, 2.5, 1.5, 0.8, 2, True)]
    chosen = points["ls"][1]
    assert chosen.hp["temperature"] == "0.5"
    assert chosen.l1_std == pytest.approx(np.std([2.1, 2.3], ddof=1))
    assert chosen.accuracy_std == pytest.approx(np.std([0.9, 0.8], ddof=1))
    assert points["ls"][3].l1_std == 0.0


def test_a_tie_keeps_the_same_group_in_either_order():
    # two τ at one (solver, r) with the same selection mean: the group key decides, not the order
    tied = [group("ls", 0.5, [2.0, 2.0], [2.0, 2.0], [0.6, 0.6], tau="0.3"),
            group("ls", 0.5, [2.1, 2.1], [2.0, 2.0], [0.9, 0.9], tau="0.5")]
    kept = {moo_points(order)["ls"][0].hp["temperature"] for order in (tied, tied[::-1])}
    assert kept == {"0.3"}  # "ls-r0.5-t0.3-..." sorts before "ls-r0.5-t0.5-..."


def test_selection_mode_where_and_metric_names(groups):
    # choosing by the lower mean keeps the τ = 0.3 group at (ls, 0.5)
    assert moo_points(groups, selection_mode="min")["ls"][1].l1_mean == pytest.approx(2.0)
    # fixing τ to 0.3 (numerically: "0.30" matches "0.3") drops the τ = 0.5 group
    only = moo_points(groups, where={"temperature": "0.30", "lam": 0.3})
    assert [p.hp["temperature"] for p in only["ls"]] == ["0.3"] * 4
    # any metric names: validation accuracy instead of test accuracy
    assert moo_points(groups, accuracy="val/accuracy")["ls"][0].accuracy_mean == pytest.approx(0.5)
    with pytest.raises(ValueError, match="allowed 'max' or 'min'"):
        moo_points(groups, selection_mode="up")


def test_a_missing_objective_is_never_on_the_front(groups):
    for repeat in groups[0].repeats:
        del repeat["metrics"]["val/l1"]
    first = moo_points(groups)["ls"][0]
    assert math.isnan(first.l1_mean) and not first.on_front


def test_settings_are_not_mixed(groups):
    other = group("ls", 0.1, [9.0], [9.0], [0.1], setting="k=50")
    with pytest.raises(ValueError, match="pass setting="):
        moo_points(groups + [other])
    assert as_tuples(moo_points(groups + [other], setting="k=50")["ls"]) == [(0.1, 9.0, 9.0, 0.1, 1, True)]
    bad = Group(group="x", setting="k=20", config="x", hp={"lr": "1e-05"}, size=1)
    bad.add("complete", {"metrics": {}})
    with pytest.raises(ValueError, match="no hp 'moo'"):
        moo_points([bad])


def test_csv_holds_every_point(groups, tmp_path):
    points = moo_points(groups)
    path = write_points_csv(points, str(tmp_path / "fronts.csv"))
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS == ("solver", "r1", "l1_mean", "l1_std", "l2_mean", "l2_std",
                                             "accuracy_mean", "accuracy_std", "n", "on_front")
    assert [(r["solver"], float(r["r1"]), r["on_front"]) for r in rows] == [
        ("ls", 0.1, "1"), ("ls", 0.5, "1"), ("ls", 0.7, "0"), ("ls", 0.9, "1"),
        ("epo", 0.1, "1"), ("epo", 0.5, "0"), ("epo", 0.9, "1")]
    second = rows[1]
    assert float(second["l1_mean"]) == pytest.approx(2.2) and float(second["l2_mean"]) == pytest.approx(2.1)
    assert float(second["l1_std"]) == pytest.approx(np.std([2.1, 2.3], ddof=1))
    assert float(second["accuracy_mean"]) == pytest.approx(0.85) and second["n"] == "2"


def test_png_is_written(groups, tmp_path):
    png, csv_path = tmp_path / "fronts.png", tmp_path / "fronts.csv"
    points = write_fronts(groups, str(png), str(csv_path))
    assert set(points) == {"ls", "epo"}
    data = png.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert csv_path.stat().st_size > 0
    # nothing to draw still gives a (blank) figure rather than an error
    assert plot_fronts({}, str(tmp_path / "empty.png")) == str(tmp_path / "empty.png")
    assert (tmp_path / "empty.png").stat().st_size > 0


@pytest.mark.parametrize("r1", [0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
def test_preference_ray_is_eq_7(r1):
    """Points t·d on the ray satisfy r1·ℓ1 = r2·ℓ2 (Eq. 7): ℓ ∝ 1/r."""
    dx, dy = ray_direction(r1)
    assert dx >= 0 and dy >= 0 and math.hypot(dx, dy) == pytest.approx(1.0)
    assert r1 * dx == pytest.approx((1 - r1) * dy)
