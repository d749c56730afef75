"""The test split of a trained trial, evaluated after the sweep chose what it reports
(``evaluation.test: reported``; docs/architecture.md, "Selection and the test split").

``evaluate_best`` gives the ``test/*`` that the loop's ``evaluate_test`` gives at the end of a
trial, from what the trial left: its best validation epoch's weights (a best folder of its
state folder, or the same files as the trial's MLflow model keeps them), the method's own
``evaluate`` on the test split with the trial's evaluation batch size, seed and best epoch, in
fp32, on one device. ``tests/test_test_split.py`` checks the two agree.

May import: torch and the generic modules of ``trainables`` (``loop``, ``checkpoints``,
``gather``); never a method's module by name.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, TypeVar

import torch

from trainables.checkpoints import best_folder, best_of_trial, read_meta
from trainables.gather import StageContext
from trainables.loop import load_trained, prefixed, seed_everything
from trainables.params import hp_value

_ModuleT = TypeVar("_ModuleT", bound=torch.nn.Module)


class EvalSession:
    """One process, one rank: what ``evaluate`` needs of a session (the device, the ranks,
    ``all_gather``)."""

    rank = 0
    world_size = 1

    def __init__(self, use_gpu: bool = False):
        self.device = torch.device("cuda" if use_gpu and torch.cuda.is_available() else "cpu")

    def wrap_model(self, model: _ModuleT) -> _ModuleT:
        return model.to(self.device)  # not wrapped: the method itself, on the device

    def all_gather(self, obj: Any) -> list[Any]:
        return [obj]


def evaluate_best(folder: str | Path, data: dict[str, Any], use_gpu: bool = False) -> dict[str, float]:
    """``test/*`` of the best weights in ``folder`` (a best folder), and ``time/test_s``.
    ``data``: the trial's payload (``{"tables": {split: Table}, "num_labels", ...}``); {} when it
    has no test split."""
    if "test" not in data["tables"]:
        return {}
    started = time.perf_counter()
    found = best_folder(folder)
    if found is None:
        raise FileNotFoundError(f"{folder}: no best weights there")
    meta = read_meta(found)
    config = meta["config"]
    torch.set_num_threads(hp_value(config, "torch_threads"))
    seed_everything(hp_value(config, "seed"))
    session = EvalSession(use_gpu)
    method = session.wrap_model(load_trained(str(found), data["num_labels"]))
    context = StageContext(
        data["tables"],
        data["num_labels"],
        hp_value(config, "eval_batch_size"),
        session,
        hp_value(config, "seed"),
        int(meta.get("epoch") or 0),
        data,
    )
    out = prefixed("test", method.evaluate(context, "test"))
    if session.device.type == "cuda":
        torch.cuda.synchronize(session.device)
    return {**out, "time/test_s": time.perf_counter() - started}


def evaluate_trial(
    state_dir: str | None,
    best_epoch: int | None,
    files: dict[str, bytes] | None,
    data: dict[str, Any],
    use_gpu: bool = False,
) -> dict[str, float]:
    """``evaluate_best`` of a trial's best folder in its state folder (``state_dir``, a path or a
    URI, and ``best_epoch``), or of its files as bytes (``files``: name -> content, the
    trial's MLflow model's checkpoint where the state folder no longer has it)."""
    if files is None:
        folder = best_of_trial(state_dir, int(best_epoch)) if state_dir and best_epoch else None
        if folder is None:
            raise FileNotFoundError(f"{state_dir}: no best folder of epoch {best_epoch}")
        return evaluate_best(folder, data, use_gpu)
    with tempfile.TemporaryDirectory(prefix="contrasweep-test-") as tmp:
        for name, content in files.items():
            (Path(tmp) / name).write_bytes(content)
        return evaluate_best(tmp, data, use_gpu)
