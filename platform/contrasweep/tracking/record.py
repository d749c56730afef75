"""``tracking.json``: the sweep's record of its MLflow runs (docs/architecture.md, "Resume").
Imports only the standard library.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


class TrackingState:
    """``tracking.json``: parent run id, trial id -> run id, last epoch logged, best checkpoint."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.data: dict[str, Any] = {"parent_run_id": None, "trials": {}}
        if self.path.exists():
            self.data = json.loads(self.path.read_text())

    def save(self) -> None:
        # Atomic replace: a SIGKILL mid-write must not leave a torn file behind.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tracking-")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.data, fh, indent=1)
        os.replace(tmp, self.path)

    @property
    def trials(self) -> dict[str, dict]:
        return self.data["trials"]
