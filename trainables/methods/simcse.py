"""SimCSE, unsupervised (Gao et al. 2021), the baseline of VaSCL (vascl.txt Sec. 3.1, 4).

Each sentence goes through the encoder twice with its dropout active; the two pooled outputs e,
e' pass through a one-layer MLP head with tanh (SimCSE's training-time pooler) and the
symmetric in-batch InfoNCE of vascl.txt Eq. 1, both directions as in Eq. 6, is minimised
(``trainables.losses.infonce``), τ = 0.05. The head is for training only: the representation
evaluated is e. Labels are never used for training.
"""

from __future__ import annotations

from torch import nn

from trainables.global_batch import global_batch
from trainables.losses.infonce import info_nce
from trainables.methods.declarations import SIMCSE
from trainables.methods.representation import RepresentationMethod


class SimCSE(RepresentationMethod):
    name = "simcse"
    params = SIMCSE  # trainables.methods.declarations

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        d = encoder.hidden_size
        self.head = nn.Sequential(nn.Linear(d, d), nn.Tanh())

    def training_step(self, batch):
        e1, e2 = self.encode(batch)[0], self.encode(batch)[0]  # two dropout masks
        loss = info_nce(*global_batch(self.head(e1), self.head(e2)), self.hp["temperature"])  # every rank's pairs
        return {"loss": loss, "loss/instance": loss.detach()}
