"""A spec sub-section's shape (``sweep.racing``, ``sweep.budget``): a mapping of known keys.

May import: ``contrasweep.errors``.
"""

from __future__ import annotations

from contrasweep.errors import SpecError


def check_keys(section, keys, where: str, example: str = "") -> None:
    """``section`` is a mapping whose keys are among ``keys``; else one ``SpecError`` naming them.
    ``example``: how the section reads (``" such as {slot_hours: 40}"``)."""
    allowed = ", ".join(f"{where}.{k}" for k in keys)
    if not isinstance(section, dict):
        raise SpecError(f"{where}={section!r} must be a mapping{example}; allowed keys: {allowed}")
    unknown = sorted(set(section) - set(keys))
    if unknown:
        raise SpecError(f"unknown key {where}.{unknown[0]}; allowed: {allowed}")
