"""The Optuna study's storage: ``optuna.db`` next to the sweep (docs/architecture.md,
"Resume"), read from memory by the one driver that writes it (issue 54).

May import: Optuna's public storages and trials (SQLAlchemy's events), ``contrasweep.folder.relocation`` and
``contrasweep.folder.sweep_storage``.
"""

from __future__ import annotations

import copy
import json
import threading
from datetime import datetime
from pathlib import Path

from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState

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

    if shared_path(Path(storage.url[len("sqlite:///") :]).parent):
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


class SoleWriterStorage(BaseStorage):
    """The study, in memory, for the process that alone writes it: the sweep's driver (its
    searcher asks, records each repeat and tells; warm points, the reported point and a race's
    eliminations go through it too; ``report`` and ``extend`` open the study when no driver
    runs). A ``BaseStorage`` (Optuna's public storage API) over ``backend``, the public
    ``RDBStorage`` of ``optuna.db`` (``StudyStorage``), which every call not about trials goes to.

    Optuna's own cache reads every unfinished trial from SQL again at each read (``get_trial``
    of a running trial, and twice per ``ask`` through ``get_all_trials``): with suggestions
    running their repeats that was a third of the driver's CPU per no-op trial. Here a study's
    trials are read from SQL once, at its first read; after that every write goes to SQL first (a
    write that fails leaves memory as it was) and then to the trial in memory, replaced by an
    updated copy (a list handed out earlier keeps the trials it held), so every read is served
    from memory. A trial's id is known from its creation here, or asked of SQL once (a trial an
    earlier driver made). What SQL stores comes back: attributes through JSON, parameters
    through their distribution, the times ``RDBStorage.set_trial_state_values`` sets
    (microseconds apart from SQL's own; a new driver reads SQL's). A study another process
    writes meanwhile would go unseen: none does. Picklable: a copy reads SQL again."""

    def __init__(self, backend: RDBStorage) -> None:
        self.backend = backend
        self._fresh()

    def _fresh(self) -> None:
        self._lock = threading.RLock()
        self._trials: dict[int, list] = {}  # study id -> its trials by number, once read
        self._where: dict[int, tuple[int, int]] = {}  # trial id -> (study id, number)
        self._ids: dict[tuple[int, int], int] = {}  # (study id, number) -> trial id
        self._directions: dict[int, list] = {}

    def __getstate__(self) -> dict:
        return {"backend": self.backend}

    def __setstate__(self, state: dict) -> None:
        self.backend = state["backend"]
        self._fresh()

    # -- studies: SQL's ----------------------------------------------------------------------
    def create_new_study(self, directions, study_name=None) -> int:
        return self.backend.create_new_study(directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self.backend.delete_study(study_id)
        with self._lock:
            self._trials.pop(study_id, None)
            self._directions.pop(study_id, None)

    def set_study_user_attr(self, study_id: int, key: str, value) -> None:
        self.backend.set_study_user_attr(study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value) -> None:
        self.backend.set_study_system_attr(study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return self.backend.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self.backend.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list:
        if study_id not in self._directions:  # fixed once the study exists
            self._directions[study_id] = self.backend.get_study_directions(study_id)
        return self._directions[study_id]

    def get_study_user_attrs(self, study_id: int) -> dict:
        return self.backend.get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict:
        return self.backend.get_study_system_attrs(study_id)

    def get_all_studies(self) -> list:
        return self.backend.get_all_studies()

    def remove_session(self) -> None:
        self.backend.remove_session()

    # -- trials: read once, then from memory ------------------------------------------------
    def _study(self, study_id: int) -> list:
        """The study's trials by number, read from SQL at the first read (the lock held)."""
        if study_id not in self._trials:
            read = self.backend.get_all_trials(study_id, deepcopy=False)
            self._trials[study_id] = sorted(read, key=lambda t: t.number)
        return self._trials[study_id]

    def create_new_trial(self, study_id: int, template_trial=None) -> int:
        with self._lock:
            trials = self._study(study_id)
            trial_id = self.backend.create_new_trial(study_id, template_trial)
            if template_trial is None:  # as RDBStorage makes it: running from now, nothing set
                trial = FrozenTrial(
                    number=len(trials),
                    state=TrialState.RUNNING,
                    value=None,
                    datetime_start=datetime.now(),
                    datetime_complete=None,
                    params={},
                    distributions={},
                    user_attrs={},
                    system_attrs={},
                    intermediate_values={},
                    trial_id=trial_id,
                )
            else:  # a warm point, an enqueued one: as SQL stored it
                trial = self.backend.get_trial(trial_id)
            trials.append(trial)
            self._where[trial_id] = (study_id, trial.number)
            self._ids[(study_id, trial.number)] = trial_id
            return trial_id

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        with self._lock:
            trial_id = self._ids.get((study_id, trial_number))
            if trial_id is None:  # made by an earlier driver: asked once
                trial_id = self.backend.get_trial_id_from_study_id_trial_number(study_id, trial_number)
                self._ids[(study_id, trial_number)] = trial_id
                self._where[trial_id] = (study_id, trial_number)
            return trial_id

    def _cached(self, trial_id: int):
        where = self._where.get(trial_id)
        if where is None or where[0] not in self._trials:
            return None
        return self._trials[where[0]][where[1]]

    def get_trial(self, trial_id: int):
        with self._lock:
            trial = self._cached(trial_id)
        if trial is None:
            return self.backend.get_trial(trial_id)
        return trial if trial.state.is_finished() else copy.deepcopy(trial)  # a live Trial edits its own copy

    def get_all_trials(self, study_id: int, deepcopy: bool = True, states=None) -> list:
        with self._lock:
            trials = list(self._study(study_id))
        if states is not None:
            trials = [t for t in trials if t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    def _update(self, trial_id: int, change) -> None:
        """``change`` applied to a copy of the trial in memory, which replaces it."""
        with self._lock:
            trial = self._cached(trial_id)
            if trial is None:
                return
            trial = copy.deepcopy(trial)
            change(trial)
            study_id, number = self._where[trial_id]
            self._trials[study_id][number] = trial

    # -- writes: SQL first, then memory ------------------------------------------------------
    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float, distribution) -> None:
        self.backend.set_trial_param(trial_id, param_name, param_value_internal, distribution)

        def change(trial):
            trial.distributions = {**trial.distributions, param_name: distribution}
            trial.params = {**trial.params, param_name: distribution.to_external_repr(param_value_internal)}

        self._update(trial_id, change)

    def set_trial_state_values(self, trial_id: int, state, values=None) -> bool:
        if not self.backend.set_trial_state_values(trial_id, state, values):
            return False

        def change(trial):
            if values is not None:
                trial.values = [float(v) for v in values]
            trial.state = state
            if state == TrialState.RUNNING:
                trial.datetime_start = datetime.now()
            if state.is_finished():
                trial.datetime_complete = datetime.now()

        self._update(trial_id, change)
        return True

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        self.backend.set_trial_intermediate_value(trial_id, step, intermediate_value)
        self._update(
            trial_id,
            lambda trial: setattr(
                trial, "intermediate_values", {**trial.intermediate_values, step: float(intermediate_value)}
            ),
        )

    def set_trial_user_attr(self, trial_id: int, key: str, value) -> None:
        self.backend.set_trial_user_attr(trial_id, key, value)
        self._update(trial_id, lambda trial: setattr(trial, "user_attrs", {**trial.user_attrs, key: _stored(value)}))

    def set_trial_system_attr(self, trial_id: int, key: str, value) -> None:
        self.backend.set_trial_system_attr(trial_id, key, value)
        self._update(
            trial_id, lambda trial: setattr(trial, "system_attrs", {**trial.system_attrs, key: _stored(value)})
        )


def _stored(value):
    """``value`` as SQL gives it back (attributes are stored as JSON)."""
    return json.loads(json.dumps(value))
