"""A user's method that breaks its contract is caught before anything starts (issue 70, point 2):
``run``, ``resume`` and ``extend`` train it for one step and predict once on the toy task on
the driver (``contrasweep.runner.checks.method_runs``) and answer the contract's one line, exit 2,
before Ray is imported and before anything is written; ``check-method`` words every row of the
same fault as the contract does (the loop raises the contract's ``ContractError``); a trial that
fails in a sweep is named as its other lines name it, with where its traceback is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from helpers import method_source

NO_LOSS = method_source("ProtoPull", '{"tau": Param("float", 0.3, 0.01, 1.0)}',
                        '{"ce": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])}')
CONTRACT = "training_step returned dict without loss; allowed: a dict with a 'loss' tensor"
SPEC = {"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4}, "grid": {"lr": [1.0e-3]},
        "fixed": {"epochs": 1}, "sweep": {"seeds": [0]}}

# the CLI in a fresh process where Ray cannot be imported: a command that reached Ray fails
# with an ImportError (exit 1) instead of the check's line (exit 2)
DRIVER = textwrap.dedent("""
    import json, sys, time
    sys.modules["ray"] = None
    from contrasweep.cli import main
    out = []
    for argv in json.loads(sys.argv[1]):
        began = time.perf_counter()
        out.append([main(argv), round(time.perf_counter() - began, 2)])
    print("RESULTS " + json.dumps(out))
""")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_run_resume_and_extend_refuse_a_method_without_loss_before_ray(tmp_path, monkeypatch):
    """The issue's case: ``run SPEC --smoke-test --set method=./broken_noloss.py:ProtoPull``
    used to run every trial on Ray and end minutes later with ``failed: 999261af: KeyError:
    'loss'``. Now: exit 2 within seconds with the contract's words and the check-method
    command, no sweep folder; ``resume`` and ``extend`` of a sweep of that method (its folder
    as ``run`` writes it) the same, and its folder unchanged."""
    from contrasweep.folder import sweeps
    from contrasweep.spec.load import load_spec

    (tmp_path / "broken_noloss.py").write_text(NO_LOSS)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    monkeypatch.chdir(tmp_path)  # --set's path is read from the working directory, as the CLI's below
    root = tmp_path / "sweeps"
    made = tmp_path / "made"  # a sweep of the broken method, as `run` leaves an interrupted one
    raw = load_spec(tmp_path / "spec.yaml", ["method=./broken_noloss.py:ProtoPull"]).raw
    folder = sweeps.create(made, "proto", raw, {"total": 1})
    folder.update_meta(status="interrupted")
    before = _files(folder.path)

    argv = [["--root", str(root), "run", str(tmp_path / "spec.yaml"), "--smoke-test",
             "--set", "method=./broken_noloss.py:ProtoPull"],
            ["--root", str(made), "resume", "proto"],
            ["--root", str(made), "extend", "proto", "--set", "sweep.seeds=[0,1]"]]
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(argv)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    took = time.perf_counter() - began
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    results = json.loads(out.stdout.split("RESULTS ", 1)[1])
    errors = [line for line in out.stderr.splitlines() if line.strip()]
    assert [code for code, _ in results] == [2, 2, 2], (results, out.stderr[-4000:])
    assert len(errors) == 3, errors  # one line each, no traceback
    method = f"{tmp_path / 'broken_noloss.py'}:ProtoPull"
    for line in errors:
        assert line.startswith(f"contrasweep: error: method {method!r} fails its training_step check: {CONTRACT}"), line
        assert line.endswith(f"every check: contrasweep check-method {method})"), line
    assert not root.exists()  # run: no sweep folder
    assert _files(folder.path) == before  # resume, extend: the folder as it was
    print(f"\n[method preflight] run, resume, extend refused in {[t for _, t in results]} s "
          f"({took:.1f} s with the interpreter's start)")
    assert max(t for _, t in results) < 60  # seconds (about 3 each here), not a sweep's minutes


def test_a_built_in_method_is_not_trained_on_the_driver(monkeypatch):
    """The registry's methods are tested with every check already: the driver imports nothing
    for them (no torch, no transformers: ``run``'s first second stays torch-free)."""
    from contrasweep.runner import checks

    monkeypatch.setitem(sys.modules, "trainables.contract", None)  # importing it raises ImportError
    for name in ("ce", "lacon", "abalone"):
        checks.method_runs(name)


def test_defaults_the_toy_model_cannot_take_skip_the_check_with_a_line(tmp_path, capsys):
    """A method whose defaults do not fit the 48 wide tiny BERT cannot be checked on it: the
    sweep goes on (its own encoder may fit) and one line says so and how to check it."""
    from contrasweep.runner.checks import method_runs

    source = NO_LOSS.replace("class ProtoPull(Method):", "class Wide(Method):\n"
                             "    @classmethod\n"
                             "    def check(cls, hp, hidden_size):\n"
                             "        from trainables.errors import SpecError\n"
                             "        if hidden_size % 7:\n"
                             "            raise SpecError(f'7 must divide the width {hidden_size}')\n")
    (tmp_path / "wide_method.py").write_text(source)
    method_runs(f"{tmp_path}/wide_method.py:Wide")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("[contrasweep] method not checked before the sweep (7 must divide the "
                                               "width 48); check it with: contrasweep check-method "), err


BROKEN = {  # training_step's fault -> the contract's words (what every training row must say)
    "no loss": ('{"ce": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])}', CONTRACT),
    "a float": ("{'loss': 1.0}", "loss is float of shape (); allowed: a scalar tensor"),
    "per-row losses": ('{"loss": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"], '
                       'reduction="none")}', "loss is Tensor of shape (24,); allowed: a scalar tensor"),
    "detached": ('{"loss": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"]).detach()}',
                 "loss has no gradient (computed without autograd, or detached)"),
    "nan": ('{"loss": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"]) * float("nan")}',
            "loss is nan; allowed: a finite number"),
}


@pytest.mark.parametrize("fault", list(BROKEN))
def test_check_method_gives_the_contracts_words_in_every_row(tmp_path, fault):
    """The issue's ``evaluate`` and ``resume`` rows said ``FAIL KeyError: 'loss'`` (the loop read
    ``out["loss"]``): the loop now raises the contract's ``ContractError``, and a row that trains
    once training_step failed fails with that row's reason (not with what follows from it: a
    diverged loop, a loss of nan -> nan)."""
    from trainables.contract import check_method

    returned, words = BROKEN[fault]
    name = "broken_" + "".join(c if c.isalnum() else "_" for c in fault)
    source = NO_LOSS.replace('{"ce": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])}', returned)
    (tmp_path / f"{name}.py").write_text(source)
    results = {r.name: r for r in check_method(f"{tmp_path}/{name}.py:ProtoPull")}
    assert results["predict"].passed
    for row in ("training_step", "evaluate", "lowers the loss", "resume", "seeded"):
        assert not results[row].passed and results[row].detail == words, (row, results[row])


def test_the_loop_raises_the_contracts_words():
    """What a trial's error says in a sweep: the contract's words, not a ``KeyError``."""
    import torch

    from trainables.errors import ContractError
    from trainables.step import training_loss

    with pytest.raises(ContractError, match="^training_step returned dict without loss; allowed"):
        training_loss({"ce": torch.tensor(1.0, requires_grad=True)})
    with pytest.raises(ContractError, match="^training_step returned tuple; allowed"):
        training_loss((torch.tensor(1.0),))
    loss = torch.tensor(1.0, requires_grad=True)
    assert training_loss({"loss": loss}) is loss


def test_a_failed_trial_is_named_with_its_error_and_its_traceback(tmp_path):
    """``failed: 999261af: KeyError: 'loss'`` named the trial by its Tune id: the line names it as
    its trial lines and MLflow run do (``run_name``), with the error's last line and Tune's
    ``error.txt`` in its folder (a trial without a configuration keeps its id)."""
    from contrasweep.console.summary import summary_lines
    from contrasweep.spec.load import validate

    sweep = validate({"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4},
                      "grid": {"lr": [1.0e-3, 1.0e-4]}, "fixed": {"epochs": 2}, "sweep": {"seeds": [0]}})
    trial_dir = tmp_path / "s" / "tune" / "run_trial_999261af_00001_1_lr=0.0001"
    trial_dir.mkdir(parents=True)
    (trial_dir / "error.txt").write_text("Failure # 1 ...")
    error = ("ray.exceptions.RayTaskError(ContractError): ray::run_trial() (pid=1)\n  File ..., in training_loss\n"
             "trainables.errors.ContractError: " + CONTRACT)
    failed = SimpleNamespace(error=error, metrics={"trial_id": "999261af_00001"}, path=str(trial_dir),
                             config={"hp": {"lr": 1.0e-4, "epochs": 2, "seed": 0}})
    unknown = SimpleNamespace(error="RuntimeError: gone", metrics={}, config={}, path="/x/tune/run_trial_abc_00002_2")
    lines, count = summary_lines([failed, unknown], "val/accuracy", "max", "s", "failed", sweep, tmp_path)
    assert count == 2
    assert lines[1] == (f"[contrasweep] failed: ce lr=0.0001 · seed=0: ContractError: {CONTRACT} "
                        f"(traceback: {trial_dir / 'error.txt'})"), lines[1]
    assert lines[2] == "[contrasweep] failed: run_trial_abc_00002_2: RuntimeError: gone (traceback: /x/tune/run_trial_abc_00002_2/error.txt)"
