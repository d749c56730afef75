"""CE+SCL (Gunel et al. 2021, ICLR, "Supervised contrastive learning for pre-trained language
model fine-tuning"): the baseline of LaCon (lacon.txt Sec. 3.2) and SCL-MOO.

    L = (1 − λ)·CE + λ·SCL

CE is the cross-entropy of a linear classifier on the pooled encoder output; SCL is the
supervised contrastive loss (``trainables.losses.supcon``) over the L2-normalised pooled
representations of the batch with temperature τ. Prediction is the classifier's argmax.
SCL is averaged over anchors (``reduction="mean"``) so that λ weighs two per-example means.
"""

from __future__ import annotations

import torch.nn.functional as F

from trainables.global_batch import global_batch
from trainables.losses import supcon_loss
from trainables.methods.ce import CrossEntropy
from trainables.methods.declarations import CE_SCL


class CrossEntropySCL(CrossEntropy):
    name = "ce_scl"
    params = CE_SCL  # trainables.methods.declarations

    def training_step(self, batch):
        pooled, _ = self.encode(batch)
        logits = self.classifier(self.dropout(pooled))
        ce = F.cross_entropy(logits, batch["labels"], label_smoothing=self.hp["label_smoothing"])
        scl = supcon_loss(*global_batch(pooled, batch["labels"]), self.hp["temperature"])  # every rank's rows
        lam = self.hp["lam"]
        return {"loss": (1 - lam) * ce + lam * scl, "loss/ce": ce.detach(), "loss/scl": scl.detach()}
