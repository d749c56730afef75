"""Racing on real Ray, MLflow and the tiny BERT (``sweep.racing``, issue 43): a configuration
at chance (lr 1e-7) leaves the race before its last repeat while a learning one (lr 1e-2) runs
every repeat; a racing driver SIGKILLed mid-race and resumed trains no repeat twice and ends
with the same eliminations. Assertions read MLflow, the sweep's race journal (``race.json``)
and its record, not the console alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import contrasweep as cs
from conftest import write_spec
from contrasweep.folder import race_record
from contrasweep.folder.race_record import RACE_FILE
from contrasweep.spec.identity import key_of
from contrasweep.tracking.store import (ELIMINATED, KIND_TAG, OUTCOME_TAG, RACE_BEST_TAG, RACE_P_VALUE_TAG, RACE_ROUND_TAG,
                                        get_client)

pytestmark = pytest.mark.slow

SEEDS = [0, 1, 2, 3]


def _spec(tmp_path: Path, model_dir: str, **sweep) -> Path:
    return write_spec(tmp_path / "race.yaml", model_dir, data={"k": 4}, reported={"lr": 1.0e-2}, grid={"lr": [1.0e-2, 1.0e-7]},
                      fixed={"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0, "checkpoint_every": 1},
                      sweep={"seeds": SEEDS, "scheduler": "none", "max_concurrent": 2,
                             "racing": {"min_repeats": 3, "alpha": 0.05}, **sweep})


def _runs(uri: str, kind: str) -> list:
    client = get_client(uri)
    exp = client.get_experiment_by_name("tests")
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`{KIND_TAG}` = '{kind}'", max_results=500)


def _by_lr(runs) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in runs:
        out.setdefault(run.data.params["hp.lr"], []).append(run)
    return out


def _check_race(uri: str, folder: Path, repeats: int = len(SEEDS)) -> dict:
    """What a finished race holds: the chance configuration eliminated after 3 repeats with its
    round and p-value, the learning one complete over all its repeats, every run FINISHED."""
    journal = race_record.read(folder / RACE_FILE)
    configs = _by_lr(_runs(uri, "configuration"))
    trials = _by_lr(_runs(uri, "trial"))
    assert {lr: len(runs) for lr, runs in trials.items()} == {"0.01": repeats, "1e-07": 3}
    assert all(r.info.status == "FINISHED" for rs in trials.values() for r in rs)
    (chance,), (learner,) = configs["1e-07"], configs["0.01"]
    assert chance.data.tags[OUTCOME_TAG] == ELIMINATED and chance.data.tags[RACE_ROUND_TAG] == "3"
    assert float(chance.data.tags[RACE_P_VALUE_TAG]) <= 0.05
    assert chance.data.tags[RACE_BEST_TAG] == learner.info.run_id
    assert chance.data.metrics["n_repeats"] == 3 and chance.info.status == "FINISHED"
    assert learner.data.tags[OUTCOME_TAG] == "complete" and learner.data.metrics["n_repeats"] == repeats
    assert journal["needed"] == 0 and len(journal["out"]) == 1
    return journal


def test_a_configuration_at_chance_leaves_the_race_and_a_learning_one_runs_every_repeat(
        ray_session, tiny_model_dir, tmp_path, cache_dir, capsys):
    """Then ``extend`` with two more seeds continues the race: the learning configuration gets
    them, the eliminated one none."""
    from contrasweep.cli import main

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = _spec(tmp_path, tiny_model_dir)
    assert main(["--root", str(tmp_path / "sweeps"), "run", str(spec), "--name", "race", "--tracking-uri", uri,
                 "--no-tsne"]) == 0
    journal = _check_race(uri, tmp_path / "sweeps" / "race")
    (round3,) = [r for r in journal["rounds"][""] if r["round"] == 3]
    assert list(round3["p_values"].values())[0] <= 0.05
    out = capsys.readouterr()
    assert "[contrasweep] racing (min_repeats 3, alpha 0.05): 1 configuration eliminated; racing saved 1 of 8 trials " \
           "(7 ran)" in out.out + out.err
    assert "trials ended 7/7: ce lr=0.01 · seed=3" in out.err  # the progress counts what the race still needs

    # the report draws the race, and its table says where the eliminated configuration left
    report = (tmp_path / "sweeps" / "race" / "report" / "report.html").read_text()
    assert "race: the race" in report and "1 configuration eliminated, 1 repeat not run." in report
    table = (tmp_path / "sweeps" / "race" / "report" / "configurations_race.csv").read_text()
    assert "eliminated at round 3 (p " in table and "3,4," in table  # n of the 4 repeats per configuration

    root = tmp_path / "sweeps"
    configs = cs.load("race", root=root).configurations()  # the Python API says who left, when and why (issue 72)
    left, stayed = configs[configs["raced_out"]], configs[~configs["raced_out"]]
    assert left["race_round"].tolist() == [3] and left["race_p"].iloc[0] <= 0.05 and left["repeats"].tolist() == [3]
    assert stayed["repeats"].tolist() == [4] and stayed["selected"].tolist() == [True] and not left["selected"].any()
    assert main(["--root", str(root), "extend", "race", "--set", "sweep.seeds=[0, 1, 2, 3, 4, 5]", "--no-tsne"]) == 0
    grown = _check_race(uri, root / "race", repeats=6)
    extended = cs.load("race", root=root)  # every trial of both drivers
    assert len(extended.trials()) == 9 and sorted(extended.configurations()["repeats"]) == [3, 6]
    assert grown["out"] == journal["out"] and sorted(grown["repeats"][learner_group(grown)]) == [
        f"seed={s}" for s in range(6)]
    assert len(list((root / "race" / "tune-ext1").glob("run_trial_*"))) == 2  # the two new seeds of the learning one
    assert main(["--root", str(root), "extend", "race", "--set", "sweep.seeds=[0, 1, 2, 3, 4, 5, 6]", "--top", "1"]) == 2
    assert "--top 1 with sweep.racing: the race chooses" in capsys.readouterr().err


def learner_group(journal: dict) -> str:
    (group,) = [g for g in journal["repeats"] if g not in journal["out"]]
    return group


def test_a_race_killed_mid_race_resumes_without_running_a_repeat_twice(ray_address, tiny_model_dir, tmp_path, cache_dir):
    """A real driver attached to the suite's Ray, SIGKILLed the moment its race has eliminated
    the chance configuration (the learning one's last repeat still to run), then resumed."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    folder = tmp_path / "sweeps" / "race"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["CONTRASWEEP_HOME"] = str(tmp_path / "sweeps")
    spec = _spec(tmp_path, tiny_model_dir, max_concurrent=1)
    proc = subprocess.Popen([sys.executable, "-m", "contrasweep", "run", str(spec), "--name", "race", "--tracking-uri", uri,
                             "--no-tsne", "--address", ray_address], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline, journal = time.time() + 300, {}
    while time.time() < deadline and proc.poll() is None:
        try:
            journal = race_record.read(folder / RACE_FILE) or {}
        except (OSError, ValueError):
            journal = {}
        if journal.get("out"):
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stdout.read()[-3000:]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    before = journal["out"]
    assert sum(len(r) for r in journal["repeats"].values()) == 6  # both first rounds; the fourth repeat not ended
    done = subprocess.run([sys.executable, "-m", "contrasweep", "resume", "race", "--no-tsne", "--address", ray_address],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = _check_race(uri, folder)
    assert after["out"] == before  # no elimination undone or redone
    # seven repeats, each trained each epoch once (MLflow, below), whichever driver's Tune trial ran
    # it (a repeat the kill cut runs on in the resumed driver's experiment, tune-r1)
    reports = [json.loads(line) for p in folder.glob("tune*/run_trial_*/result.json") for line in p.read_text().splitlines()]
    assert len({key_of(r["config"]) for r in reports}) == 7, sorted({key_of(r["config"]) for r in reports})
    client = get_client(uri)
    for run in _runs(uri, "trial"):
        assert [m.step for m in client.get_metric_history(run.info.run_id, "val/accuracy")] == [1, 2, 3]


def test_group_asha_inside_a_race_stops_a_configuration_at_a_rung_of_its_first_round(
        ray_session, tiny_model_dir, tmp_path, cache_dir):
    """ASHA's rungs wait for a configuration's first round (2 repeats here), not for all 4: the
    configuration at chance stops at rung 1 and leaves the race as stopped, its waiting repeat
    with it (never issued again); of the two that learn, the worse leaves after its first round:
    stopped at rung 1 or rung 2 (grace 1, factor 1.5: rungs 1, 2, 3) where its group met the rung
    after the better one's mean was recorded (asynchronous halving decides in the order groups
    arrive, and which trial process gets going first decides that), dropped by the race after
    round 2 otherwise (CI of 37c5229 met rung 2 second: stopped there)."""
    from contrasweep.cli import main
    from contrasweep.folder.record import TrackingState

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = write_spec(tmp_path / "asha.yaml", tiny_model_dir, data={"k": 4}, reported={"lr": 1.0e-2},
                      grid={"lr": [1.0e-2, 3.0e-3, 1.0e-7]}, fixed={"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0},
                      sweep={"seeds": SEEDS, "scheduler": "asha", "asha": {"grace_period": 1, "reduction_factor": 1.5},
                             # alpha 0.4: the 2 configurations' round is Holm over its 2 ordered pairs, the same
                             # decision as the test against the round's best at 0.2 before issue 69
                             "max_concurrent": 2, "racing": {"min_repeats": 2, "alpha": 0.4}})
    assert main(["--root", str(tmp_path / "sweeps"), "run", str(spec), "--name", "asha", "--tracking-uri", uri,
                 "--no-tsne"]) == 0
    trials = _by_lr(_runs(uri, "trial"))
    assert {lr: len(runs) for lr, runs in trials.items()} == {"0.01": 4, "0.003": 2, "1e-07": 2}
    decisions = TrackingState(tmp_path / "sweeps" / "asha" / "group_asha.json").data["decisions"]
    rung_1 = list(decisions["1"].values())
    assert sorted(rung_1) in (["continue", "continue", "stop"], ["continue", "stop", "stop"]), rung_1
    stops = [d for rung in decisions.values() for d in rung.values()].count("stop")
    assert stops in (1, 2), decisions  # lr=1e-7 at rung 1; lr=1e-2 never (complete, below)
    worse = "stopped" if stops == 2 else ELIMINATED  # how lr=3e-3 left: ASHA at rung 1 or 2, or the race
    outcomes = {lr: sorted(r.data.tags[OUTCOME_TAG] for r in runs) for lr, runs in trials.items()}
    assert outcomes["1e-07"] == ["stopped", "stopped"]
    assert outcomes["0.003"] == (["stopped", "stopped"] if worse == "stopped" else ["complete", "complete"])
    configs = {lr: runs[0].data.tags[OUTCOME_TAG] for lr, runs in _by_lr(_runs(uri, "configuration")).items()}
    assert configs == {"0.01": "complete", "0.003": worse, "1e-07": "stopped"}
    journal = race_record.read(tmp_path / "sweeps" / "asha" / RACE_FILE)
    assert sorted(o["outcome"] for o in journal["out"].values()) == sorted([worse, "stopped"])
    assert len(list((tmp_path / "sweeps" / "asha" / "tune").glob("run_trial_*"))) == 8  # no repeat issued twice


def test_a_random_search_races_its_suggestions(ray_session, tiny_model_dir, tmp_path, cache_dir, capsys):
    """The study's race (``contrasweep.search.study_race``): the paper's point (lr 1e-2) first,
    then the random sampler's draw at chance (lr 1e-7, seed 0's second draw), judged at its third
    repeat against the first suggestion and eliminated; the study is told the mean of what it ran."""
    import optuna

    from contrasweep.cli import main

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = write_spec(tmp_path / "random.yaml", tiny_model_dir, data={"k": 4}, reported={"lr": 1.0e-2}, grid={},
                      search={"lr": {"choice": [1.0e-2, 1.0e-7]}},
                      fixed={"epochs": 3, "batch_size": 8, "warmup_ratio": 0.0, "checkpoint_every": 1},
                      # one trial at a time: the race is asynchronous, and with two a chance suggestion's third
                      # repeat could end before the first suggestion's, judged then with no peer at its round
                      sweep={"searcher": "random", "num_samples": 2, "seeds": SEEDS, "scheduler": "none",
                             "max_concurrent": 1, "racing": {"min_repeats": 3, "alpha": 0.05}})
    assert main(["--root", str(tmp_path / "sweeps"), "run", str(spec), "--name", "rs", "--tracking-uri", uri,
                 "--no-tsne"]) == 0
    folder = tmp_path / "sweeps" / "rs"
    _check_race(uri, folder)
    out = capsys.readouterr()
    assert "1 configuration eliminated; racing saved 1 of 8 trials (7 ran)" in out.out + out.err
    learner, chance = optuna.load_study(study_name="rs", storage=f"sqlite:///{folder / 'optuna.db'}").trials
    assert chance.params["lr"] == 1.0e-7 and chance.user_attrs["race."]["round"] == 3
    assert chance.state.name == learner.state.name == "COMPLETE"
    assert len([k for k in chance.user_attrs if k.startswith("repeat.")]) == 3
