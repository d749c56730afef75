"""Your own method, swept like the papers' (docs/methods-own.md): cross-entropy plus a
supervised contrastive term on the pooled sentence embeddings,

    L = CE + w · SupCon(z, y; τ),

z the L2-normalised pooled encoder outputs of the batch (Khosla et al. 2020, Eq. 2, as
``trainables.losses.supcon_loss`` computes it). In a spec: ``method: ./ce_supcon.py:CESupCon``
(a path relative to the spec's folder) or ``method: ce_supcon:CESupCon`` (a module on the path).
"""

import torch
import torch.nn.functional as F
from torch import nn

from trainables.base import Method
from trainables.global_batch import global_batch
from trainables.losses import supcon_loss
from trainables.params import Param


class CESupCon(Method):  # runs are named by the class: "CESupCon weight=0.5 · seed=0"
    params = {  # searched like a built-in's: grid, search domains, reported point
        "weight": Param("float", 0.5, 0.0, 10.0, help="w, the weight of the contrastive term"),
        "temperature": Param("float", 0.1, 0.0, 10.0, low_open=True, help="τ of SupCon", symbol="τ"),  # shown as τ
    }

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)  # self.hp: the values, validated
        self.classifier = nn.Linear(encoder.hidden_size, num_labels)

    def training_step(self, batch):
        pooled, _ = self.encode(batch)
        ce = F.cross_entropy(self.classifier(pooled), batch["labels"])
        # every worker's rows under DDP (a contrastive loss needs the whole batch)
        scl = supcon_loss(*global_batch(pooled, batch["labels"]), self.hp["temperature"])
        loss = ce + self.hp["weight"] * scl
        return {"loss": loss, "loss/ce": ce.detach(), "loss/supcon": scl.detach()}

    @torch.no_grad()
    def predict(self, batch):
        return self.classifier(self.encode(batch)[0])
