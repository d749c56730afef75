"""``evaluation.test: reported`` without Ray: the trial skips the test split; the test split
evaluated afterwards from a trial's best folder (``trainables.test_split``) gives exactly the
``test/*`` the trial gives when it tests after its last epoch, for every registered method;
the rule of what a report shows (``tracking.aggregate.reported``); the spec's one-line errors."""

from __future__ import annotations

import pytest

from contrasweep.errors import SpecError
from contrasweep.tracking.aggregate import Group, reported, select
from trainables.checkpoints import best_of_trial
from trainables.loop import train
from trainables.registry import get_method
from trainables.sessions import LocalSession
from trainables.test_split import evaluate_best, evaluate_trial

from helpers import loop_config, multilabel_tables, toy_tables
from test_methods_contract import CASES, IDS


@pytest.fixture(scope="module")
def tables(tiny_model_dir):
    return {"single": toy_tables(tiny_model_dir, n_per_class=8), "multi": multilabel_tables(tiny_model_dir)}


@pytest.mark.parametrize("name, hp", CASES, ids=IDS)
def test_the_test_split_after_the_sweep_equals_the_one_in_the_trial(name, hp, tiny_model_dir, tables, tmp_path):
    data = tables[get_method(name).label_kind]
    first = get_method(name).metric_names[0]
    config = {**loop_config(tiny_model_dir, epochs=2, **hp), "method": name, "metric": f"val/{first}"}
    session = LocalSession(str(tmp_path))
    train(config, data, session)
    in_trial = {k: v for k, v in session.reports[-1].items() if k.startswith("test/")}
    assert f"test/{first}" in in_trial
    folder = best_of_trial(session.state_dir, int(session.reports[-1]["best/epoch"]))
    after = evaluate_best(folder, data)
    assert set(after) == set(in_trial) | {"time/test_s"}
    for key, value in in_trial.items():
        assert after[key] == pytest.approx(value, abs=1e-9), key
    # the same weights handed over as bytes (the trial's MLflow model, when its state folder dropped them)
    files = {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()}
    assert evaluate_trial(None, None, files, data)[f"test/{first}"] == pytest.approx(in_trial[f"test/{first}"], abs=1e-9)


def test_a_trial_of_a_reported_sweep_skips_the_test_split(tiny_model_dir, tables, tmp_path):
    session = LocalSession(str(tmp_path))
    train({**loop_config(tiny_model_dir, epochs=2), "evaluate_test": False}, tables["single"], session)
    assert session.reports[-1]["epoch"] == 2 and "best/val/accuracy" in session.reports[-1]
    assert not any(k.startswith("test/") or k == "time/test_s" for r in session.reports for k in r)


def _group(lr: str, wd: str, val: float, setting: str = "", complete: bool = True) -> Group:
    group = Group(group=f"{setting}{lr}{wd}", setting=setting, config=f"{lr}{wd}", hp={"lr": lr, "weight_decay": wd,
                                                                                         "epochs": "2"}, size=1)
    group.add("complete" if complete else "stopped", {"metrics": {"best/val/accuracy": val}, "run_id": group.group})
    return group


def test_reported_is_the_selected_group_and_its_slices():
    # lr 3 × weight decay 2; the best is (b, 0)
    values = {("a", "0"): 0.5, ("b", "0"): 0.9, ("c", "0"): 0.6, ("a", "1"): 0.7, ("b", "1"): 0.8, ("c", "1"): 0.4}
    found = [_group(lr, wd, v) for (lr, wd), v in values.items()]
    keys = ["lr", "weight_decay"]
    shown = {(g.hp["lr"], g.hp["weight_decay"]) for g in reported(found, "val/accuracy", "max", keys)}
    assert shown == {("b", "0"), ("a", "0"), ("c", "0"), ("b", "1")}
    # a searcher's sweep: the selected group alone
    assert [g.hp["lr"] for g in reported(found, "val/accuracy", "max", keys, slices=False)] == ["b"]
    # mode min picks (c, 1): its slices are (a, 1), (b, 1) and (c, 0)
    shown = {(g.hp["lr"], g.hp["weight_decay"]) for g in reported(found, "val/accuracy", "min", keys)}
    assert shown == {("c", "1"), ("a", "1"), ("b", "1"), ("c", "0")}


def test_equal_means_select_the_same_group_whatever_the_order():
    # two concurrent trials start in either order; a tie must not follow it (a CI run selected
    # (0.001, 0.1) in one sweep and (0.001, 0.0) in its twin, both at 0.25)
    found = [_group("a", "0", 0.25), _group("a", "1", 0.25), _group("b", "0", 0.2)]
    for order in (found, found[::-1]):
        assert select(order, "val/accuracy", "max")[""].group == "a0"
    low = [_group("a", "1", 0.1), _group("a", "0", 0.1), _group("b", "0", 0.2)]
    assert select(low, "val/accuracy", "min")[""].group == select(low[::-1], "val/accuracy", "min")[""].group == "a0"
    shown = [{(g.hp["lr"], g.hp["weight_decay"]) for g in reported(o, "val/accuracy", "max", ["lr", "weight_decay"])}
             for o in (found, found[::-1])]
    assert shown[0] == shown[1] == {("a", "0"), ("a", "1"), ("b", "0")}


def test_reported_works_per_setting_and_never_shows_an_incomplete_group():
    found = [_group("a", "0", 0.9, "k=4"), _group("b", "0", 0.5, "k=4"), _group("c", "0", 0.8, "k=4", complete=False),
             _group("a", "0", 0.1, "k=8"), _group("b", "0", 0.3, "k=8"), _group("a", "1", 0.2, "k=8")]
    shown = {(g.setting, g.hp["lr"], g.hp["weight_decay"]) for g in reported(found, "val/accuracy", "max",
                                                                             ["lr", "weight_decay"])}
    assert shown == {("k=4", "a", "0"), ("k=4", "b", "0"), ("k=8", "b", "0"), ("k=8", "a", "0")}


def test_the_spec_takes_reported_or_all(tmp_path, tiny_model_dir):
    from conftest import write_spec

    from contrasweep.spec.load import load_spec

    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir)
    assert load_spec(spec).test_split == "reported"
    assert load_spec(spec, ["evaluation.test=all"]).test_split == "all"
    with pytest.raises(SpecError, match=r"^evaluation.test='some' is not allowed; allowed: reported, all"):
        load_spec(spec, ["evaluation.test=some"])
    with pytest.raises(SpecError, match="allowed: evaluation.sts, evaluation.test, evaluation.alpha$"):
        load_spec(spec, ["evaluation.tests=all"])
    # the level of the test that a configuration beat chance (contrasweep.tracking.verdict)
    assert load_spec(spec).alpha == 0.05 and load_spec(spec, ["evaluation.alpha=0.01"]).alpha == 0.01
    with pytest.raises(SpecError, match=r"^evaluation.alpha=0.7 is not allowed; allowed: a number in \(0, 0.5\]$"):
        load_spec(spec, ["evaluation.alpha=0.7"])
