"""`contrasweep report` end to end: two tiny sweeps (CE and LaCon, k ∈ {2, 3} × 2 split seeds,
two configurations each) on a real local Ray and MLflow store, then the report: the main
table equals numpy/scipy over the stored repeats, every section's files exist, the HTML is
self-contained, and everything is logged to the parent run. The sweeps are the session's
``report_sweeps`` (tests/conftest.py), which other tests read too."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

pytestmark = pytest.mark.slow


def test_report_tables_sections_and_artifacts(report_sweeps):
    from contrasweep.tracking.store import get_client
    from dashboards.report import build
    from dashboards.significance import matched_values
    from dashboards.source import load

    uri, root, tmp = report_sweeps
    report = build(uri, "lacon-small", tmp / "out", compare=("ce-small",))
    # main table: one row per sweep, one column per k; the baseline is the CE sweep
    assert report.main.columns == ["method", "bbc_news k=2", "bbc_news k=3"]
    assert [row[0] for row in report.main.rows] == ["lacon (lacon-small)", "ce (ce-small) [baseline]", "chance level"]
    # the last row: what learning nothing scores on each column's test split (the sweep run's chance/<setting>/...)
    assert all(0.0 < float(level) < 1.0 for level in report.main.rows[-1][1:]), report.main.rows[-1]
    lacon, ce = load(uri, "lacon-small"), load(uri, "ce-small")
    for record in (lacon, ce):
        for setting, group in record.selected.items():
            values = [r["metrics"]["test/accuracy"] for r in group.repeats]
            assert len(values) == 2  # the group's 2 split repeats × 1 seed
            row = next(r for r in report.main.records if r["sweep"] == record.name and r["column"].endswith(setting))
            assert row["mean"] == pytest.approx(np.mean(values)) and row["std"] == pytest.approx(np.std(values, ddof=1))
            if record is lacon:  # p against the CE sweep's selected group, over matched repeats
                pairs = matched_values(group, ce.selected[setting], "test/accuracy")
                diffs = [a - b for a, b in pairs]
                expected = stats.wilcoxon(*zip(*pairs)).pvalue if any(diffs) else math.nan
                assert len(pairs) == 2 and (row["p_value"] == pytest.approx(expected, nan_ok=True))
                # 2 matched repeats: the difference and its interval, and that the test cannot decide (issue 70)
                assert row["matched"] == 2 and row["decidable"] is False and row["min_p"] == 0.5
                assert row["difference"] == pytest.approx(np.mean(diffs)), row
                text = report.main.rows[0][report.main.columns.index(row["column"])]
                assert "95% CI [" in text and "this test cannot reach p ≤ 0.05; it needs at least 6" in text, text
                assert "p=" not in text, text
    assert "Baseline: ce-small (the first ce sweep)." in report.sections[0].body
    assert (report.baseline, report.baseline_why) == ("ce-small", "the first ce sweep")
    titles = [s.title for s in report.sections]
    assert "test/accuracy against k" in titles
    # a hyperparameter by its display name, as its runs are named (issue 70; its files keep the name)
    assert "lacon-small: sensitivity to τ" in titles and "ce-small: sensitivity to lr" in titles
    assert any(t.startswith("lacon-small k=2: Pareto front") for t in titles)
    tsne = report.sections[-1]
    assert tsne.images and "label embeddings" in tsne.images[0][1]  # LaCon's W_emb drawn as stars
    out = tmp / "out"
    for name in ("report.html", "main_table.csv", "main_table.md", "curve_k.png", "tsne.png",
                 "configurations_lacon-small.csv", "sensitivity_lacon-small_temperature.png"):
        assert (out / name).stat().st_size > 0, name
    import csv

    for name in ("curve_k.csv", "sensitivity_ce-small_lr.csv", "sensitivity_lacon-small_temperature.csv"):
        with open(out / name) as fh:  # a grid tests its selected configurations' slices: drawn on test
            drawn = list(csv.DictReader(fh))
        assert len(drawn) >= 2 and {r["metric"] for r in drawn} == {"test/accuracy"}, (name, drawn)
        assert all(0.0 <= float(r["bar_low"]) <= float(r["bar_high"]) <= 1.0 for r in drawn), (name, drawn)
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == sum(len(s.images) for s in report.sections) >= 6
    assert "src='http" not in page and 'src="http' not in page  # self-contained
    client = get_client(uri)
    logged = {f.path for f in client.list_artifacts(lacon.parent.info.run_id, "report")}
    assert {"report/report.html", "report/main_table.csv", "report/curve_k.png", "report/tsne.png"} <= logged


def test_report_command_prints_the_table_and_rejects_bad_names(report_sweeps, capsys):
    from contrasweep.cli import main

    uri, root, tmp = report_sweeps
    assert main(["--root", str(root), "report", "ce-small", "--no-tsne"]) == 0
    printed = capsys.readouterr().out
    assert "ce (ce-small)" in printed and "bbc_news k=2" in printed and "report.html" in printed
    assert (root / "ce-small" / "report" / "report.html").exists()
    assert main(["--root", str(root), "report", "nope", "--tracking-uri", uri]) == 2
    assert "no sweep 'nope'" in capsys.readouterr().err
    assert main(["--root", str(root), "report", "ce-small", "--baseline", "other"]) == 2
    assert main(["--root", str(root), "report", "../ce-small"]) == 2
    # a new process, as a user runs it (t-SNE loads the registered model): no library progress bars
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "HF_HUB_DISABLE_PROGRESS_BARS")}
    proc = subprocess.run([sys.executable, "-m", "contrasweep", "--root", str(root), "report", "lacon-small"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "lacon (lacon-small)" in proc.stdout, proc.stdout + proc.stderr
    assert "Downloading artifacts" not in proc.stderr and "Loading weights" not in proc.stderr, proc.stderr
    assert (root / "lacon-small" / "report" / "tsne.png").exists()


def test_list_and_mlflow_name_the_method_and_the_selected_values(report_sweeps, capsys):
    """Issue 70: ``list`` shows each finished sweep's method, its selected configuration's values
    by the names its runs carry (``τ``, not ``temperature``), their validation and test metric,
    and no "so far"; MLflow's ``method`` param is the method's short name (no path for a built-in)."""
    from contrasweep.cli import main
    from contrasweep.tracking.store import get_client, trial_runs
    from dashboards.source import load
    from dashboards.tables import configurations_table

    uri, root, tmp = report_sweeps
    assert main(["--root", str(root), "list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert "selected configuration" in header and "so far" not in header
    cells = {r.split()[0]: r for r in rows}
    lacon = load(uri, "lacon-small")
    names = {r.info.run_name for r in trial_runs(get_client(uri), lacon.parent.info.run_id)}
    for sweep, method, key in (("lacon-small", "lacon", "τ"), ("ce-small", "ce", "lr")):
        row = cells[sweep]
        assert row.split()[3] == method and "(so far)" not in row, row
        chosen = row[header.index("selected configuration"):header.index("validation")]
        value = re.search(rf"(?:^|, ){key}=[0-9.e-]+", chosen)
        assert value and "temperature" not in chosen, row
        assert row[header.index("test"):].startswith("test/accuracy 0."), row
        if sweep == "lacon-small":  # the same name and value as its trial runs' names
            assert any(f" {value.group().lstrip(', ')} " in n for n in names), (chosen, names)
    columns = configurations_table(lacon).columns
    assert "τ" in columns and "temperature" not in columns, columns
    for run in trial_runs(get_client(uri), lacon.parent.info.run_id) + [lacon.parent]:
        assert run.data.params["method"] == "lacon" and "method_path" not in run.data.params
        assert "hp.temperature" in run.data.params or run is lacon.parent  # MLflow's keys stay the names
