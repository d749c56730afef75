"""Losses: pure, vectorised functions of tensors, one per file, each citing its equations.
A loss that several methods share lives here once (DESIGN.md, Rules of the spine)."""

from trainables.losses.supcon import supcon_loss

__all__ = ["supcon_loss"]
