"""MLflow, written by the driver and read back (docs/architecture.md, "Data flow").

``store``: the leaf everything else here (and ``dashboards``) imports: the client, the tag
names, the default store, trial runs by tag, a store failure in one line (the sweep's record,
``tracking.json``, is ``contrasweep.folder.record``). ``ledger``: what the record says finished (for the schedulers).
``tracker``: ``MlflowTracker``, the Tune callback that writes the run hierarchy.
``aggregate``: repeat groups, mean/std/n, the selection rule and what a report shows.
``tested``: the test phase's record and its MLflow side. ``describe``: the sweep run's
description and a data variant as a dataset input. ``models``: the model registry.
``runs_view``: the MLflow UI's runs table. ``reattach``: the record rebuilt from MLflow's tags.
``model_flavor``: a trial's MLflow Model (pyfunc over ``trainables.inference``).
``provenance``: which code, versions, spec, user and host made the runs. ``verdict``: did a
configuration learn (its repeats against their data's chance level). ``writer``: the
tracker's MLflow calls, in a process of their own, behind a write-ahead log; ``run_ids``: the
runs it makes for the driver's placeholders. ``closed``: the groups the driver closed, for
the selection at the sweep's end.

May import: ``contrasweep.errors``, ``contrasweep.spec``, ``contrasweep.folder`` (the record, moved
folders, Tune's uploads), ``contrasweep.data.chance`` (what learning nothing scores),
``trainables.checkpoints`` and ``trainables.storage`` (the state folder), ``trainables.params``,
``trainables.registry``, ``trainables.encoder_names``, ``trainables.outputs``,
``trainables.errors``, ``trainables.user_methods`` (a user's method's file), ``trainables.loop``
(the registry's loader), ``trainables.phase_progress``, ``trainables.inference`` (inside an MLflow
model), MLflow, Ray Tune's ``Callback``, GitPython (provenance). Never
``contrasweep.search``, ``run``, ``console`` or ``cli``.
"""
