"""Sweep directories: everything a sweep needs to be resumed lives in one folder.

``<root>/<name>/``: ``spec.yaml`` (the validated spec), ``sweep.json`` (tracking URI, storage,
data cache key, status, the Tune experiments its drivers ran), ``tracking.json`` (MLflow run
ids), ``trials/<configuration key>/state`` (each repeat's state folder, whichever driver runs
it), ``tune/`` (the first driver's Tune experiment; ``tune-r1/``… for each resume, ``tune-ext1/``…
for each extension: Tune writes them, no driver reads them back), ``train/`` (Ray Train runs of
distributed trials), ``optuna.db``.
With a storage (``sweep.storage``, ``--storage``) ``trials/``, ``tune*/`` and ``train/`` are
under ``<storage>/<name>/`` instead (``contrasweep.folder.sweep_storage``).
The root is ``--root``, else ``$CONTRASWEEP_HOME``, else ``./sweeps``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from contrasweep.errors import UserError
from contrasweep.folder import driver
from trainables.storage import join


def sweeps_root(root: str | None = None) -> Path:
    """The folder holding the sweeps: ``--root``, else ``$CONTRASWEEP_HOME``, else ./sweeps
    (created when missing; an existing file there is an error)."""
    path = Path(root or os.environ.get("CONTRASWEEP_HOME") or "sweeps").resolve()
    if path.exists() and not path.is_dir():
        given = "--root" if root else ("$CONTRASWEEP_HOME" if os.environ.get("CONTRASWEEP_HOME") else "./sweeps")
        raise UserError(f"{given} {path} is a file; allowed: a folder for the sweeps (created when missing)")
    return path


@dataclass
class SweepDir:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def spec_file(self) -> Path:
        return self.path / "spec.yaml"

    @property
    def meta_file(self) -> Path:
        return self.path / "sweep.json"

    @property
    def tune_name(self) -> str:
        """The Tune experiment the sweep's newest driver runs: ``tune``; ``tune-extN`` for its
        N-th extension (``contrasweep extend``); ``…-rK`` for the K-th resume of that stage
        (every driver builds a fresh Tuner: ``new_experiment``)."""
        return self.tune_names[-1]

    @property
    def tune_names(self) -> list[str]:
        """Every Tune experiment the sweep's drivers ran, first to last (``sweep.json``'s
        ``experiments``; a sweep from before it: one per stage)."""
        meta = self.meta()
        if meta.get("experiments"):
            return list(meta["experiments"])
        return ["tune"] + [f"tune-ext{n}" for n in range(1, len(meta.get("extensions", [])) + 1)]

    @property
    def stage(self) -> str:
        """The sweep's stage: ``tune``, or ``tune-extN`` after its N-th extension."""
        extensions = len(self.meta().get("extensions", []))
        return f"tune-ext{extensions}" if extensions else "tune"

    def new_experiment(self) -> str:
        """Name a new Tune experiment for a resume's or an extension's driver (a resume's:
        ``<stage>-rK``; a new stage's: the stage; ``run``'s is ``tune``, from ``create``) and
        record it in ``sweep.json`` before Tune writes anything."""
        names = self.tune_names
        stage = self.stage
        runs = sum(1 for n in names if n == stage or n.startswith(f"{stage}-r"))
        name = f"{stage}-r{runs}" if runs else stage
        self.update_meta(experiments=[*names, name])
        return name

    @property
    def train_dir(self) -> Path:
        return self.path / "train"

    @property
    def storage(self) -> str | None:
        """The sweep's storage (``sweep.storage`` / ``--storage``), None: this folder."""
        return self.meta().get("storage")

    @property
    def state_root(self) -> str:
        """Where Tune's state, Train's runs and the trials' state folders live."""
        return join(self.storage, self.name) if self.storage else str(self.path)

    @property
    def tune_location(self) -> str:
        return join(self.state_root, self.tune_name)

    @property
    def tune_locations(self) -> list[str]:
        return [join(self.state_root, name) for name in self.tune_names]

    @property
    def trials_location(self) -> str:
        """Where each repeat's state folder lives, by configuration key (``trials/<key>/state``)."""
        return join(self.state_root, "trials")

    @property
    def train_location(self) -> str:
        return join(self.state_root, "train")

    @property
    def optuna_uri(self) -> str:
        return f"sqlite:///{self.path / 'optuna.db'}"

    def meta(self) -> dict:
        """``sweep.json``; a damaged one is a one-line ``UserError`` naming the file."""
        if not self.meta_file.exists():
            return {}
        try:
            meta = json.loads(self.meta_file.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(
                f"sweep {self.name!r}: {self.meta_file} is damaged ({exc}); allowed: the JSON file contrasweep "
                "wrote there (restore it, or remove the sweep folder)"
            ) from None
        if not isinstance(meta, dict):
            raise UserError(
                f"sweep {self.name!r}: {self.meta_file} holds no JSON object; allowed: the JSON file "
                "contrasweep wrote there (restore it, or remove the sweep folder)"
            )
        return meta

    def update_meta(self, **values) -> None:
        meta = {**self.meta(), **values}
        tmp = self.meta_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, self.meta_file)

    def spec(self) -> dict:
        """The spec the sweep was started with (``spec.yaml``, written by ``create``)."""
        allowed = (
            "allowed: the spec.yaml contrasweep wrote there (restore it, or start the sweep again with "
            "`contrasweep run`)"
        )
        if not self.spec_file.is_file():
            raise UserError(f"sweep {self.name!r} has no spec file {self.spec_file}; {allowed}")
        try:
            spec = yaml.safe_load(self.spec_file.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError):
            raise UserError(f"sweep {self.name!r}: {self.spec_file} is not valid YAML; {allowed}") from None
        if not isinstance(spec, dict):
            raise UserError(f"sweep {self.name!r}: {self.spec_file} holds no YAML mapping; {allowed}")
        return spec

    def status(self) -> str:
        """``sweep.json``'s status, or ``damaged`` (``contrasweep list`` goes on past it);
        ``interrupted`` for a sweep recorded as running whose driver is gone
        (``contrasweep.folder.driver``; ``contrasweep.runner.recovery`` then records it so)."""
        try:
            status = self.meta().get("status", "?")
        except UserError:
            return "damaged"
        if status == "running" and self.driver()[0] != "alive":
            return "interrupted"
        return status

    def driver(self) -> tuple[str, str]:
        """(``alive`` | ``dead`` | ``none``, who): the process that drives this sweep."""
        return driver.state(self.path)


def ensure_new(root: Path, name: str, overwrite: bool = False) -> None:
    """A new sweep's name is free; with ``overwrite`` an existing sweep of that name may be
    replaced, unless its driver still runs it."""
    folder = SweepDir(root / name)
    if not folder.path.exists():
        return
    if overwrite:
        alive, who = folder.driver()
        if alive == "alive":
            raise UserError(
                f"sweep {name!r} is still running ({who}); allowed: --overwrite once it has ended, or a new --name"
            )
        return
    status = folder.status()
    fresh = _free_name(root, name)
    if status == "finished":
        raise UserError(
            f"sweep {name!r} already exists in {root} and has finished; allowed: a new --name "
            f"(e.g. {fresh}), or --overwrite to replace it"
        )
    raise UserError(
        f"sweep {name!r} already exists in {root} ({status}); allowed: `contrasweep resume {name}`, "
        f"a new --name (e.g. {fresh}), or --overwrite to replace it"
    )


def _free_name(root: Path, name: str) -> str:
    n = 2
    while (root / f"{name}-{n}").exists():
        n += 1
    return f"{name}-{n}"


def replace(root: Path, name: str) -> None:
    """``--overwrite``: the old sweep's folder goes (its MLflow runs stay, under their own parent)."""
    import shutil

    if (root / name).exists():
        shutil.rmtree(root / name)


def create(root: Path, name: str, spec: dict, meta: dict) -> SweepDir:
    ensure_new(root, name)
    sweep = SweepDir(root / name)
    sweep.path.mkdir(parents=True)
    sweep.spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))

    driver.write(sweep.path)  # before the status says running: a dead driver is always seen
    # folder: where the sweep was made; resume maps the paths Tune pickled when it moved (contrasweep.folder.relocation)
    sweep.update_meta(
        name=name,
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        status="running",
        folder=str(sweep.path),
        experiments=["tune"],
        **meta,
    )
    return sweep


def open_existing(root: Path, name: str) -> SweepDir:
    sweep = SweepDir(root / name)
    if not sweep.meta_file.exists():
        known = ", ".join(s.name for s in list_sweeps(root)) or "none"
        raise UserError(f"no sweep named {name!r} in {root}; allowed: {known}")
    return sweep


def list_sweeps(root: Path) -> list[SweepDir]:
    if not root.is_dir():
        return []
    return sorted((SweepDir(p) for p in root.iterdir() if (p / "sweep.json").exists()), key=_created)


def _created(sweep: SweepDir) -> str:
    try:
        return str(sweep.meta().get("created", ""))
    except UserError:  # a damaged sweep.json: listed last, as damaged
        return "~"


def default_name(spec_path: str, smoke: bool = False) -> str:
    return f"{Path(spec_path).stem}-{'smoke-' if smoke else ''}{time.strftime('%Y%m%d-%H%M%S')}"
