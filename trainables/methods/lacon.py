"""LaCon: label anchored contrastive learning (Zhang et al. 2022; lacon.txt Sec. 2).

Parts:
* instance representations H = g(f(x)) (Eq. 1): f = the encoder's pooled output ([CLS] in
  the paper, ``encoder.pooling: cls``), g = a 3-layer MLP with ReLU after each hidden layer,
  width d (Sec. 2.1); ``use_head: false`` removes g (Table 3, "w/o g");
* label embeddings L = rows of a learnable C × d matrix W_emb, randomly initialised (Eq. 2);
* the loss of Eq. 7 (``trainables.losses.lacon``): multi-head ICL′ (Eq. 4; ``heads: 1`` is the
  single-head ICL of Eq. 3, Table 3 "w/ L_ICL"), LCL (Eq. 5), λ·LER (Eq. 6); ``use_icl``,
  ``use_lcl``, ``use_ler`` switch each one off (Table 3 second block, Table 6): the loss takes
  them as weights, 1, 1 and λ when on and 0 when off (``loss_weights``);
* prediction by matching (Eq. 8): argmax_j cos(H_x, L_j); no classifier layer;
* ``fusion: true`` is LaCon-fusion (Eq. 9, Sec. 2.6): G_ij = cos(L_i, E_j) between every label
  and every token output, a convolution over a window of tokens then a max over labels gives
  m, β = softmax(m) over the (unpadded) tokens, z = Σ_i β_i E_i, H = g(z). Following LEAM
  (Wang et al. 2018), which Sec. 2.6 names as its inspiration, the convolution is a 1-D
  convolution across tokens with the C labels as channels and a ReLU; its window
  (``fusion_window``, odd, default 3) is our choice — the paper does not give one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainables.base import Method
from trainables.global_batch import global_batch
from trainables.losses.common import cosine
from trainables.losses.lacon import lacon_loss
from trainables.methods.declarations import DECLARATIONS, LACON, check_lacon


def projection_head(d: int) -> nn.Sequential:
    """g: 3 linear layers of width d, ReLU after each hidden layer (Sec. 2.1)."""
    return nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))


class LabelFusion(nn.Module):
    """Eq. 9: label–token cosine interactions -> conv over tokens -> max over labels -> β."""

    def __init__(self, num_labels: int, window: int):
        super().__init__()
        self.conv = nn.Conv1d(num_labels, num_labels, kernel_size=window, padding=window // 2)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor, label_emb: torch.Tensor) -> torch.Tensor:
        g = cosine(label_emb.unsqueeze(0), tokens)  # [B, C, T]: G_ij = cos(L_i, E_j)
        g = g.masked_fill(~mask.bool().unsqueeze(1), 0.0)  # padding interacts with nothing
        m = F.relu(self.conv(g)).max(dim=1).values  # [B, T]
        beta = m.masked_fill(~mask.bool(), float("-inf")).softmax(-1)
        return (beta.unsqueeze(-1) * tokens).sum(1)  # z = Σ β_i E_i


class LaCon(Method):
    name = "lacon"
    params = LACON  # trainables.methods.declarations

    @classmethod
    def check(cls, hp, hidden_size):
        check_lacon(hp, hidden_size)  # torch-free, in its declaration: the driver runs it before a sweep

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        d = encoder.hidden_size
        self.check(self.hp, d)
        self.head = projection_head(d) if self.hp["use_head"] else nn.Identity()
        self.label_emb = nn.Parameter(torch.randn(num_labels, d) * 0.02)  # W_emb, random init (Sec. 2.1)
        self.fusion = LabelFusion(num_labels, self.hp["fusion_window"]) if self.hp["fusion"] else None

    serving_output = DECLARATIONS["lacon"].serving_output  # Eq. 8's cosine per label; the best one is the prediction

    def instance_embeddings(self, batch) -> torch.Tensor:
        return self.represent(batch)  # H_x: the space where Eq. 8 compares instances with labels

    def label_embeddings(self) -> torch.Tensor:
        return self.label_emb.detach()

    def represent(self, batch) -> torch.Tensor:
        pooled, tokens = self.encode(batch)
        if self.fusion is not None:
            pooled = self.fusion(tokens, batch["attention_mask"], self.label_emb)
        return self.head(pooled)

    def training_step(self, batch):
        represented, labels = global_batch(self.represent(batch), batch["labels"])  # every rank's rows
        out = lacon_loss(
            represented, self.label_emb, labels, self.hp["temperature"], self.hp["heads"], **self.loss_weights()
        )
        return {"loss": out["loss"], **{k: v.detach() for k, v in out.items() if k != "loss"}}

    def loss_weights(self) -> dict[str, float]:
        """Eq. 7's weights from the spec's switches: 1·ICL′ + 1·LCL + λ·LER, a switched-off
        term (Table 3's "w/o" rows) weighted 0."""
        return {
            "icl_weight": 1.0 if self.hp["use_icl"] else 0.0,
            "lcl_weight": 1.0 if self.hp["use_lcl"] else 0.0,
            "ler_weight": self.hp["lam"] if self.hp["use_ler"] else 0.0,
        }

    @torch.no_grad()
    def predict(self, batch):
        return cosine(self.represent(batch), self.label_emb)  # Eq. 8: score_j = sim(H_x, L_j)
