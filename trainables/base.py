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

__all__ = ["Method"]


class Method(nn.Module):
    """A method the generic loop trains: an ``nn.Module`` holding the encoder and its own heads.

    A method of your own subclasses it (docs/methods-own.md, "The contract"): it declares
    ``params``, builds its heads in ``__init__`` and writes ``training_step`` and ``predict``;
    the other members have defaults.

    Attributes:
        name: The method's name; optional for a method of your own (a built-in's is refused).
        params: Method-specific hyperparameters, ``{name: Param}``, validated by the spec like
            the loop's own.
        label_kind: ``"single"``: labels are class ids ``[B]``; ``"multi"``: multi-hot ``[B, L]``
            (``data.task: multilabel``).
        metric_names: What ``evaluate`` reports per split (``sweep.metric`` may name
            ``val/<one of these>``).
        sts_metric_names: What ``evaluate`` reports on the validation split when the spec gives
            STS pairs.
        step_metrics: Keys of ``training_step``'s output logged per optimiser step (MLflow step =
            global step).
        serving_output: What the MLflow model returns per row (``trainables.inference.OUTPUTS``):
            ``"probabilities"`` (softmax of ``predict``'s logits), ``"similarities"``,
            ``"multilabel"`` or ``"embedding"``.
    """

    name: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    label_kind: ClassVar[str] = "single"
    metric_names: ClassVar[tuple[str, ...]] = ("accuracy", "macro_f1", "mcc", "f1")
    sts_metric_names: ClassVar[tuple[str, ...]] = ()
    step_metrics: ClassVar[tuple[str, ...]] = ()
    serving_output: ClassVar[str] = "probabilities"

    def __init__(self, encoder: Encoder, num_labels: int, hp: dict[str, Any]):
        """Hold the encoder and the validated hyperparameters; a subclass builds its heads after.

        Args:
            encoder: The text encoder; ``encode`` calls it.
            num_labels: The number of classes (labels of a multi-label task).
            hp: Values of ``params`` by name; a missing one takes its default.

        Raises:
            SpecError: A value outside its parameter's range (``Param.coerce``).
        """
        super().__init__()
        self.encoder = encoder
        self.num_labels = num_labels
        # coerce again: searchers hand list-valued choices over as text (params.as_text)
        self.hp = {k: p.coerce(k, hp.get(k, p.default)) for k, p in self.params.items()}

    @classmethod
    def check(cls, hp: dict[str, Any], hidden_size: int) -> None:
        """Refuse hyperparameters this encoder cannot take; the default accepts all.

        Called on the driver before a sweep starts, and again when the method is built.

        Args:
            hp: The method's hyperparameters by name.
            hidden_size: The encoder's width ``d``.

        Raises:
            UserError: A subclass raises it for hyperparameters this encoder cannot take.
        """

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Delegate to ``training_step``, so that DDP's gradient hooks see the call.

        Args:
            batch: Dict of tensors: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``.

        Returns:
            What ``training_step`` returns.
        """
        return self.training_step(batch)

    def encode(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the encoder on a batch.

        Args:
            batch: Dict of tensors: ``input_ids``, ``attention_mask`` and, if present, ``token_type_ids``.

        Returns:
            ``(pooled [B, d], tokens [B, T, d])``: the pooled output and the last hidden states.
        """
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))

    def training_step(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The loss of one batch; every method writes it.

        Args:
            batch: Dict of tensors: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``.

        Returns:
            ``{"loss": scalar, "loss/<part>": scalar, ...}``: ``loss`` carries the gradient; the
            parts are detached scalars, logged as epoch means (and per step if in ``step_metrics``).

        Raises:
            NotImplementedError: Here; a subclass overrides it.
        """
        raise NotImplementedError

    @torch.no_grad()
    def predict(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scores of a batch; a method's prediction rule (e.g. matching against label embeddings) lives here.

        Args:
            batch: Dict of tensors: ``input_ids``, ``attention_mask``, ``token_type_ids``.

        Returns:
            Scores ``[B, C]``; the argmax is the predicted class.

        Raises:
            NotImplementedError: Here; a subclass overrides it.
        """
        raise NotImplementedError

    def param_groups(self, lr: float, weight_decay: float) -> list[dict]:
        """AdamW groups: no weight decay on biases and LayerNorm weights (BERT convention).

        Override for per-part learning rates.

        Args:
            lr: The loop's learning rate.
            weight_decay: The loop's weight decay.

        Returns:
            AdamW parameter groups: dicts with ``params``, ``lr`` and ``weight_decay``.
        """
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
        """The schedule ``lr_schedule: method`` resolves to.

        Returns:
            The one the paper uses for these hyperparameters (one grid can mix losses whose
            papers schedule differently): ``"linear"`` (default), ``"constant"`` or ``"cosine"``.
        """
        return "linear"

    def evaluate(self, context: StageContext, split: str) -> dict[str, float]:
        """That split's metrics; by default classification metrics of ``predict``.

        A method judged otherwise (representation quality: clustering, probes) overrides it
        and lists its metric names in ``metric_names``.

        Args:
            context: This epoch's ``trainables.gather.StageContext``.
            split: The split to judge (``"validation"`` or ``"test"``).

        Returns:
            ``{name: value}`` for every name in ``metric_names``, reported as ``val/<name>`` and,
            at the best validation epoch, ``test/<name>``.
        """
        return classification_evaluate(
            self, context.tables[split], context.num_labels, context.eval_batch_size, context.session
        )

    def instance_embeddings(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The representation a report plots (t-SNE).

        Args:
            batch: Dict of tensors: ``input_ids``, ``attention_mask``, ``token_type_ids``.

        Returns:
            ``[B, d]``: the pooled encoder output unless the method classifies in another space
            (LaCon: the head's output, where its labels live).
        """
        return self.encode(batch)[0]

    def label_embeddings(self) -> torch.Tensor | None:
        """Label vectors in the space of ``instance_embeddings``.

        Returns:
            ``[C, d]`` for methods that learn them (LaCon's W_emb); None otherwise.
        """
        return None

    def second_stage(self, context: StageContext) -> dict[str, float] | None:
        """Fit a second stage; called after every epoch's training and before that epoch's evaluation.

        A two-stage method (frozen encoder + linear layer) fits its second stage here, so that
        every epoch's validation metrics (the ones ASHA and the best checkpoint use) are those
        of the whole two-stage pipeline.

        Args:
            context: This epoch's ``trainables.gather.StageContext``.

        Returns:
            Extra metrics, reported as ``stage2/<name>``, or None (the default: no second stage).
        """
        return None
