"""Losses: pure, vectorised functions of tensors, one per file, each citing its equations.
A loss that several methods share lives here once (docs/architecture.md, "Rules of the spine")."""

from trainables.losses.scl_moo import nonneg_shift, scl_moo_neg, scl_moo_objectives, scl_moo_pos
from trainables.losses.supcon import supcon_loss

__all__ = ["nonneg_shift", "scl_moo_neg", "scl_moo_objectives", "scl_moo_pos", "supcon_loss"]
