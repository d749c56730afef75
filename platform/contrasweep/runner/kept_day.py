"""Measurements kept a day in a JSON file of the data cache's folder, one entry per key, each
with the time it was measured (``when``): ``plan``'s fixed costs (``contrasweep.runner.fixed_costs``)
and calibrations (``contrasweep.runner.sweep_plan``). Written whole (``folder.record.write_whole``);
best effort: a file that cannot be read or written means nothing kept.

May import: ``contrasweep.folder.record``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from contrasweep.folder.record import write_whole

KEEP_S = 24 * 3600.0


def get(file: Path, key: str) -> dict | None:
    """The entry kept under ``key`` if it is less than a day old, else None."""
    try:
        found = json.loads(Path(file).read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return found if found and time.time() - found.get("when", 0) < KEEP_S else None


def put(file: Path, key: str, value: dict) -> None:
    """Keep ``value`` (with its ``when``) under ``key``; entries over a day old go."""
    try:
        kept = json.loads(Path(file).read_text())
    except (OSError, ValueError):
        kept = {}
    kept = {k: v for k, v in kept.items() if time.time() - v.get("when", 0) < KEEP_S}
    kept[key] = value
    try:
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        write_whole(Path(file), json.dumps(kept, indent=1).encode())
    except OSError:
        pass
