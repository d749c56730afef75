"""``contrasweep.api.frames`` on runs built by hand (fast): MLflow's strings become the values they
hold, but keys stay text, since a hex key can look like a number."""

from __future__ import annotations

from types import SimpleNamespace

from contrasweep.api.frames import trial_rows, value


def _run(run_id: str, start: int, tags: dict, params: dict, metrics: dict) -> SimpleNamespace:
    info = SimpleNamespace(run_id=run_id, start_time=start, end_time=start + 2500, status="FINISHED")
    return SimpleNamespace(info=info, data=SimpleNamespace(tags=tags, params=params, metrics=metrics))


def test_values_are_parsed_and_keys_stay_text():
    assert [value(t) for t in ("3", "1e-05", "0.1", "True", "false", "None", "linear", None)] == [
        3, 1e-05, 0.1, True, False, None, "linear", None]
    tags = {"contrasweep.trial_id": "00061170", "contrasweep.group": "1234e567", "contrasweep.config": "0000000000000001",
            "mlflow.runName": "ce lr=0.001 · seed=0", "contrasweep.variant": "1", "contrasweep.data_seed": "1",
            "contrasweep.outcome": "stopped", "contrasweep.last_epoch": "2"}
    params = {"hp.lr": "0.001", "hp.seed": "0", "hp.compile": "False", "data.source": "bbc_news", "method": "ce"}
    later = _run("b", 2000, {**tags, "contrasweep.trial_id": "0abc"}, params, {"best/epoch": 1.0, "epoch": 2.0})
    frame = trial_rows([later, _run("a", 1000, tags, params, {"best/epoch": 2.0, "test/accuracy": 0.5})])
    assert frame["run_id"].tolist() == ["a", "b"]  # oldest first
    row = frame.iloc[0].to_dict()
    assert (row["trial_id"], row["group"], row["config"]) == ("00061170", "1234e567", "0000000000000001")
    assert (row["variant"], row["data_seed"], row["seed"], row["last_epoch"], row["best_epoch"]) == (1, 1, 0, 2, 2)
    assert (row["hp.lr"], row["hp.compile"], row["data.source"], row["setting"]) == (0.001, False, "bbc_news", "")
    assert row["outcome"] == "stopped" and row["duration_s"] == 2.5 and row["test/accuracy"] == 0.5
    assert "method" not in frame.columns and "epoch" not in frame.columns  # not a value; the last epoch's bookkeeping
