"""The Optuna study's storage: ``optuna.db`` next to the sweep (docs/architecture.md,
"Resume"), read from memory by the one driver that writes it (issue 54).

May import: Optuna's storages (SQLAlchemy's events), ``contrasweep.folder.relocation`` and
``contrasweep.folder.sweep_storage``.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path

from optuna.storages import RDBStorage
from optuna.storages._cached_storage import _CachedStorage

from contrasweep.folder.relocation import here_uri


class StudyStorage(RDBStorage):
    """``RDBStorage`` that follows its sweep folder: Tune pickles it with the searcher, and
    ``RDBStorage.__setstate__`` reconnects to its URL at once, so a moved folder would fail
    inside ``Tuner.restore`` (``contrasweep.folder.relocation``). Its connections commit
    without waiting for the disk twice (``write_ahead``)."""

    def __init__(self, url: str, **kwargs) -> None:
        super().__init__(url, **kwargs)
        write_ahead(self)

    def __setstate__(self, state: dict) -> None:
        state["url"] = here_uri(state["url"])
        super().__setstate__(state)
        write_ahead(self)


def write_ahead(storage: RDBStorage) -> None:
    """SQLite's write-ahead log for a study file on a local disk (``PRAGMA journal_mode=WAL``,
    kept by the file, with ``synchronous=NORMAL``): a commit appends to the log without a sync,
    where the default rollback journal synced it two or three times. The driver commits a few
    times per trial (``ask``, each repeat's record, ``tell``), on Tune's event loop: at 2,000 no-op
    trials those waits were 15% of the driver's busy time (``benchmarks/paper_scale.py``). A
    killed process loses no commit (the log is in the OS's hands); a lost machine may lose the
    last ones, never the file's consistency. A study on a network file system (a cluster's shared
    sweep folder) keeps the rollback journal: SQLite's log needs memory its readers share."""
    if not storage.url.startswith("sqlite:///"):
        return
    from contrasweep.folder.sweep_storage import shared_path

    if shared_path(Path(storage.url[len("sqlite:///"):]).parent):
        return
    from sqlalchemy import event

    def pragmas(connection, record) -> None:
        cursor = connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        except Exception:  # noqa: BLE001 - a file system without the log's shared memory: the journal as it was
            pass
        finally:
            cursor.close()

    event.listen(storage.engine, "connect", pragmas)
    storage.engine.dispose()  # the connection the set-up made goes: every one from now has them


class SoleWriterStorage(_CachedStorage):
    """Optuna's own cache over ``optuna.db`` for the process that alone writes the study: the
    sweep's driver (its searcher asks, records each repeat and tells; warm points, the reported
    point and a race's eliminations go through it too; ``report`` and ``extend`` open the study
    when no driver runs).

    Optuna's ``_CachedStorage`` keeps only *finished* trials in memory and reads every
    unfinished one from SQL again at each read (``get_trial`` of a running trial, and twice per
    ``ask`` through ``get_all_trials``): with suggestions running their repeats that was a third
    of the driver's CPU per no-op trial. Here the study is read from SQL once, at the first read;
    after that every write goes to SQL first, as before (a write that fails leaves memory as it
    was), and then to the trial in memory, replaced by an updated copy (a list handed out earlier
    keeps the trials it held), so every read is served from memory. What SQL stores comes back:
    attributes through JSON, parameters through their distribution, the times
    ``RDBStorage.set_trial_state_values`` sets (microseconds apart from SQL's own; a new driver
    reads SQL's). A study another process writes meanwhile would go unseen: none does."""

    def __init__(self, backend: RDBStorage) -> None:
        super().__init__(backend)
        self._loaded: set[int] = set()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_loaded"] = set()  # a copy in another process reads SQL again
        return state

    def _read_trials_from_remote_storage(self, study_id: int) -> None:
        if study_id not in self._loaded:
            super()._read_trials_from_remote_storage(study_id)  # every trial, at the first read
            self._loaded.add(study_id)

    def get_trial(self, trial_id: int):
        with self._lock:
            trial = self._cached(trial_id)
        if trial is None:
            return super().get_trial(trial_id)
        return trial if trial.state.is_finished() else copy.deepcopy(trial)  # a live Trial edits its own copy

    def _cached(self, trial_id: int):
        where = self._trial_id_to_study_id_and_number.get(trial_id)
        if where is None or where[0] not in self._loaded:
            return None
        return self._studies[where[0]].trials.get(where[1])

    def _update(self, trial_id: int, change) -> None:
        """``change`` applied to a copy of the trial in memory, which replaces it."""
        with self._lock:
            trial = self._cached(trial_id)
            if trial is None:
                return
            trial = copy.deepcopy(trial)
            change(trial)
            study_id, number = self._trial_id_to_study_id_and_number[trial_id]
            self._studies[study_id].trials[number] = trial

    # -- writes: SQL first, then memory ------------------------------------------------------
    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float, distribution) -> None:
        super().set_trial_param(trial_id, param_name, param_value_internal, distribution)

        def change(trial):
            trial.distributions = {**trial.distributions, param_name: distribution}
            trial.params = {**trial.params, param_name: distribution.to_external_repr(param_value_internal)}
        self._update(trial_id, change)

    def set_trial_state_values(self, trial_id: int, state, values=None) -> bool:
        if not super().set_trial_state_values(trial_id, state, values):
            return False

        def change(trial):
            if values is not None:
                trial.values = [float(v) for v in values]
            trial.state = state
            if state.name == "RUNNING":
                trial.datetime_start = datetime.now()
            if state.is_finished():
                trial.datetime_complete = datetime.now()
        self._update(trial_id, change)
        return True

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        super().set_trial_intermediate_value(trial_id, step, intermediate_value)
        self._update(trial_id, lambda trial: setattr(trial, "intermediate_values",
                                                     {**trial.intermediate_values, step: float(intermediate_value)}))

    def set_trial_user_attr(self, trial_id: int, key: str, value) -> None:
        super().set_trial_user_attr(trial_id, key, value)
        self._update(trial_id, lambda trial: setattr(trial, "user_attrs", {**trial.user_attrs, key: _stored(value)}))

    def set_trial_system_attr(self, trial_id: int, key: str, value) -> None:
        super().set_trial_system_attr(trial_id, key, value)
        self._update(trial_id, lambda trial: setattr(trial, "system_attrs", {**trial.system_attrs, key: _stored(value)}))


def _stored(value):
    """``value`` as SQL gives it back (attributes are stored as JSON)."""
    return json.loads(json.dumps(value))
