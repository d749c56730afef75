"""Searchers and schedulers (docs/architecture.md, "Resume: one rule for every searcher and
scheduler"). ``study_search``: the ``optuna``/``random`` searcher, Optuna ask/tell over the
sweep's study (``study_storage``: that study's storage, following a moved folder);
``group_asha``: ASHA over repeat groups and the FIFO base both schedulers share (``settle``).

May import: ``contrasweep.errors``, ``contrasweep.spec``, ``contrasweep.folder``,
``contrasweep.tracking`` (the ledger, warm starts' aggregates), ``trainables.params``, Ray Tune,
Optuna. Never ``run``, ``console`` or ``cli``.
"""
