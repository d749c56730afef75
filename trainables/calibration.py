"""What a trial costs on this machine, measured before a sweep (``contrasweep plan``;
docs/architecture.md, "Plan before launching").

The generic loop itself (``loop.train`` with a ``LocalSession`` in a temporary folder) trains
the trial's method for one epoch on a slice of its own data: ``steps`` optimiser steps of the
trial's batch size (at most ``BATCH`` rows: seconds per row hardly depend on it, and a
calibration of a batch-64 SimCSE then stays near 20 s), ``eval_rows`` validation rows and
``TEST_FACTOR`` times as many test rows spread over each split (the two evaluation passes give
an evaluation's fixed seconds and its seconds per row: ``fixed_and_per_row``). Its phase clock
(``time/<phase>_s``, what every trial reports) gives the seconds of each phase. One epoch, not
two with the second timed: the first step's one-off costs (lazy initialisation, allocator
growth) are charged to training, which errs towards more time, and SimCSE's evaluations (5 s
each, fixed) would otherwise double the calibration. The set-up is timed by building the
method once more afterwards (what a trial pays in a process that ran one before: Tune reuses
trial processes); the loop's own set-up (imports included) is kept beside it. The
first epoch always writes the best weights and a resume state, so its checkpoint seconds over
the bytes of those two folders give the write speed; their sizes are what every trial of the
sweep keeps (``trainables.checkpoints``).

Training and the second stage are charged per row (a second stage's fixed costs, e.g. a
probe's, count as if they grew with the rows: more time for bigger training sets).

May import: torch, numpy, pyarrow, this package (loop, sessions, checkpoints, params).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from trainables.params import hp_value

EPOCHS = 1
STEPS = 3
BATCH = 16  # the most rows per calibration step (the trial's batch size when smaller)
EVAL_ROWS = 32
TEST_FACTOR = 3


def spread(table, rows: int):
    """``rows`` rows spread evenly over ``table`` (its order may be by length or label)."""
    if table.num_rows <= rows:
        return table
    return table.take(np.linspace(0, table.num_rows - 1, rows).round().astype(np.int64))


def fixed_and_per_row(val_s: float, n_val: int, test_s: float, n_test: int) -> tuple[float, float]:
    """An evaluation's seconds as fixed + rows × per row, from the validation pass and the test
    pass over ``TEST_FACTOR`` times as many rows (the same ``evaluate``): a method's fixed costs
    (SimCSE's k-means restarts and few-shot probes, ABALONE's probe grid) do not grow with the
    rows. Where the two passes do not fit such a line, all of it is per row."""
    if n_test > n_val > 0 and test_s > val_s:
        row = (test_s - val_s) / (n_test - n_val)
        return max(0.0, val_s - n_val * row), row
    return 0.0, val_s / max(1, n_val)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def calibrate(config: dict[str, Any], data: dict[str, Any], steps: int = STEPS, eval_rows: int = EVAL_ROWS) -> dict:
    """Seconds per row of training and the second stage; an evaluation's fixed seconds and seconds
    per row; the set-up seconds;
    seconds per byte written; the bytes of the best weights and of a resume state. ``config`` and
    ``data`` are a trial's (``loop.train``'s arguments)."""
    import torch

    from trainables.loop import build_method, train  # transformers: plan imports this module before it calibrates
    from trainables.sessions import LocalSession

    tables = data["tables"]
    batch = min(BATCH, int(hp_value(config, "batch_size")))
    sliced = {"train": spread(tables["train"], steps * batch)}
    for split, rows in (("validation", eval_rows), ("test", TEST_FACTOR * eval_rows)):
        if split in tables:
            sliced[split] = spread(tables[split], rows)
    # max_steps off: the calibration's epochs are whole passes over its slice, whatever the trial's budget
    hp = {**config["hp"], "epochs": EPOCHS, "max_steps": 0, "checkpoint_every": 1, "batch_size": batch}
    threads = torch.get_num_threads()
    folder = Path(tempfile.mkdtemp(prefix="contrasweep-calibrate-"))
    started = time.perf_counter()
    try:
        session = LocalSession(str(folder))
        loop_config = {k: v for k, v in config.items() if k != "checkpoint_at"}  # every epoch writes one here
        train({**loop_config, "hp": hp}, {**data, "tables": sliced}, session)
        first, last = session.reports[0], session.reports[-1]
        built = time.perf_counter()  # a trial after the first in a process: imports done, the encoder read again
        build_method({**loop_config, "hp": hp}, data["num_labels"])
        warm_setup = time.perf_counter() - built
        state = folder / "state"
        best = max(state.glob("best-e*"), key=lambda p: p.name)
        resume = max(state.glob("resume-e*"), key=lambda p: p.name)
        weights, resume_bytes = _size(best), _size(resume)
    finally:
        torch.set_num_threads(threads)  # the loop sets the trial's own
        shutil.rmtree(folder, ignore_errors=True)

    def per_row(report: dict, phase: str, rows: int) -> float:
        return float(report.get(f"time/{phase}_s", 0.0)) / max(1, rows)

    n_train = sliced["train"].num_rows
    n_val = sliced["validation"].num_rows if "validation" in sliced else 0
    n_test = sliced["test"].num_rows if "test" in sliced else 0
    fixed, row = fixed_and_per_row(
        float(last.get("time/eval_s", 0.0)), n_val, float(last.get("time/test_s", 0.0)), n_test
    )
    return {
        "setup_s": warm_setup,
        "first_setup_s": float(first.get("time/setup_s", 0.0)),
        "train_row_s": per_row(last, "train", n_train),
        "stage2_row_s": per_row(last, "stage2", n_train),
        "eval_fixed_s": fixed,
        "eval_row_s": row,
        "write_byte_s": float(first.get("time/checkpoint_s", 0.0)) / max(1, weights + resume_bytes),
        "weights_bytes": weights,
        "resume_bytes": resume_bytes,
        "rows": {"train": n_train, "validation": n_val, "test": n_test},
        "steps": steps,
        "measured_s": time.perf_counter() - started,
    }
