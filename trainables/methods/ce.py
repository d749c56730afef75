"""Cross-entropy fine-tuning: the baseline of every paper here (LaCon Sec. 3.2 "BERT-base
with CE"; SCL-MOO's CE; SupCL-Seq's and Gunel et al.'s starting point).

A dropout + linear classifier on the pooled encoder output, trained with (optionally label-
smoothed) cross-entropy; prediction is the classifier's argmax.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainables.base import Method
from trainables.methods.declarations import CE


class CrossEntropy(Method):
    name = "ce"
    params = CE  # trainables.methods.declarations

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        self.dropout = nn.Dropout(self.hp["classifier_dropout"])
        self.classifier = nn.Linear(encoder.hidden_size, num_labels)

    def logits(self, batch):
        pooled, _ = self.encode(batch)
        return self.classifier(self.dropout(pooled))

    def training_step(self, batch):
        loss = F.cross_entropy(self.logits(batch), batch["labels"], label_smoothing=self.hp["label_smoothing"])
        return {"loss": loss, "loss/ce": loss.detach()}

    @torch.no_grad()
    def predict(self, batch):
        return self.logits(batch)
