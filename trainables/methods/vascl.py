"""VaSCL (Zhang et al. 2022, vascl.txt Sec. 3.2, App. A): contrastive learning with virtual
augmentation in the neighbourhood of each instance.

Per batch of M sentences: two dropout passes give e, e' (pooled); the head h (2-layer MLP,
d × d then d × 128, App. A) gives z = h(e); the loss is Eq. 6 = the instance InfoNCE of Eq. 1
both ways + the neighbourhood loss of Eq. 5 both ways, with N(i) the K nearest in-batch
neighbours of e_i and the virtual augmentation e_i* = e_i + δ_i*, δ_i* found by gradient ascent
on Eq. 2 within ‖δ_i‖ = Δ (Eq. 3-4; ``trainables.losses.vascl``). Labels are never used.

Hyperparameters (App. A): head lr 5e-4 and backbone lr 5e-6 (``head_lr`` and the loop's
``lr``; constant schedule, see search_spaces/vascl.yaml), Δ = 15 for base-size encoders and 30
for large ones, τ = 0.05 (as SimCSE), batch 1024, 5 epochs. The paper gives no K: 16 here
(the default of the public VaSCL code), sweepable (Fig. 2a studies top-K neighbourhoods).
``neighbour_grad`` (default true, the paper: Eq. 6 is minimised over every parameter and e*
depends on the encoder through e) lets the neighbourhood term's gradient reach the encoder; false
keeps it to the head. ``clean_grad`` (default true, Eq. 5-6 as written) lets that term
differentiate through the clean z as well as through z*; false treats the clean z as constants
there, as the authors' public code does (``trainables.losses.vascl.vascl_loss`` says why the
paper's reading is the default). A last batch with M ≤ K uses K = M − 1 (and no neighbourhood term
when M = 1).
"""

from __future__ import annotations

from torch import nn

from trainables.global_batch import global_batch
from trainables.losses.infonce import info_nce
from trainables.losses.vascl import vascl_loss
from trainables.methods.declarations import VASCL, check_vascl
from trainables.methods.representation import RepresentationMethod


class VaSCL(RepresentationMethod):
    name = "vascl"
    params = VASCL  # trainables.methods.declarations

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        d = encoder.hidden_size
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, self.hp["head_dim"]))

    @classmethod
    def check(cls, hp, hidden_size):
        check_vascl(hp, hidden_size)  # torch-free, in its declaration: the driver runs it before a sweep

    def training_step(self, batch):
        # two dropout masks; the pairs of every rank (the neighbourhoods are the global batch's)
        e1, e2 = global_batch(self.encode(batch)[0], self.encode(batch)[0])
        k = min(self.hp["neighbours"], len(e1) - 1)
        if k < 1:  # a one-row batch has no neighbourhood: the instance term alone
            loss = info_nce(self.head(e1), self.head(e2), self.hp["temperature"])
            return {"loss": loss, "loss/instance": loss.detach()}
        out = vascl_loss(
            e1,
            e2,
            self.head,
            self.hp["temperature"],
            k=k,
            delta=self.hp["delta"],
            steps=self.hp["ascent_steps"],
            neighbour_grad=self.hp["neighbour_grad"],
            clean_grad=self.hp["clean_grad"],
        )
        return {
            "loss": out["loss"],
            "loss/instance": out["instance"].detach(),
            "loss/neighbourhood": out["neighbourhood"].detach(),
        }

    def param_groups(self, lr, weight_decay):
        """Backbone at the loop's ``lr``, the head at ``head_lr`` (App. A: 5e-6 vs 5e-4)."""
        groups = []
        for group in super().param_groups(lr, weight_decay):
            head = [p for p in group["params"] if any(p is q for q in self.head.parameters())]
            rest = [p for p in group["params"] if not any(p is q for q in self.head.parameters())]
            groups += [{**group, "params": rest}, {**group, "params": head, "lr": self.hp["head_lr"]}]
        return [g for g in groups if g["params"]]
