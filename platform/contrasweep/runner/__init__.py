"""Running a sweep on Ray (docs/architecture.md, "Data flow", "Storage and clusters").

``tune``: Ray start-up, the pre-start checks, data into the object store, the Tuner, run and
resume; ``executor``: what one trial runs (in process, or under ``TorchTrainer``);
``shipping``: what a cluster job ships to its workers; ``preflight``: services checked before
Ray starts; ``recovery``: a dead driver's sweep set straight; ``sweep_plan``: what a sweep will
cost before it runs (``contrasweep plan``), with ``fixed_costs`` measured where it will run;
``slots``: trials at once and pending at once; ``extend``: a sweep grown (``contrasweep extend``);
``test_phase``: the test split after selection (``evaluation.test: reported``).

May import: ``contrasweep.errors``, ``contrasweep.data``, ``contrasweep.spec``, ``contrasweep.folder``,
``contrasweep.tracking``, ``contrasweep.search``, ``contrasweep.console``, ``trainables`` (inside a
trial, and ``trainables.calibration`` for a plan), Ray. Never ``cli``.
"""
