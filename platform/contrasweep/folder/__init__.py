"""A sweep's folder on disk (docs/architecture.md, "Storage and clusters", "A dead driver").

``sweeps``: sweep folders (spec, status, Tune state, the Optuna study); ``driver``: who
drives a sweep (``driver.json``) and whether it lives; ``sweep_storage``: the sweep's storage
(preflight, the driver files mirrored there and fetched back); ``relocation``: a moved folder,
old → new for the paths Tune pickled; ``cleanup``: disk a sweep no longer needs; ``record``:
the sweep's record of its MLflow runs (``tracking.json`` and its journal); ``placeholders``: the
run ids the driver named before its MLflow writer made the runs, and what they map to.

May import: ``contrasweep.errors``, ``trainables.storage``, ``trainables.checkpoints`` (clean-up
reads a state folder's files), pyarrow, Ray Tune's ``Callback`` (the storage mirror runs as one).
Never MLflow or any other room of ``contrasweep``.
"""
