"""Losses: pure, vectorised functions of tensors, one per file, each citing its equations.
A loss that several methods share lives here once (docs/architecture.md, "Rules of the spine"),
and so do the pieces the contrastive losses share (``common``: cosine similarities, the
self-mask, masked log-sum-exp and log-softmax)."""

from trainables.losses.infonce import info_nce
from trainables.losses.scl_moo import nonneg_shift, scl_moo_neg, scl_moo_objectives, scl_moo_pos
from trainables.losses.supcon import supcon_loss

__all__ = ["info_nce", "nonneg_shift", "scl_moo_neg", "scl_moo_objectives", "scl_moo_pos", "supcon_loss"]
