"""What a command prints: contrasweep's own lines on the terminal, everything (Ray's and
Tune's output, the logging tree's handlers included) in the sweep's driver.log; -v shows all."""

from __future__ import annotations

import logging
import sys

from contrasweep.console import LOG_FILE, Console, attach_log


def _emit(logger: logging.Logger) -> None:
    print("(run_trial pid=1) Checkpoint successfully created at: /a/very/long/path")
    print("[contrasweep] trials ended 1/4: ce lr=3e-05 · seed=0: complete", file=sys.stderr)
    logger.warning("Experiment state snapshotting has been triggered multiple times")
    print("╭──── Trial status ────╮")


def test_the_terminal_gets_our_lines_and_the_log_gets_everything(tmp_path, capsys):
    logger = logging.getLogger("ray.tune.test_console")
    handler = logging.StreamHandler(sys.stderr)  # bound to the stream before the console, as Ray's are
    logger.addHandler(handler)
    try:
        with Console(verbose=False):
            print("[contrasweep] sweep 'x': starting")  # before the folder exists: kept in memory
            attach_log(tmp_path)
            _emit(logger)
    finally:
        logger.removeHandler(handler)
    shown = capsys.readouterr()
    assert shown.out == "[contrasweep] sweep 'x': starting\n"
    assert shown.err == "[contrasweep] trials ended 1/4: ce lr=3e-05 · seed=0: complete\n"
    log = (tmp_path / LOG_FILE).read_text()
    for text in ("sweep 'x': starting", "Checkpoint successfully created", "trials ended 1/4: ce", "snapshotting", "Trial status"):
        assert text in log, log
    assert sys.stdout is not None and handler.stream is sys.stderr  # everything put back


def test_verbose_shows_everything(tmp_path, capsys):
    logger = logging.getLogger("ray.tune.test_console_verbose")
    with Console(verbose=True):
        attach_log(tmp_path)
        _emit(logger)
    shown = capsys.readouterr()
    assert "Checkpoint successfully created" in shown.out and "Trial status" in shown.out
    assert "[contrasweep] trials ended 1/4" in shown.err


def test_progress_inside_an_epoch_reaches_the_progress_display_not_the_terminal(tmp_path, capsys, monkeypatch):
    """A trial prints a marked line every $CONTRASWEEP_PROGRESS_S seconds while it iterates
    batches; Ray forwards it with its (pid=…) prefix; the console hands it to the progress
    display and neither prints nor logs it."""
    import time

    from contrasweep.console.progress import Progress
    from trainables import phase_progress

    monkeypatch.setenv(phase_progress.ENV, "0.01")
    phase_progress.set_trial("abc_00001")
    try:
        def slow(n):
            for i in range(n):
                time.sleep(0.004)
                yield i

        assert list(phase_progress.track(slow(20), "epoch 2/3 training", 20)) == list(range(20))
        printed = capsys.readouterr().out  # the trial's own lines (what Ray forwards)
        assert printed.startswith(f"{phase_progress.PREFIX} abc_00001 epoch 2/3 training ")
        with Console(verbose=False) as console:
            attach_log(tmp_path)
            progress = Progress(total=2, metric="val/accuracy")
            progress.trial_started("ce lr=0.1 · seed=0", 3, "abc_00001")
            print(f"\x1b[36m(run_trial pid=7)\x1b[0m {printed.splitlines()[-1]}")  # as the driver receives it
            assert progress.running["ce lr=0.1 · seed=0"].startswith("ce lr=0.1 · seed=0 epoch 2/3 training ")
            assert console.progress is progress
    finally:
        phase_progress.set_trial(None)
    shown = capsys.readouterr()
    assert phase_progress.PREFIX not in shown.out + shown.err
    assert "[contrasweep] ce lr=0.1 · seed=0 epoch 2/3 training: batch " in shown.err  # not a terminal: a line (throttled)
    assert phase_progress.PREFIX not in (tmp_path / LOG_FILE).read_text()
    assert list(phase_progress.track(range(3), "x", 3)) == [0, 1, 2]  # no trial set: silent


def test_on_a_terminal_one_status_line_is_kept_current(tmp_path):
    """Under a real pseudo-terminal: the running trials' status is one line rewritten in place
    (carriage returns, no new lines), cleared before a trial's end is printed as a line of its own."""
    import os
    import pty
    import subprocess

    script = ("from contrasweep.console import Console\nfrom contrasweep.console.progress import Progress\n"
              "with Console():\n"
              "    p = Progress(total=2, metric='val/accuracy', units=[1.0, 1.0])\n"
              "    p.trial_started('ce lr=0.1 · seed=0', 3, 't1')\n"
              "    p.trial_epoch('ce lr=0.1 · seed=0', 1, 3, 0.5, 0)\n"
              "    p.trial_phase('t1', 'epoch 2/3 training', 7, 10)\n"
              "    p.trial_ended('ce lr=0.1 · seed=0', 'FINISHED', 'complete', 0.75, 2, 3, 1)\n"
              "    p.close()\n")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=follower, stdout=follower, stderr=follower,
                            cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    assert proc.wait(timeout=30) == 0, output
    text = output.decode()
    assert "\r[contrasweep] trials ended 0/2" in text and "ce lr=0.1 · seed=0 epoch 1/3 val/accuracy=0.5000" in text
    assert "ce lr=0.1 · seed=0 epoch 2/3 training [#######---] 7/10 batches" in text  # progress inside the epoch, in place
    assert "\r[contrasweep] trials ended 1/2, 0m00s so far, ETA ~0m00s" in text and "0/2, 0m00s so far, ETA" not in text  # once one ended
    lines = [shown for shown in (line.split("\r")[-1].strip() for line in text.replace("\r\n", "\n").split("\n")) if shown]
    assert lines == ["[contrasweep] trials ended 1/2: ce lr=0.1 · seed=0: complete (3 epochs), best val/accuracy=0.7500 at epoch 2"], text


def test_an_interrupted_sweeps_summary_calls_the_cut_trials_interrupted(tmp_path):
    """After Ctrl-C: a trial the interruption cut is "interrupted"; "stopped early" is what the
    scheduler (ASHA) ended before its last epoch (tracking.json: FINISHED, outcome stopped)."""
    import json
    from types import SimpleNamespace

    from contrasweep.console.summary import summary_lines
    from contrasweep.spec.load import validate

    sweep = validate({"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4},
                      "grid": {"lr": [1.0e-3, 1.0e-4, 1.0e-5]}, "fixed": {"epochs": 2}, "sweep": {"seeds": [0]}})
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "tracking.json").write_text(json.dumps({"trials": {
        "a": {"status": "FINISHED", "outcome": "complete"}, "b": {"status": "FINISHED", "outcome": "stopped"}, "c": {}}}))

    def result(lr: float, epoch: int, tid: str):
        return SimpleNamespace(error=None, metrics={"epoch": epoch, "val/accuracy": 0.5, "trial_id": tid}, path="t",
                               config={"hp": {"lr": lr, "epochs": 2, "seed": 0}})

    results = [result(1.0e-3, 2, "a"), result(1.0e-4, 1, "b"), result(1.0e-5, 1, "c")]
    lines, failed = summary_lines(results, "val/accuracy", "max", "s", "interrupted", sweep, tmp_path)
    assert failed == 0
    assert lines[0] == "[contrasweep] sweep 's' interrupted: 3 trials: 1 complete, 1 stopped early, 1 interrupted, 0 failed"

    # a resumed driver's fresh Tuner holds only its own trials: the record's ended trials of this
    # stage's earlier drivers (tune, tune-r1, ...) that no result holds count too (by trial id: a
    # trial that never reported is known by its folder's name), an extension's not
    record = json.loads((tmp_path / "s" / "tracking.json").read_text())
    record["trials"]["d"] = {"status": "FINISHED", "outcome": "complete", "tune": "tune-r1"}
    record["trials"]["e"] = {"status": "FINISHED", "outcome": "stopped"}  # written before entries named their experiment
    record["trials"]["f"] = {"status": "FINISHED", "outcome": "complete", "tune": "tune-ext1"}
    record["trials"]["1a2b3c4d_00007"] = {"status": "FINISHED", "outcome": "stopped", "tune": "tune"}
    (tmp_path / "s" / "tracking.json").write_text(json.dumps(record))
    waited = SimpleNamespace(error=None, metrics={}, config={}, path="/x/tune/run_trial_1a2b3c4d_00007_7_lr=0.1_2026")
    lines, _ = summary_lines([*results, waited], "val/accuracy", "max", "s", "interrupted", sweep, tmp_path)
    assert lines[0] == "[contrasweep] sweep 's' interrupted: 6 trials: 2 complete, 3 stopped early, 1 interrupted, 0 failed"


def test_a_resume_opens_with_what_is_done_and_what_goes_on_from_where(tmp_path):
    import json

    from contrasweep.console.summary import resume_line

    (tmp_path / "sweep.json").write_text(json.dumps({"total": 6}))
    (tmp_path / "tracking.json").write_text(json.dumps({"trials": {
        "a": {"status": "FINISHED", "outcome": "complete", "name": "ce lr=0.001 · seed=0", "last_epoch": 3},
        "b": {"status": "FINISHED", "outcome": "stopped", "name": "ce lr=0.0001 · seed=0", "last_epoch": 1},
        "c": {"name": "ce lr=1e-05 · seed=0", "last_epoch": 2}}}))
    assert resume_line(tmp_path, "s") == (
        "[contrasweep] resuming sweep 's': 2/6 trials ended (1 complete, 1 stopped early, 0 failed); 1 go on from "
        "their last saved state (ce lr=1e-05 · seed=0 had reached epoch 2); 3 not started yet")


def test_list_shows_the_selected_configurations_mean_not_a_lucky_repeat():
    """One lucky seed's 1.0 is not "best": `list` shows the configuration the summary selects,
    the best mean over complete groups, as mean ± std of its repeats."""
    from contrasweep.console.listing import _mean_std, selected_values

    trials = {"a": {"group": "g1", "group_size": 2, "outcome": "complete", "best_value": 1.0},
              "b": {"group": "g1", "group_size": 2, "outcome": "complete", "best_value": 0.5},
              "c": {"group": "g2", "group_size": 2, "outcome": "complete", "best_value": 0.8},
              "d": {"group": "g2", "group_size": 2, "outcome": "complete", "best_value": 0.8},
              "e": {"group": "g3", "group_size": 2, "outcome": "complete", "best_value": 0.95},  # its 2nd repeat runs
              "f": {"group": "g4", "group_size": 1, "outcome": "stopped", "best_value": 0.99}}
    assert selected_values(trials, "max") == [0.8, 0.8]
    assert _mean_std(selected_values(trials, "max")) == "0.8000 ± 0.0000 (2 repeats)"
    assert _mean_std([1.0, 0.5]) == "0.7500 ± 0.3536 (2 repeats)" and _mean_std([0.5]) == "0.5000 (1 repeat)"
    assert selected_values(trials, "min") == [1.0, 0.5]


def test_list_breaks_equal_means_as_the_summary_does():
    """Two configurations with the same repeats' values (small validation sets tie): `list` names
    the one the summary and selection select (the group key that sorts first), whatever order
    the record holds them in (on 46b8d9a's `list`: the first in the record)."""
    from contrasweep.console.listing import selected
    from contrasweep.tracking.aggregate import rank

    entries = [("a", "g2", 1.0), ("b", "g2", 0.984375), ("c", "g1", 1.0), ("d", "g1", 0.984375)]
    trials = {t: {"group": g, "group_size": 2, "outcome": "complete", "best_value": v} for t, g, v in entries}
    assert rank(-0.9921875, "g1") < rank(-0.9921875, "g2")
    assert selected(trials, "max")[1] == "g1" and selected(trials, "min")[1] == "g1"
    assert selected(dict(reversed(list(trials.items()))), "max")[1] == "g1"


def test_list_and_the_summary_say_when_the_selected_configuration_did_not_learn(tmp_path):
    """Its verdict (contrasweep.tracking.verdict, kept in tracking.json) beside its mean: the chance
    level and the optimiser steps its repeats took; the summary's one line says what would give it more."""
    import json
    from types import SimpleNamespace

    from contrasweep.console.listing import listing
    from contrasweep.console.summary import chance_lines
    from contrasweep.tracking.aggregate import Group

    trials = {t: {"group": "g1", "group_size": 2, "outcome": "complete", "best_value": v, "status": "FINISHED"}
              for t, v in (("a", 0.24), ("b", 0.23))}
    verdict = {"learned": False, "level": 0.23, "mean": 0.235, "p_value": 0.24, "n": 2, "steps": 20}
    (tmp_path / "tracking.json").write_text(json.dumps({"trials": trials, "verdicts": {"g1": verdict}}))
    sweep = SimpleNamespace(path=tmp_path, status=lambda: "finished", meta=lambda: {"total": 2},
                            spec=lambda: {"sweep": {"metric": "val/accuracy"}})
    row = listing(sweep)
    assert row["best"] == "val/accuracy 0.2350 ± 0.0071 (2 repeats)" and row["learned"] == "no (chance 0.2300, 20 steps)"
    best = {"n_total=20": Group("g1", "n_total=20", "c", {}, 2)}
    assert chance_lines(tmp_path, best, "val/accuracy") == [
        "[contrasweep] did not learn [n_total=20]: the selected configuration's best/val/accuracy 0.2350 against chance "
        "0.2300 (p=0.24 over 2 repeats; 20 optimiser steps): it predicts no better than a model that never read a text "
        "(its registered model says so); give it more optimiser steps (fixed.max_steps or more epochs) or a larger lr"]
    # the README's demo: 0.65 and 0.85 against 0.20 clear the split's noise, but two repeats (df = 1) give p = 0.057
    demo = {"learned": False, "level": 0.2, "mean": 0.75, "p_value": 0.057, "n": 2, "steps": 15, "margin": 0.19}
    (tmp_path / "tracking.json").write_text(json.dumps({"trials": trials, "verdicts": {"g1": demo}}))
    assert chance_lines(tmp_path, best, "val/accuracy") == [
        "[contrasweep] not shown to learn [n_total=20]: the selected configuration's best/val/accuracy 0.7500 against "
        "chance 0.2000 (p=0.057 over 2 repeats; 15 optimiser steps): its mean clears what the evaluation split scores by "
        "luck (0.190), but its repeats do not show it at evaluation.alpha (its registered model says it did not learn); "
        "give it more repeats (sweep.seeds, or data.seed's values)"]
    assert chance_lines(tmp_path, best, "val/loss", "min")[0].startswith("[contrasweep] did not learn [n_total=20]")
    verdict["learned"] = True
    (tmp_path / "tracking.json").write_text(json.dumps({"trials": trials, "verdicts": {"g1": verdict}}))
    assert listing(sweep)["learned"] == "yes" and chance_lines(tmp_path, best, "val/accuracy") == []
