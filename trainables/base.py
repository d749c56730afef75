"""The method interface the generic loop trains (docs/architecture.md, "The method interface").

A method is an ``nn.Module`` holding the encoder and its own heads. The loop only ever calls:

* ``forward(batch)`` / ``training_step(batch)`` -> ``{"loss": scalar, "loss/<part>": scalar, ...}``
  (``forward`` delegates to ``training_step`` so DDP's gradient hooks see the call);
* ``predict(batch)`` -> scores ``[B, C]``; the argmax is the predicted class (a method's
  prediction rule, e.g. matching against label embeddings, lives here);
* ``evaluate(context, split)`` -> that split's metrics (reported as ``val/<name>`` and, at the
  best validation epoch, ``test/<name>``); by default classification metrics of ``predict``.
  A method judged otherwise (representation quality: clustering, probes) overrides it and
  lists its metric names in ``metric_names`` (what ``sweep.metric`` may name);
* ``param_groups(lr, weight_decay)`` -> AdamW parameter groups (override for per-part rates);
* ``second_stage(context)`` -> extra metrics or ``None``: called after every epoch's training
  and before that epoch's evaluation, with a ``trainables.gather.StageContext``; a two-stage
  method (frozen encoder + linear layer) fits its second stage here, so that every epoch's
  validation metrics — the ones ASHA and the best checkpoint use — are those of the whole
  two-stage pipeline. Its metrics are reported as ``stage2/<name>``.

``step_metrics`` names scalar outputs of ``training_step`` that are also logged at every
optimiser step (e.g. SCL-MOO's α and objectives), not only as epoch means.

Batches are dicts of tensors: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from trainables.encoder import Encoder
from trainables.gather import StageContext, classification_evaluate
from trainables.params import Param


class Method(nn.Module):
    name: ClassVar[str] = ""
    # Method-specific hyperparameters, validated by the spec like the loop's own.
    params: ClassVar[dict[str, Param]] = {}
    # "single": labels are class ids [B]; "multi": multi-hot [B, L] (data.task: multilabel).
    label_kind: ClassVar[str] = "single"
    # What evaluate() reports per split (sweep.metric may name val/<one of these>).
    metric_names: ClassVar[tuple[str, ...]] = ("accuracy", "macro_f1", "mcc", "f1")
    # ... and what it reports on the validation split when the spec gives STS pairs.
    sts_metric_names: ClassVar[tuple[str, ...]] = ()
    # Keys of training_step's output logged per optimiser step (MLflow step = global step).
    step_metrics: ClassVar[tuple[str, ...]] = ()
    # What the MLflow model returns per row (trainables.inference.OUTPUTS): "probabilities"
    # (softmax of predict's logits), "similarities", "multilabel" or "embedding".
    serving_output: ClassVar[str] = "probabilities"

    def __init__(self, encoder: Encoder, num_labels: int, hp: dict[str, Any]):
        super().__init__()
        self.encoder = encoder
        self.num_labels = num_labels
        # coerce again: searchers hand list-valued choices over as text (params.as_text)
        self.hp = {k: p.coerce(k, hp.get(k, p.default)) for k, p in self.params.items()}

    @classmethod
    def check(cls, hp: dict[str, Any], hidden_size: int) -> None:
        """Raise ``UserError`` for hyperparameters this encoder cannot take (called on the
        driver before a sweep starts, and again when the method is built)."""

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return self.training_step(batch)

    def encode(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))

    def training_step(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def param_groups(self, lr: float, weight_decay: float) -> list[dict]:
        """AdamW groups: no weight decay on biases and LayerNorm weights (BERT convention)."""
        decay: list[nn.Parameter] = []
        no_decay: list[nn.Parameter] = []
        for name, param in self.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if param.ndim < 2 or "LayerNorm" in name or "norm" in name.lower() else decay).append(param)
        return [
            {"params": decay, "lr": lr, "weight_decay": weight_decay},
            {"params": no_decay, "lr": lr, "weight_decay": 0.0},
        ]

    def lr_schedule(self) -> str:
        """The schedule ``lr_schedule: method`` resolves to: the one the paper uses for these
        hyperparameters (one grid can mix losses whose papers schedule differently)."""
        return "linear"

    def evaluate(self, context: StageContext, split: str) -> dict[str, float]:
        return classification_evaluate(
            self, context.tables[split], context.num_labels, context.eval_batch_size, context.session
        )

    def instance_embeddings(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The representation a report plots (t-SNE): the pooled encoder output unless the
        method classifies in another space (LaCon: the head's output, where its labels live)."""
        return self.encode(batch)[0]

    def label_embeddings(self) -> torch.Tensor | None:
        """``[C, d]`` label vectors in the space of ``instance_embeddings``, for methods that
        learn them (LaCon's W_emb); None otherwise."""
        return None

    def second_stage(self, context: StageContext) -> dict[str, float] | None:
        return None
