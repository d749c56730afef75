"""Content-hashed Arrow cache of tokenised splits.

Layout: ``<cache>/<key>/`` is a ``DatasetDict.save_to_disk`` directory plus a marker file
``contrasweep.json`` (label names, stats, ...). A writer builds everything in a private
temporary directory, writes the marker last and renames the directory into place; a
rename is atomic, so a ``<key>/`` directory is either absent or complete. When two writers
race, the second rename fails because the target exists, and the loser discards its copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

# Bump when what is stored (columns, dtypes, cleaning, split or sampling rules) changes, so
# old entries are not reused.
FORMAT_VERSION = 2  # 2: label names stripped of surrounding spaces by default (data.labels)
MARKER = "contrasweep.json"


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The argument, else ``$CONTRASWEEP_CACHE``, else ``~/.cache/contrasweep``."""
    root = cache_dir or os.environ.get("CONTRASWEEP_CACHE") or "~/.cache/contrasweep"
    # Absolute: trials change their working directory and still open PreparedData.path.
    return Path(os.path.abspath(Path(root).expanduser()))


def cache_key(source_fingerprint: str, config: dict, tokenizer: str, max_length: int) -> str:
    parts = {
        "format": FORMAT_VERSION,
        "source": source_fingerprint,
        "config": config,
        "tokenizer": tokenizer,
        "max_length": max_length,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_marker(path: Path) -> dict | None:
    """The marker of a complete entry, or ``None``."""
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None


def write_entry(root: Path, key: str, dataset_dict, meta: dict) -> Path:
    """Save ``dataset_dict`` and ``meta`` as ``root/key`` atomically; returns that path."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    tmp = root / f".tmp-{key[:16]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        dataset_dict.save_to_disk(str(tmp))
        (tmp / MARKER).write_text(json.dumps(meta, indent=1, sort_keys=True))
        if final.exists() and read_marker(final) is None:
            # Not made by a writer (they rename complete directories): a partial copy by hand.
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if read_marker(final) is None:  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # no-op after a successful rename
    return final
