"""The Optuna study's storage: ``optuna.db`` next to the sweep (docs/architecture.md,
"Resume")."""

from __future__ import annotations

from optuna.storages import RDBStorage

from contrasweep.folder.relocation import here_uri


class StudyStorage(RDBStorage):
    """``RDBStorage`` that follows its sweep folder: Tune pickles it with the searcher, and
    ``RDBStorage.__setstate__`` reconnects to its URL at once, so a moved folder would fail
    inside ``Tuner.restore`` (``contrasweep.folder.relocation``)."""

    def __setstate__(self, state: dict) -> None:
        state["url"] = here_uri(state["url"])
        super().__setstate__(state)
