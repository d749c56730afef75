"""Issue 70 (7): no library progress bar reaches a console. The project's one transformers
``save_pretrained`` (``trainables.toy.build_tiny_bert``: ``check-method``'s model, and a run's
check of a user's method) writes without transformers' "Writing model shards" bar and leaves
the bars' switch as it found it; every command starts with the libraries' bars off
(``contrasweep.console.quiet.quiet_libraries``: the environment a local Ray's workers inherit),
a user's own setting kept."""

from __future__ import annotations

import os
import sys

import pytest

BARS = ("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_tiny_bert_is_written_without_a_progress_bar(enabled, tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    from trainables.toy import build_tiny_bert

    was = hf_logging.is_progress_bar_enabled()
    (hf_logging.enable_progress_bar if enabled else hf_logging.disable_progress_bar)()
    try:
        capfd.readouterr()
        folder = build_tiny_bert(tmp_path / "tiny")
        out, err = capfd.readouterr()
        assert (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()
        assert "Writing model shards" not in out + err and "%|" not in out + err, out + err
        assert hf_logging.is_progress_bar_enabled() is enabled  # as it was
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()


def test_every_command_starts_with_the_libraries_bars_off(monkeypatch, tmp_path, capsys):
    from contrasweep.cli import commands, main

    for name in BARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_DATASETS_DISABLE_PROGRESS_BARS", "0")  # a user's own setting wins
    seen = {}

    def fake_list(args):
        seen.update({name: os.environ.get(name) for name in BARS})
        return 0

    monkeypatch.setattr(commands, "cmd_list", fake_list)
    assert main(["--root", str(tmp_path), "list"]) == 0
    assert seen == {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                    "HF_DATASETS_DISABLE_PROGRESS_BARS": "0"}


def test_a_commands_process_writes_a_model_silently(tmp_path):
    """In a fresh process, as ``contrasweep`` starts one: after ``quiet_libraries`` the
    transformers bar is off at import (its ``Writing model shards`` as any other)."""
    import subprocess

    code = ("import sys\nfrom contrasweep.console.quiet import quiet_libraries\nquiet_libraries()\n"
            "from transformers.utils import logging\nprint('BARS', logging.is_progress_bar_enabled())\n")
    env = {k: v for k, v in os.environ.items() if k not in BARS}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "BARS False" in done.stdout, done.stdout + done.stderr[-2000:]
