"""The training side (docs/architecture.md, "Layers"): the method interface and its eight
methods, the losses, the generic loop and its sessions, checkpoints, evaluation and inference.
It runs in a trial's process (or a Ray Train rank) and knows nothing of sweeps.

May import: ``trainables`` (its own modules), torch, transformers, safetensors, numpy, scipy,
pyarrow, scikit-learn (inside the evaluation that uses it), Ray's Tune and Train sessions (inside
``trainables.sessions``), the embedded encoder's package. Never ``contrasweep`` or
``dashboards``: dependencies run one way, from the orchestration layer down to this one.
"""
