"""What a resumed driver (``runner.tune.resume``, an extension's: ``contrasweep.runner.extend``) checks
and settles before it builds its Tuner: the sweep's folder, here or fetched from its storage
(``open_or_fetch``); whether ``resume`` may take it (``resumable``); a dead driver's runs closed
and a moved folder mapped (``arrived``).

May import: ``contrasweep.errors``, ``contrasweep.folder``, ``contrasweep.tracking.ledger``,
``contrasweep.runner.recovery``, ``trainables.storage`` (a location as the user wrote it).
"""

from __future__ import annotations

from pathlib import Path

from contrasweep.errors import UserError
from contrasweep.folder import relocation, sweep_storage, sweeps
from contrasweep.runner import recovery
from contrasweep.tracking import ledger
from trainables.storage import display


def open_or_fetch(name: str, root: Path, storage: str | None) -> sweeps.SweepDir:
    """The sweep's folder here, or fetched from ``storage`` when this machine has none."""
    if storage and not (root / name / "sweep.json").exists() and not sweep_storage.fetch(storage, root / name):
        raise UserError(
            f"no sweep named {name!r} in {root} or in {display(storage)}; allowed: the --storage the sweep "
            "was started with"
        )
    sweep_dir = sweeps.open_existing(root, name)
    if storage and sweep_dir.storage != storage:
        raise UserError(
            f"sweep {name!r} keeps its state in {display(sweep_dir.storage or str(sweep_dir.path))}, not "
            f"{display(storage)}; allowed: --storage {sweep_dir.storage or '(none)'}"
        )
    return sweep_dir


def resumable(sweep_dir: sweeps.SweepDir) -> dict:
    """``sweep.json`` of a sweep that ``resume`` may take: unfinished, no driver alive, its spec
    and record readable (each a one-line ``UserError`` before anything starts)."""
    meta, name = sweep_dir.meta(), sweep_dir.name
    if meta.get("status") == "finished":
        raise UserError(
            f"sweep {name!r} has already finished; allowed: resume an unfinished sweep (see `contrasweep list`)"
        )
    alive, who = sweep_dir.driver()
    if alive == "alive":
        raise UserError(f"sweep {name!r} is still running ({who}); allowed: resume it once that process has ended")
    sweep_dir.spec()  # missing or damaged: one line before anything starts
    ledger.check_readable(sweep_dir.path / "tracking.json")  # unreadable: one line, not "nothing finished"
    return meta


def arrived(sweep_dir: sweeps.SweepDir) -> None:
    """A dead driver's RUNNING runs closed (the tracker reopens them) and a moved folder's paths
    mapped (``folder.relocation``), before a resumed driver's Tuner is built."""
    meta = sweep_dir.meta()
    recovery.settle(sweep_dir)
    earlier = relocation.arrived(sweep_dir.path, meta.get("folder"), meta.get("earlier_folders", []))
    if earlier is not None:  # the record names the folders it ran in
        sweep_dir.update_meta(folder=str(sweep_dir.path), earlier_folders=earlier)
