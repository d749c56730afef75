"""The command line: user errors are one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import write_spec


def run_cli(*args, cwd, env=None):
    import os

    env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "contrasweep", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def assert_user_error(proc, fragment):
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("contrasweep: error: ") and fragment in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_spec(tmp_path):
    assert_user_error(run_cli("run", "nope.yaml", cwd=tmp_path), "spec file 'nope.yaml' does not exist")


def test_bad_override_value(tmp_path, tiny_model_dir):
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir)
    proc = run_cli("run", str(spec), "--set", "fixed.epochs=0", cwd=tmp_path)
    assert_user_error(proc, "fixed.epochs=0 is not allowed; allowed: an integer in [1, 10000]")


def test_bad_data_column(tmp_path, tiny_model_dir):
    csv = tmp_path / "d.csv"
    csv.write_text("sentence,label\nhello,a\nworld,b\n")
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, data={"source": str(csv), "protocol": "full", "k": None})
    proc = run_cli("run", str(spec), cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw"), "CONTRASWEEP_CACHE": str(tmp_path / "c")})
    assert_user_error(proc, "column 'text' not found; available columns: sentence, label; allowed: name the column "
                            "with data.text, e.g. data.text: sentence")


def test_resume_unknown_sweep(tmp_path):
    proc = run_cli("resume", "ghost", cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert_user_error(proc, "no sweep named 'ghost'")


def test_bad_name(tmp_path, tiny_model_dir):
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir)
    assert_user_error(run_cli("run", str(spec), "--name", "../x", cwd=tmp_path), "name='../x' is not allowed")


def test_list_empty(tmp_path):
    proc = run_cli("list", cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert proc.returncode == 0 and "no sweeps" in proc.stdout


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help(tmp_path, argv):
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 0 and "usage" in proc.stdout


@pytest.mark.slow
def test_ui_serves_on_localhost_and_sigterm_stops_everything_it_started(tmp_path):
    import os
    import signal
    import socket
    import time
    import urllib.request
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "contrasweep", "ui", "--port", str(port)], cwd=tmp_path,
                            env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    assert resp.status == 200
                    break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "MLflow UI did not come up"
                time.sleep(1)
        from test_ray_loopback import descendants, sockets_of

        held = {ip for _, ip, p in sockets_of(descendants(proc.pid)) if p == port}
        assert held == {"127.0.0.1"}, held  # this machine only
        started = descendants(proc.pid)
        asked = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # to contrasweep alone, as a service manager or `kill` does
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert time.monotonic() - asked < 2.5  # within 2 s of SIGTERM (1.5 s grace, then SIGKILL)
        # the terminal: our lines only (the address); MLflow's INFO lines and warnings go to its log
        out = proc.stdout.read()
        assert out.strip() and all(line.startswith("[contrasweep]") for line in out.strip().splitlines()), out
        assert (tmp_path / "mlflow-ui.log").stat().st_size > 0
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing serves the port any more
        assert not [pid for pid in started if Path(f"/proc/{pid}").exists()], started
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
def test_heads_not_dividing_the_encoder_width_fails_before_any_trial(tmp_path, tiny_model_dir):
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, method="lacon", grid={"temperature": [0.1]},
                      reported={"temperature": 0.1}, fixed={"heads": 6, "epochs": 1})
    proc = run_cli("run", str(spec), cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert_user_error(proc, "heads=6 does not divide the encoder's hidden size 32")
    assert not (tmp_path / "sw").exists()  # nothing started


@pytest.mark.parametrize("overrides, fragment", [
    (["fixed.neighbours=8"], "neighbours=8 is not allowed with batch_size=8; allowed: 1 <= neighbours <= batch_size - 1"),
    (["fixed.neighbours=3", "evaluation.sts=missing.csv"], "missing.csv' does not exist"),
    (["fixed.delta=-1"], "fixed.delta=-1 is not allowed; allowed: a number in (0, 1e+06]"),
])
def test_vascl_bad_input_fails_before_any_trial(tmp_path, tiny_model_dir, overrides, fragment):
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, method="vascl", reported={}, grid={"lr": [1.0e-3]},
                      sweep={"seeds": [0], "metric": "val/cluster_acc"})
    args = [a for o in overrides for a in ("--set", o)]
    proc = run_cli("run", str(spec), *args, cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert_user_error(proc, fragment)
    assert not (tmp_path / "sw").exists()


SPEC = "method: ce\ndata: {source: bbc_news}\ngrid: {lr: [1.0e-5]}\n"


@pytest.mark.parametrize("argv, files, fragment", [
    (["run", "latin1.yaml"], {"latin1.yaml": SPEC.encode() + b"paper: {title: caf\xe9}\n"},
     "spec file 'latin1.yaml' is not UTF-8 text (byte 0xe9 at offset"),
    (["run", "dup.yaml"], {"dup.yaml": b"method: ce\nmethod: lacon\n" + SPEC.encode()[len("method: ce\n"):]},
     "key 'method' appears twice (lines 1 and 2)"),
    (["run", "ep0.yaml", "--smoke-test"], {"ep0.yaml": SPEC.encode() + b"fixed: {epochs: 0}\n"},
     "fixed.epochs=0 is not allowed; allowed: an integer in [1, 10000]"),
    (["resume", "../outside"], {}, "name='../outside' is not allowed"),
    (["--root", "afile", "list"], {"afile": b""}, "is a file; allowed: a folder for the sweeps"),
    (["ui", "--port", "99999"], {}, "--port 99999 is not allowed; allowed: a TCP port in [1, 65535]"),
    (["ui", "--host", "no such host"], {}, "--host 'no such host' is not an address of this machine; allowed: 127.0.0.1"),
    (["ui", "--host", "203.0.113.254"], {}, "--host 203.0.113.254 cannot be served here (Cannot assign requested address)"),
    (["run", "ok.yaml", "--tracking-uri", "http://127.0.0.1:9"], {"ok.yaml": SPEC.encode()},
     "--tracking-uri http://127.0.0.1:9 did not answer within 5 s"),
    (["run", "ok.yaml", "--address", "127.0.0.1:9"], {"ok.yaml": SPEC.encode()}, "--address 127.0.0.1:9 did not answer"),
    (["run", "ok.yaml", "--address", "nowhere"], {"ok.yaml": SPEC.encode()}, "--address 'nowhere' is not an address"),
    (["resume", "bad"], {"sw/bad/sweep.json": b'{"status": "runn'}, "sweep 'bad': "),
    (["resume", "nospec"], {"sw/nospec/sweep.json": b'{"status": "running"}'}, "sweep 'nospec' has no spec file"),
    (["resume", "badspec"], {"sw/badspec/sweep.json": b'{"status": "running"}', "sw/badspec/spec.yaml": b"a: [1,\n"},
     "spec.yaml is not valid YAML"),
    (["run", "ok.yaml", "--name", "done"], {"ok.yaml": SPEC.encode(), "sw/done/sweep.json": b'{"status": "finished"}'},
     "and has finished; allowed: a new --name (e.g. done-2), or --overwrite to replace it"),
    (["run", "ok.yaml", "--name", "cut"], {"ok.yaml": SPEC.encode(), "sw/cut/sweep.json": b'{"status": "interrupted"}'},
     "(interrupted); allowed: `contrasweep resume cut`, a new --name (e.g. cut-2), or --overwrite to replace it"),
])
def test_bad_input_catalogue(tmp_path, argv, files, fragment):
    """Issue 16's cases that used to give a traceback, exit 0, or go by silently: each is one
    line, exit status 2, and nothing started (no sweep folder made or changed)."""
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    proc = run_cli(*argv, cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert_user_error(proc, fragment)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_list_goes_on_past_a_damaged_sweep(tmp_path):
    for name, meta in (("good", '{"status": "finished", "trials": 4, "created": "2026-11-25T01:00:00"}'),
                       ("bad", "{not json")):
        (tmp_path / "sw" / name).mkdir(parents=True)
        (tmp_path / "sw" / name / "sweep.json").write_text(meta)
    proc = run_cli("list", cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()[1:]}
    assert rows["good"][:2] == ["finished", "4/4"] and rows["bad"][0] == "damaged", proc.stdout


@pytest.mark.slow
def test_a_searched_range_with_invalid_values_fails_before_any_trial(tmp_path, tiny_model_dir):
    """heads searched over 5..7 on a width-32 encoder: 5 and 7 do not divide it. The preflight
    checks every integer of the range (it used to check only choices), before Ray starts."""
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, method="lacon", grid=None, reported={"temperature": 0.1, "heads": 4},
                      search={"heads": {"randint": [4, 7]}, "temperature": {"uniform": [0.05, 0.5]}},
                      fixed={"epochs": 1}, sweep={"searcher": "optuna", "num_samples": 2, "seeds": [0]})
    proc = run_cli("run", str(spec), cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert_user_error(proc, "search.heads={randint: [4, 7]} includes heads=5: heads=5 does not divide the encoder's "
                            "hidden size 32")
    assert not (tmp_path / "sw").exists()  # nothing started
    # without heads reported, the point evaluated first takes LaCon's default, 6 (inside 4..7)
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, method="lacon", grid=None, reported={"temperature": 0.1},
                      search={"heads": {"randint": [4, 7]}, "temperature": {"uniform": [0.05, 0.5]}},
                      fixed={"epochs": 1}, sweep={"searcher": "optuna", "num_samples": 2, "seeds": [0]})
    proc = run_cli("run", str(spec), cwd=tmp_path, env={"CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert_user_error(proc, "the reported point (heads=6, temperature=0.1) is evaluated first: heads=6 does not divide")


def test_ui_on_another_host_warns_that_mlflow_has_no_authentication(tmp_path):
    import os
    import signal

    from contrasweep.runner.preflight import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "contrasweep", "ui", "--host", "0.0.0.0", "--port", str(port)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first, second = proc.stderr.readline(), proc.stderr.readline()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert first.startswith(f"[contrasweep] warning: MLflow has no authentication: anyone who can reach 0.0.0.0:{port}")
    assert second.startswith(f"[contrasweep] MLflow UI on http://0.0.0.0:{port}")


def test_ui_on_a_busy_port_is_one_line(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_user_error(run_cli("ui", "--port", str(port), cwd=tmp_path), f"--port {port} is in use on 127.0.0.1")


def test_resources_beyond_this_machine_fail_before_data_or_ray(tmp_path, tiny_model_dir):
    """cpu: 64 per trial on this machine: one line naming both numbers, before the data are
    prepared (no cache entry) and so before a local Ray starts."""
    import os

    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, sweep={"resources": {"cpu": 64}})
    proc = run_cli("run", str(spec), cwd=tmp_path,
                   env={"CONTRASWEEP_HOME": str(tmp_path / "sw"), "CONTRASWEEP_CACHE": str(tmp_path / "cache")})
    assert_user_error(proc, f"sweep.resources needs 64 CPU and 0 GPU per trial (workers=1 x cpu=64, gpu=0) but the local Ray "
                            f"has {os.cpu_count()} CPU")
    assert not (tmp_path / "sw").exists() and not (tmp_path / "cache").exists()


def test_global_options_before_or_after_the_command():
    from contrasweep.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["--root", "a", "list"]).root == "a"
    assert parser.parse_args(["list", "--root", "b"]).root == "b"
    assert parser.parse_args(["--root", "a", "run", "s.yaml", "--root", "b"]).root == "b"  # the later one wins
    assert parser.parse_args(["report", "x"]).root is None
    assert "``" not in parser.format_help()


def test_smoke_runs_go_to_their_own_experiment(tmp_path, tiny_model_dir, monkeypatch):
    """--smoke-test: the sweep's experiment is '<experiment>-smoke', its name says smoke, and
    its parent run is tagged, so smoke runs never mix into comparisons."""
    from contrasweep.cli import main
    from contrasweep.errors import UserError
    from contrasweep.runner import tune
    from contrasweep.tracking.describe import sweep_tags

    seen = {}

    def stop_before_ray(sweep, name, *args, **kwargs):
        seen.update(sweep=sweep, name=name)
        raise UserError("stopped by the test")

    monkeypatch.setattr(tune, "run", stop_before_ray)
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir)
    assert main(["--root", str(tmp_path / "sw"), "run", str(spec), "--smoke-test"]) == 2
    assert seen["sweep"].experiment == "tests-smoke" and seen["sweep"].raw["tracking"]["experiment"] == "tests-smoke"
    assert seen["name"].startswith("s-smoke-")
    assert sweep_tags(seen["sweep"].raw, seen["name"])["contrasweep.smoke"] == "true"
    assert main(["--root", str(tmp_path / "sw"), "run", str(spec)]) == 2
    assert seen["sweep"].experiment == "tests" and sweep_tags(seen["sweep"].raw, "x")["contrasweep.smoke"] == "false"


def test_overwrite_replaces_a_sweep_unless_its_driver_runs_it(tmp_path):
    from contrasweep.errors import UserError
    from contrasweep.folder import driver, sweeps

    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "sweep.json").write_text('{"status": "finished"}')
    sweeps.ensure_new(tmp_path, "x", overwrite=True)  # a finished sweep may be replaced
    driver.write(folder)  # this process now drives it
    (folder / "sweep.json").write_text('{"status": "running"}')
    with pytest.raises(UserError, match="still running"):
        sweeps.ensure_new(tmp_path, "x", overwrite=True)
    sweeps.replace(tmp_path, "x")
    assert not folder.exists()


@pytest.mark.parametrize("argv, files", [
    (["run", "missing.yaml"], {}),
    (["run", "bad.yaml"], {"bad.yaml": SPEC + "fixed: {epochs: 0}\n"}),
    (["run", "ok.yaml", "--address", "nowhere"], {"ok.yaml": SPEC}),
    (["run", "ok.yaml", "--name", "../x"], {"ok.yaml": SPEC}),
    (["run", "lacon.yaml"], {"lacon.yaml": "method: lacon\ndata: {source: bbc_news}\nfixed: {heads: 0}\n"}),
    (["resume", "nothing"], {}),
])
def test_argument_and_spec_errors_come_before_torch_ray_or_transformers(tmp_path, argv, files):
    """The CLI checks arguments, the spec (against the methods' declarations, not their modules)
    and the names before it imports torch, Ray or transformers: an error takes a fraction of a
    second (about 0.2 s here), not the 2-3 s those imports cost."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code = ("import sys\nfrom contrasweep.cli import main\ncode = main(sys.argv[1:])\n"
            "heavy = sorted(m for m in ('torch', 'ray', 'transformers', 'sklearn') if m in sys.modules)\n"
            "print('HEAVY', heavy)\nsys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**__import__("os").environ, "CONTRASWEEP_HOME": str(tmp_path / "sw")})
    assert proc.returncode == 2 and proc.stderr.startswith("contrasweep: error: "), proc.stderr
    assert "HEAVY []" in proc.stdout, proc.stdout


DRIVER_SPECS = {  # method -> write_spec sections: CE checks nothing; LaCon reads the width; VaSCL the batch
    "ce": {},
    "lacon": {"method": "lacon", "reported": {"temperature": 0.1}, "grid": {"temperature": [0.1, 0.2]},
              "fixed": {"heads": 4, "epochs": 1}},
    "vascl": {"method": "vascl", "reported": {}, "grid": {"lr": [1.0e-3]}, "fixed": {"neighbours": 3},
              "sweep": {"seeds": [0], "metric": "val/cluster_acc"}},
}


@pytest.mark.parametrize("method", sorted(DRIVER_SPECS))
def test_a_sweeps_driver_starts_without_transformers_or_the_methods(tiny_model_dir, tmp_path, method):
    """What a sweep's driver does before Ray starts (the launch module, the pre-start checks
    against the encoder, the data cache's tokenizer identity) imports neither transformers nor
    scikit-learn nor torch nor the method's module: those are the trial's (docs/architecture.md,
    "Facts about the stack"). LaCon's check reads the encoder's width from its config.json."""
    spec = write_spec(tmp_path / "s.yaml", tiny_model_dir, **DRIVER_SPECS[method])
    code = ("import sys\nfrom contrasweep.runner import checks, tune\nfrom contrasweep.data.tokens import tokenizer_identity\n"
            "from contrasweep.spec.load import load_spec\n"
            f"sweep = load_spec({str(spec)!r}, [])\nchecks.check_resources(sweep, local=True)\n"
            "checks.check_against_encoder(sweep)\ntokenizer_identity(sweep.encoder['name'])\n"
            f"print('HEAVY', sorted(m for m in ('torch', 'transformers', 'sklearn', 'trainables.methods.{method}') "
            "if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_the_width_comes_from_the_models_config_json(tiny_model_dir, tmp_path):
    import json

    from trainables.encoder_names import config_width

    assert config_width(tiny_model_dir) == 32 and config_width("default") == 384  # the tiny BERT, MiniLM-L6
    for key in ("dim", "d_model", "n_embd"):  # DistilBERT; T5 and BART; GPT-2
        (tmp_path / key).mkdir()
        (tmp_path / key / "config.json").write_text(json.dumps({key: 768, "n_heads": 12}))
        assert config_width(str(tmp_path / key)) == 768
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "config.json").write_text("{}")
    assert config_width(str(tmp_path / "none")) is None and config_width("some-org/some-hub-model") is None


def test_every_method_class_matches_its_declaration():
    from trainables.base import Method
    from trainables.methods.declarations import DECLARATIONS
    from trainables.registry import get_method, method_names

    assert set(DECLARATIONS) == set(method_names())
    for name, declared in DECLARATIONS.items():
        cls = get_method(name)
        assert (cls.name, cls.params, cls.label_kind, cls.metric_names, cls.sts_metric_names) == (
            declared.name, declared.params, declared.label_kind, declared.metric_names, declared.sts_metric_names), name
        overrides_check = cls.check.__func__ is not Method.check.__func__  # the driver skips the others' check
        assert (declared.check is not None) == overrides_check, name
