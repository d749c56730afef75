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
- ``run/``: Ray start-up, preflight, shipping, the trial executor, the Tuner, recovery.
- ``cli``: the commands (the one module that also imports ``dashboards``).
"""

__version__ = "0.1.0"
