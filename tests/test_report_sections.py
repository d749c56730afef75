"""Report sections from hand-made repeat groups (no Ray, no MLflow): the main table's numbers
and p-values against numpy/scipy, curves over a data axis, sensitivity lines that keep the
other hyperparameters at the selected values, Pareto fronts with a cost metric, SCL-MOO fronts,
and a self-contained HTML page."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from contrasweep.tracking.aggregate import Group
from dashboards import report, tables
from dashboards.source import SweepRecord


def group(setting: str, hp: dict, repeats: list[dict], size: int | None = None, outcome: str = "complete",
          info=None) -> Group:
    g = Group(group=f"{setting}|{sorted(hp.items())}", setting=setting, config=str(sorted(hp.items())), hp=hp,
              size=size or len(repeats), info=info or {"dataset": "bbc_news", "method": "x"})
    for i, metrics in enumerate(repeats):
        g.add(outcome, {"run_id": f"r{i}", "seed": "0", "data_seed": str(i), "split_seed": None, "metrics": metrics})
    return g


def record(name: str, method: str, groups: list[Group], metric=("val/accuracy",), mode=("max",), grid=None) -> SweepRecord:
    spec = {"method": method, "grid": grid or {}, "sweep": {"metric": list(metric), "mode": list(mode)}}
    return SweepRecord(name=name, tracking_uri="unused", parent=SimpleNamespace(info=SimpleNamespace(run_id=name)),
                       spec=spec, groups=groups)


def reps(val: list[float], test: list[float], **extra) -> list[dict]:
    return [{"best/val/accuracy": v, "test/accuracy": t, **{k: x[i] for k, x in extra.items()}}
            for i, (v, t) in enumerate(zip(val, test))]


def test_main_table_selects_on_validation_and_tests_against_the_baseline():
    ce = record("ce-s", "ce", [group("rho=0.1", {"lr": "1e-05"}, reps([0.5, 0.6, 0.7], [0.50, 0.52, 0.55])),
                               group("rho=0.5", {"lr": "1e-05"}, reps([0.6, 0.6, 0.6], [0.61, 0.63, 0.60]))])
    good = group("rho=0.1", {"temperature": "0.1"}, reps([0.9, 0.9, 0.9], [0.58, 0.60, 0.66]))
    lucky_on_test = group("rho=0.1", {"temperature": "0.5"}, reps([0.1, 0.1, 0.1], [0.99, 0.99, 0.99]))
    partial = group("rho=0.1", {"temperature": "0.3"}, reps([1.0], [1.0]), size=3)  # a repeat missing: never chosen
    lacon = record("lacon-s", "lacon", [good, lucky_on_test, partial,
                                        group("rho=0.5", {"temperature": "0.1"}, reps([0.7] * 3, [0.7, 0.71, 0.69]))])
    table = tables.main_table([lacon, ce], baseline=ce)
    assert table.columns == ["method", "bbc_news rho=0.1", "bbc_news rho=0.5"]
    row = next(r for r in table.records if r["sweep"] == "lacon-s" and r["column"] == "bbc_news rho=0.1")
    assert row["hp"] == "temperature=0.1"  # best validation mean, not the best test mean
    assert row["mean"] == pytest.approx(np.mean([0.58, 0.60, 0.66])) and row["std"] == pytest.approx(np.std([0.58, 0.60, 0.66], ddof=1))
    assert row["p_value"] == pytest.approx(stats.wilcoxon([0.58, 0.60, 0.66], [0.50, 0.52, 0.55]).pvalue)
    assert all(r["p_value"] == "" for r in table.records if r["sweep"] == "ce-s")
    assert "(p=" in table.rows[0][1] and table.rows[1][0] == "ce (ce-s) [baseline]"
    assert table.markdown().count("\n") == 4 and table.csv().startswith("sweep,method,column,metric,mean,std,n,p_value")
    assert "0.6133 ± 0.0416" in table.text()
    configs = tables.configurations_table(lacon)
    assert [r["selected"] for r in configs.records] == [True, False, False, True]
    assert configs.records[2]["outcome"] == "1 complete" and configs.records[2]["repeats"] == 1  # 1 of 3 repeats


def test_curves_sensitivity_pareto_and_html(tmp_path):
    grid = {"temperature": [0.1, 0.5], "lam": [0.5, 1.0]}
    groups = []
    for rho, shift in (("0.1", 0.0), ("0.5", 0.1)):
        for t in ("0.1", "0.5"):
            for lam in ("0.5", "1.0"):
                val = 0.5 + shift + (0.2 if t == "0.1" else 0) + (0.1 if lam == "0.5" else 0)
                cost = 10.0 if t == "0.1" else 5.0
                groups.append(group(f"rho={rho}", {"temperature": t, "lam": lam},
                                    reps([val, val], [val - 0.1, val - 0.05], **{"cost/train_s": [cost, cost + 2]})))
    sweep = record("lacon-c", "lacon", groups, metric=("val/accuracy", "cost/train_s"), mode=("max", "min"), grid=grid)
    (curve,) = report.curve_sections([sweep], tmp_path)
    assert curve.title == "test/accuracy against rho" and (tmp_path / "curve_rho.png").stat().st_size > 1000
    sensitivity = report.sensitivity_sections([sweep], tmp_path)
    assert [s.title for s in sensitivity] == ["lacon-c: sensitivity to temperature", "lacon-c: sensitivity to lam"]
    line = report._sensitivity_line(sweep, "temperature", "rho=0.1", sweep.selected["rho=0.1"])
    assert line.x == ["0.1", "0.5"]  # lam held at the selected 0.5
    assert line.mean == pytest.approx([0.8 - 0.075, 0.6 - 0.075])
    fronts = report.pareto_sections([sweep], tmp_path)
    assert len(fronts) == 2 and {p.name for p in tmp_path.glob("pareto_*.png")} == {
        "pareto_lacon-c_rho0.1.png", "pareto_lacon-c_rho0.5.png"}
    rows = [r for r in fronts[0].files if r.endswith(".csv")]
    import csv

    with open(rows[0]) as fh:
        on = {(r["hp.temperature"], r["hp.lam"]) for r in csv.DictReader(fh) if r["on_front"] == "True"}
    # maximise accuracy, minimise training seconds: the best of each temperature (lam 0.5) is non-dominated
    assert on == {("0.1", "0.5"), ("0.5", "0.5")}
    page = report.render([sweep], [curve, *sensitivity, *fronts])
    assert page.count("data:image/png;base64,") == 1 + 2 + 2 and "<table>" in page


def test_scl_moo_fronts_section(tmp_path):
    groups = [group("", {"moo": solver, "r1": r1}, reps([0.8, 0.8], [0.7, 0.7], **{"val/l1": [l1, l1], "val/l2": [l2, l2]}))
              for solver, r1, l1, l2 in (("ls", "0.1", 1.0, 3.0), ("ls", "0.9", 3.0, 1.0), ("epo", "0.1", 1.2, 2.5),
                                         ("epo", "0.9", 2.5, 1.2))]
    sweep = record("moo", "scl_moo", groups, grid={"moo": ["ls", "epo"], "r1": [0.1, 0.9]})
    (section,) = report.moo_sections([sweep], tmp_path)
    assert section.title == "moo: SCL-MOO fronts" and (tmp_path / "moo_fronts_moo.png").stat().st_size > 1000
    text = (tmp_path / "moo_fronts_moo.csv").read_text().splitlines()
    assert len(text) == 5 and text[0].startswith("solver,r1,l1_mean")
    assert report.moo_sections([record("ce", "ce", groups)], tmp_path) == []  # other methods have no fronts
