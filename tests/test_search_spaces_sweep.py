"""Every shipped spec (``search_spaces/*.yaml``) passes ``--smoke-test`` end to end (real local
Ray, real MLflow sqlite store) on the tiny BERT: the YAML as shipped, through the smoke-test path
(``load_spec(..., smoke=True)``: one epoch wherever the spec sets its epochs, searched or fixed,
and the first 2 grid trials), with only the encoder, the data size and what the tiny model needs
overridden (EXTRA)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dashboards.trials import history, parent_runs, trial_runs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

EXTRA = {
    "lacon.yaml": ["fixed.heads=2"],  # heads must divide the tiny model's width (32)
    "lacon_fusion.yaml": ["fixed.heads=2"],
    # after the reported (LS) point, an EPO point; every trial tests itself (the two differ in more than
    # the solver: only the selected one is reported), so that both solvers' test accuracy is summarised
    "scl_moo.yaml": ["grid.moo=[epo]", "evaluation.test=all"],
    "supcl_seq.yaml": ["reported.batch_size=16"],  # in the search domain; the next point is Table 1's first block (batch 800: all 20 rows)
    **{f"{m}_small.yaml": ["fixed.batch_size=8", "fixed.eval_kmeans_runs=2", "fixed.probe_splits=1", "fixed.probe_iterations=20"]
       for m in ("simcse", "vascl")},
}
EXTRA["vascl_small.yaml"] += ["fixed.neighbours=3"]
EXTRA["simcse.yaml"] = EXTRA["simcse_small.yaml"]
EXTRA["vascl.yaml"] = EXTRA["vascl_small.yaml"]
EXTRA["abalone_small.yaml"] = ["data={task: multilabel, source: bbc_multilabel, n_docs: 60}", "fixed.queue_size=16",
                               "fixed.probe_lrs=[0.1]", "fixed.probe_weight_decays=[0.01]", "fixed.probe_epochs=2",
                               "fixed.batch_size=8"]
EXTRA["abalone.yaml"] = EXTRA["abalone_small.yaml"]  # its grid searches the epochs: smoke cuts them to 1 there
SPECS = sorted(p.name for p in (ROOT / "search_spaces").glob("*.yaml"))


def test_every_shipped_spec_is_swept_here():
    assert len(SPECS) >= 13 and set(EXTRA) <= set(SPECS)


@pytest.mark.parametrize("name", SPECS)
def test_search_space_sweeps_on_tiny_model(name, ray_session, tiny_model_dir, cache_dir, tmp_path, capsys):
    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec import load as spec

    overrides = [f"encoder.name={tiny_model_dir}", "encoder.max_length=32",
                 "data={source: bbc_news, protocol: few_shot, k: 4, test_fraction: 0.05}",  # multi-label: see EXTRA
                 "sweep.max_concurrent=2", "tracking.experiment=spaces", *EXTRA.get(name, [])]
    if name == "simcse_small.yaml":  # with STS pairs: val/sts_spearman reaches MLflow too
        from test_sts import write_pairs

        overrides.append(f"evaluation.sts={write_pairs(tmp_path / 'pairs.csv')}")
    if name == "ce.yaml":  # a user's own CSV with dirty rows: what was dropped, and why, is said and logged
        from test_data import _rows, _write_csv

        # issue 57: 'banana ' is banana (spaces stripped by default); 'Apple' is another class, named with the setting
        dirty = _rows() + [{"text": " ", "label": "apple"}, {"text": "orphan", "label": ""}, {"text": "odd", "label": "7"},
                           {"text": "spaced", "label": "banana "}, {"text": "cased", "label": "Apple"}]
        overrides.append(f"data={{source: {_write_csv(tmp_path / 'own.csv', dirty)}, protocol: full, test_fraction: 0.1}}")
    sweep = spec.load_spec(ROOT / "search_spaces" / name, overrides, smoke=True)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tune.run(sweep, "s", sweeps.sweeps_root(str(tmp_path / "sweeps")), uri, None)
    n = min(2, len(sweep.grid_configs()))
    assert len(results) == n and not any(r.error for r in results)
    parent = parent_runs(uri, "spaces", "s")[0]
    runs = trial_runs(uri, parent.info.run_id)
    err = capsys.readouterr().err
    if name == "ce.yaml":
        assert "[contrasweep] data: dropped 2 rows of the source's train split: 1 empty text, 1 no label\n" in err
        assert "[contrasweep] data: class '7' has no row in" in err
        assert ("[contrasweep] data: labels 'banana' and 'banana ' are one class 'banana' (data.labels: surrounding "
                "spaces stripped)\n") in err
        assert ("[contrasweep] data: labels 'Apple' and 'apple' differ only in case: set data.labels.casefold: true "
                "to merge them\n") in err
        from mlflow.tracking import MlflowClient

        stats = json.loads(Path(MlflowClient(uri).download_artifacts(parent.info.run_id, "data_stats.json", str(tmp_path))).read_text())
        assert stats["dropped"] == {"train": {"empty text": 1, "no label": 1}} and stats["train"]["per_class"]["7"] in (0, 1)
        assert stats["labels"] == {"merged": {"banana": ["banana", "banana "]}, "similar": [
            {"names": ["Apple", "apple"], "differ_in": "case", "set": "data.labels.casefold: true"}]}
    assert len(runs) == n and all(r.info.status == "FINISHED" for r in runs)
    assert all(r.data.tags["contrasweep.last_epoch"] == "1" for r in runs)  # one epoch, wherever the spec sets them
    objective = sweep.metric[0].removeprefix("val/")
    # evaluation.test: reported: the selected configuration's runs, and those on its slices, hold test
    # numbers (every run where its trial tested itself: Searcher.tests_in_trials)
    from contrasweep.search.registry import tests_in_trials
    from contrasweep.tracking.aggregate import groups_of, reported

    shown = reported(groups_of(runs), sweep.objective.metric, sweep.objective.mode, sweep.varied)
    tested = {r["run_id"] for g in shown for r in g.repeats}
    assert tested and all(r.data.tags["contrasweep.outcome"] == "complete" for r in runs)
    for run in runs:
        assert f"val/{objective}" in run.data.metrics
        assert (f"test/{objective}" in run.data.metrics) == (tests_in_trials(sweep) or run.info.run_id in tested)
        if sweep.evaluation.get("sts"):
            assert -1.0 <= run.data.metrics["val/sts_spearman"] <= 1.0
        if sweep.method == "supcl_seq":  # both stages' metrics
            assert "train/loss" in run.data.metrics and "stage2/train_accuracy" in run.data.metrics
        if sweep.method == "scl_moo":  # α, ℓ1, ℓ2 per optimiser step, steps 1..n
            steps = [s for s, _ in history(uri, run.info.run_id, "step/moo/alpha_1")]
            assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 2
            alphas = [v for _, v in history(uri, run.info.run_id, "step/moo/alpha_1")]
            assert all(0.0 <= a <= 1.0 for a in alphas)
            assert len(history(uri, run.info.run_id, "step/moo/l2")) == len(steps)
    if sweep.method == "scl_moo":
        assert sorted(r.data.params["hp.moo"] for r in runs) == ["epo", "ls"]
        from dashboards.compare import seed_summary

        rows = seed_summary(uri, "spaces", "s", "test/accuracy", by=("moo",))
        by_moo = {r["moo"]: r for r in rows}
        assert set(by_moo) == {"epo", "ls"} and all(r["n"] == 1 and r["std"] == 0.0 for r in rows)
        assert by_moo["ls"]["mean"] == next(r.data.metrics["test/accuracy"] for r in runs if r.data.params["hp.moo"] == "ls")
    # chance levels (issue 55): the sweep run holds what learning nothing scores on the objective,
    # and each complete configuration run a verdict against it, kept in the record for the summary
    from mlflow.tracking import MlflowClient

    level = parent.data.metrics[f"chance/{sweep.objective.metric}"]
    assert 0.0 <= level <= 1.0 and f"chance/test/{objective}" in parent.data.metrics
    configs = MlflowClient(uri).search_runs([parent.info.experiment_id], filter_string=(
        f"tags.`mlflow.parentRunId` = '{parent.info.run_id}' and tags.`contrasweep.kind` = 'configuration'"))
    from contrasweep.folder.record import read as read_record

    record = read_record(tmp_path / "sweeps" / "s" / "tracking.json")
    assert configs and all(c.data.tags["contrasweep.learned"] == ("no", "yes")[record["verdicts"][c.data.tags["contrasweep.group"]]["learned"]]
                           and c.data.metrics[f"chance/best/{sweep.objective.metric}"] == pytest.approx(level) for c in configs)
    chosen = parent.data.tags.get("contrasweep.learned")  # the selected configuration's verdict, on the sweep run
    from contrasweep.console.summary import summary_lines

    lines = summary_lines(results, sweep.objective.metric, sweep.objective.mode, "s", "finished", sweep, tmp_path / "sweeps")[0]
    said = [line for line in lines if line.startswith(tuple(f"[contrasweep] {verdict}: the selected configuration's "
                                                            f"best/{sweep.objective.metric} "
                                                            for verdict in ("did not learn", "not shown to learn")))]
    assert chosen in ("yes", "no") and len(said) == (chosen == "no"), lines
    if name == "ce.yaml":  # the dummy predictors of the data, in data_stats.json
        val = stats["validation"]["per_class"]
        train = stats["train"]["per_class"]
        majority = max(train, key=lambda c: (train[c], -list(train).index(c)))
        assert stats["chance"]["validation"]["majority"]["accuracy"] == pytest.approx(val[majority] / sum(val.values()))
