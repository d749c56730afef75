"""The spec's ``tracking`` section: the MLflow experiment and how many configurations keep an
MLflow model (``keep_models``; docs/architecture.md, "What a sweep keeps").

May import: ``contrasweep.errors``.
"""

from __future__ import annotations

from contrasweep.errors import SpecError

KEYS = ("experiment", "keep_models")
KEEP_MODELS_DEFAULT = 2  # besides what a report shows: the next best configurations of each setting


def parse_tracking(section: dict) -> tuple[str, int | str]:
    """(experiment, keep_models): ``keep_models`` is a whole number >= 0 (the K best
    configurations of each setting, besides each setting's selected configuration and its
    sensitivity slices) or ``all`` (every complete trial, logged as it ends)."""
    extra = sorted(set(section) - set(KEYS))
    if extra:
        raise SpecError(f"unknown key tracking.{extra[0]}; allowed: {', '.join('tracking.' + k for k in KEYS)}")
    keep = section.get("keep_models", KEEP_MODELS_DEFAULT)
    if keep != "all" and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise SpecError(
            f"tracking.keep_models must be a whole number >= 0 or all, got {keep!r}; allowed: e.g. "
            f"tracking.keep_models: {KEEP_MODELS_DEFAULT} (the best configurations of each setting that keep "
            "an MLflow model, besides what a report shows) or all (every complete trial)"
        )
    return str(section.get("experiment", "contrasweep")), keep
