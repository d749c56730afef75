"""One name per hyperparameter (issue 70, point 5; ``contrasweep.spec.names``): the same symbol,
or the name as written, in a trial's line and MLflow run name, the summary's best-configuration
line, ``contrasweep list``'s row and the report's configurations table, for a built-in method
(its declarations' symbols), a user's method that declares its symbols (``Param(...,
symbol="τ")``) and one that declares none (its names as written everywhere: before, ``lam`` was
``λ`` in run names only). And where a user looks (point 6): MLflow's ``method`` param is the
short name, ``list`` shows the method, the selected configuration's values and its test metric,
"(so far)" only until the sweep has ended. (On real sweeps: tests/test_report.py's
``test_list_and_mlflow_name_the_method_and_the_selected_values``, tests/test_extend.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from contrasweep.console.listing import listing
from contrasweep.console.summary import best_lines
from contrasweep.spec.identity import config_run_name, identify, run_name
from contrasweep.spec.load import load_spec
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.aggregate import Group
from dashboards.source import SweepRecord
from dashboards.tables import configurations_table, main_table
from helpers import method_source

PROTO = method_source("ProtoPull", '{"tau": Param("float", 0.1, 0.0, 10.0, low_open=True<tau>),\n'
                       '              "lam": Param("float", 0.5, 0.0, 1.0<lam>)}')


@pytest.fixture(autouse=True)
def _forget_user_modules():
    """Each test's method file is a new module (a name in sys.modules is its file's)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if "pytest-of" in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]


def _sweep(folder: Path, method: str, grid: dict):
    spec = {"method": method, "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4}, "grid": grid,
            "fixed": {"epochs": 1}, "sweep": {"seeds": [0, 1], "scheduler": "none"}}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    return load_spec(path)


CASES = {  # method -> (its file's symbols, the grid, what each key shows as)
    "lacon": (None, {"temperature": [0.297, 0.5], "lam": [0.7152]}, {"temperature": "τ", "lam": "λ"}),
    "declared": (("τ", "λ"), {"tau": [0.297, 0.5], "lam": [0.7152]}, {"tau": "τ", "lam": "λ"}),
    "undeclared": (("", ""), {"tau": [0.297, 0.5], "lam": [0.7152]}, {"tau": "tau", "lam": "lam"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hyperparameter_has_one_name_in_every_line_and_table(tmp_path, case):
    symbols, grid, shown = CASES[case]
    method = "lacon"
    if symbols is not None:
        tau, lam = (f', symbol="{s}"' if s else "" for s in symbols)
        (tmp_path / "proto.py").write_text(PROTO.replace("<tau>", tau).replace("<lam>", lam))
        method = "./proto.py:ProtoPull"
    sweep = _sweep(tmp_path, method, grid)
    static = SweepStatic.of(sweep)
    trial = next(t for t in sweep.grid_trials() if t[next(iter(grid))] == 0.297)
    identity = identify({"hp": trial}, static)
    hp = {k: v for k, v in identity.hp.items() if k != "seed"}
    label = "lacon" if case == "lacon" else "ProtoPull"
    keys = list(sweep.varied)  # the spec's order (run names, the summary and the report keep it)
    values = [f"{shown[k]}={hp[k]}" for k in keys]  # ["λ=0.7152", "τ=0.297"]

    # the trial's console line and MLflow run name, and its configuration run's
    assert run_name(identity, static) == f"{label} {' '.join(values)} · seed={identity.seed}"
    assert config_run_name(identity, static) == f"{label} {' '.join(values)}"

    # the summary's line
    group = Group(identity.group, "", identity.config, hp, size=1)
    group.add("complete", {"metrics": {"best/val/accuracy": 0.9, "test/accuracy": 0.8}})
    (line,) = best_lines([], sweep, "val/accuracy", "max", best={"": group})
    assert line.startswith(f"[contrasweep] best configuration: {', '.join(values)}: val/accuracy 0.9000"), line

    # list's row (the record keeps each trial's values)
    folder = tmp_path / "sw"
    folder.mkdir()
    (folder / "tracking.json").write_text(json.dumps({"trials": {"t0": {
        "group": identity.group, "group_size": 1, "outcome": "complete", "status": "FINISHED", "best_value": 0.9,
        "hp": hp, "final": {"test/accuracy": 0.8}}}}))
    row = listing(SimpleNamespace(path=folder, status=lambda: "finished", meta=lambda: {"total": 1},
                                  spec=lambda: sweep.raw))
    assert row["selected"] == ", ".join(values) and row["method"] == label

    # the report's configurations table and the main table's hp text
    record = SweepRecord("s", "", SimpleNamespace(data=SimpleNamespace(metrics={})), sweep.raw, [group])
    assert configurations_table(record).columns[1:1 + len(keys)] == [shown[k] for k in keys]
    assert main_table([record]).records[0]["hp"].split() == [f"{shown.get(k, k)}={hp[k]}" for k in sorted(hp)]
    raw_names = {k for k, s in shown.items() if s != k}  # never the name where the symbol shows
    for text in (run_name(identity, static), line, row["selected"], " ".join(configurations_table(record).columns)):
        assert not any(f"{k}=" in text or f" {k} " in f" {text} " for k in raw_names), text


def test_a_method_that_no_longer_loads_shows_its_names_as_written(tmp_path):
    from contrasweep.spec.names import hp_name, hp_values, method_name

    gone = f"{tmp_path}/gone.py:ProtoPull"
    assert hp_name("tau", gone) == "tau" and hp_values({"tau": 0.1, "lr": 1e-3}, gone, ["tau", "lr"]) == "tau=0.1 lr=0.001"
    assert method_name(gone) == "ProtoPull" and method_name("lacon") == "lacon"


def test_every_built_in_symbol_is_its_methods_own():
    """No two hyperparameters of one built-in (the loop's included) show as the same name."""
    from trainables.methods.declarations import DECLARATIONS
    from trainables.params import LOOP_PARAMS

    for name, declaration in DECLARATIONS.items():
        shown = [p.symbol or k for k, p in {**LOOP_PARAMS, **declaration.params}.items()]
        assert len(shown) == len(set(shown)), name
    assert DECLARATIONS["lacon"].params["temperature"].symbol == "τ" and DECLARATIONS["vascl"].params["delta"].symbol == "Δ"


def test_mlflow_names_a_users_method_by_its_class_and_keeps_its_path():
    from contrasweep.tracking.describe import method_params

    assert method_params("/abs/path/proto.py:ProtoPull") == {"method": "ProtoPull",
                                                            "method_path": "/abs/path/proto.py:ProtoPull"}
    assert method_params("mylab.losses:CESupCon") == {"method": "CESupCon", "method_path": "mylab.losses:CESupCon"}
    assert method_params("lacon") == {"method": "lacon"}


def _listed(tmp_path, status: str, trials: dict, tests: dict | None = None, spec: dict | None = None) -> dict:
    (tmp_path / "tracking.json").write_text(json.dumps({"trials": trials, **({"tests": tests} if tests else {})}))
    spec = spec or {"method": "/abs/proto.py:ProtoPull", "grid": {"tau": [0.1, 0.3]}, "sweep": {"metric": "val/accuracy"}}
    return listing(SimpleNamespace(path=tmp_path, status=lambda: status, meta=lambda: {"total": 4}, spec=lambda: spec))


def _trial(group: str, value: float, tau: float, **extra) -> dict:
    return {"group": group, "group_size": 2, "outcome": "complete", "status": "FINISHED", "best_value": value,
            "hp": {"tau": tau, "epochs": 1}, **extra}


def test_list_shows_the_method_the_selected_values_and_their_test_metric(tmp_path):
    """The test metric of the selected configuration's repeats: each trial's own (``final``) or
    the test phase's (``tests.results``); ``-`` before any was tested; "(n of m repeats)" where
    only some were. "(so far)" while the sweep runs or waits for ``resume``, never once it ended."""
    trials = {"a": _trial("g1", 0.9, 0.3, run_id="r1", final={"test/accuracy": 0.8}),
              "b": _trial("g1", 0.8, 0.3, run_id="r2", final={"test/accuracy": 0.7}),
              "c": _trial("g2", 0.5, 0.1, run_id="r3")}
    row = _listed(tmp_path, "finished", trials)
    assert (row["method"], row["selected"], row["best"], row["test"]) == (
        "ProtoPull", "tau=0.3", "val/accuracy 0.8500 ± 0.0707 (2 repeats)", "test/accuracy 0.7500 ± 0.0707")
    for status in ("running", "interrupted"):
        assert _listed(tmp_path, status, trials)["selected"] == "tau=0.3 (so far)"
    assert _listed(tmp_path, "failed", trials)["selected"] == "tau=0.3"
    # evaluation.test: reported: the test phase's results, one of two so far
    untested = {k: {**e, "final": {}} for k, e in trials.items()}
    assert _listed(tmp_path, "running", untested)["test"] == "-"
    row = _listed(tmp_path, "running", untested, {"results": {"r1": {"metrics": {"test/accuracy": 0.75}}}})
    assert row["test"] == "test/accuracy 0.7500 (1 of 2 repeats)"
    # a NaN test value is no value; nothing varied: the spec's configuration by its fixed values
    nan = {k: {**e, "final": {"test/accuracy": float("nan")}} for k, e in trials.items()}
    assert _listed(tmp_path, "finished", nan)["test"] == "-"
    one = _listed(tmp_path, "finished", trials, spec={"method": "lacon", "fixed": {"epochs": 1}})
    assert one["selected"] == "the spec's configuration (epochs=1)" and one["method"] == "lacon"
    # a record written before trials kept their values: the row shows none, never a wrong one
    old = {k: {kk: vv for kk, vv in e.items() if kk != "hp"} for k, e in trials.items()}
    assert _listed(tmp_path, "finished", old)["selected"] == "-"
    assert _listed(tmp_path, "finished", {})["selected"] == "-" and _listed(tmp_path, "finished", {})["test"] == "-"
