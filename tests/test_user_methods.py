"""A researcher's own method named by its import path (issue 56, ``trainables.user_methods``):
every way it can be wrong is one line before Ray starts (exit 2 through the CLI); a module on
the working directory's path and a file beside the spec both load and are searched like a
built-in; ``check-method`` passes the eight built-ins and the example and names the fault of a
broken method of each kind; what a cluster and an MLflow model get of it; a changed method is
refused on resume/extend unless allowed. (A user's method swept, killed, changed and extended
through the CLI: tests/test_extend.py.)"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from contrasweep.errors import SpecError, UserError
from contrasweep.spec.load import load_spec
from trainables.registry import method_names

from helpers import method_source

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ce_supcon.py"
GOOD = method_source("Good", '{"weight": Param("float", 0.5, 0.0, 1.0)}')


def _spec(folder: Path, method: str, **extra) -> Path:
    spec = {"method": method, "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4}, **extra}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(autouse=True)
def _forget_user_modules():
    """Each test's files are new modules (a name in sys.modules is its file's)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        module = sys.modules[name]
        if "pytest-of" in str(getattr(module, "__file__", "") or "") or name.startswith("mylab"):
            del sys.modules[name]


@pytest.mark.parametrize("source, method, fragment", [
    (GOOD + "\nimport no_such_package_here\n", "m.py:Good",
     "does not import (ModuleNotFoundError: No module named 'no_such_package_here')"),
    (GOOD + "\ndef broken(:\n", "m.py:Good", "does not import (SyntaxError: invalid syntax"),
    (GOOD, "m.py:Missing", "has no 'Missing'; allowed: a class it defines (Good, Method, Param)"),
    (GOOD + "\nclass Plain:\n    pass\n", "m.py:Plain", "is not a trainables.base.Method subclass (type 'Plain')"),
    (GOOD.replace('Param("float", 0.5, 0.0, 1.0)', "0.5"), "m.py:Good",
     "params['weight'] is 0.5; allowed: a trainables.params.Param with a default"),
    (GOOD.replace('Param("float", 0.5, 0.0, 1.0)', 'Param("float", None, 0.0, 1.0)'), "m.py:Good",
     "params['weight'] has no default; allowed: a default in its range (a number in [0, 1])"),
    (GOOD.replace('Param("float", 0.5, 0.0, 1.0)', 'Param("float", 2.0, 0.0, 1.0)'), "m.py:Good",
     "the default of params['weight'] is outside its range (weight=2.0 is not allowed; allowed: a number in [0, 1])"),
    (GOOD.replace('{"weight"', '{"lr"'), "m.py:Good", "params['lr'] is one of the loop's own parameters"),
    (GOOD.replace('0.0, 1.0)', '0.0, 1.0, symbol="w 1")'), "m.py:Good",
     "params['weight'] has symbol='w 1'; allowed: a short name without spaces, '=', ',' or '·' (e.g. 'τ')"),
    (GOOD.replace('0.0, 1.0)', '0.0, 1.0, symbol="lr")'), "m.py:Good",
     "two hyperparameters would show as 'lr' (a symbol is another's symbol or name)"),
    (GOOD.replace('0.0, 1.0)', '0.0, 1.0, symbol="β"), "gamma": Param("float", 0.5, 0.0, 1.0, symbol="β")'), "m.py:Good",
     "two hyperparameters would show as 'β'"),
    (GOOD.replace("    params =", '    label_kind = "multiple"\n    params ='), "m.py:Good",
     "label_kind='multiple'; allowed: 'single' (class ids) or 'multi'"),
    (GOOD.replace("    params =", '    name = "lacon"\n    params ='), "m.py:Good",
     "declares name='lacon', the built-in method's; allowed: a name of its own"),
    (GOOD.replace("    params =", '    metric_names = ()\n    params ='), "m.py:Good", "metric_names=(); allowed: a non-empty"),
    (GOOD, "gone.py:Good", "method file '{folder}/gone.py' does not exist"),
    (GOOD, "no_such_lab.losses:Good", "method module 'no_such_lab.losses' does not import (ModuleNotFoundError"),
    (GOOD, "lacon9", "method 'lacon9' is not a built-in method; allowed: abalone, ce, ce_scl, lacon, scl_moo, simcse, "
                     "supcl_seq, vascl, or your own as package.module:Class or path/to/file.py:Class"),
])
def test_each_way_a_method_is_wrong_is_one_line(tmp_path, source, method, fragment):
    (tmp_path / "m.py").write_text(source)
    with pytest.raises(SpecError) as error:
        load_spec(_spec(tmp_path, method))
    message = str(error.value)
    assert fragment.format(folder=tmp_path) in message and "\n" not in message, message


def test_a_bad_method_exits_2_in_one_line_before_ray(tmp_path, capsys):
    from contrasweep.cli import main

    (tmp_path / "m.py").write_text(GOOD + "\nclass Plain:\n    pass\n")
    assert main(["--root", str(tmp_path / "sweeps"), "run", str(_spec(tmp_path, "./m.py:Plain"))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("contrasweep: error: method ") and "Method subclass" in err[0]
    assert not (tmp_path / "sweeps").exists()  # no sweep folder: nothing started


def test_a_file_beside_the_spec_and_a_module_on_the_path_are_searched_like_built_ins(tmp_path, monkeypatch):
    from contrasweep.spec.identity import identify, run_name
    from contrasweep.spec.static import SweepStatic

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "m.py").write_text(GOOD)
    sweep = load_spec(_spec(folder, "./m.py:Good", grid={"weight": [0.1, 0.9]}, fixed={"epochs": 1}),
                      ["sweep.seeds=[0, 1]"])
    assert sweep.method == f"{folder}/m.py:Good"  # from the spec's folder; the saved spec names it from anywhere
    assert sweep.raw["method"] == sweep.method and sweep.grid == {"weight": [0.1, 0.9]}
    trials = sweep.grid_trials()
    assert len(trials) == 4 and {t["weight"] for t in trials} == {0.1, 0.9}
    static = SweepStatic.of(sweep)
    assert run_name(identify({"hp": trials[0]}, static), static).startswith("Good weight=0.1")
    with pytest.raises(SpecError, match=r"weight=3 is not allowed; allowed: a number in \[0, 1\]"):
        load_spec(_spec(folder, "./m.py:Good", grid={"weight": [3]}))
    # the reported point, --smoke-test, racing and a budget take it as they take a built-in
    raced = load_spec(_spec(folder, "./m.py:Good", reported={"weight": 0.3}, grid={"weight": [0.1, 0.9]},
                            sweep={"seeds": [0, 1, 2], "racing": {"min_repeats": 2}, "budget": {"slot_hours": 1}}),
                      smoke=True)
    assert raced.reported == {"weight": 0.3} and raced.grid_points()[0]["weight"] == 0.3 and raced.grid_limit == 2
    assert raced.racing is not None and raced.budget is not None

    package = tmp_path / "lab" / "mylab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "losses.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path / "lab")  # "importable from the working directory"
    monkeypatch.setattr(sys, "path", list(sys.path))
    sweep = load_spec(_spec(tmp_path, "mylab.losses:Good", search={"weight": {"uniform": [0.0, 1.0]}},
                            sweep={"searcher": "optuna", "num_samples": 3}))
    assert sweep.method == "mylab.losses:Good" and "weight" in sweep.domains


def test_what_another_machine_gets_of_a_method(tmp_path, monkeypatch):
    from contrasweep.runner.shipping import runtime_env
    from trainables.user_methods import shipped_sources

    (tmp_path / "m.py").write_text(GOOD)
    package = tmp_path / "mylab"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "losses.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load_spec(_spec(tmp_path, "mylab.losses:Good"))
    assert shipped_sources(f"{tmp_path}/m.py:Good") == [str(tmp_path / "m.py")]
    assert shipped_sources("mylab.losses:Good") == [str(package)]  # its top-level package, whole
    assert shipped_sources("yaml:YAMLObject") == [] and shipped_sources("ce") == []  # installed, built-in
    env = runtime_env("code", method=f"{tmp_path}/m.py:Good")
    assert env["py_modules"][-1] == str(tmp_path / "m.py") and len(env["py_modules"]) == 3
    assert "py_modules" not in runtime_env("installed", method=f"{tmp_path}/m.py:Good")
    # a trial process where the file's path does not exist imports the shipped module of its name
    from trainables.registry import get_method

    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_method("/elsewhere/m.py:Good").__module__ == "m"


def test_a_changed_method_is_refused_unless_allowed_and_then_recorded(tmp_path, capsys):
    from contrasweep.folder import sweeps
    from contrasweep.runner.checks import method_unchanged
    from contrasweep.tracking.provenance import method_fingerprint, method_tags

    file = tmp_path / "m.py"
    file.write_text(GOOD)
    sweep = load_spec(_spec(tmp_path, "./m.py:Good"))
    started = method_fingerprint(sweep.method)
    assert started["file"] == str(file) and len(started["sha256"]) == 64 and "git_commit" not in started  # not in git
    folder = sweeps.create(tmp_path / "sweeps", "x", sweep.raw, {"method": started})
    method_unchanged(sweep, folder, allow=False)  # unchanged: nothing to say
    file.write_text(GOOD + "# changed\n")
    with pytest.raises(UserError, match=r"changed since the sweep last ran .* allowed: restore the file, or "
                                         r"--allow-changed-method"):
        method_unchanged(sweep, folder, allow=False)
    method_unchanged(sweep, folder, allow=True)
    assert "going on with the new code" in capsys.readouterr().err
    now = method_fingerprint(sweep.method)
    assert [c["sha256"] for c in folder.meta()["method_changes"]] == [now["sha256"]] != [started["sha256"]]
    method_unchanged(sweep, folder, allow=False)  # the change it accepted is what it compares with now
    tags = method_tags(now, started)
    assert tags["contrasweep.method.sha256"] == now["sha256"]
    assert tags["contrasweep.method.sha256_at_start"] == started["sha256"]
    assert "contrasweep.method.sha256_at_start" not in method_tags(started, started)


def test_a_method_in_a_git_checkout_records_its_commit_and_whether_the_file_differs(tmp_path):
    import subprocess

    from contrasweep.tracking.provenance import method_fingerprint

    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "m.py").write_text(GOOD)
    import hashlib

    assert method_fingerprint(f"{tmp_path}/m.py:Good") == {  # a repository without a commit: no git keys
        "path": f"{tmp_path}/m.py:Good", "file": str(tmp_path / "m.py"),
        "sha256": hashlib.sha256((tmp_path / "m.py").read_bytes()).hexdigest()}
    run("add", "m.py")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    found = method_fingerprint(f"{tmp_path}/m.py:Good")
    assert found["git_commit"] == head and found["git_dirty"] == "false"
    (tmp_path / "m.py").write_text(GOOD + "# edited\n")
    assert method_fingerprint(f"{tmp_path}/m.py:Good")["git_dirty"] == "true"


# -- check-method ------------------------------------------------------------------------

@pytest.mark.parametrize("name", method_names())
def test_check_method_passes_every_built_in(name):
    from trainables.contract import CHECKS, check_method

    results = check_method(name)
    assert [r.name for r in results] == [c[0] for c in CHECKS]
    assert all(r.passed for r in results), [(r.name, r.detail) for r in results if not r.passed]


BROKEN = {  # what breaks -> (the method's source, the check that fails, its reason)
    "no gradient": (GOOD.replace('F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])',
                                 'F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"]).detach()'),
                    "training_step", "loss has no gradient"),
    "a gradient that misses the encoder": (
        GOOD.replace("F.cross_entropy(self.classifier(self.encode(batch)[0]),",
                     "F.cross_entropy(self.classifier(self.encode(batch)[0].detach()),"),
        "training_step", "no gradient reaches the encoder"),
    "predict's shape": (GOOD.replace("return self.classifier(self.encode(batch)[0])",
                                     "return self.classifier(self.encode(batch)[0])[:, :1]"),
                        "predict", "predict gave (24, 1); allowed: scores [B, num_labels] = [24, 2]"),
    "a missing metric": (GOOD.replace("    params =", '    metric_names = ("accuracy", "auroc")\n    params ='),
                         "evaluate", "evaluate() did not report auroc of metric_names"),
    "a loss climbing its gradient": (
        GOOD.replace('return {"loss": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])}',
                     'ce = F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])\n'
                     '        return {"loss": 2 * ce.detach() - ce}'),
        "lowers the loss", "the loss does not decrease along its gradient"),
    "state outside the state_dict": (
        GOOD.replace('        return {"loss": F.cross_entropy(',
                     '        self.calls = getattr(self, "calls", 0) + 1\n'
                     '        return {"loss": self.calls * F.cross_entropy('),
        "resume", "differ from two epochs straight: train/loss"),
    "unseeded randomness": (
        GOOD.replace('        return {"loss": F.cross_entropy(',
                     '        import time\n        noise = torch.rand(1, generator=torch.Generator().manual_seed(time.time_ns()))\n'
                     '        return {"loss": noise.squeeze() + F.cross_entropy('),
        "seeded", "seed 0 gave losses"),
}


@pytest.mark.parametrize("fault", list(BROKEN))
def test_check_method_names_the_fault_of_a_broken_method(tmp_path, fault):
    from trainables.contract import check_method

    source, check, reason = BROKEN[fault]
    name = "broken_" + "".join(c if c.isalnum() else "_" for c in fault)
    (tmp_path / f"{name}.py").write_text(source)
    results = {r.name: r for r in check_method(f"{tmp_path}/{name}.py:Good")}
    assert not results[check].passed and reason in results[check].detail, results[check]
    assert results["training_step"].passed or check == "training_step"


def test_check_method_on_the_command_line(tmp_path, capsys, monkeypatch):
    from contrasweep.cli import main

    shutil.copy(EXAMPLE, tmp_path / "ce_supcon.py")
    (tmp_path / "bad.py").write_text(BROKEN["predict's shape"][0])
    monkeypatch.chdir(tmp_path)
    assert main(["check-method", "./ce_supcon.py:CESupCon", "--set", "temperature=0.2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "6 of 6 checks passed" and "training_step    pass" in out
    assert main(["check-method", "./bad.py:Good"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "5 of 6 checks passed; failed: predict"
    assert any(line.startswith("predict          FAIL    predict gave (24, 1)") for line in out)
    assert main(["check-method", "./ce_supcon.py:CESupCon", "--set", "temperature=-1"]) == 2
    assert main(["check-method", "./ce_supcon.py:CESupCon", "--set", "nope=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("contrasweep: error: temperature=-1 is not allowed; allowed: a number in (0, 10]")
    assert err[1].startswith("contrasweep: error: --set nope: unknown hyperparameter; allowed: adam_eps, amp")


def test_the_example_is_about_40_lines_and_reads_as_the_docs_say():
    text = EXAMPLE.read_text()
    assert len(text.splitlines()) <= 45 and "class CESupCon(Method)" in text
    docs = (EXAMPLE.parents[1] / "docs" / "methods-own.md").read_text()
    assert "examples/ce_supcon.py" in docs and "check-method" in docs and "--allow-changed-method" in docs
    assert "methods-own.md" in (EXAMPLE.parents[1] / "README.md").read_text()
