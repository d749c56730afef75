"""A sweep's placeholder run ids and the MLflow run ids they stand for (issue 71).

The driver names a trial's MLflow run before the store has made it: a *placeholder*, a fresh
``uuid4().hex``, the form MLflow's own run ids take. Its MLflow writer makes the run with
MLflow's public ``create_run`` (the store draws the real id), tags it
``contrasweep.placeholder`` = the placeholder, and appends ``<placeholder> <run id>`` to
``mlflow_wal/ids`` (this module) before it counts the call applied. From then on it translates
the placeholder wherever a later call names it (a run id argument, a tag value such as
``mlflow.parentRunId``, a search filter): ``translate``.

The sweep's records name runs by whichever id the driver had when it wrote them, so every reader
of a record maps it through the file first (``folder.record.TrackingState`` does, on load), and
the tracker rewrites its own in memory once the writer has applied its queue (``remap``).

Imports only the standard library.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

IDS_FILE = Path("mlflow_wal") / "ids"  # in the sweep folder: one "<placeholder> <run id>" line each
PLACEHOLDER_TAG = "contrasweep.placeholder"
_ID = re.compile(r"[0-9a-f]{32}")  # a run id or a placeholder (uuid4().hex, as MLflow's SQL and file stores draw)


def ids_path(sweep_dir: str | os.PathLike) -> Path:
    return Path(sweep_dir) / IDS_FILE


def load(path: str | os.PathLike) -> dict[str, str]:
    """``path``'s placeholders -> run ids (none when it does not exist; a line a kill tore is
    left out: its run is found again by its tag, ``tracking.run_ids.made_run``)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return {}
    ids = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and all(_ID.fullmatch(p) for p in parts):
            ids[parts[0]] = parts[1]
    return ids


def append(path: str | os.PathLike, placeholder: str, run_id: str) -> None:
    """One pair, appended in one write (a kill leaves the line whole or torn, never another's)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{placeholder} {run_id}\n".encode())
    finally:
        os.close(fd)


def translate(obj: Any, ids: dict[str, str]) -> Any:
    """``obj`` with every placeholder in ``ids`` replaced by its run id: in strings (whole or
    inside, as a search filter names a parent), tuples, lists, dicts (keys and values) and
    MLflow's key-value entities (``RunTag``, ``Param``: rebuilt with the value translated).
    Returns ``obj`` itself where nothing changes."""
    if not ids:
        return obj
    if isinstance(obj, str):
        if len(obj) < 32:
            return obj
        new = _ID.sub(lambda m: ids.get(m[0], m[0]), obj)
        return obj if new == obj else new
    if isinstance(obj, (list, tuple)):
        items = [translate(item, ids) for item in obj]
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return type(obj)(items) if isinstance(obj, list) or type(obj) is tuple else type(obj)(*items)
    if isinstance(obj, dict):
        pairs = [(translate(k, ids), translate(v, ids)) for k, v in obj.items()]
        if all(a is k and b is v for (a, b), (k, v) in zip(pairs, obj.items())):
            return obj
        return dict(pairs)
    value = getattr(obj, "value", None)
    if isinstance(value, str) and hasattr(obj, "key"):
        new = translate(value, ids)
        return obj if new is value else type(obj)(obj.key, new)
    return obj


def remap(obj: Any, ids: dict[str, str]) -> bool:
    """Translate, in place, every placeholder ``obj`` holds (dicts, lists and sets, nested): the
    tracker's record and the maps that hold its entries keep their identity. Whether any changed."""
    changed = False
    if not ids:
        return False
    if isinstance(obj, dict):
        for key in list(obj):
            value = obj[key]
            new_key = translate(key, ids) if isinstance(key, str) else key
            if isinstance(value, (dict, list, set)):
                changed |= remap(value, ids)
                new = value
            else:
                new = translate(value, ids) if isinstance(value, str) else value
            if new_key is not key:
                del obj[key]
                changed = True
            if new_key is not key or new is not value:
                obj[new_key] = new
                changed = True
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            if isinstance(value, (dict, list, set)):
                changed |= remap(value, ids)
            elif isinstance(value, str):
                new = translate(value, ids)
                if new is not value:
                    obj[i] = new
                    changed = True
    elif isinstance(obj, set):
        new = {translate(v, ids) if isinstance(v, str) else v for v in obj}
        if new != obj:
            obj.clear()
            obj.update(new)
            changed = True
    return changed
