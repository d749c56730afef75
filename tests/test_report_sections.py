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


def record(name: str, method: str, groups: list[Group], metric=("val/accuracy",), mode=("max",), grid=None,
           chance: dict | None = None, learned: dict | None = None) -> SweepRecord:
    """``chance``: the sweep run's ``chance/...`` metrics; ``learned``: group -> verdict."""
    spec = {"method": method, "grid": grid or {}, "sweep": {"metric": list(metric), "mode": list(mode)}}
    parent = SimpleNamespace(info=SimpleNamespace(run_id=name), data=SimpleNamespace(metrics=chance or {}))
    return SweepRecord(name=name, tracking_uri="unused", parent=parent, spec=spec, groups=groups, learned=learned or {})


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
    assert row["hp"] == "τ=0.1"  # best validation mean, not the best test mean (by its display name: issue 70)
    assert row["mean"] == pytest.approx(np.mean([0.58, 0.60, 0.66])) and row["std"] == pytest.approx(np.std([0.58, 0.60, 0.66], ddof=1))
    assert row["p_value"] == pytest.approx(stats.wilcoxon([0.58, 0.60, 0.66], [0.50, 0.52, 0.55]).pvalue)
    assert all(r["p_value"] == "" for r in table.records if r["sweep"] == "ce-s")
    # 3 matched repeats: the difference and its interval, and that the test cannot reach p ≤ 0.05
    assert ("(Δ +0.0900, 95% CI [+0.0470, +0.1330]; 3 matched repeats: this test cannot reach p ≤ 0.05; it needs at "
            "least 6)") in table.rows[0][1] and "p=" not in table.rows[0][1] and table.rows[1][0] == "ce (ce-s) [baseline]"
    assert table.markdown().count("\n") == 5 and table.csv().startswith(
        "sweep,method,column,metric,mean,std,n,p_value,matched,left_out,difference,ci_low,ci_high,min_p,decidable")
    assert table.rows[2] == ["chance level", "–", "–"]  # sweeps recorded without chance levels
    assert "0.6133 ± 0.0416" in table.text()
    configs = tables.configurations_table(lacon)
    assert [r["selected"] for r in configs.records] == [True, False, False, True]
    assert configs.records[2]["outcome"] == "1 complete" and configs.records[2]["repeats"] == 1  # 1 of 3 repeats

    # chance levels (the sweep run's chance/<setting>/... metrics) end each table; a configuration
    # that did not learn is marked, and a comparison where both sides did not learn says so
    levels = {"chance/rho_0.1/test/accuracy": 0.55, "chance/rho_0.5/test/accuracy": 0.5,
              "chance/rho_0.1/val/accuracy": 0.5, "chance/rho_0.5/val/accuracy": 0.45}
    ce = record("ce-s", "ce", ce.groups, chance=levels, learned={g.group: {"learned": False, "p_value": 0.4} for g in ce.groups})
    lacon = record("lacon-s", "lacon", lacon.groups, chance=levels,
                   learned={good.group: {"learned": False, "p_value": 0.3}, lacon.groups[3].group: {"learned": True, "p_value": 0.01}})
    table = tables.main_table([lacon, ce], baseline=ce)
    assert table.rows[-1] == ["chance level", "0.5500", "0.5000"]
    assert "(did not learn) (Δ +0.0900" in table.rows[0][1] and "both at chance: the comparison says nothing)" in table.rows[0][1]
    assert "did not learn" not in table.rows[0][2] and "both at chance" not in table.rows[0][2]  # lacon learned there
    assert "(did not learn)" in table.rows[1][1] and "p=" not in table.rows[1][1]  # the baseline itself
    assert [r["did_not_learn"] for r in table.records if r["sweep"] == "lacon-s"] == [True, False]
    configs = tables.configurations_table(lacon)
    assert [r["learned"] for r in configs.records] == ["did not learn (p=0.3)", "", "", "yes (p=0.01)"]
    good.repeats[0]["metrics"]["train/steps"] = 20.0  # the optimiser steps its repeats took, where they said
    assert tables.configurations_table(lacon).records[0]["learned"] == "did not learn (p=0.3; 20 steps)"
    assert configs.rows[-2:] == [["rho=0.1", "", "chance level", "", "0.5000", "0.5500", "", ""],
                                 ["rho=0.5", "", "chance level", "", "0.4500", "0.5000", "", ""]]


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
    sweep = record("lacon-c", "lacon", groups, metric=("val/accuracy", "cost/train_s"), mode=("max", "min"), grid=grid,
                   chance={"chance/rho_0.1/test/accuracy": 0.4, "chance/rho_0.5/test/accuracy": 0.3})
    (curve,) = report.curve_sections([sweep], tmp_path)
    assert curve.title == "test/accuracy against rho" and (tmp_path / "curve_rho.png").stat().st_size > 1000
    sensitivity = report.sensitivity_sections([sweep], tmp_path)
    assert [s.title for s in sensitivity] == ["lacon-c: sensitivity to τ", "lacon-c: sensitivity to λ"]
    import csv

    with open(tmp_path / "sensitivity_lacon-c_temperature.csv") as fh:
        drawn = [r for r in csv.DictReader(fh) if r["series"] == "rho=0.1"]
    assert [r["x"] for r in drawn] == ["0.1", "0.5"]  # lam held at the selected 0.5
    assert [float(r["mean"]) for r in drawn] == pytest.approx([0.8 - 0.075, 0.6 - 0.075])
    assert {r["metric"] for r in drawn} == {"test/accuracy"} and [r["n"] for r in drawn] == ["2", "2"]
    with open(tmp_path / "sensitivity_lacon-c_temperature.csv") as fh:  # each setting's chance level, across its line
        levels = {(r["series"], r["x"]): float(r["mean"]) for r in csv.DictReader(fh) if r["series"].startswith("chance")}
    assert levels == {("chance level rho=0.1", "0.1"): 0.4, ("chance level rho=0.1", "0.5"): 0.4,
                      ("chance level rho=0.5", "0.1"): 0.3, ("chance level rho=0.5", "0.5"): 0.3}
    with open(tmp_path / "curve_rho.csv") as fh:  # a data axis: the level of each setting
        assert {r["x"]: float(r["mean"]) for r in csv.DictReader(fh) if r["series"] == "chance level"} == {"0.1": 0.4, "0.5": 0.3}
    fronts = report.pareto_sections([sweep], tmp_path)
    assert len(fronts) == 2 and {p.name for p in tmp_path.glob("pareto_*.png")} == {
        "pareto_lacon-c_rho0.1.png", "pareto_lacon-c_rho0.5.png"}
    rows = [r for r in fronts[0].files if r.endswith(".csv")]

    with open(rows[0]) as fh:
        on = {(r["hp.temperature"], r["hp.lam"]) for r in csv.DictReader(fh) if r["on_front"] == "True"}
    # maximise accuracy, minimise training seconds: the best of each temperature (lam 0.5) is non-dominated
    assert on == {("0.1", "0.5"), ("0.5", "0.5")}
    page = report.render([sweep], [curve, *sensitivity, *fronts])
    assert page.count("data:image/png;base64,") == 1 + 2 + 2 and "<table>" in page


def test_a_figure_never_draws_a_validation_number_on_a_test_axis(tmp_path):
    """evaluation.test: reported with a searcher tests only the selected configuration: its
    sensitivity figure draws every configuration at its best validation value and says so (a
    test axis would mix the two); a tested slice is drawn on test; an accuracy's error bars stop
    at 0 and 1."""
    import csv

    selected = group("", {"lr": "0.001"}, reps([0.9, 0.3], [0.95, 0.25]))
    untested = [group("", {"lr": lr}, [{"best/val/accuracy": v} for v in vals])
                for lr, vals in (("0.0001", [0.5, 0.6]), ("1e-05", [0.02, 0.98]))]
    sweep = record("opt", "ce", [selected, *untested], grid={"lr": []})
    (section,) = report.sensitivity_sections([sweep], tmp_path)
    with open(tmp_path / "sensitivity_opt_lr.csv") as fh:
        drawn = list(csv.DictReader(fh))
    assert {r["metric"] for r in drawn} == {"best/val/accuracy"} and len(drawn) == 3
    assert [float(r["mean"]) for r in drawn] == pytest.approx([0.6, 0.55, 0.5])  # validation, the selected one too
    assert "validation values" in section.images[0][1]
    assert all(0.0 <= float(r["bar_low"]) <= float(r["mean"]) <= float(r["bar_high"]) <= 1.0 for r in drawn)
    assert float(drawn[2]["bar_low"]) == pytest.approx(0.0) and float(drawn[2]["bar_high"]) == pytest.approx(1.0)
    for other in untested:  # once every configuration on the slice is tested, the figure draws test
        for repeat in other.repeats:
            repeat["metrics"]["test/accuracy"] = 0.5
    report.sensitivity_sections([sweep], tmp_path)
    with open(tmp_path / "sensitivity_opt_lr.csv") as fh:
        assert {r["metric"] for r in csv.DictReader(fh)} == {"test/accuracy"}
    # a table cell without a test value shows the validation one, marked
    assert tables.Cell("best/val/accuracy", 0.5, 0.1, 2, fallback=True).text() == "0.5000 ± 0.1000 (validation)"
    assert tables.Cell("best/val/accuracy", 0.5, 0.0, 1).text() == "0.5000"  # ± only over 2 or more repeats


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


def _grid_record(objective, settings=("",), extra=None) -> SweepRecord:
    """A 3 × 3 × 2 grid (lr × temperature × dropouts) whose configuration means are
    ``objective(lr, temperature, dropouts)``, two repeats each (± 0.001 around the mean)."""
    found = []
    for setting in settings:
        for lr in ("1e-05", "0.0001", "0.001"):
            for t in ("0.05", "0.1", "0.5"):
                for d in ("[0.0, 0.1]", "[0.1, 0.1]"):
                    mean = objective(float(lr), float(t), d) + (extra(setting) if extra else 0.0)
                    found.append(group(setting, {"lr": lr, "temperature": t, "dropouts": d},
                                       reps([mean - 0.001, mean + 0.001], [mean, mean])))
    found.append(group(settings[0], {"lr": "0.01", "temperature": "0.3", "dropouts": "[0.0, 0.1]"},
                       reps([1.0], [1.0]), size=2))  # incomplete: left out
    return record("s", "lacon", found, grid={"lr": [], "temperature": [], "dropouts": []})


def test_importance_ranks_the_hyperparameter_that_decides_the_objective_first(tmp_path, monkeypatch):
    """fANOVA over configuration means: the temperature decides the rank (lr and the dropout set
    move it by a hundredth of that), so it comes first with most of the variance; the same
    sweep gives the same values; one setting's values are ``importance/<hp>`` metrics on the
    sweep run in a real MLflow store, several settings' ``importance/<setting>/<hp>``."""
    from dashboards.importance import importances, log_importances, setting_importance
    from contrasweep.tracking.store import get_client

    def objective(lr, t, d):
        return {0.05: 0.9, 0.1: 0.6, 0.5: 0.3}[t] + 0.003 * (lr == 1e-4) + 0.002 * (d == "[0.1, 0.1]")

    sweep = _grid_record(objective)
    values = setting_importance(sweep, "")
    assert list(values)[0] == "temperature" and values["temperature"] > 0.9
    assert set(values) == {"lr", "temperature", "dropouts"} and sum(values.values()) == pytest.approx(1.0)
    assert setting_importance(sweep, "") == values
    # lr decides instead: it comes first
    flipped = setting_importance(_grid_record(lambda lr, t, d: {1e-5: 0.2, 1e-4: 0.8, 1e-3: 0.5}[lr] + 0.001 * t), "")
    assert list(flipped)[0] == "lr" and flipped["lr"] > 0.9

    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("x", artifact_location=str(tmp_path / "art"))).info.run_id
    assert log_importances(client, run_id, importances(sweep)) == {f"importance/{k}": v for k, v in values.items()}
    assert client.get_run(run_id).data.metrics == pytest.approx({f"importance/{k}": v for k, v in values.items()})
    two = importances(_grid_record(objective, settings=("k=5", "k=20"), extra=lambda s: 0.01 * (s == "k=5")))
    logged = log_importances(client, run_id, two)
    assert set(logged) == {f"importance/k:{k}/{hp}" for k in (5, 20) for hp in values}
    assert logged["importance/k:20/temperature"] == pytest.approx(two["k=20"]["temperature"])

    # the report logs them on its sweep's run, next to report/importance_s.png
    sweep.parent.info.run_id = built_run = client.create_run(client.get_run(run_id).info.experiment_id).info.run_id
    monkeypatch.setattr(report, "load", lambda uri, name, run_id=None: sweep)
    report.build(f"sqlite:///{tmp_path / 'mlflow.db'}", "s", tmp_path / "built", tsne=False)
    assert client.get_run(built_run).data.metrics == pytest.approx({f"importance/{k}": v for k, v in values.items()})
    assert "report/importance_s.png" in {a.path for a in client.list_artifacts(built_run, "report")}

    # the report's section: a table per hyperparameter × setting and a bar plot
    section, = report.importance_sections([sweep], {"s": importances(sweep)}, tmp_path)
    assert section.title == "s: hyperparameter importance" and "18 complete configurations" in section.body
    assert [p.split("/")[-1] for p, _ in section.images] == ["importance_s.png"]
    assert (tmp_path / "importance_s.csv").read_text().splitlines()[1].startswith(",temperature,")


def test_no_importance_without_two_varied_hyperparameters_or_without_variance():
    from dashboards.importance import importances, setting_importance

    assert setting_importance(_grid_record(lambda lr, t, d: 0.5), "") == {}  # every mean the same
    one = record("one", "ce", [group("", {"lr": lr}, reps([v, v], [v, v])) for lr, v in (("1e-05", 0.2), ("0.001", 0.8))],
                 grid={"lr": []})
    assert importances(one) == {}
    # a hyperparameter with one value among the complete configurations does not count
    fixed = record("f", "ce", [group("", {"lr": lr, "wd": "0.01"}, reps([v, v], [v, v]))
                               for lr, v in (("1e-05", 0.2), ("0.001", 0.8))], grid={"lr": [], "wd": []})
    assert importances(fixed) == {}
