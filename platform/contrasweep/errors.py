"""The user-facing errors, re-exported where the CLI catches them.

They are defined at the bottom layer (``trainables.errors``) because both sides raise them:
the training side for a bad hyperparameter or encoder, the orchestration side for a bad spec
or data source (docs/architecture.md, "Layers").

May import: ``trainables.errors``.
"""

from trainables.errors import DataError, SpecError, UserError

__all__ = ["DataError", "SpecError", "UserError"]
