"""A trial's MLflow run, named by the driver before the store has made it
(``contrasweep.tracking.writer``): the driver records and queues the run without waiting.

The driver's name is a placeholder (``folder.placeholders``). The writer makes the run with
MLflow's public ``create_run``, tagged with the placeholder, keeps placeholder -> run id in
``mlflow_wal/ids`` and translates the placeholder in every later call (``Ids``). Before
issue 71 the run was made under the driver's id by patching the store module's ``uuid``.

May import: ``contrasweep.folder.placeholders``, ``contrasweep.tracking.store`` (its paged search)
and the standard library (MLflow's client is the caller's; the replay's search imports MLflow's
``ViewType``, in the writer).
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path
from urllib.parse import urlparse

from contrasweep.folder.placeholders import IDS_FILE, PLACEHOLDER_TAG, append, load, translate
from contrasweep.tracking.store import search_all

# Stores whose runs are made queued under a placeholder (``made_run``): MLflow's SQL and file
# stores, and a tracking server (issue 73: a trial that starts while the server is away goes on,
# and a creation tried again after the server died mid-answer finds its run by its tag, not twice).
QUEUED_RUN_STORES = frozenset({"sqlite", "postgresql", "mysql", "mssql", "file", "", "http", "https"})
RunRef = namedtuple("RunRef", "run_id experiment_id run_name start_time")
Made = namedtuple("Made", "info")  # what a queued ``create_run`` returns: ``.info.run_id``, as a Run's


def queued_runs(tracking_uri: str) -> bool:
    """Whether the store at ``tracking_uri`` gets its runs made queued (``QUEUED_RUN_STORES``)."""
    return urlparse(tracking_uri).scheme.split("+")[0] in QUEUED_RUN_STORES


class Ids:
    """The writer's placeholders -> run ids, as ``mlflow_wal/ids`` holds them (``wal``: that folder)."""

    def __init__(self, wal: str | os.PathLike):
        self.path = Path(wal) / IDS_FILE.name
        self.map = load(self.path)

    def translate(self, obj):
        return translate(obj, self.map)

    def add(self, placeholder: str, run_id: str) -> None:
        append(self.path, placeholder, run_id)
        self.map[placeholder] = run_id


def made_run(client, ids: Ids, experiment_id: str, run_id: str, replaying: bool = False, tags=None, **kwargs) -> str:
    """Make the run the driver named ``run_id`` (a placeholder) and note it in ``ids``; returns
    its MLflow id. A placeholder ``ids`` knows is not made again. A replayed creation (the
    writer may have been killed after making the run, before noting it) looks for the run
    first: by its tag, or, for a call an earlier version logged, under that id itself (it made
    runs under the driver's id)."""
    if run_id in ids.map:
        return ids.map[run_id]
    if replaying:
        found = _made_before(client, experiment_id, run_id)
        if found is not None:
            ids.add(run_id, found)
            return found
    made = client.create_run(experiment_id, tags={**(tags or {}), PLACEHOLDER_TAG: run_id}, **kwargs).info.run_id
    ids.add(run_id, made)
    return made


def _made_before(client, experiment_id: str, placeholder: str) -> str | None:
    from mlflow.entities import ViewType

    runs = client.search_runs(
        [experiment_id], f"tags.`{PLACEHOLDER_TAG}` = '{placeholder}'", run_view_type=ViewType.ALL, max_results=1
    )
    if runs:
        return runs[0].info.run_id
    try:
        return client.get_run(placeholder).info.run_id
    except Exception:  # noqa: BLE001 - MLflow's "not found": never made
        return None


def recover(client, sweep_dir: str | os.PathLike, experiment_id: str) -> int:
    """A sweep whose ``mlflow_wal/ids`` is gone (a user deleted it, or all of ``mlflow_wal/``):
    its record may still name runs by placeholders no writer could translate (the store would
    answer "run not found"). Every run of the experiment tagged with a placeholder is read back
    (paged) and the file written again from their tags; it exists from then on, also when
    nothing was found (a sweep from before issue 71), so the search runs once. The pairs found."""
    path = Path(sweep_dir) / IDS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    found = search_all(client, [experiment_id], f"tags.`{PLACEHOLDER_TAG}` LIKE '%'")
    for run in found:
        append(path, run.data.tags[PLACEHOLDER_TAG], run.info.run_id)
    path.touch()
    return len(found)
