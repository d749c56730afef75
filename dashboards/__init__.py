"""Read-only consumers of MLflow (docs/architecture.md, "Tracking, registry and reports"): a
sweep read back, its trial tables and histories, repeat-group aggregates and selection,
Wilcoxon tests over matched repeats, Pareto and SCL-MOO fronts, figures, the t-SNE map of the
registered model, and the paper-style report (``report``: HTML, CSV, Markdown, PNG, logged to
the sweep run).

May import: ``contrasweep.tracking`` (the store, aggregation, the registry), ``contrasweep.data``
(a checkpoint's test split), ``contrasweep.spec`` (how numbers read, objectives),
``contrasweep.errors``, ``trainables.loop``, ``trainables.sessions``, ``trainables.gather`` (to
load a checkpoint and embed), ``trainables.user_methods`` (a user's method's short name), MLflow,
scipy, Optuna, matplotlib, scikit-learn, requests (the HTTP errors of MLflow's artifact uploads).
Nothing in ``contrasweep`` imports this package except the CLI.
"""
