"""Starting a trial from another trial's weights (``init_from``): the encoder of a finished
checkpoint, its heads discarded (ABALONE Sec. 5.2's fine-tuning after contrastive learning)."""

from __future__ import annotations

import os

import torch
from torch import nn

from trainables.errors import UserError
from trainables.loop import MODEL_FILE


def model_file(path: str) -> str:
    """The weights file of a checkpoint: ``path`` itself, or ``path/model.pt`` for a directory."""
    path = os.path.expanduser(path)
    return path if os.path.isfile(path) else os.path.join(path, MODEL_FILE)


def check_model_file(path: str, key: str = "init_from") -> str:
    """``model_file(path)``, or a one-line ``UserError`` naming ``key`` when there is none."""
    found = model_file(path)
    if not os.path.isfile(found):
        raise UserError(f"{key}={path!r}: no {MODEL_FILE} there; allowed: a checkpoint directory of a "
                        f"finished stage-1 trial (holding {MODEL_FILE}), or ''")
    return found


@torch.no_grad()
def load_encoder_weights(encoder: nn.Module, path: str, key: str = "init_from") -> None:
    """Copy the ``encoder.*`` entries of a checkpoint's state dict into ``encoder``. Every DDP
    rank reads the file, so it must be on storage every worker sees."""
    state = torch.load(check_model_file(path, key), map_location="cpu")
    encoder_state = {k[len("encoder."):]: v for k, v in state.items() if k.startswith("encoder.")}
    try:
        encoder.load_state_dict(encoder_state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{key}={path!r}: its encoder does not match this run's encoder "
                        f"({first}); allowed: a checkpoint trained with the same encoder.name") from None
