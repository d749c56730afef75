"""What a sweep keeps, as the summary (``contrasweep.console.summary``) and ``list`` say it: its
MLflow models (``model_lines``: how many complete trials keep one, the kept ones whose weights
were gone; ``model_errors``: why one could not be built) and its folder's size on disk
(``disk_use``, in words: ``human``).

May import: ``contrasweep.folder.record``, ``contrasweep.spec.text``.
"""

from __future__ import annotations

import os
from pathlib import Path

from contrasweep.folder.record import MODEL_LOGGED, MODEL_MISSING
from contrasweep.folder.record import read as read_record
from contrasweep.spec.text import counted


def model_errors(folder: Path) -> list[str]:
    """Why complete trials got no MLflow model (``tracking.json``; contrasweep.tracking.artifacts)."""
    try:
        trials = read_record(Path(folder) / "tracking.json").get("trials", {})
    except (OSError, ValueError):
        return []
    return [e["model_error"] for e in trials.values() if e.get("model_error")]


def model_lines(folder: Path, keep_models) -> list[str]:
    """How many complete trials keep an MLflow model, and the kept ones whose weights were gone
    (``tracking.json``'s ``model``: contrasweep.tracking.kept)."""
    try:
        trials = read_record(Path(folder) / "tracking.json").get("trials", {})
    except (OSError, ValueError):
        return []
    complete = sum(1 for e in trials.values() if e.get("outcome") == "complete")
    logged = sum(1 for e in trials.values() if e.get("model") == MODEL_LOGGED)
    missing = sum(1 for e in trials.values() if e.get("model") == MODEL_MISSING)
    if not complete:
        return []
    which = (
        "every complete trial"
        if keep_models == "all"
        else f"the {max(1, int(keep_models))} best configurations of each setting and the reported point, whose "
        "weights the sweep keeps"
    )
    lines = [
        f"[contrasweep] MLflow models: {logged} of {counted(complete, 'complete trial')} ({which}; "
        "tracking.keep_models)"
    ]
    if missing:
        lines.append(
            f"[contrasweep] no MLflow model for {counted(missing, 'repeat')} kept after the sweep first finished: "
            "their weights were removed then; to get them, run that configuration again"
        )
    return lines


def disk_use(folder: Path) -> int:
    """Bytes under ``folder``: each file once (a resume state hard-links the best weights),
    links not followed."""
    seen, total = set(), 0
    for here, _, files in os.walk(folder):
        for name in files:
            try:
                stat = os.lstat(os.path.join(here, name))
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"
