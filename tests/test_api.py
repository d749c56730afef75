"""The Python API's read side (issue 72): ``contrasweep.load`` and ``list_sweeps`` on the
session's finished sweeps (``report_sweeps``, tests/conftest.py). Every number is recomputed
from MLflow's runs here, not taken from the code that builds the frames."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys

import pandas as pd
import pytest

import contrasweep as cs
from contrasweep.errors import UserError
from contrasweep.tracking.store import get_client, trial_runs

pytestmark = pytest.mark.slow  # the session's sweeps


def _runs(uri: str, sweep: cs.Sweep) -> dict:
    return {r.info.run_id: r for r in trial_runs(get_client(uri), sweep.run_id)}


def test_trials_and_configurations_hold_every_run_and_their_statistics(report_sweeps):
    uri, root, tmp = report_sweeps
    sweep = cs.load("ce-small", root=root)  # the store from the sweep's folder
    assert sweep.tracking_uri == uri and sweep.status == "finished" and sweep.method == "ce"
    assert sorted(sweep.settings) == ["k=2", "k=3"]
    runs = _runs(uri, sweep)
    trials = sweep.trials()
    assert len(trials) == 8 and set(trials["run_id"]) == set(runs)
    for row in trials.to_dict("records"):
        run = runs[row["run_id"]]
        assert row["group"] == run.data.tags["contrasweep.group"] and row["outcome"] == "complete"
        assert row["hp.lr"] == float(run.data.params["hp.lr"]) and isinstance(row["seed"], int)
        assert row["test/accuracy"] == run.data.metrics["test/accuracy"]
        assert row["best_epoch"] == int(run.data.metrics["best/epoch"]) and row["duration_s"] > 0
    assert trials["hp.lr"].dtype == float  # MLflow's strings as numbers

    configs = sweep.configurations()
    assert len(configs) == 4 and set(configs["group"]) == set(trials["group"])
    for row in configs.to_dict("records"):
        mine = [runs[r].data.metrics["best/val/accuracy"] for r in trials[trials["group"] == row["group"]]["run_id"]]
        assert row["repeats"] == row["repeats_expected"] == row["repeats_complete"] == len(mine) == 2
        assert math.isclose(row["mean/best/val/accuracy"], statistics.fmean(mine))
        assert math.isclose(row["std/best/val/accuracy"], statistics.stdev(mine))
        assert row["complete"] and not row["raced_out"] and not row["budget_cut"] and row["learned"] in (True, False)
    # per setting, the complete configuration with the best mean (ties: the group key that sorts first)
    for setting, rows in configs.groupby("setting"):
        best = max(rows.to_dict("records"), key=lambda r: (r["mean/best/val/accuracy"], [-ord(c) for c in r["group"]]))
        assert rows[rows["selected"]]["group"].tolist() == [best["group"]], setting
    chosen = sweep.selected()
    assert len(chosen) == 2 and chosen["selected"].all() and sorted(chosen["setting"]) == ["k=2", "k=3"]

    history = sweep.history("val/accuracy")
    assert len(history) == 8 and set(history["step"]) == {1}  # one epoch per trial
    for row in history.to_dict("records"):
        (logged,) = get_client(uri).get_metric_history(row["run_id"], "val/accuracy")
        assert row["value"] == logged.value
    some = trials["run_id"].tolist()[:3]
    assert set(sweep.history("val/accuracy", run_ids=some)["run_id"]) == set(some)
    with pytest.raises(UserError, match="are not trials of sweep 'ce-small'"):
        sweep.history("val/accuracy", run_ids=["nope"])

    # the same sweep found in the store alone (no folder on this machine): the same tables
    alone = cs.load("ce-small", root=tmp / "elsewhere", tracking_uri=uri)
    assert alone.folder is None and alone.status == "finished"
    pd.testing.assert_frame_equal(alone.trials(), trials)
    pd.testing.assert_frame_equal(alone.configurations(), configs)
    html = sweep._repr_html_()
    assert "ce-small" in html and "hp.lr" in html and "mean/test/accuracy" in html


def test_list_models_and_comparison(report_sweeps, capsys, tmp_path):
    from contrasweep.cli import main

    uri, root, tmp = report_sweeps
    listed = cs.list_sweeps(root)
    assert main(["--root", str(root), "list"]) == 0
    printed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert sorted(listed["name"]) == sorted(printed) == ["ce-small", "lacon-small"]
    for row in listed.to_dict("records"):  # the same rows as `contrasweep list`
        line = printed[row["name"]]
        assert row["status"] == "finished" and row["trials"] == "8/8" and row["validation"] in line
        assert row["test"] in line and row["selected"] in line and row["disk"] > 0

    lacon, ce = cs.load("lacon-small", root=root), cs.load("ce-small", root=root)
    with pytest.raises(UserError, match="has 2 settings, each with its best model; allowed: setting="):
        ce.best_model()
    model = ce.best_model(setting="k=2")
    predicted = model.predict(pd.DataFrame({"text": ["the striker scored twice", "shares fell after the results"]}))
    assert len(predicted) == 2 and "label" in predicted.columns
    with pytest.raises(UserError, match="has no sentence-transformers folder"):
        ce.encoder(setting="k=2", dst=tmp_path / "enc")

    # the report's main table: lacon against the ce baseline over matched repeats, recomputed here
    table = lacon.compare("ce-small")
    assert set(table["sweep"]) == {"lacon-small", "ce-small"} and set(table["baseline"]) == {"ce-small"}
    ce_trials, lacon_trials = ce.trials(), lacon.trials()
    for row in table[table["sweep"] == "lacon-small"].to_dict("records"):
        setting = next(s for s in lacon.settings if s in row["column"])
        mine = lacon.selected().set_index("setting").loc[setting]
        theirs = ce.selected().set_index("setting").loc[mine.name]
        keys = ["data_seed", "split_seed", "seed"]
        a = lacon_trials[lacon_trials["group"] == mine["group"]].set_index(keys)["test/accuracy"]
        b = ce_trials[ce_trials["group"] == theirs["group"]].set_index(keys)["test/accuracy"]
        diffs = (a - b).dropna()
        assert row["matched"] == len(diffs) == 2 and math.isclose(row["difference"], diffs.mean())
    report = ce.report(out=tmp_path / "report", tsne=False)
    assert report.name == "report.html" and report.exists()


def test_reading_imports_no_ray(report_sweeps):
    """``import contrasweep`` is cheap (the API on first use), and reading a sweep needs no Ray."""
    uri, root, tmp = report_sweeps
    code = (
        "import sys, contrasweep as cs\n"
        "assert not {'ray', 'mlflow', 'pandas', 'torch'} & set(sys.modules), sorted(sys.modules)\n"
        f"s = cs.load('ce-small', root={str(root)!r})\n"
        "print(len(s.trials()), len(s.configurations()), s.status)\n"
        "assert 'ray' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["8", "4", "finished"]
    assert "Downloading artifacts" not in done.stderr  # no progress bar per read
