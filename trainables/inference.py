"""A trained checkpoint applied to raw text, outside any sweep (docs/architecture.md, "Use the
best model"): what the MLflow model of a trial (``contrasweep.tracking.model_flavor``) runs.

``Predictor(checkpoint, encoder_dir, info)`` rebuilds the method with ``loop.load_trained``
(the encoder from ``encoder_dir``'s ``config.json``, every weight from the checkpoint),
tokenises texts as the sweep's data was (``contrasweep.data.tokens.tokenize_splits``: the
encoder's tokenizer, truncation at ``max_length``, a second text as the pair's second segment)
and returns one row per text, shaped by the method's ``serving_output`` (``OUTPUTS``):

* ``probabilities``: ``label`` (the class name of the argmax) and ``prob_<class>`` = softmax
  of ``predict``'s logits (CE, CE+SCL, SCL-MOO, SupCL-Seq's fitted linear layer);
* ``similarities``: LaCon's rule (Eq. 8): ``label`` of the best ``score_<class>`` = cosine of
  H_x (after the fusion block when the run used it) with each label embedding;
* ``multilabel``: ``labels`` (the classes with σ ≥ ``threshold``, the run's own) and
  ``score_<class>`` = σ per label (ABALONE: the probe or the classifier);
* ``embedding``: ``embedding``, the pooled encoder output as evaluated (SimCSE, VaSCL).

``info``: ``label_names``, ``max_length``, ``is_pair`` (and the method's ``threshold`` comes
from its own hyperparameters). The columns and their types are ``trainables.outputs``' (torch-free:
the driver writes the signature from them). May import: ``trainables`` (loop, encoder, outputs),
torch, numpy, transformers.
"""

from __future__ import annotations

import numpy as np
import torch

from trainables.outputs import class_columns, output_columns

BATCH_SIZE = 32


def _probabilities(method, batch, names) -> dict:
    probs = torch.softmax(method.predict(batch).float(), dim=-1).cpu().numpy()
    return {"label": [names[i] for i in probs.argmax(1)], **dict(zip(class_columns("prob_", names), probs.T))}


def _similarities(method, batch, names) -> dict:
    scores = method.predict(batch).float().cpu().numpy()
    return {"label": [names[i] for i in scores.argmax(1)], **dict(zip(class_columns("score_", names), scores.T))}


def _multilabel(method, batch, names) -> dict:
    from trainables.evaluation.multilabel import threshold_predictions  # evaluation's rule; scikit-learn

    scores = method.predict(batch).float().cpu().numpy()
    threshold = float(method.hp["threshold"])
    chosen = threshold_predictions(scores, threshold).astype(bool)
    return {
        "labels": [[n for n, on in zip(names, row) if on] for row in chosen],
        "threshold": [threshold] * len(scores),
        **dict(zip(class_columns("score_", names), scores.T)),
    }


def _embedding(method, batch, names) -> dict:
    return {"embedding": list(method.representation(batch).float().cpu().numpy())}


OUTPUTS = {
    "probabilities": _probabilities,
    "similarities": _similarities,
    "multilabel": _multilabel,
    "embedding": _embedding,
}


class Predictor:
    """The method of a best checkpoint on CPU (or ``device``), in eval mode."""

    def __init__(self, checkpoint: str, encoder_dir: str, info: dict, device: str = "cpu"):
        from transformers import AutoTokenizer

        from trainables.loop import load_trained

        self.info = info
        self.names = [str(n) for n in info["label_names"]]
        self.method = load_trained(checkpoint, num_labels=len(self.names), encoder_dir=encoder_dir).to(device)
        self.tokenizer = AutoTokenizer.from_pretrained(encoder_dir)
        self.device = device
        self.kind = type(self.method).serving_output

    def batch(self, texts: list[str], pairs: list[str] | None = None) -> dict[str, torch.Tensor]:
        enc = self.tokenizer(
            list(texts),
            list(pairs) if pairs is not None else None,
            truncation=True,
            max_length=int(self.info["max_length"]),
            padding=True,
            return_token_type_ids=True,
            return_tensors="pt",
        )
        return {k: enc[k].to(self.device) for k in ("input_ids", "attention_mask", "token_type_ids")}

    @torch.no_grad()
    def predict(self, texts: list[str], pairs: list[str] | None = None) -> dict[str, list]:
        """Column -> one value per text (``output_columns``)."""
        out: dict[str, list] = {}
        for start in range(0, len(texts), BATCH_SIZE):
            part = pairs[start : start + BATCH_SIZE] if pairs is not None else None
            rows = OUTPUTS[self.kind](self.method, self.batch(texts[start : start + BATCH_SIZE], part), self.names)
            for column, values in rows.items():
                out.setdefault(column, []).extend(
                    np.asarray(v).tolist() if isinstance(v, np.ndarray) else v for v in values
                )
        return out or {column: [] for column in output_columns(self.kind, self.names)}
