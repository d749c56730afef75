"""Starting a trial from another trial's weights (``init_from``): the encoder of a finished
checkpoint, its heads discarded (ABALONE Sec. 5.2's fine-tuning after contrastive learning)."""

from __future__ import annotations

import torch
from torch import nn

from trainables.checkpoints import WEIGHTS_FILE, load_weights, weights_file
from trainables.errors import UserError


def check_model_file(path: str, key: str = "init_from") -> str:
    """The weights file of ``path`` (``trainables.checkpoints.weights_file``: a weights file,
    a best folder, a registry download or a reported checkpoint), or a one-line ``UserError``
    naming ``key`` when there is none."""
    found = weights_file(path)
    if found is None:
        raise UserError(
            f"{key}={path!r}: no {WEIGHTS_FILE} there; allowed: the best folder (or a checkpoint) "
            f"of a finished stage-1 trial, a {WEIGHTS_FILE} file, or ''"
        )
    return str(found)


@torch.no_grad()
def load_encoder_weights(encoder: nn.Module, path: str, key: str = "init_from") -> None:
    """Copy the ``encoder.*`` entries of a checkpoint's state dict into ``encoder``. Every DDP
    rank reads the file, so it must be on storage every worker sees."""
    state = load_weights(check_model_file(path, key))
    encoder_state = {k[len("encoder.") :]: v for k, v in state.items() if k.startswith("encoder.")}
    try:
        encoder.load_state_dict(encoder_state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"{key}={path!r}: its encoder does not match this run's encoder "
            f"({first}); allowed: a checkpoint trained with the same encoder.name"
        ) from None
