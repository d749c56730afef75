"""Tune's own saved state in the sweep folder (``<sweep>/tune``), kept restorable across kills
(docs/architecture.md, "Resume").

Ray 2.60 keeps a driver's state in a staging folder and copies that folder into the sweep's
``tune/`` (``pyarrow.fs.copy_files``, which truncates each destination first) every few
seconds and whenever trials checkpoint. A restored session first copies down every ``.json``
and ``.pkl`` at the top of ``tune/`` into its staging folder, ``tuner.pkl`` and the earlier
sessions' files included, and so re-uploaded all of them at each save: a driver killed during
one of those copies left ``tuner.pkl`` empty (``Tuner.restore``: ``EOFError``) or every
session's ``experiment_state`` torn (Tune then restored nothing). ``own_session_uploads``
removes those copies from the staging folder before the first save, so a session writes only
its own files; ``set_aside_torn_state`` handles a session that a kill cut short anyway.
"""

from __future__ import annotations

import json
import os
import re

from contrasweep.errors import UserError
from trainables.storage import filesystem

# Tune's per-session state files: experiment_state-<time>.json, the searcher's and the
# callbacks' state of the same session (basic-variant-state-, search_gen_state-, searcher-state-)
SESSION_FILE = re.compile(r"-(\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2})\.(json|pkl)$")
TUNER_PKL = "tuner.pkl"  # written once, when the sweep starts (``Tuner.__init__``)
TORN_SUFFIX = ".torn"


def own_session_uploads(trials) -> list[str]:
    """Called once per driver process before Tune's first save (the tracker's first
    ``on_step_begin``, which Tune calls after restoring and before it saves): deletes from the
    driver's staging folder what a restore copied down there (``tuner.pkl`` and earlier
    sessions' files), which Tune has already read; the copies in ``tune/`` are untouched.
    Returns the names deleted (none for a sweep that starts: nothing was copied down)."""
    if not trials:
        return []
    staging = trials[0].storage.experiment_driver_staging_path
    try:
        entries = list(os.scandir(staging))
    except FileNotFoundError:
        return []
    removed = []
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and (entry.name == TUNER_PKL or SESSION_FILE.search(entry.name)):
            try:
                os.unlink(entry.path)
            except OSError:  # left: Tune uploads it again, as it did before
                continue
            removed.append(entry.name)
    return sorted(removed)


def check_tuner_state(tune_location: str, name: str) -> None:
    """``tuner.pkl`` cut short (a kill while an earlier contrasweep re-uploaded it during a
    resumed session) is one line, not Tune's ``EOFError``."""
    filesys, root = filesystem(tune_location)
    path = f"{root.rstrip('/')}/{TUNER_PKL}"
    try:
        with filesys.open_input_stream(path) as stream:
            data = stream.read()
    except (FileNotFoundError, OSError):
        return  # none: Tuner.can_restore says so in its own line
    if not _pickle_complete(data):
        raise UserError(f"sweep {name!r} cannot be resumed: Tune's {TUNER_PKL} in {tune_location} is cut short "
                        f"({len(data)} bytes; a driver killed while writing it); allowed: start the sweep again "
                        "with `contrasweep run --overwrite`")


def set_aside_torn_state(tune_location: str) -> list[str]:
    """Tune writes its saved state with a plain ``open(path, "w")`` and copies it with
    truncating writes: a driver killed meanwhile leaves the session's newest files empty or cut
    short, and ``Tuner.restore``, which takes the newest by name, then restored nothing and ran
    the sweep again from an empty state. Every file of such a session is renamed with ``.torn``
    so that Tune restores the newest complete session; what ended after it, the sweep's own
    record says (docs/architecture.md, "Resume"). A pickle is torn when it lacks its final STOP
    opcode (nothing is unpickled here), anything else when it does not parse as JSON (an empty
    file included). Returns the names set aside."""
    from pyarrow import fs

    filesys, root = filesystem(tune_location)
    sessions: dict[str, list] = {}
    for info in filesys.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        found = SESSION_FILE.search(info.base_name) if info.type == fs.FileType.File else None
        if found:
            sessions.setdefault(found.group(1), []).append(info)
    torn = [stamp for stamp, files in sessions.items() if any(_torn(filesys, info) for info in files)]
    names = []
    for stamp in sorted(torn):
        for info in sessions[stamp]:
            filesys.move(info.path, info.path + TORN_SUFFIX)
            names.append(info.base_name)
    return names


def has_session(tune_location: str) -> bool:
    """Whether Tune saved an experiment state there (``experiment_state-<time>.json``, whole or
    set aside as torn). A sweep stopped after its Tuner was saved (``tuner.pkl``) and before
    Tune's first save has none: Tune's restore would lose its trial count (``num_samples`` is
    not in ``tuner.pkl``), so ``resume`` starts it instead (``contrasweep.run.tune.resume``)."""
    from pyarrow import fs

    filesys, root = filesystem(tune_location)
    return any(info.base_name.startswith("experiment_state-")
               for info in filesys.get_file_info(fs.FileSelector(root, allow_not_found=True)))


def _pickle_complete(data: bytes) -> bool:
    return data[:1] == b"\x80" and data.endswith(b".")  # protocol 2 or later, ends with STOP


def _torn(filesys, info) -> bool:
    """Judged by content, not by name: Tune's searcher states are pickles also where their
    name ends in ``.json`` (``basic-variant-state-``, ``search_gen_state-``)."""
    with filesys.open_input_stream(info.path) as stream:
        data = stream.read()
    if data[:1] == b"\x80":
        return not _pickle_complete(data)
    try:
        json.loads(data)
    except ValueError:  # empty or cut short (UnicodeDecodeError is a ValueError too)
        return True
    return False
