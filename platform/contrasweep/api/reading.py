"""``list_sweeps``: the sweeps under a root, as ``contrasweep list`` shows them. Read only, but
for what ``list`` also does: a sweep whose driver died is recorded as interrupted first
(``contrasweep.runner.recovery.settle``). No Ray.

May import: pandas, ``contrasweep.folder``, ``contrasweep.console`` (the list's rows),
``contrasweep.runner.recovery``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from contrasweep.console.listing import listing
from contrasweep.folder import sweeps
from contrasweep.runner.recovery import settle

LIST_COLUMNS = ["name", "status", "trials", "method", "selected", "validation", "test", "learned", "disk", "created"]


def sweep_rows(root: str | Path | None = None) -> tuple[list[dict], list[str]]:
    """``contrasweep list``'s rows (``LIST_COLUMNS``; ``disk`` in bytes) and the lines saying
    which dead drivers' sweeps were set straight first."""
    base = sweeps.sweeps_root(None if root is None else str(root))
    found = sweeps.list_sweeps(base)
    notes = [note for note in (settle(s) for s in found) if note]
    rows = []
    for sweep in found:
        row = listing(sweep)
        rows.append(
            {
                "name": sweep.name,
                **{k: row[k] for k in ("status", "trials", "method", "selected")},
                "validation": row["best"],
                **{k: row[k] for k in ("test", "learned", "disk", "created")},
            }
        )
    return rows, notes


def list_sweeps(root: str | Path | None = None) -> pd.DataFrame:
    """The sweeps under ``root``, one row each, as ``contrasweep list`` prints them.

    Args:
        root: The sweeps folder (default ``$CONTRASWEEP_HOME`` or ``./sweeps``).

    Returns:
        Columns ``name``, ``status`` (``running``, ``finished``, ``interrupted``, ``failed``,
        ``damaged``; ``+extN`` after ``extend``), ``trials`` ("ended/all"), ``method``,
        ``selected`` (the selected configuration's values), ``validation`` and ``test`` (mean ±
        std over its repeats, as text), ``learned``, ``disk`` (bytes), ``created``. A sweep whose
        driver died is recorded as interrupted first, as ``contrasweep list`` does, with a
        warning saying so.
    """
    rows, notes = sweep_rows(root)
    for note in notes:  # what `contrasweep list` prints on stderr
        warnings.warn(note, stacklevel=2)
    return pd.DataFrame(rows, columns=LIST_COLUMNS)
