"""A new MLflow run made under an id the driver chose (``contrasweep.tracking.writer``): the
driver records and queues a trial's run without waiting for the store to name it.

May import: the standard library (MLflow's client is the caller's).
"""

from __future__ import annotations

import sys
import uuid
from collections import namedtuple
from urllib.parse import urlparse

# Stores that make a run under a chosen id (``made_run``): MLflow's SQL and file stores. A
# tracking server's run id is the server's, so ``create_run`` waits for it there.
CHOSEN_ID_STORES = frozenset({"sqlite", "postgresql", "mysql", "mssql", "file", ""})
RunRef = namedtuple("RunRef", "run_id experiment_id run_name start_time")
Made = namedtuple("Made", "info")  # what a queued ``create_run`` returns: ``.info.run_id``, as a Run's


def chosen_ids(tracking_uri: str) -> bool:
    """Whether the store at ``tracking_uri`` makes runs under a chosen id (``CHOSEN_ID_STORES``)."""
    return urlparse(tracking_uri).scheme.split("+")[0] in CHOSEN_ID_STORES


class _OneId:
    """The ``uuid`` module as an MLflow store's module sees it during one ``create_run``."""

    def __init__(self, run_id: str):
        self._id = uuid.UUID(hex=run_id)

    def uuid4(self) -> uuid.UUID:
        return self._id

    def __getattr__(self, name: str):
        return getattr(uuid, name)


def made_run(client, experiment_id: str, run_id: str, replaying: bool = False, **kwargs) -> None:
    """Make a run under ``run_id``. MLflow's client has no way to choose a new run's id; its SQL
    and file stores draw one from ``uuid.uuid4()`` of their own module (MLflow 3.10-3.17), so
    for this call (the writer runs one call at a time) that module's ``uuid`` gives ``run_id``.
    Checked: a store that made another id is a store error (the sweep stops; ``resume`` says
    it again). A replayed creation whose run exists (made before a kill) is skipped."""
    from unittest import mock

    if replaying:
        try:
            client.get_run(run_id)
            return
        except Exception:  # noqa: BLE001 - MLflow's "not found": made below
            pass
    module = sys.modules[type(client._tracking_client.store).__module__]
    made = None
    if hasattr(module, "uuid"):
        with mock.patch.object(module, "uuid", _OneId(run_id)):
            made = client.create_run(experiment_id, **kwargs).info.run_id
    if made != run_id:
        raise RuntimeError(f"this MLflow store ({module.__name__}) does not make a run under a chosen id (made "
                           f"{made}, asked {run_id}); allowed: MLflow 3.10-3.17, as pyproject.toml pins it")
