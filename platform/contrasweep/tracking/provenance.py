"""Which code, on which machine, by whom, made a sweep's runs (docs/architecture.md, "Data flow").

The tags go once on the sweep run (the same for every run of a sweep; writing them per trial was
part of the driver's cost per trial, issue 41); a configuration or trial run carries MLflow's
user and source columns (``UI_TAGS``) and whichever tag differs from its sweep run's (a sweep
resumed by other code or on another host), so that any run says what made it, read with its
sweep run: MLflow's own context tags (``mlflow.user``,
``mlflow.source.name``, ``mlflow.source.type``: ``mlflow.tracking.context``'s default
provider), the git commit, branch and dirty flag of the contrasweep source tree when it is a
git checkout (MLflow's git provider looks at ``sys.argv[0]``, which for the installed
``contrasweep`` script is a file in the virtualenv, not the source), the versions of python and
of the packages a result depends on, the spec's sha256 (of ``spec.yaml`` as logged on the sweep
run) and the host. The driver records them; on a cluster the workers' versions are checked
before the sweep starts (``sweep.ship``). A user's method (``method: mylab.losses:Class``,
``trainables.user_methods``) adds ``METHOD_TAGS`` on every run: its import path, its module
file, that file's sha256 and, in a git checkout, the commit and whether the file differs from it
(``method_fingerprint``, also kept in ``sweep.json``, which ``resume`` and ``extend`` compare).

May import: MLflow (its tag names and context providers), ``contrasweep.tracking.rows``,
``trainables.registry`` and ``trainables.user_methods`` (a user's method's file).
"""

from __future__ import annotations

import hashlib
import platform
import socket
from importlib import metadata
from pathlib import Path

import contrasweep
from contrasweep.tracking.rows import spec_yaml
from trainables.registry import get_method
from trainables.user_methods import is_reference, source_file

PACKAGES = ("torch", "transformers", "ray", "mlflow", "optuna", "contrasweep")
VERSION_TAG = "contrasweep.version."  # + python or a package name
SPEC_SHA_TAG = "contrasweep.spec_sha256"
HOST_TAG = "contrasweep.host"
UI_TAGS = ("mlflow.user", "mlflow.source.name", "mlflow.source.type")  # columns of the MLflow runs table
METHOD_TAGS = "contrasweep.method."  # + path, file, sha256, git_commit, git_dirty, sha256_at_start: on every run


def versions() -> dict[str, str]:
    """python and each of ``PACKAGES`` as installed (read from their metadata: nothing is imported)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def source_tree() -> Path:
    return Path(contrasweep.__file__).resolve().parent


def git_tags(path: Path) -> dict[str, str]:
    """Commit, branch and dirty flag (tracked files changed) of the checkout holding ``path``;
    {} when it is not one (an installed wheel)."""
    from mlflow.utils.mlflow_tags import MLFLOW_GIT_BRANCH, MLFLOW_GIT_COMMIT, MLFLOW_GIT_DIRTY

    try:
        from git import InvalidGitRepositoryError, NoSuchPathError, Repo
    except ImportError:  # GitPython (an MLflow requirement) without a git executable
        return {}
    try:
        repo = Repo(path, search_parent_directories=True)
        tags = {
            MLFLOW_GIT_COMMIT: repo.head.commit.hexsha,
            MLFLOW_GIT_DIRTY: str(repo.is_dirty(untracked_files=False)).lower(),
        }
        if not repo.head.is_detached:
            tags[MLFLOW_GIT_BRANCH] = repo.active_branch.name
        return tags
    except (InvalidGitRepositoryError, NoSuchPathError, ValueError):
        return {}
    except Exception:  # noqa: BLE001 - a repository git cannot read (no commit yet, a broken HEAD): no git tags
        return {}


def method_fingerprint(method: str) -> dict[str, str]:
    """A user's method as it is now: ``path`` (the reference), ``file``, ``sha256`` of the file,
    and ``git_commit``/``git_dirty`` (the file differs from that commit, or git does not track
    it) where the file is in a git checkout; {} for a built-in method."""
    if not is_reference(method):
        return {}
    get_method(method)  # imported and checked (a one-line error otherwise)
    path = source_file(method)
    found = {"path": method, "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    found.update(file_git(path))
    return found


def file_git(path: Path) -> dict[str, str]:
    """The commit of the checkout holding ``path`` and whether the file differs from it."""
    try:
        from git import Repo
    except ImportError:  # GitPython without a git executable
        return {}
    try:
        repo = Repo(path.parent, search_parent_directories=True)
        assert repo.working_tree_dir is not None  # a bare repository has none: no git tags (below)
        relative = str(path.relative_to(Path(repo.working_tree_dir).resolve()))
        tracked = bool(repo.git.ls_files("--", relative))
        dirty = not tracked or repo.is_dirty(untracked_files=False, path=relative)
        return {"git_commit": repo.head.commit.hexsha, "git_dirty": str(dirty).lower()}
    except Exception:  # noqa: BLE001 - not a checkout, no commit yet, a broken HEAD: no git tags
        return {}


def method_tags(now: dict[str, str], at_start: dict[str, str] | None = None) -> dict[str, str]:
    """``METHOD_TAGS`` + each fingerprint key; a method changed since the sweep started
    (``resume --allow-changed-method``) also carries the hash it started with."""
    tags = {METHOD_TAGS + key: value for key, value in now.items()}
    if at_start and at_start.get("sha256") != now.get("sha256"):
        tags[METHOD_TAGS + "sha256_at_start"] = at_start.get("sha256", "")
    return tags


def provenance_tags(spec: dict, method_at_start: dict[str, str] | None = None) -> dict[str, str]:
    """The tags every run of a sweep started by this process carries; ``method_at_start``: a
    user's method's fingerprint when the sweep started (``sweep.json``)."""
    from mlflow.tracking.context.git_context import GitRunContext
    from mlflow.tracking.context.registry import resolve_tags

    # MLflow's annotation says instances; its docstring and its isinstance test take classes
    tags = dict(resolve_tags(ignore=[GitRunContext]))  # type: ignore[list-item]
    tags.update(git_tags(source_tree()))
    tags.update({VERSION_TAG + name: version for name, version in versions().items()})
    tags[SPEC_SHA_TAG] = hashlib.sha256(spec_yaml(spec).encode()).hexdigest()
    tags[HOST_TAG] = socket.gethostname()
    tags.update(method_tags(method_fingerprint(str(spec.get("method", ""))), method_at_start))
    return tags
