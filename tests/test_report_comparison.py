"""Comparisons that say what they can conclude (issue 70, point 1), from hand-made repeat groups
(no Ray, no MLflow): beside each p the mean paired difference with its t-interval and the
number of matched repeats; where the Wilcoxon signed-rank test cannot reach alpha with that many
repeats (its smallest two-sided p is 2/2^n), the cell says so in words instead of a p; NaN
values, a single matched repeat, all-equal repeats; the baseline named with why it was chosen;
``--baseline`` naming no sweep of the report a one-line error, exit 2, before anything is read."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from contrasweep.errors import UserError
from contrasweep.tracking.aggregate import Group
from dashboards import report, tables
from dashboards.significance import compare, min_p, repeats_needed, t_interval
from dashboards.source import SweepRecord

T_975_DF1 = 12.706204736174707  # Student's t, 0.975 quantile, 1 degree of freedom (printed tables: 12.706)


def group(tests: list[float], setting: str = "k=4", hp: dict | None = None) -> Group:
    g = Group(group=f"{setting}|{hp}", setting=setting, config=str(hp), hp=hp or {}, size=len(tests),
              info={"dataset": "tickets", "method": "x"})
    for i, t in enumerate(tests):
        g.add("complete", {"run_id": f"r{i}", "seed": str(i % 2), "data_seed": str(i // 2), "split_seed": None,
                           "metrics": {"best/val/accuracy": 0.5, "test/accuracy": t}})
    return g


def record(name: str, method: str, groups: list[Group], alpha: float | None = None) -> SweepRecord:
    spec = {"method": method, "grid": {}, "sweep": {"metric": ["val/accuracy"], "mode": ["max"]}}
    if alpha is not None:
        spec["evaluation"] = {"alpha": alpha}
    parent = SimpleNamespace(info=SimpleNamespace(run_id=name, experiment_id="0"), data=SimpleNamespace(metrics={}))
    return SweepRecord(name=name, tracking_uri="unused", parent=parent, spec=spec, groups=groups)


def test_smallest_reachable_p_is_scipys_on_all_positive_differences():
    """2/2^n is what scipy's exact two-sided test gives when every difference has one sign (the
    one most extreme of the 2^n equally likely sign patterns, doubled): the least p there is."""
    for n in range(1, 21):
        assert min_p(n) == pytest.approx(stats.wilcoxon(np.arange(1.0, n + 1)).pvalue, rel=1e-12), n
        assert min_p(n) == pytest.approx(stats.wilcoxon(-np.arange(1.0, n + 1)).pvalue, rel=1e-12), n
    assert min_p(0) == 1.0 and min_p(2) == 0.5
    # no other sign pattern of 5 differences goes below it (every 2^5 pattern, exactly)
    ranks = np.arange(1.0, 6.0)
    patterns = [ranks * np.array([1 if (m >> i) & 1 else -1 for i in range(5)]) for m in range(32)]
    assert min(stats.wilcoxon(p, method="exact").pvalue for p in patterns) == pytest.approx(min_p(5))
    assert [repeats_needed(a) for a in (0.5, 0.25, 0.1, 0.0625, 0.05, 0.01)] == [2, 3, 5, 5, 6, 8]
    assert min_p(repeats_needed(0.05)) <= 0.05 < min_p(repeats_needed(0.05) - 1)
    with pytest.raises(ValueError):
        repeats_needed(0.0)


def test_t_interval_by_hand_and_against_scipy():
    # differences 1 and 2: mean 1.5, s = √0.5, s/√2 = 0.5; t(0.975, 1) = 12.706
    low, high = t_interval([1.0, 2.0], 0.05)
    assert (low, high) == pytest.approx((1.5 - 0.5 * T_975_DF1, 1.5 + 0.5 * T_975_DF1))
    assert (low, high) == pytest.approx((-4.853102, 7.853102), abs=1e-6)
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.8, 0.05, 7), rng.normal(0.75, 0.05, 7)
    want = stats.ttest_rel(a, b).confidence_interval(confidence_level=0.9)
    assert t_interval(list(a - b), 0.1) == pytest.approx((want.low, want.high))
    assert t_interval([0.02, 0.02, 0.02], 0.05) == pytest.approx((0.02, 0.02))  # no spread: zero width
    assert all(math.isnan(v) for v in t_interval([0.3], 0.05) + t_interval([], 0.05))


def test_two_2_repeat_sweeps_say_the_test_cannot_decide_and_give_the_interval(tmp_path):
    """The issue's case: 2 matched repeats, where the old table printed a bare ``(p=…)``."""
    mine = record("protopull-int", "./protopull.py:ProtoPull", [group([0.92, 0.94])])
    lacon = record("lacon-tickets", "lacon", [group([0.90, 0.91])])
    base, why = report.pick_baseline([mine, lacon], "lacon-tickets")
    assert base is lacon and why == "chosen with --baseline"
    table = tables.main_table([mine, lacon], base)
    # differences 0.02, 0.03: mean 0.025, s/√2 = 0.005, ± 12.706 × 0.005
    text = table.rows[0][1]
    assert text == ("0.9300 ± 0.0141 (Δ +0.0250, 95% CI [-0.0385, +0.0885]; 2 matched repeats: this test cannot "
                    "reach p ≤ 0.05; it needs at least 6)"), text
    assert "p=" not in text and table.rows[1][1] == "0.9050 ± 0.0071"  # the baseline: no comparison with itself
    row = table.records[0]
    assert row["matched"] == 2 and row["decidable"] is False and row["min_p"] == 0.5
    assert row["difference"] == pytest.approx(0.025) and row["p_value"] == pytest.approx(0.5)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.025 - 0.005 * T_975_DF1, 0.025 + 0.005 * T_975_DF1))
    assert table.records[1]["matched"] == "" and table.records[1]["p_value"] == ""
    assert "this test cannot reach p ≤ 0.05; it needs at least 6" in table.markdown() + table.html() + table.text()
    assert "ci_low" in table.csv().splitlines()[0]
    note = report._main_note([mine, lacon], base, why)
    assert "Baseline: lacon-tickets (chosen with --baseline)" in note and "2/2^n" in note and "6 at 0.05" in note


def test_six_repeats_with_a_clear_difference_give_a_real_p_and_an_interval_without_zero():
    gains = [0.03, 0.05, 0.04, 0.06, 0.02, 0.07]
    ce_values = [0.80, 0.82, 0.78, 0.81, 0.79, 0.83]
    ce = record("ce-t", "ce", [group(ce_values)])
    lacon = record("lacon-t", "lacon", [group([c + g for c, g in zip(ce_values, gains)])])
    base, why = report.pick_baseline([lacon, ce], None)
    assert base is ce and why == "the first ce sweep"
    table = tables.main_table([lacon, ce], base)
    row = table.records[0]
    want = stats.wilcoxon([c + g for c, g in zip(ce_values, gains)], ce_values)
    assert row["p_value"] == pytest.approx(want.pvalue) == pytest.approx(0.03125) and row["decidable"] is True
    assert row["difference"] == pytest.approx(np.mean(gains)) and 0 < row["ci_low"] < row["difference"] < row["ci_high"]
    t = stats.ttest_1samp(gains, 0.0).confidence_interval(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((t.low, t.high))
    assert table.rows[0][1].endswith(f"(Δ +0.0450, 95% CI [{t.low:+.4f}, {t.high:+.4f}], 6 matched repeats, p=0.0312)")
    # at the sweep's own evaluation.alpha 0.01, 6 repeats cannot reach it: 8 are needed
    strict = record("lacon-t", "lacon", lacon.groups, alpha=0.01)
    text = tables.main_table([strict, ce], ce).rows[0][1]
    assert "99% CI [" in text and "6 matched repeats: this test cannot reach p ≤ 0.01; it needs at least 8" in text


def test_few_equal_and_missing_repeats_are_said_in_words_never_nan():
    base = group([0.5, 0.6, 0.7])

    def said(other: Group) -> str:
        found = compare(other, base, "test/accuracy")
        assert "nan" not in found.text().lower(), found.text()
        return found.text()

    assert said(group([0.6])) == ("Δ +0.1000; 1 matched repeat: no interval under 2, and this test cannot reach "
                                  "p ≤ 0.05; it needs at least 6")
    assert said(group([0.5, 0.6, 0.7])) == ("Δ +0.0000, 95% CI [+0.0000, +0.0000]; 3 matched repeats, 3 without a "
                                            "difference: this test cannot reach p ≤ 0.05; it needs at least 6 that differ")
    assert "3 matched repeats, 1 without a difference:" in said(group([0.5, 0.7, 0.8]))
    assert said(group([0.5])) == ("Δ +0.0000; 1 matched repeat, 1 without a difference: no interval under 2, and this "
                                  "test cannot reach p ≤ 0.05; it needs at least 6 that differ")
    other = Group(group="o", setting="k=4", config="o", hp={}, size=1)
    other.add("complete", {"seed": "9", "data_seed": "9", "split_seed": None, "metrics": {"test/accuracy": 0.5}})
    assert said(other) == "no matched repeats with the baseline: no comparison"
    # a NaN (a diverged repeat) on either side: that pair is left out, and the text says so
    nan_side = group([0.6, math.nan, 0.8])
    found = compare(nan_side, base, "test/accuracy")
    assert found.matched == 2 and found.left_out == 1 and found.difference == pytest.approx(0.1)
    assert said(nan_side).endswith("2 matched repeats: this test cannot reach p ≤ 0.05; it needs at least 6; "
                                   "1 matched repeat without a finite value left out")
    base.repeats[0]["metrics"]["test/accuracy"] = math.inf
    assert compare(nan_side, base, "test/accuracy").left_out == 2
    big = group([0.5] * 8)
    found = compare(group([0.6, 0.6, 0.5, 0.7, 0.6, 0.8, 0.6, math.nan]), big, "test/accuracy")
    assert found.matched == 7 and found.differing == 6 and found.decidable and not math.isnan(found.p_value)
    assert found.p_value == pytest.approx(stats.wilcoxon([0.1, 0.1, 0.0, 0.2, 0.1, 0.3, 0.1]).pvalue)


def test_baseline_is_named_with_why_it_was_chosen():
    mine, other = record("mine", "./m.py:M", [group([0.5, 0.6])]), record("other", "lacon", [group([0.5, 0.6])])
    assert report.pick_baseline([mine, other], None) == (mine, "no ce sweep among them: the first sweep named")
    ce = record("ce-x", "ce", [group([0.5, 0.6])])
    assert report.pick_baseline([mine, other, ce], None) == (ce, "the first ce sweep")
    assert report.pick_baseline([mine], None) == (None, "")
    with pytest.raises(UserError, match="--baseline 'nope' is not among the report's sweeps; allowed: mine, other"):
        report.pick_baseline([mine, other], "nope")


def test_a_baseline_outside_the_report_is_one_line_exit_2_before_anything_is_read(tmp_path, monkeypatch, capsys):
    from contrasweep.cli import main

    def no_reading(*args, **kwargs):
        raise AssertionError("read MLflow before checking --baseline")

    monkeypatch.setattr(report, "load", no_reading)
    with pytest.raises(UserError):
        report.build("sqlite:///unused.db", "a", tmp_path / "out", compare=("b",), baseline="c")
    assert not (tmp_path / "out").exists()
    argv = ["--root", str(tmp_path), "report", "a", "--compare", "b", "--baseline", "c",
            "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ("contrasweep: error: --baseline 'c' is not among the report's "
                                                   "sweeps; allowed: a, b (the sweep named first and those after "
                                                   "--compare)\n")


def test_report_command_prints_the_baseline_and_why(tmp_path, monkeypatch, capsys):
    from contrasweep.cli import main

    sweeps = {"mine": record("mine", "./m.py:M", [group([0.92, 0.94])]),
              "lacon-t": record("lacon-t", "lacon", [group([0.90, 0.91])])}
    monkeypatch.setattr(report, "load", lambda uri, name, run_id=None: sweeps[name])
    monkeypatch.setattr(report, "get_client", lambda uri: SimpleNamespace(log_artifacts=lambda *a: None,
                                                                          log_batch=lambda *a, **k: None))
    argv = ["--root", str(tmp_path), "report", "mine", "--compare", "lacon-t", "--no-tsne",
            "--tracking-uri", "sqlite:///unused.db", "--out", str(tmp_path / "out")]
    from test_demo_console import documented, undocumented

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert undocumented(out, documented()) == [], out  # docs/cli.md's Console table explains every line
    lines = out.splitlines()
    assert lines[0] == ("[contrasweep] baseline: mine (no ce sweep among them: the first sweep named); each other "
                        "cell: Δ = that sweep − mine over matched repeats, its confidence interval, and the Wilcoxon "
                        "p where the repeats can reach alpha")
    assert any("2 matched repeats: this test cannot reach p ≤ 0.05; it needs at least 6" in line for line in lines)
    assert main([*argv, "--baseline", "lacon-t"]) == 0
    assert capsys.readouterr().out.startswith("[contrasweep] baseline: lacon-t (chosen with --baseline);")
