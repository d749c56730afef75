"""Tune's own saved state in the sweep folder (``<sweep>/tune``), kept restorable across kills
(docs/architecture.md, "Resume").

Ray 2.60 keeps a driver's state in a staging folder and copies that folder into the sweep's
``tune/`` (``pyarrow.fs.copy_files``, which truncates each destination first) every few
seconds and whenever trials checkpoint. A restored session first copies down every ``.json``
and ``.pkl`` at the top of ``tune/`` into its staging folder, ``tuner.pkl`` and the earlier
sessions' files included, and so re-uploaded all of them at each save: a driver killed during
one of those copies left ``tuner.pkl`` empty (``Tuner.restore``: ``EOFError``) or every
session's ``experiment_state`` torn (Tune then restored nothing). ``clear_staging`` removes
those copies from the staging folder before the first save, so a session writes only its own
files, and a killed driver's last state from it before a restore; ``set_aside_torn_state``
handles a session that a kill cut short anyway.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from contrasweep.errors import UserError
from trainables.storage import filesystem

# Tune's per-session state files: experiment_state-<time>.json, the searcher's and the
# callbacks' state of the same session (basic-variant-state-, search_gen_state-, searcher-state-)
SESSION_FILE = re.compile(r"-(\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2})\.(json|pkl)$")
TUNER_PKL = "tuner.pkl"  # written once, when the sweep starts (``Tuner.__init__``)
TORN_SUFFIX = ".torn"


def clear_staging(tune_location: str) -> list[str]:
    """Deletes ``tuner.pkl`` and every session's state files at the top of this sweep's
    staging folders on this machine (those holding one of its trial folders, or a session of
    its ``tune/``): Tune's copies, never those in ``tune/``. Returns the names deleted.

    A driver attached to a Ray that outlives it (a cluster, ``--address``) stages in the same
    folder as the driver it resumes (Tune reuses the first trial's), where the killed driver
    left its last state. Tune restores its trials from ``tune/`` but its searcher from the
    newest state in that folder: after a session a kill left torn in ``tune/`` (set aside) or
    never copied up, the searcher came from a later save than the trials, and a trial it had
    handed out never ran again. So ``resume`` calls this before ``Tuner.restore``.

    The restore then copies down every state file of ``tune/`` into that folder, and Tune's
    saves copy the folder up whole: each save rewrote ``tuner.pkl`` and the earlier sessions'
    files (a kill during one left them empty). So the tracker's ``setup`` calls this again
    (Tune calls it after the restore and before its first save, whether or not a trial is left
    to run), and a session uploads only its own files."""
    import ray
    from pyarrow import fs

    if not ray.is_initialized():
        return []
    from ray.train.constants import _get_ray_train_session_dir

    filesys, root = filesystem(tune_location)
    ours = {info.base_name for info in filesys.get_file_info(fs.FileSelector(root, allow_not_found=True))}
    stamps = {found.group(1) for found in map(SESSION_FILE.search, (n.removesuffix(TORN_SUFFIX) for n in ours)) if found}
    removed = []
    for staging in Path(_get_ray_train_session_dir()).glob(f"*/{Path(root).name}/driver_artifacts"):
        entries = list(os.scandir(staging))
        state = [e for e in entries if e.is_file(follow_symlinks=False)
                 and (e.name == TUNER_PKL or SESSION_FILE.search(e.name))]
        if not any(e.is_dir(follow_symlinks=False) and e.name in ours for e in entries) and not any(
                (found := SESSION_FILE.search(e.name)) and found.group(1) in stamps for e in state):
            continue  # another sweep's (every sweep's Tune folder is named ``tune``)
        for entry in state:
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
