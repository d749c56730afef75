"""What a sweep on a Ray cluster ships to its workers (docs/architecture.md, "Data flow").

Two ways to get the project onto worker nodes, chosen with ``ship``:

* ``code``: the driver ships its own copy with the job's ``runtime_env``: the folders of the
  ``contrasweep`` and ``trainables`` packages as ``py_modules`` (``dashboards`` runs on the
  driver only) and the spec's local files that workers read (a local encoder folder,
  ``init_from`` weights) in a ``working_dir``. Workers need only the dependencies (torch,
  transformers, ray, ...), not the project.
* ``installed``: every worker node has contrasweep installed (a container image); nothing is
  shipped, and ``check_worker_versions`` makes sure the nodes run the driver's version.

A user's method (``method: mylab.losses:Class`` or ``path/to/file.py:Class``,
``trainables.user_methods``) ships with ``code`` as one more ``py_modules`` entry
(``trainables.user_methods.shipped_sources``): the file, or the module's top-level package
folder, unless it is installed (in site-packages: then, as with ``installed``, every node must
have it).

Tokenised data are not shipped here: they go through the object store (``contrasweep.runner.inputs.put_data``);
data files are read on the driver only.

A shipped local file is read on the worker at ``worker_path(value)``: a path relative to the
job's ``working_dir``, which Ray makes the worker's current directory. Tune and Ray Train
would change into the trial folder, so the environment sets ``RAY_CHDIR_TO_TRIAL_DIR=0``
(nothing in a trial writes to a relative path: its state goes to ``executor.state_dir``).

The runtime_env is for ``ray.init`` only: Ray 2.60 zips and uploads local folders for a job,
and refuses them in a task's or actor's runtime_env.
"""

from __future__ import annotations

import atexit
import fnmatch
import hashlib
import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from contrasweep.errors import UserError
from contrasweep.folder.driver import pid_exists
from contrasweep.spec.domains import Choice
from contrasweep.spec.sweep import SHIP_MODES  # the spec's allowed values
from trainables.checkpoints import best_folder, read_meta
from trainables.encoder_names import DEFAULT_ENCODER
from trainables.storage import is_uri, local_path
from trainables.user_methods import shipped_sources

PACKAGES = ("contrasweep", "trainables")  # what a trial process imports; dashboards never runs there
FILES_DIR = "contrasweep_files"  # folder of the working_dir that holds the shipped local files
# gitignore patterns (Ray matches them relative to each shipped folder); basename patterns
# only, so that ``shipped_bytes`` can apply them exactly. No weights patterns: the same list
# applies to the working_dir, whose model folders must keep their weights.
EXCLUDES = [
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".ipynb_checkpoints/",
    "*.egg-info/",
    ".git/",
    ".venv/",
    "venv/",
    "sweeps/",
    "mlruns/",
    "mlartifacts/",
    "mlflow.db",
]  # a sweep run from inside a package folder
MiB = 1024 * 1024


def worker_env() -> dict[str, str]:
    """One thread pool per trial, and the driver's Hugging Face settings (offline mode, cache)."""
    env = {
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # progress lines inside long epochs (trainables.phase_progress), every 5 s unless set
        "CONTRASWEEP_PROGRESS_S": os.environ.get("CONTRASWEEP_PROGRESS_S", "5"),
    }
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def check_ship(ship: str) -> str:
    """``ship`` as given, or a one-line ``UserError`` naming the allowed values."""
    if ship not in SHIP_MODES:
        raise UserError(
            f"ship={ship!r}; allowed: code (the driver ships contrasweep, trainables and the spec's "
            "local files with the job) or installed (every worker node has contrasweep installed, "
            "e.g. a container image)"
        )
    return ship


def runtime_env(ship: str, local_files: Sequence[str | Path] = (), limit: int | None = None, method: str = "") -> dict:
    """The job's ``runtime_env`` for ``ray.init(address=..., runtime_env=...)``.

    ``local_files``: the spec's values that name local files or folders workers read
    (``local_files_of``); with ``ship == "installed"`` they must already be where the value
    says on every node. ``limit``: bytes per shipped package (default: Ray's own limit);
    ``method``: the spec's method (a user's is shipped: ``shipped_sources``)."""
    env: dict[str, Any] = {"env_vars": worker_env()}
    if check_ship(ship) == "installed":
        return env
    limit = ray_package_limit() if limit is None else limit
    modules = [package_dir(name) for name in PACKAGES] + [Path(m) for m in shipped_sources(method)]
    for folder in modules:
        check_size(folder, f"package folder {str(folder)!r}", limit)
    # Always a working_dir: without one Ray puts the driver's cwd first on every worker's
    # sys.path, and a driver started in a checkout would shadow the shipped trainables/.
    env.update(
        py_modules=[str(m) for m in modules], excludes=list(EXCLUDES), working_dir=str(stage(local_files, limit))
    )
    env["env_vars"]["RAY_CHDIR_TO_TRIAL_DIR"] = "0"  # trials keep the working_dir as cwd: worker_path is relative to it
    return env


def package_dir(name: str) -> Path:
    """The folder an imported package was loaded from: the repository folder for an editable
    install, site-packages for a normal one (what this driver runs is what workers get)."""
    module = importlib.import_module(name)
    assert module.__file__ is not None  # a regular package (a namespace package has no file)
    return Path(module.__file__).resolve().parent


def ray_package_limit() -> int:
    """Ray refuses a runtime_env package at its gRPC message size (512 MiB in Ray 2.60,
    ``RAY_max_grpc_message_size``; ``ray._private.runtime_env.packaging.GCS_STORAGE_MAX_SIZE``)."""
    return int(os.environ.get("RAY_max_grpc_message_size", 512 * MiB))


def source_of(value: str | Path) -> Path:
    """The driver file or folder behind a spec value. A reported checkpoint (a pointer whose
    meta.json names a best folder) stands for that best folder when the pointer's state folder
    is on this machine only; on a URI or a network file system workers follow the pointer."""
    path = Path(os.path.expanduser(str(value))).resolve()
    try:
        state_dir = str(read_meta(path).get("state_dir") or "") if path.is_dir() else ""
    except (OSError, ValueError):
        state_dir = ""
    if state_dir and not visible_everywhere(state_dir):
        found = best_folder(path)
        return Path(found).resolve() if found is not None else path
    return path


def visible_everywhere(location: str) -> bool:
    """A URI (S3, GCS, ...) or a path on a network file system: every node reads it itself
    (the storage preflight's test, ``sweep_storage.shared_path``)."""
    from contrasweep.folder.sweep_storage import shared_path  # Ray Tune: only where a location is checked

    return is_uri(location) or shared_path(local_path(os.path.expanduser(location)))


def worker_path(driver_path: str | Path) -> str:
    """Where a worker reads a local file or folder that ``runtime_env("code", ...)`` shipped:
    relative to the working_dir (the worker's cwd), one folder per driver path (its hash),
    keeping the file's name (``from_pretrained`` and ``weights_file`` look at the contents, the
    name is only for people)."""
    path = Path(os.path.expanduser(str(driver_path))).resolve()
    tag = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    return f"{FILES_DIR}/{tag}/{path.name}"


STAGE_PREFIX = "contrasweep-ship-"  # + the driver's pid: a staged folder whose driver is gone is an orphan


def remove_orphans() -> None:
    """Remove staged folders of drivers that are gone: ``atexit`` never ran in a killed driver
    (SIGKILL, a lost machine), which left its folder of links in the temp folder (issue 57)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{STAGE_PREFIX}*-*"):
        pid = folder.name[len(STAGE_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def stage(values: Iterable[str | Path], limit: int) -> Path:
    """A temporary working_dir of symbolic links, ``worker_path(value)`` -> the driver's file
    (Ray's packaging follows links, so the files are read once, when Ray zips the folder),
    and a manifest (worker path -> value, for people). Checked against ``limit`` as a whole:
    the working_dir is one package."""
    remove_orphans()
    root = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, root, True)  # links only: the targets are never touched
    values = list(dict.fromkeys(str(v) for v in values))
    (root / FILES_DIR).mkdir()
    (root / FILES_DIR / "manifest.json").write_text(json.dumps({worker_path(v): v for v in values}, indent=1))
    for value in values:
        source = source_of(value)
        if not source.exists():
            raise UserError(
                f"local file {value!r} does not exist on the driver; allowed: an existing file or folder, "
                "or a Hugging Face model name"
            )
        link = root / worker_path(value)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(source, target_is_directory=source.is_dir())
    if values:
        label = (
            f"local file {values[0]!r}"
            if len(values) == 1
            else f"the local files {', '.join(map(repr, values))} together"
        )
        check_size(root, label, limit)
    return root


def check_size(path: Path, label: str, limit: int) -> int:
    """Bytes Ray would ship from ``path`` (after ``EXCLUDES``); a one-line ``UserError`` at the
    limit, because Ray's own error comes late, from deep inside ``ray.init``."""
    size = shipped_bytes(path)
    if size >= limit:
        raise UserError(
            f"{label} is {size / MiB:.1f} MiB but a Ray runtime_env ships at most {limit / MiB:.1f} MiB "
            "(RAY_max_grpc_message_size); allowed: install it on every worker node (ship: installed, "
            "e.g. in the container image) or put it on a network file system every node mounts (not shipped)"
        )
    return size


def shipped_bytes(path: Path) -> int:
    """The size of ``path`` as Ray packs it: links followed, ``EXCLUDES`` left out."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for folder, dirs, files in os.walk(path, followlinks=True):
        dirs[:] = [d for d in dirs if not excluded(d, is_dir=True)]
        total += sum(os.path.getsize(os.path.join(folder, f)) for f in files if not excluded(f, is_dir=False))
    return total


def excluded(name: str, is_dir: bool) -> bool:
    """gitignore semantics of a basename pattern: ``x/`` matches folders only, ``x`` both."""
    return any(fnmatch.fnmatchcase(name, p.rstrip("/")) for p in EXCLUDES if is_dir or not p.endswith("/"))


def local_files_of(sweep) -> list[str]:
    """The spec's values (as written) that name files on this machine that a worker reads: a
    local encoder folder and every ``init_from``. Data files are not among them (read on the
    driver), nor URIs and paths on a network file system (every node reads those itself)."""
    name = sweep.encoder.get("name") or DEFAULT_ENCODER
    values = [name] if name != DEFAULT_ENCODER and os.path.isdir(os.path.expanduser(name)) else []
    values += [v for v in values_of(sweep, "init_from") if isinstance(v, str) and v]
    return [v for v in dict.fromkeys(values) if not visible_everywhere(v)]


def values_of(sweep, key: str) -> list:
    """Every value ``key`` takes in a spec: fixed, reported, grid, and a search ``choice``."""
    domain = sweep.domains.get(key)
    options = list(domain.options) if isinstance(domain, Choice) else []  # a range holds no paths
    return [sweep.fixed.get(key), sweep.reported.get(key), *sweep.grid.get(key, []), *options]


def check_worker_versions(expected: str, timeout_s: float = 120.0) -> None:
    """With ``ship == "installed"``: every alive node must import contrasweep ``expected``
    (the driver's ``contrasweep.__version__``); a node with another version or none would fail
    its trials one by one, with tracebacks, long after the sweep started."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def installed_version() -> str:  # nested: pickled by value, so a node without contrasweep can run it
        try:
            import contrasweep
        except ImportError:
            return ""
        return str(getattr(contrasweep, "__version__", "unknown"))

    probe = ray.remote(num_cpus=0, max_retries=0)(installed_version)
    nodes = {f"{n['NodeManagerAddress']} [{n['NodeID'][:8]}]": n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    refs = {
        name: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        for name, node in nodes.items()
    }
    ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout_s)
    answers = {name: node_answer(ref, timeout_s) for name, ref in refs.items()}
    wrong = sorted(f"node {name} {answer}" for name, answer in answers.items() if answer != f"has {expected}")
    if wrong:
        raise UserError(
            f"contrasweep on the worker nodes is not the driver's {expected}: {', '.join(wrong)}; allowed: "
            f"install contrasweep=={expected} on every worker node (the container image), or ship "
            "the code (sweep.ship: code)"
        )


def node_answer(ref, timeout_s: float) -> str:
    """What a node's probe said, as words for the error message."""
    import ray

    if not ray.wait([ref], timeout=0)[0]:
        ray.cancel(ref, force=True)
        return f"did not answer within {timeout_s:g} s"
    try:
        version = ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - any failure of the probe is the node's answer
        return f"failed the check ({type(exc).__name__})"
    return f"has {version}" if version else "has no contrasweep installed"
