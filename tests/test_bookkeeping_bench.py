"""``benchmarks/bookkeeping.py``'s pure parts: the slots' occupancy and the rates sustained, from
the trials' own start and end times, the goals' verdict and py-spy's top costs. The benchmark
itself starts Ray and is run by hand (docs/performance.md)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bookkeeping  # noqa: E402


def back_to_back(slots: int, per_slot: int, length: float, gap: float) -> list[tuple[float, float]]:
    """``slots`` slots each running ``per_slot`` trials of ``length`` s with ``gap`` s idle between."""
    return [(i * (length + gap), i * (length + gap) + length) for _ in range(slots) for i in range(per_slot)]


def test_full_slots_are_fully_occupied_at_one_start_a_slot_second():
    intervals = back_to_back(slots=16, per_slot=50, length=1.0, gap=0.0)
    line = bookkeeping.timeline(intervals, slots=16)
    assert line["span_s"] == pytest.approx(50.0)
    assert line["occupancy"] == pytest.approx(1.0)
    assert line["steady_occupancy"] == pytest.approx(1.0)
    assert line["starts_per_s"] == pytest.approx(16.0, rel=0.05)
    assert line["idle_between_trials_s"] == pytest.approx(0.0, abs=1e-9)


def test_a_gap_between_trials_is_idle_time_and_a_lower_rate():
    intervals = back_to_back(slots=4, per_slot=100, length=1.0, gap=0.25)
    line = bookkeeping.timeline(intervals, slots=4, results_per_trial=2)
    assert line["steady_occupancy"] == pytest.approx(0.8, rel=0.02)
    assert line["starts_per_s"] == pytest.approx(4 / 1.25, rel=0.05)
    assert line["results_per_s"] == pytest.approx(2 * line["starts_per_s"])
    assert line["idle_between_trials_s"] == pytest.approx(0.25, rel=0.05)


def test_half_the_slots_never_used_is_half_occupancy():
    intervals = back_to_back(slots=8, per_slot=20, length=1.0, gap=0.0)
    assert bookkeeping.timeline(intervals, slots=16)["steady_occupancy"] == pytest.approx(0.5)


def test_busy_seconds_clip_to_the_window_and_the_series_covers_the_span():
    assert bookkeeping.busy_seconds([(0.0, 2.0), (1.0, 3.0)], 1.5, 2.5) == pytest.approx(1.5)
    series = bookkeeping.occupancy_series(back_to_back(2, 10, 1.0, 1.0), slots=2, step=2.0)
    assert len(series) == 10 and all(v == pytest.approx(0.5) for v in series[:-1])
    assert math.isnan(bookkeeping.occupancy([(0.0, 1.0)], 1, 1.0, 1.0))


def test_quantile_is_linear_between_the_sorted_values():
    assert bookkeeping.quantile([3.0, 1.0, 2.0, 4.0], 0.5) == pytest.approx(2.5)
    assert bookkeeping.quantile([5.0], 0.9) == 5.0


def test_the_verdict_names_each_goal_met_or_missed():
    rows = {"tune@16": {"wall_over_ideal": 1.1}, "contrasweep@16": {"wall_over_ideal": 1.3, "vs_tune": 1.05},
            "contrasweep@64": {"wall_over_ideal": 2.0, "vs_tune": 1.2}}
    lines = bookkeeping.verdict(rows)
    assert lines == ["16 slots: contrasweep wall/ideal 1.30 (goal <= 1.2) MISS",
                     "16 slots: contrasweep / plain Tune wall 1.05 (goal <= 1.1) met",
                     "64 slots: contrasweep / plain Tune wall 1.20 (goal <= 1.1) MISS"]


def test_top_costs_count_a_frame_once_per_stack_and_drop_line_numbers():
    raw = ["thread (0x1);main (a.py:1);step (b.py:10);step (b.py:12) 30",
           "thread (0x1);main (a.py:1);log (c.py:5) 10", "garbage"]
    total, inclusive, own = bookkeeping.top_costs(raw, n=3)
    assert total == 40
    assert dict(inclusive)["step (b.py)"] == 30 and dict(inclusive)["main (a.py)"] == 40
    assert own == [("step (b.py)", 30), ("log (c.py)", 10)]


def test_filling_says_how_many_ran_at_once_and_when_every_slot_was_busy():
    ramp = [(0.5 * i, 0.5 * i + 10.0) for i in range(4)] + [(20.0, 21.0)]
    assert bookkeeping.filling(ramp, slots=4) == (4, pytest.approx(1.5))
    assert bookkeeping.filling(ramp, slots=8) == (4, None)
    assert bookkeeping.filling([(0.0, 1.0), (1.0, 2.0)], slots=2) == (1, None)  # one ends as the next begins
