"""contrasweep: Ray-distributed hyperparameter search for contrastive text classification.

The orchestration layer (docs/architecture.md, "Layers"). Its rooms, lowest first; a room
imports only the rooms above it in this list (and ``trainables``), never one below:

- ``errors``: the errors the CLI prints as one line (from ``trainables.errors``).
- ``spec/``: a YAML spec and ``--set`` → a validated ``Sweep``; data axes; a trial's plan and
  identity. ``data/``: sources, protocols, tokenise once, the Arrow cache.
- ``folder/``: a sweep's folder on disk: status, its driver, its storage mirror, moved
  folders, clean-up.
- ``tracking/``: MLflow: the store leaf (client, tag names), the sweep's record, the tracker,
  aggregation and selection, the registry, the runs view, re-attaching.
- ``search/``: searchers and schedulers (the Optuna study searcher, group ASHA).
- ``console/``: what a command prints: lines, progress, the summary.
- ``runner/``: Ray start-up, preflight, shipping, the trial executor, the Tuner, recovery.
- ``api``, ``cli``: the Python API and the commands (the two that also import ``dashboards``).

``import contrasweep as cs`` gives the Python API (``cs.run``, ``cs.load``, ``cs.Sweep``, ...;
docs/api.md), imported on first use: a trial process that imports ``contrasweep.runner`` does not
import the API's pandas, MLflow and ``dashboards``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contrasweep.api import Plan, Sweep, extend, list_sweeps, load, plan, resume, run

__version__ = "0.1.0"
__all__ = ["Plan", "Sweep", "__version__", "extend", "list_sweeps", "load", "plan", "resume", "run"]
_API = set(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _API:
        import contrasweep.api

        return getattr(contrasweep.api, name)
    raise AttributeError(f"module 'contrasweep' has no attribute {name!r}")
