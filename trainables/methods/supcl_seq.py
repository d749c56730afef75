"""SupCL-Seq (Sedghamiz et al. 2021, supcl_seq.txt Sec. 2): supervised contrastive learning
over dropout views, then a linear layer on the frozen encoder.

Stage 1 (``training_step``): the batch goes through the same encoder once per dropout
probability p_n of the configured set (x̃_n = Enc(x, p_n), Sec. 2); for that pass every
``nn.Dropout`` of the encoder uses p_n (BERT's attention dropout reads its module's ``p`` at
call time, so it follows too) and the original probabilities are restored afterwards. Every
probability yields its own view, duplicates included ([0.1, 0.1] = two views at 0.1, Table 1).
The supervised contrastive loss Eq. 2 runs over all M·N views (``trainables.losses.supcon``:
positives are every other view with the same label, similarity the inner product of
L2-normalised pooled embeddings, footnote 2 and App. A), τ = 0.05 (Table 4).

Stage 2 (``second_stage``): "the encoder parameters are frozen and a linear classification
layer is then trained with cross-entropy" (Sec. 2). We fit it after every stage-1 epoch on the
frozen features of the training split, so each epoch's validation metrics (what ASHA and the
best checkpoint see) belong to the full two-stage pipeline. The linear layer is a multinomial
logistic regression (scikit-learn, L-BFGS to convergence, L2 strength 1/``probe_c``): exactly a
linear layer minimising cross-entropy, without an lr/epoch schedule to tune for a convex
problem. Departure, stated: the paper trains that layer with Devlin et al.'s fine-tuning
hyper-parameters, which it does not list; the features are the L2-normalised pooled embeddings
the contrastive loss shaped. The fitted weights are buffers, so they are saved with every
checkpoint and never touched by the stage-1 optimiser.

Reduction: Eq. 2 sums over anchors; we average (``reduction="mean"``) so the gradient scale
does not grow with M·N — the same choice as Khosla et al.'s reference loss. Pooling follows the
spec's encoder (the paper uses the CLS state of BERT-base; set ``encoder.pooling: cls``).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainables.base import Method
from trainables.errors import UserError
from trainables.global_batch import global_batch
from trainables.losses import supcon_loss
from trainables.methods.declarations import SUPCL_SEQ


@contextmanager
def dropout_probability(module: nn.Module, p: float):
    """Every ``nn.Dropout`` under ``module`` uses probability ``p`` inside the block."""
    dropouts = [m for m in module.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    saved = [m.p for m in dropouts]
    try:
        for m in dropouts:
            m.p = p
        yield len(dropouts)
    finally:
        for m, old in zip(dropouts, saved):
            m.p = old


class SupCLSeq(Method):
    name = "supcl_seq"
    params = SUPCL_SEQ  # trainables.methods.declarations
    head_weight: torch.Tensor  # buffers (__init__)
    head_bias: torch.Tensor

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        if not any(isinstance(m, nn.modules.dropout._DropoutNd) for m in encoder.modules()):
            raise UserError(
                "method supcl_seq needs an encoder with nn.Dropout modules (its views are dropout "
                "probabilities); allowed: BERT-style Hugging Face encoders"
            )
        # stage-2 linear layer: buffers (saved in checkpoints, invisible to the stage-1 optimiser)
        self.register_buffer("head_weight", torch.zeros(num_labels, encoder.hidden_size))
        self.register_buffer("head_bias", torch.zeros(num_labels))

    def views(self, batch) -> torch.Tensor:
        """``[N·M, d]``: the pooled embeddings of the N dropout views, view-major."""
        out = []
        for p in self.hp["dropouts"]:
            with dropout_probability(self.encoder, p):
                out.append(self.encode(batch)[0])
        return torch.cat(out)

    def training_step(self, batch):
        labels = batch["labels"].repeat(len(self.hp["dropouts"]))
        loss = supcon_loss(*global_batch(self.views(batch), labels), self.hp["temperature"])
        return {"loss": loss, "loss/supcon": loss.detach()}

    def features(self, batch) -> torch.Tensor:
        return F.normalize(self.encode(batch)[0], dim=-1)

    @torch.no_grad()
    def predict(self, batch):
        return F.linear(self.features(batch), self.head_weight, self.head_bias)

    def second_stage(self, context):
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import log_loss

        x, y = context.outputs(self, "train", self.features)
        classes = np.unique(y)
        if len(classes) < 2:  # nothing to separate: predict the only class seen
            weight, bias = np.zeros(tuple(self.head_weight.shape)), np.full(self.num_labels, -1.0e4)
            bias[classes] = 0.0
            self._set_head(weight, bias)
            return {"train_accuracy": 1.0}
        clf = LogisticRegression(C=self.hp["probe_c"], max_iter=self.hp["probe_max_iter"])
        clf.fit(x, y)
        self._set_head(*full_linear_layer(clf, self.num_labels, x.shape[1]))
        proba = clf.predict_proba(x)
        return {
            "train_accuracy": float(clf.score(x, y)),
            "train_loss": float(log_loss(y, proba, labels=clf.classes_)),
            "iterations": float(np.max(clf.n_iter_)),
        }

    def _set_head(self, weight: np.ndarray, bias: np.ndarray) -> None:
        self.head_weight.copy_(torch.as_tensor(weight, dtype=self.head_weight.dtype))
        self.head_bias.copy_(torch.as_tensor(bias, dtype=self.head_bias.dtype))


def full_linear_layer(clf, num_labels: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's coefficients as a ``num_labels × dim`` layer whose argmax is the
    classifier's prediction: a binary model's single row scores ``classes_[1]`` against a zero
    row for ``classes_[0]``; labels absent from the training split can never win."""
    weight, bias = np.zeros((num_labels, dim)), np.full(num_labels, -1.0e4)
    classes = clf.classes_.astype(int)
    if len(classes) == 2:
        weight[classes[1]], bias[classes[1]] = clf.coef_[0], clf.intercept_[0]
        bias[classes[0]] = 0.0
    else:
        weight[classes], bias[classes] = clf.coef_, clf.intercept_
    return weight, bias
