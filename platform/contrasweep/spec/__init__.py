"""What a sweep is, before anything runs (docs/architecture.md, "The spec format").

``load``: a YAML spec and ``--set`` overrides → a validated ``Sweep`` (one-line errors);
``sweep``: the ``Sweep`` and the words a spec may use; ``axes``: list-valued data keys → data
variants; ``trial``: a trial's plan (hyperparameters, data variant, seed) decoded from its Tune
config; ``identity``: a trial's configuration, setting, repeat group and MLflow names;
``names``: the one display name of each hyperparameter (its ``Param``'s symbol, or its name).

``domains``: the search domains as typed objects; ``objective``: a metric and its mode.

May import: ``contrasweep.errors``, ``contrasweep.data``, ``trainables.params``,
``trainables.registry`` (torch-free declarations), ``trainables.user_methods`` (a user's method's
short name). Never Ray, MLflow or torch; Optuna only inside a domain's ``distribution()``, which
the searcher calls.
"""
