"""The MLflow writer's framing (``contrasweep.tracking.writer``): length-prefixed pickles on its
pipes and in its write-ahead log segments.

May import: the standard library.
"""

from __future__ import annotations

import os
import pickle
import struct
from pathlib import Path

FRAME = struct.Struct("<I")


def send(fd: int, body: bytes) -> None:
    """One length-prefixed frame to a pipe."""
    data = memoryview(FRAME.pack(len(body)) + body)
    while data:
        data = data[os.write(fd, data) :]


def receive(fd: int) -> bytes:
    """One length-prefixed frame from a pipe (EOFError at its end)."""
    (size,) = FRAME.unpack(_read(fd, FRAME.size))
    return _read(fd, size)


def _read(fd: int, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = os.read(fd, left)
        if not part:
            raise EOFError
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def frames(segment: Path):
    """The calls in a log segment, in order; a frame the kill cut short ends it."""
    data = segment.read_bytes()
    at = 0
    while at + FRAME.size <= len(data):
        (size,) = FRAME.unpack_from(data, at)
        body = data[at + FRAME.size : at + FRAME.size + size]
        if len(body) < size:
            return
        try:
            yield pickle.loads(body)
        except Exception:  # noqa: BLE001 - torn
            return
        at += FRAME.size + size
