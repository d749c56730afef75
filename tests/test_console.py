"""What a command prints: contrasweep's own lines on the terminal, everything (Ray's and
Tune's output, the logging tree's handlers included) in the sweep's driver.log; -v shows all."""

from __future__ import annotations

import logging
import sys

from contrasweep.console import LOG_FILE, Console, attach_log


def _emit(logger: logging.Logger) -> None:
    print("(run_trial pid=1) Checkpoint successfully created at: /a/very/long/path")
    print("[contrasweep] 1/4 ce lr=3e-05 · seed=0: complete", file=sys.stderr)
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
    assert shown.err == "[contrasweep] 1/4 ce lr=3e-05 · seed=0: complete\n"
    log = (tmp_path / LOG_FILE).read_text()
    for text in ("sweep 'x': starting", "Checkpoint successfully created", "1/4 ce", "snapshotting", "Trial status"):
        assert text in log, log
    assert sys.stdout is not None and handler.stream is sys.stderr  # everything put back


def test_verbose_shows_everything(tmp_path, capsys):
    logger = logging.getLogger("ray.tune.test_console_verbose")
    with Console(verbose=True):
        attach_log(tmp_path)
        _emit(logger)
    shown = capsys.readouterr()
    assert "Checkpoint successfully created" in shown.out and "Trial status" in shown.out
    assert "[contrasweep] 1/4" in shown.err
