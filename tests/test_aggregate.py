"""Repeat-group aggregates and selection read back from a real MLflow store (dashboards.aggregate)."""

from __future__ import annotations

import numpy as np
import pytest

from contrasweep.tracking.aggregate import groups, select
from contrasweep.tracking.store import PARENT_TAG, SWEEP_RUN_TAG, get_client
from dashboards.compare import seed_summary


@pytest.fixture()
def store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = get_client(uri)
    exp = client.create_experiment("agg", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sweep", tags={"contrasweep.sweep": "s"}).info.run_id

    def trial(group, setting, lr, seed, best, test, outcome="complete", size=2):
        run = client.create_run(exp, tags={
            PARENT_TAG: parent, SWEEP_RUN_TAG: parent, "contrasweep.sweep": "s", "contrasweep.group": group, "contrasweep.setting": setting,
            "contrasweep.config": f"cfg-{lr}", "contrasweep.group_size": str(size), "contrasweep.outcome": outcome,
            "contrasweep.data_seed": str(seed)}).info.run_id
        client.log_param(run, "hp.lr", str(lr))
        client.log_param(run, "hp.seed", str(seed))
        client.log_metric(run, "best/val/accuracy", best)
        client.log_metric(run, "test/accuracy", test)
        client.set_terminated(run)

    trial("A", "k=5", 1e-5, 0, 0.8, 0.75)
    trial("A", "k=5", 1e-5, 1, 0.6, 0.65)
    trial("B", "k=5", 2e-5, 0, 0.9, 0.95)   # the best single repeat, not the best mean
    trial("B", "k=5", 2e-5, 1, 0.4, 0.35)
    trial("C", "k=5", 3e-5, 0, 0.99, 0.99)  # its other repeat was stopped by ASHA
    trial("C", "k=5", 3e-5, 1, 0.5, 0.5, outcome="stopped")
    trial("D", "k=20", 1e-5, 0, 0.7, 0.72, size=1)
    return uri, parent


def test_aggregates_equal_numpy_over_the_stored_repeats(store):
    uri, parent = store
    found = {g.group: g for g in groups(uri, parent)}
    assert list(found) == ["A", "B", "C", "D"]
    a = found["A"]
    assert a.complete and a.hp == {"lr": "1e-05"} and a.setting == "k=5" and a.size == 2
    for metric, values in (("best/val/accuracy", [0.8, 0.6]), ("test/accuracy", [0.75, 0.65])):
        stats = a.stats(metric)
        assert stats["mean"] == pytest.approx(np.mean(values)) and stats["std"] == pytest.approx(np.std(values, ddof=1))
        assert stats["n"] == 2
    assert found["D"].stats("test/accuracy") == {"mean": pytest.approx(0.72), "std": 0.0, "n": 1}
    assert not found["C"].complete and found["C"].outcomes == {"complete": 1, "stopped": 1}


def test_selection_is_the_best_complete_mean_per_setting(store):
    uri, parent = store
    best = select(groups(uri, parent), "val/accuracy", "max")
    assert {s: g.group for s, g in best.items()} == {"k=5": "A", "k=20": "D"}
    assert select(groups(uri, parent), "val/accuracy", "min")["k=5"].group == "B"


def test_seed_summary_leaves_out_stopped_trials(store):
    uri, _ = store
    rows = {r["lr"]: r for r in seed_summary(uri, "agg", "s", "test/accuracy", by=("lr",))}
    assert rows["3e-05"]["n"] == 1 and rows["1e-05"]["n"] == 3


def test_cli_names_the_best_mean_configuration_not_the_best_trial():
    from types import SimpleNamespace

    from contrasweep.console.summary import best_lines
    from contrasweep.spec.load import validate

    sweep = validate({"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 5},
                      "grid": {"lr": [1.0e-5, 2.0e-5, 3.0e-5]}, "fixed": {"epochs": 2}, "sweep": {"seeds": [0, 1]}})
    values = {(1e-5, 0): (0.8, 2), (1e-5, 1): (0.6, 2), (2e-5, 0): (0.9, 2), (2e-5, 1): (0.4, 2),
              (3e-5, 0): (0.99, 1), (3e-5, 1): (0.98, 1)}  # 3e-5 was stopped by ASHA after epoch 1
    results = [SimpleNamespace(error=None, config={"hp": trial},
                               metrics={"best/val/accuracy": values[(trial["lr"], trial["seed"])][0],
                                        "epoch": values[(trial["lr"], trial["seed"])][1]})
               for trial in sweep.grid_trials()]
    # no test numbers (evaluation.test: reported, before its test phase): "–", never a number
    assert best_lines(results, sweep, "val/accuracy", "max", {}) == [
        "[contrasweep] best configuration: lr=1e-05: val/accuracy 0.7000 ± 0.1414, test/accuracy – (2 repeats)"]
    for result in results:
        result.metrics["test/accuracy"] = result.metrics["best/val/accuracy"] - 0.1
    assert best_lines(results, sweep, "val/accuracy", "max", {}) == [
        "[contrasweep] best configuration: lr=1e-05: val/accuracy 0.7000 ± 0.1414, test/accuracy 0.6000 ± 0.1414 "
        "(2 repeats)"]
    # one configuration (an empty grid): what the spec's fixed section set, not every default (issue 57)
    one = validate({"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 5}, "grid": {},
                    "fixed": {"lr": 1.0e-4, "epochs": 2}, "sweep": {"seeds": [0, 1]}})
    results = [SimpleNamespace(error=None, config={"hp": trial}, metrics={"best/val/accuracy": 0.5, "epoch": 2})
               for trial in one.grid_trials()]
    (line,) = best_lines(results, one, "val/accuracy", "max", {})
    assert line == ("[contrasweep] best configuration: the spec's configuration (lr=0.0001, epochs=2): val/accuracy "
                    "0.5000 ± 0.0000, test/accuracy – (2 repeats)")
