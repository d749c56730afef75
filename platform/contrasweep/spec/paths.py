"""Relative file paths in a spec file are read from the spec's folder, as a user who keeps a
spec next to its data expects wherever they run it from; a path given on the command line
(``--set data.source=...``) is read from the working directory, as every shell path is.

Which values: ``data.source`` (a file, a list of files as a data axis, or a ``{train, validation,
test}`` mapping of files) and ``evaluation.sts``, when they end in a data file's suffix, and the
file of a ``method: path/to/file.py:Class`` (``trainables.user_methods``); bundled corpus names,
``hub:`` names, module paths, absolute and ``~`` paths stay as written.

May import: ``contrasweep.data.config`` (the file suffixes).
"""

from __future__ import annotations

from pathlib import Path

from contrasweep.data.config import FILE_SUFFIXES


def absolute_paths(raw: dict, folder: Path) -> None:
    """Make the raw spec's relative data paths absolute against ``folder``, in place: the spec's
    folder before ``--set`` is applied, the working directory after (the saved spec then
    names the same files from wherever a later ``resume`` runs)."""
    data = raw.get("data")
    if isinstance(data, dict) and "source" in data:
        data["source"] = _resolved(data["source"], folder)
    method = raw.get("method")
    if isinstance(method, str) and ".py:" in method:
        where, _, attr = method.rpartition(":")
        if where.endswith(".py") and not where.startswith("~") and not Path(where).is_absolute():
            raw["method"] = f"{folder.resolve() / where}:{attr}"
    evaluation = raw.get("evaluation")
    if isinstance(evaluation, dict) and "sts" in evaluation:
        evaluation["sts"] = _resolved(evaluation["sts"], folder)


def _resolved(value, folder: Path):
    if isinstance(value, list):
        return [_resolved(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: _resolved(v, folder) for k, v in value.items()}
    if not isinstance(value, str) or not value.lower().endswith(FILE_SUFFIXES):
        return value
    if value.startswith(("~", "hub:")) or Path(value).is_absolute():
        return value
    return str(folder.resolve() / value)
