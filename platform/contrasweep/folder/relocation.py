"""A sweep folder that was moved (``mv sweeps/x elsewhere/x``; ``contrasweep --root elsewhere
resume x``) still resumes.

The sweep's records hold absolute paths (``tracking.json``'s state folders), and Tune pickles
the callbacks, the scheduler and the searcher (with the paths they were given: the tracker's
sweep folder, group ASHA's ``group_asha.json``, the Optuna study's sqlite URL) to send them to
its workers and into ``tuner.pkl``. ``resume`` names each folder the sweep ran in
(``sweep.json``'s ``folder`` and ``earlier_folders``) and the new one (``arrived``); each path
read back goes through ``here``, and each of those objects maps its paths when it is unpickled.
One sweep runs per driver process, so one mapping per process is enough.
"""

from __future__ import annotations

import os

_MOVED: dict[str, str] = {}


def moved(old: str | os.PathLike, new: str | os.PathLike) -> None:
    """Paths under ``old`` are read under ``new`` from now on in this process."""
    old, new = str(old).rstrip(os.sep), str(new).rstrip(os.sep)
    if old != new:
        _MOVED[old] = new


def arrived(current: str | os.PathLike, folder: str | None, earlier: list[str]) -> list[str] | None:
    """A sweep found at ``current`` that ``sweep.json`` says ran in ``folder`` (and before that
    in ``earlier``): maps each of them to ``current``; returns the new ``earlier_folders`` when
    the sweep moved (None when it did not)."""
    current = str(current).rstrip(os.sep)
    seen = [f.rstrip(os.sep) for f in dict.fromkeys([*earlier, folder or current])]
    if all(f == current for f in seen):
        return None
    for old in seen:
        moved(old, current)
    return [f for f in seen if f != current]


def here(path: str | os.PathLike) -> str:
    """``path`` where it is now: under the new folder when it was under a moved one."""
    text = str(path)
    for old, new in _MOVED.items():
        if text == old or text.startswith(old + os.sep):
            return new + text[len(old) :]
    return text


def here_uri(uri: str) -> str:
    """A ``sqlite:///`` URI whose file moved with its sweep; other URIs unchanged."""
    prefix = "sqlite:///"
    return prefix + here(uri[len(prefix) :]) if uri.startswith(prefix) else uri
