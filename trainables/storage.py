"""Locations of a sweep's state: a local (or NFS-mounted) path, or a URI that ``pyarrow.fs``
understands (``s3://bucket/prefix``, ``gs://…``, ``hdfs://…``; query options such as
``?endpoint_override=host:port&scheme=http`` stay on the URI), the same URIs Ray Tune takes as
``storage_path``. Trials write their state folders there (``trainables.checkpoints``); the driver
reads and prunes them there.
"""

from __future__ import annotations

import os
from pathlib import Path


def is_uri(location: str | os.PathLike) -> bool:
    """A location pyarrow must open (a scheme other than ``file://``)."""
    text = str(location)
    return "://" in text and not text.startswith("file://")


def local_path(location: str | os.PathLike) -> Path:
    """The local path of a non-URI location (``file://`` stripped)."""
    text = str(location)
    return Path(text[len("file://") :] if text.startswith("file://") else text)


def join(location: str | os.PathLike, *parts: str) -> str:
    """``location`` / parts, keeping a URI's query options at the end."""
    text = str(location)
    if not is_uri(text):
        return str(local_path(text).joinpath(*parts))
    base, sep, query = text.partition("?")
    return "/".join([base.rstrip("/"), *parts]) + sep + query


def filesystem(location: str | os.PathLike):
    """``(pyarrow filesystem, path within it)`` of a location."""
    from pyarrow import fs

    if is_uri(location):
        return fs.FileSystem.from_uri(str(location))
    return fs.LocalFileSystem(), str(local_path(location).resolve())


def display(location: str | os.PathLike) -> str:
    """The location for messages: without its query options, a secret key in it masked."""
    text = str(location).partition("?")[0]
    scheme, sep, rest = text.partition("://")
    userinfo, at, host = rest.partition("@")
    if sep and at and ":" in userinfo:
        return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"
    return text
