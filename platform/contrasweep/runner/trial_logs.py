"""Each trial's ``result.json`` and ``progress.csv``, written where the sweep keeps them (issue 54).

Ray Tune's own loggers (``JsonLoggerCallback``, ``CSVLoggerCallback``) write into the driver's
staging folder, and every save of Tune's experiment state copies that whole folder, every
trial's files, to the sweep's Tune folder: a copy that grew with the trials run, made before
each new trial (until issue 71) and every few seconds. Where Tune's
storage is a local path (the sweep folder, or a shared one the driver mounts), these write straight
into the trial's own folder there (``trial.path``), so the staging folder keeps Tune's state
files only. Where it is a URI (``sweep.storage`` on object storage) they write where Tune's do
and Tune's copy carries them, as before.

The files are Tune's formats: one JSON line per report (``result.json``; the ``config`` within),
and the report flattened with ``/`` as CSV, its header from the first report (``progress.csv``).
A trial that runs again (a restore) appends to both.

May import: Ray Tune's ``LoggerCallback`` and its JSON encoder.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ray.tune.logger import LoggerCallback
from ray.tune.utils import flatten_dict
from ray.tune.utils.util import SafeFallbackEncoder

RESULT_FILE, PROGRESS_FILE, PARAMS_FILE = "result.json", "progress.csv", "params.json"


def trial_folder(trial) -> Path:
    """Where a trial's logs go: its folder in Tune's storage when that is a local path, else
    the driver's staging folder (Tune copies it up)."""
    trial.init_local_path()  # names the trial's folder (Tune keeps a name once given)
    storage = getattr(trial, "storage", None)
    filesystem = getattr(storage, "storage_filesystem", None)
    if filesystem is not None and getattr(filesystem, "type_name", "") == "local":
        return Path(trial.path)
    return Path(trial.local_path)


class TrialLogs(LoggerCallback):
    """``result.json`` and ``progress.csv`` per trial (the module's docstring)."""

    def __init__(self) -> None:
        self._open: dict = {}  # trial -> [result file, progress file, csv writer or None]

    def __getstate__(self):  # pickled into tuner.pkl with the run config: no open files
        return {"_open": {}}

    def log_trial_start(self, trial) -> None:
        self.log_trial_end(trial)
        folder = trial_folder(trial)
        folder.mkdir(parents=True, exist_ok=True)
        params = folder / PARAMS_FILE
        if not params.exists():
            params.write_text(json.dumps(trial.config, indent=2, sort_keys=True, cls=SafeFallbackEncoder))
        progress = folder / PROGRESS_FILE
        self._open[trial] = [
            (folder / RESULT_FILE).open("a"),
            progress.open("a", newline=""),
            None,
            progress.exists() and progress.stat().st_size > 0,
        ]

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        if trial not in self._open:
            self.log_trial_start(trial)
        files = self._open[trial]
        files[0].write(json.dumps(result, cls=SafeFallbackEncoder) + "\n")
        files[0].flush()
        flat = flatten_dict({k: v for k, v in result.items() if k != "config"}, delimiter="/")
        if files[2] is None:
            files[2] = writer = csv.DictWriter(files[1], fieldnames=list(flat), extrasaction="ignore")
            if not files[3]:  # a restored trial's file has its header already
                writer.writeheader()
        files[2].writerow(flat)
        files[1].flush()

    def log_trial_end(self, trial, failed: bool = False) -> None:
        files = self._open.pop(trial, None)
        if files is not None:
            files[0].close()
            files[1].close()
