"""A sweep budget on real Ray, MLflow and Optuna with the tiny BERT (``sweep.budget``, issue 43):
a budget smaller than one trial lets the first trial run and no other (the gate admits a trial
while nothing has ended and nothing is spent: then it expects every trial to take as long as
the first), the sweep ends early and exits 0 with every run FINISHED, the configuration cut
short says so, and ``extend --set sweep.budget.slot_hours=...`` runs what the budget left,
training nothing twice. Assertions read MLflow, the sweep's ``budget.json``, its record and
the Optuna study, not the console alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contrasweep as cs
from conftest import write_spec
from contrasweep.folder.budget_record import BUDGET_FILE
from contrasweep.tracking.store import BUDGET_CUT, KIND_TAG, OUTCOME_TAG, get_client

pytestmark = pytest.mark.slow

TINY = 1e-6  # slot-hours: 3.6 ms, less than any trial


def _runs(uri: str, kind: str) -> list:
    client = get_client(uri)
    exp = client.get_experiment_by_name("tests")
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`{KIND_TAG}` = '{kind}'", max_results=500)


def _trained(folder: Path) -> list[str]:
    """The trial folders whose trial reported a result (a trial the budget ended has none)."""
    return [p.name for p in folder.glob("tune*/run_trial_*") if (p / "result.json").exists()
            and (p / "result.json").stat().st_size]


def test_a_budget_ends_the_grid_early_and_extend_runs_what_it_left(ray_session, tiny_model_dir, tmp_path, cache_dir,
                                                                  capsys):
    from contrasweep.cli import main

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = tmp_path / "sweeps"
    spec = write_spec(tmp_path / "budget.yaml", tiny_model_dir, reported={"lr": 1.0e-2}, grid={"lr": [1.0e-2, 1.0e-3]},
                      fixed={"epochs": 1, "batch_size": 8, "warmup_ratio": 0.0},
                      sweep={"seeds": [0, 1, 2], "scheduler": "none", "max_concurrent": 1,
                             "budget": {"slot_hours": TINY}})
    assert main(["--root", str(root), "run", str(spec), "--name", "b", "--tracking-uri", uri, "--no-tsne"]) == 0
    folder = root / "b"
    journal = json.loads((folder / BUDGET_FILE).read_text())
    assert journal["ended"] is not None and journal["spent_s"] > TINY * 3600
    (trial,) = _runs(uri, "trial")  # the first trial alone ran
    (config,) = _runs(uri, "configuration")
    assert trial.info.status == "FINISHED" and trial.data.tags[OUTCOME_TAG] == "complete"
    assert config.info.status == "FINISHED" and config.data.tags[OUTCOME_TAG] == BUDGET_CUT
    assert config.data.metrics["n_repeats"] == 1 and journal["ended"]["cut"] == {config.data.tags["contrasweep.group"]: 1}
    (sweep_run,) = _runs(uri, "sweep")
    assert sweep_run.info.status == "FINISHED"
    assert json.loads((folder / "sweep.json").read_text())["status"] == "finished"
    assert len(_trained(folder)) == 1
    table = (folder / "report" / "configurations_b.csv").read_text()
    assert "cut short by the budget,1,3," in table  # its outcome, n of its repeats
    out = capsys.readouterr()
    text = out.out + out.err
    assert "[contrasweep] sweep 'b' finished: 1 trial: 1 complete" in text
    assert "it ended the sweep: 5 trials did not run, 1 configuration cut short (outcome budget" in text
    # nothing completed all its repeats: nothing selected, said with the budget that would complete one (issue 57)
    line = next(l for l in text.splitlines() if l.startswith("[contrasweep] nothing selected: "))
    assert "before any configuration completed its 3 repeats, so there is no best configuration" in line
    assert float(line.split("contrasweep extend b --set sweep.budget.slot_hours=")[1]) > TINY
    assert "[contrasweep] best configuration" not in text
    assert main(["--root", str(root), "list"]) == 0
    assert "none: the budget ended the sweep first" in capsys.readouterr().out
    configs = cs.load("b", root=root).configurations()  # the Python API says which left and why (issue 72)
    assert configs["budget_cut"].tolist() == [True] and configs["repeats"].tolist() == [1]
    assert configs["repeats_expected"].tolist() == [3] and not configs["selected"].any()

    # a budget may only grow; a larger one runs the five trials it left, none of them twice
    assert main(["--root", str(root), "extend", "b", "--set", "sweep.budget.slot_hours=0.0000001"]) == 2
    assert "sweep.budget can only grow" in capsys.readouterr().err
    assert main(["--root", str(root), "extend", "b", "--set", "sweep.budget.slot_hours=10", "--no-tsne"]) == 0
    trials = _runs(uri, "trial")
    assert len(trials) == 6 and all(r.info.status == "FINISHED" for r in trials)
    assert len({r.data.tags["contrasweep.config_key"] for r in trials}) == 6
    configs = _runs(uri, "configuration")
    assert sorted(r.data.tags[OUTCOME_TAG] for r in configs) == ["complete", "complete"]
    assert all(r.data.metrics["n_repeats"] == 3 and r.info.status == "FINISHED" for r in configs)
    assert len(_trained(folder)) == 6  # 1 in the run, 5 in its extension
    grown_api = cs.load("b", root=root)  # every trial of both drivers, nothing cut any more
    assert len(grown_api.trials()) == 6 and not grown_api.configurations()["budget_cut"].any()
    grown = json.loads((folder / BUDGET_FILE).read_text())
    assert grown["ended"] is None and grown["slot_hours"] == 10 and grown["ended_n"] == 6


def test_a_budget_ends_a_study_sweep_and_its_cut_suggestion_is_not_told(ray_session, tiny_model_dir, tmp_path,
                                                                          cache_dir):
    import optuna

    from contrasweep.cli import main

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = tmp_path / "sweeps"
    spec = write_spec(tmp_path / "study.yaml", tiny_model_dir, grid={}, reported={},
                      search={"lr": {"loguniform": [1.0e-4, 1.0e-2]}}, fixed={"epochs": 1, "batch_size": 8},
                      sweep={"searcher": "optuna", "scheduler": "none", "seeds": [0, 1], "num_samples": 3,
                             "max_concurrent": 1, "budget": {"slot_hours": TINY}})
    assert main(["--root", str(root), "run", str(spec), "--name", "s", "--tracking-uri", uri, "--no-tsne"]) == 0
    (trial,) = _runs(uri, "trial")
    (config,) = _runs(uri, "configuration")
    assert trial.info.status == config.info.status == "FINISHED" and config.data.tags[OUTCOME_TAG] == BUDGET_CUT
    (study,) = optuna.get_all_study_summaries(f"sqlite:///{root / 's' / 'optuna.db'}")
    (suggestion,) = optuna.load_study(study_name=study.study_name,
                                      storage=f"sqlite:///{root / 's' / 'optuna.db'}").get_trials()
    # one suggestion asked, one of its two repeats run: never told the study (an extension runs its other repeat)
    assert suggestion.state == optuna.trial.TrialState.RUNNING and len(suggestion.user_attrs) >= 1
    assert json.loads((root / "s" / "sweep.json").read_text())["status"] == "finished"
