"""SCL-MOO (Moukafih et al. 2023, scl_moo.txt Sec. 2): supervised contrastive fine-tuning as a
two-objective problem, solved by linear scalarisation (LS) or Exact Pareto Optimal search (EPO).

    ℓ1 = λ·ℓ̃pos + (1 − λ)·CE      (Eq. 2, Eq. 4)    intra-class agreement
    ℓ2 = λ·ℓ̃neg + (1 − λ)·CE      (Eq. 3, Eq. 5)    inter-class repulsion

over the L2-normalised pooled representations (``trainables.losses.scl_moo``); CE is the
cross-entropy of a linear classifier on the same representation, which also predicts.

* ``moo: ls`` (Eq. 6): minimise r1·ℓ1 + r2·ℓ2 with r = [r1, 1 − r1] on the simplex.
* ``moo: epo`` (Eq. 7; Mahapatra & Rajan 2020): every step, the gradients of ℓ1 and ℓ2 with
  respect to all trainable parameters (every parameter is shared: both objectives hold CE and
  the encoder), their 2 × 2 Gram matrix and the EPO linear programme give α on the simplex
  (``trainables.methods.epo``); the step minimises Σ_j m·α_j·ℓ_j (m = 2). When the LP fails, α = r for
  that step, counted in ``moo/lp_fallback`` and logged as a warning. EPO needs non-negative
  objectives: ℓ̃pos and ℓ̃neg are shifted by the constant 1/τ, their lower bound for cosine
  similarities (``nonneg_shift``), which changes no gradient; LS uses the same shifted values
  so that the logged ℓ1, ℓ2 of both methods are comparable.

Per step, α_1, α_2, ℓ1 and ℓ2 are logged (MLflow ``step/moo/...``). ``evaluate`` adds the
split's ℓ1 and ℓ2 (``val/l1``, ``val/l2``, ``test/l1``, ``test/l2``; a sweep may select on them)
for the Pareto fronts of ``dashboards/moo.py``.
Cost: EPO takes two extra backward passes per step (one per objective) before the loop's own.
Under DDP ℓ̃pos and ℓ̃neg are computed on the gathered global batch (``trainables.global_batch``:
the same for 1 and 2 workers), and the per-objective gradients and losses are averaged over
ranks before the LP, so every rank solves the same programme and takes the same α.
Defaults are the paper's reported best: τ = 0.3, λ = 0.3, r = [0.1, 0.9] (Sec. 3).
"""

from __future__ import annotations

import logging

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from trainables.batches import to_device, train_batches
from trainables.global_batch import global_batch
from trainables.losses import scl_moo_objectives
from trainables.methods.ce import CrossEntropy
from trainables.methods.declarations import DECLARATIONS, SCL_MOO
from trainables.methods.epo import epo_alpha
from trainables.metrics import classification_metrics
from trainables.params import LOOP_PARAMS

log = logging.getLogger("contrasweep.scl_moo")

# evaluate() shuffles a split with this fixed seed before cutting it into batches: a split may be
# stored sorted by class (one-class batches would make ℓ̃neg = 0), and a fixed order measures
# every epoch and every trial of a sweep on the same batches.
EVAL_ORDER_SEED = 0


class SCLMOO(CrossEntropy):
    name = "scl_moo"
    params = SCL_MOO  # trainables.methods.declarations
    step_metrics = ("moo/alpha_1", "moo/alpha_2", "moo/l1", "moo/l2")
    metric_names = DECLARATIONS["scl_moo"].metric_names

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        # The loop's (global) batch size is not a method parameter, so it is not in self.hp;
        # evaluate() needs it to cut a split into batches like the ones trained on.
        size = LOOP_PARAMS["batch_size"]
        self.train_batch_size = size.coerce("batch_size", hp.get("batch_size", size.default))

    def objectives(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(CE, ℓ1, ℓ2, logits) of one batch, Eq. 4–5 with the 1/τ shift; shared by training
        and evaluate (whose predictions are the logits' argmax)."""
        pooled, _ = self.encode(batch)
        labels = batch["labels"]
        logits = self.classifier(self.dropout(pooled))
        ce = F.cross_entropy(logits, labels, label_smoothing=self.hp["label_smoothing"])
        # the contrastive terms over every rank's rows; CE stays per rank (DDP averages it)
        z, y = global_batch(pooled, labels)
        l1, l2 = scl_moo_objectives(z, y, ce, self.hp["temperature"], self.hp["lam"], shift=True)
        return ce, l1, l2, logits

    def training_step(self, batch):
        ce, l1, l2, _ = self.objectives(batch)
        r = torch.tensor([self.hp["r1"], 1.0 - self.hp["r1"]], dtype=torch.float64)
        if self.hp["moo"] == "ls":
            alpha, fallback, balance = r, 0.0, 0.0
            loss = r[0].item() * l1 + r[1].item() * l2  # Eq. 6
        else:
            alpha, fallback, balance = self.epo_weights(torch.stack([l1, l2]), r)
            loss = 2 * (alpha[0].item() * l1 + alpha[1].item() * l2)  # Σ_j m·α_j·ℓ_j, m = 2
        return {
            "loss": loss,
            "loss/ce": ce.detach(),
            "loss/l1": l1.detach(),
            "loss/l2": l2.detach(),
            "moo/l1": l1.detach(),
            "moo/l2": l2.detach(),
            "moo/alpha_1": torch.tensor(float(alpha[0])),
            "moo/alpha_2": torch.tensor(float(alpha[1])),
            "moo/lp_fallback": torch.tensor(fallback),
            "moo/balance_step": torch.tensor(balance),
        }

    def evaluate(self, context, split):
        """The classification metrics of ``predict`` plus ``l1`` and ``l2``: ℓ1 and ℓ2 (Eq. 4–5,
        shifted by 1/τ like the trained and logged values, so ``val/l1`` compares with
        ``train/moo/l1`` and EPO's ray r1·ℓ1 = r2·ℓ2 of Eq. 7 is stated on the same numbers).

        ℓ̃pos and ℓ̃neg (Eq. 2–3) are defined on a mini-batch (the paper's ℓ_j, Eq. 1, is their
        expectation over batches), so the split's value is a batch-mean estimate: the mean over
        the split's batches of each batch's ℓ1 / ℓ2. The batches are cut exactly as training
        cuts them (``train_batches``: the loop's ``batch_size``, split over the DDP ranks, the
        contrastive terms computed on the gathered global batch), because the in-batch log-mean-exps depend on how many
        positives and negatives a batch holds: any other size would estimate another quantity.
        Every batch weighs the same, the short last one too (as in the epoch's training mean),
        and CE is the trained one (label smoothing included). The order is a fixed shuffle
        (``EVAL_ORDER_SEED``), the method is in eval mode (no dropout) and nothing is
        differentiated. The classification metrics come from the same forward pass (the
        logits' argmax is ``predict``; metrics do not depend on the row order), so the split
        is encoded once. Under DDP a last global batch with fewer rows than ranks lends its
        first row to the empty ranks (``train_batches``); those copies are left out of the
        classification metrics.
        """
        found = self.objective_means(context.tables[split], context.session)
        metrics = classification_metrics(found.pop("y_true"), found.pop("y_pred"), context.num_labels)
        return {**metrics, **found}

    @torch.no_grad()
    def objective_means(self, table, session) -> dict:
        """{"l1", "l2"}: each objective's mean over the batches of ``table`` (see ``evaluate``),
        and every row's "y_true" / "y_pred" from the same pass; every rank gets the same
        numbers. NaN for an empty split."""
        was_training = self.training
        self.eval()
        per_batch, y_true, y_pred = [], [], []
        try:
            for start, batch in enumerate(
                train_batches(table, self.train_batch_size, EVAL_ORDER_SEED, 0, session.rank, session.world_size)
            ):
                batch = to_device(batch, session.device)
                _, l1, l2, logits = self.objectives(batch)
                per_batch.append(torch.stack([l1, l2]).float())
                if not self._lent_row(table.num_rows, start, session):
                    y_true.append(batch["labels"])
                    y_pred.append(logits.argmax(-1))
        finally:
            self.train(was_training)
        sums = torch.stack(per_batch).double().sum(0).cpu().tolist() if per_batch else [0.0, 0.0]
        pairs = (torch.cat(y_true).cpu().numpy(), torch.cat(y_pred).cpu().numpy()) if y_true else None
        # the mean over every rank's batches, as the loop averages training losses
        gathered = session.all_gather((sums, len(per_batch), pairs))
        steps = sum(n for _, n, _ in gathered)
        shards = [p for _, _, p in gathered if p is not None]
        out = {
            "y_true": np.concatenate([p[0] for p in shards]) if shards else np.zeros(0, dtype=np.int64),
            "y_pred": np.concatenate([p[1] for p in shards]) if shards else np.zeros(0, dtype=np.int64),
        }
        if not steps:
            return {**out, "l1": float("nan"), "l2": float("nan")}
        return {**out, **{name: sum(part[j] for part, _, _ in gathered) / steps for j, name in enumerate(("l1", "l2"))}}

    def _lent_row(self, rows: int, batch_index: int, session) -> bool:
        """Whether this rank's shard of batch ``batch_index`` is a copy lent by ``train_batches``
        (the global batch had fewer rows than ranks and this rank got none)."""
        size = min(self.train_batch_size, rows - batch_index * self.train_batch_size)
        return session.rank >= size

    def epo_weights(self, losses: torch.Tensor, r: torch.Tensor):
        """α from the EPO LP on the Gram matrix of the per-objective gradients."""
        params = [p for p in self.parameters() if p.requires_grad]
        rows = []
        for loss in losses:
            grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            rows.append(
                torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])
            )
        flat = torch.stack(rows).float()
        values = losses.detach().float().clone()
        if dist.is_available() and dist.is_initialized():  # the LP of the global batch, on every rank
            for tensor in (flat, values):
                dist.all_reduce(tensor)
                tensor /= dist.get_world_size()
        gram = (flat @ flat.T).double().cpu().numpy()
        step = epo_alpha(values.double().cpu().numpy(), gram, r.numpy(), eps=self.hp["epo_eps"])
        if not step.ok:
            log.warning("EPO linear programme failed (losses %s); this step uses α = r", values.tolist())
        return torch.as_tensor(step.alpha), float(not step.ok), float(step.mode == "balance")
