"""No library progress bars on the terminal: MLflow's artifact downloads, transformers'
"Loading weights" and "Writing model shards", datasets' tokenising and saving.

May import: nothing of the project.
"""

from __future__ import annotations

import os


def quiet_libraries() -> None:
    """Set where a command or a driver's call starts, before any of those libraries is imported,
    so a local Ray's workers inherit it too; a user's own setting wins."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers reads it at import
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
