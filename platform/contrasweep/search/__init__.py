"""Searchers and schedulers (docs/architecture.md, "Resume: one rule for every searcher and
scheduler"). ``base``: their contracts (``Searcher``, ``Scheduler``: what contrasweep asks of
each, in the order it asks); ``registry``: one object per name the spec may give.
``study_search``: the ``optuna``/``random`` searcher, Optuna ask/tell over the
sweep's study (``study_storage``: that study's storage, following a moved folder;
``optuna_versions``: what differs between the Optuna releases it accepts);
``fifo``: the base both schedulers share (FIFO over the live trials); ``group_asha``: ASHA over
repeat groups;
``racing``, ``race_search`` and ``study_race``: racing over repeats (a grid's, a study's);
``budget_gate``: ``sweep.budget``, which both schedulers ask before a trial starts;
``warm_actors``: Tune's actor cache kept warm for the next trials.

May import: ``contrasweep.errors``, ``contrasweep.data`` (a data axis's default),
``contrasweep.spec``, ``contrasweep.folder``, ``contrasweep.tracking`` (the ledger, what ran, warm
starts' aggregates), ``trainables.params``, Ray Tune, Optuna. Never ``runner``, ``console`` or ``cli``.
"""
