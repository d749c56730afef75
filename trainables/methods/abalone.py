"""Multi-label text classification with a balanced supervised contrastive loss (Audibert et al.,
abalone_multilabel.txt): the contrastive losses L_MSC, L_Base, L_BQueue, L_BQProto with a
momentum encoder, a queue and label prototypes, judged by linear evaluation; and the BCE-based
baselines (L_BCE, L_FCL, L_ASY), also used to fine-tune a stage-1 encoder (Sec. 5.2).

One method; ``loss`` picks the row of Tables 2/3 (msc, bqproto, bqueue, base, bce, focal, asl:
the table and the selection are in ``trainables.methods.abalone_losses``; queue and momentum update in
``trainables.methods.momentum_queue``).

Contrastive losses (stage 1). f = the encoder's pooled output ("we designated the [CLS] token as
the final representation", Sec. 4.3; set ``encoder.pooling: cls``), h = a projection head "composed
of two fully connected layers with ReLU as activation function: W2·ReLU(W1·x) where W1 ∈ R^{h×h}
and W2 ∈ R^{d×h} ... d is set to 256" (App. A; biases kept, as in the SupCon head the paper says
it copies), z = h(f(x)). "A set of L trainable label prototypes C" (Sec. 3.2) is a parameter
[L, d] (msc, bqproto only). The queue "stores the learned representations of the K preceding
instances from the previous batches obtained from a momentum encoder" (Sec. 3.2), K = 512,
m = 0.999 (App. A). Parameters other than the backbone train at ``head_lr`` = 5e-5: "The learning
rate for parameters, other than the backbone, is consistently set to 5e−5" (App. A).

Step order (App. B, Algorithm 1): q = g_θ(x); k = g_θk(x).detach(); L(q, Queue, C, τ).backward();
update(θ), update(C); θ_k = m·θ_k + (1 − m)·θ; enqueue(Queue, k). The generic loop calls only
``training_step`` (forward + loss) and then does backward and the optimiser step itself, so the
last two lines of one iteration run at the START of the next ``training_step`` (``flush``): the
keys of step t wait in ``_pending``; step t+1 first applies θ_k ← m·θ_k + (1 − m)·θ and enqueues
them, then computes its own q and k and its loss. This is exactly App. B's order: between the
optimiser step of iteration t and the start of iteration t+1 nothing changes θ (clipping and the
scheduler act before / beside the step), so the update sees the same θ, and the queue holds the
same keys when the loss of t+1 is computed. The current batch's keys are never in the queue when
its own loss is computed (they would count each instance's own momentum embedding as a
positive). ``second_stage`` (after every epoch, before evaluation and the checkpoint) flushes
too, so a checkpoint never has keys in flight and resuming is exact; ``load_state_dict``
drops keys in flight. The key model (a ``momentum_copy`` of encoder and head, ``self.momentum``)
is a submodule, so it is checkpointed, but its parameters need no gradient and stay out of the
optimiser; the keys are computed in the module's mode (train mode in the loop: dropout 0.1 is the
only noise, "No data augmentation is employed", App. A). The queue (``self.queue``) is a separate
submodule, never inside the modules ``momentum_update`` averages (that function copies buffers).

DDP: each rank's keys and labels are all-gathered (``trainables.global_batch``, padded to
the largest shard) when ``training_step`` computes them, so every rank enqueues the same keys in
the same (rank) order and all queues stay identical (MoCo does the same). The batch's own
projections and labels are gathered with their gradients (``trainables.global_batch``), so the
loss is the global batch's, the same for 1 and 2 workers. Every rank calls ``training_step`` the
same number of times (the loop's batching guarantees it), so the collective is matched.

Linear evaluation (stage 2, ``second_stage``, App. A; the fit is
``trainables.evaluation.multilabel_probe.fit_linear_probe``): after every epoch one logistic
regression per label on the frozen pooled features f(x), chosen on the validation split; the
chosen weights are buffers ``probe_weight`` [R, L, d] / ``probe_bias`` [R, L] (saved with every
checkpoint, invisible to the stage-1 optimiser). ``val/*`` of these losses is therefore optimistic
(as in the paper, which selects on validation and reports test).

BCE-family losses: plain fine-tuning of a dropout + linear classifier on f(x); prediction σ of
its logits; no queue, momentum encoder or stage 2. "Fine-Tuning after Supervised Contrastive
Learning" (Sec. 5.2; App. A: "we discard the projection head and train a linear layer using BCE
... learning rate in {5e−5, 2e−5} and a number of epochs in {5, 10}") is a second sweep: set
``init_from`` to the best folder of a stage-1 trial (its ``model.safetensors``;
``trainables.checkpoints``) and ``loss: bce``. Only the keys under ``encoder.`` are loaded (the
head, momentum model, queue, prototypes and probe are discarded), at the first ``training_step``
(``load_init``): a resumed trial restores its own checkpoint instead (the ``init_loaded`` buffer is
saved with it), and ``load_trained`` of a fine-tuned checkpoint never needs the stage-1 file. Every
DDP rank reads the file (shared storage).

Evaluation (``evaluate``): scores (σ of the classifier, or of the probe) thresholded at
``threshold`` (0.5); "the hamming loss, Micro-F1 score and Macro-F1 score" (Sec. 4.3), per-label F1
(``f1/<label>``), and head/tail macro-F1 with the head taken from the TRAINING label counts. On
the test split also the Silhouette score and Davies–Bouldin index of f(x) with label combinations
as classes, the most frequent half of the combinations kept (Sec. 5.3, Table 4: 10^4 embeddings;
``cluster_keep_fraction`` is App. D's proportion). Only finite
floats are returned (Tune and MLflow): a NaN score (degenerate clustering) is left out.

Schedule: with the loop's ``lr_schedule: method`` (both search spaces set it), the contrastive
losses decay along a cosine and the BCE family linearly, as App. A says (``lr_schedule``).

Departures, stated: the stage-1 checkpoint is chosen by the loop (best validation
micro-F1 of the whole pipeline), which is one of App. A's criteria ("The checkpoints with the best
micro-F1 is kept"); the probe's batch size is not given by the paper (``probe_batch_size``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from trainables.base import Method
from trainables.evaluation.multilabel import (
    combination_clustering,
    context_label_names,
    multilabel_metrics,
    threshold_predictions,
    train_label_counts,
)
from trainables.evaluation.multilabel_probe import fit_linear_probe, probe_seed
from trainables.global_batch import global_batch
from trainables.methods.abalone_losses import (
    BCE_FAMILY,
    CONTRASTIVE,
    WITH_PROTOTYPES,
    WITH_QUEUE,
    bce_family_loss,
    contrastive_loss,
)
from trainables.methods.declarations import ABALONE, DECLARATIONS, check_abalone, check_abalone_combination
from trainables.methods.momentum_queue import EmbeddingQueue, momentum_copy, momentum_update
from trainables.metrics import finite_metrics, metric_keys
from trainables.warm_start import load_encoder_weights

__all__ = ["MultiLabelContrastive", "fit_linear_probe", "global_batch", "CONTRASTIVE", "BCE_FAMILY"]


class MultiLabelContrastive(Method):
    name = "abalone"
    label_kind = DECLARATIONS["abalone"].label_kind
    metric_names = DECLARATIONS["abalone"].metric_names
    params = ABALONE  # trainables.methods.declarations
    serving_output = DECLARATIONS["abalone"].serving_output  # σ per label (predict), the set at the threshold
    # buffers, registered by __init__ for the losses that use them
    probe_weight: torch.Tensor
    probe_bias: torch.Tensor
    init_loaded: torch.Tensor

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        check_abalone_combination(self.hp)
        loss, d = self.hp["loss"], encoder.hidden_size
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None  # keys of the last step, not yet enqueued
        if loss in CONTRASTIVE:
            self.projection = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, self.hp["proj_dim"]))
            if loss in WITH_PROTOTYPES:
                self.prototypes = nn.Parameter(F.normalize(torch.randn(num_labels, self.hp["proj_dim"]), dim=-1))
            if loss in WITH_QUEUE:
                self.momentum = nn.ModuleDict(
                    {"encoder": momentum_copy(encoder), "projection": momentum_copy(self.projection)}
                )
                self.queue = EmbeddingQueue(self.hp["proj_dim"], num_labels, self.hp["queue_size"])
            r = self.hp["probe_restarts"]
            self.register_buffer("probe_weight", torch.zeros(r, num_labels, d))
            self.register_buffer("probe_bias", torch.zeros(r, num_labels))
        else:
            self.dropout = nn.Dropout(self.hp["classifier_dropout"])
            self.classifier = nn.Linear(d, num_labels)
            if self.hp["init_from"]:
                self.register_buffer("init_loaded", torch.zeros((), dtype=torch.long))

    # ------------------------------------------------------------------ checks

    @classmethod
    def check(cls, hp, hidden_size):
        check_abalone(hp, hidden_size)  # torch-free, in its declaration: the driver runs it before a sweep

    @property
    def contrastive(self) -> bool:
        return self.hp["loss"] in CONTRASTIVE

    def lr_schedule(self) -> str:
        """App. A: "As a common practice for contrastive learning, a cosine scheduler is used";
        the baselines (and the fine-tuning, "the same as Common Process") "employed the standard
        linear scheduler"."""
        return "cosine" if self.contrastive else "linear"

    # ------------------------------------------------------------------ stage 1

    def features(self, batch) -> torch.Tensor:
        """f(x): the pooled encoder output, the representation that is evaluated."""
        return self.encode(batch)[0]

    def training_step(self, batch):
        y = batch["labels"]
        if not self.contrastive:
            self.load_init()
            logits = self.classifier(self.dropout(self.features(batch)))
            loss = bce_family_loss(self.hp, logits, y)
            return {"loss": loss, f"loss/{self.hp['loss']}": loss.detach()}
        self.flush()  # App. B steps 5-6 of the previous iteration (module docstring)
        z, y = global_batch(self.projection(self.features(batch)), y)  # every rank's rows (the queue's keys too, below)
        queue_z = queue_y = None
        if hasattr(self, "queue"):
            with torch.no_grad():
                keys = self.momentum["projection"](
                    self.momentum["encoder"](batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))[
                        0
                    ]
                )
            self._pending = global_batch(keys.detach(), batch["labels"].to(keys.dtype))
            queue_z, queue_y = self.queue.embeddings, self.queue.labels
        loss = contrastive_loss(self.hp, z, y, getattr(self, "prototypes", None), queue_z, queue_y)
        return {"loss": loss, f"loss/{self.hp['loss']}": loss.detach()}

    @torch.no_grad()
    def flush(self) -> None:
        """App. B's "θ_k = m·θ_k + (1 − m)·θ; enqueue(Queue, k)" for the keys of the last step:
        call after the optimiser step (the next ``training_step`` and ``second_stage`` do)."""
        if self._pending is None:
            return
        m = self.hp["momentum"]
        momentum_update(self.momentum["encoder"], self.encoder, m)
        momentum_update(self.momentum["projection"], self.projection, m)
        self.queue.enqueue(*self._pending)
        self._pending = None

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        self._pending = None  # keys in flight belong to the state being replaced
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @torch.no_grad()
    def load_init(self) -> None:
        """Load ``init_from``'s ``encoder.*`` weights once (the first training step calls it)."""
        if not self.hp["init_from"] or not hasattr(self, "init_loaded") or int(self.init_loaded):
            return
        load_encoder_weights(self.encoder, self.hp["init_from"], "init_from")
        self.init_loaded.fill_(1)

    def param_groups(self, lr, weight_decay):
        """Backbone at the loop's ``lr``; projection head, prototypes, classifier at ``head_lr``
        (App. A). The momentum model needs no gradient and is left out by the base rule."""
        encoder = {id(p) for p in self.encoder.parameters()}
        groups = []
        for group in super().param_groups(lr, weight_decay):
            backbone = [p for p in group["params"] if id(p) in encoder]
            heads = [p for p in group["params"] if id(p) not in encoder]
            groups += [{**group, "params": backbone}, {**group, "params": heads, "lr": self.hp["head_lr"]}]
        return [g for g in groups if g["params"]]

    # ------------------------------------------------------------------ prediction

    def scores(self, features: torch.Tensor) -> torch.Tensor:
        """Label probabilities [N, L] from f(x): the probe (mean over restarts) or the classifier."""
        if self.contrastive:
            logits = torch.einsum("nd,rld->nrl", features, self.probe_weight) + self.probe_bias
            return torch.sigmoid(logits).mean(1)
        return torch.sigmoid(self.classifier(features))

    @torch.no_grad()
    def predict(self, batch):
        return self.scores(self.features(batch))

    # ------------------------------------------------------------------ stage 2 and evaluation

    def _split_features(self, context, split: str) -> tuple[np.ndarray, np.ndarray]:
        """f(x) and labels of a split, computed once per epoch (stage 2 and evaluation share them)."""
        key = ("abalone/features", split)
        if key not in context.cache:
            context.cache[key] = context.outputs(self, split, self.features)
        return context.cache[key]

    def second_stage(self, context):
        if not self.contrastive:
            return None
        self.flush()  # the last step's momentum update and keys, before the checkpoint
        x_train, y_train = self._split_features(context, "train")
        x_val, y_val = self._split_features(context, "validation")
        fit = fit_linear_probe(
            x_train,
            y_train,
            x_val,
            y_val,
            lrs=self.hp["probe_lrs"],
            weight_decays=self.hp["probe_weight_decays"],
            epochs=self.hp["probe_epochs"],
            batch_size=self.hp["probe_batch_size"],
            restarts=self.hp["probe_restarts"],
            threshold=self.hp["threshold"],
            select=self.hp["probe_select"],
            seed=probe_seed(context.seed, context.epoch),
            device=self.probe_weight.device,
        )
        self.probe_weight.copy_(fit["weight"])
        self.probe_bias.copy_(fit["bias"])
        metrics = {
            "train_loss": fit["train_loss"],
            "val_micro_f1": fit["val_micro_f1"],
            "grid_points": float(len(fit["grid"])),
        }
        names = metric_keys(context_label_names(context, self.num_labels))
        for j, g in enumerate(fit["choice"]):
            metrics[f"lr/{names[j]}"], metrics[f"weight_decay/{names[j]}"] = fit["grid"][g]
        if self.hp["probe_select"] == "joint":
            metrics["lr"], metrics["weight_decay"] = fit["grid"][fit["choice"][0]]
        return finite_metrics(metrics)

    def evaluate(self, context, split):
        x, y = self._split_features(context, split)
        with torch.no_grad():
            device = next(self.parameters()).device
            scores = self.scores(torch.as_tensor(x, dtype=torch.float32, device=device)).cpu().numpy()
        pred = threshold_predictions(scores, self.hp["threshold"])
        label_names = context_label_names(context, self.num_labels)
        out = multilabel_metrics(y, pred, label_names=label_names, train_counts=train_label_counts(context))
        metrics = {k: out[k] for k in self.metric_names if k in out}
        for name, key in zip(label_names, metric_keys(label_names)):
            metrics[f"f1/{key}"] = out["per_label_f1"][name]
        if split == "test":
            clusters = combination_clustering(
                x,
                y,
                keep_fraction=self.hp["cluster_keep_fraction"],
                max_points=self.hp["cluster_max_points"],
                seed=context.seed,
            )
            metrics["silhouette"], metrics["davies_bouldin"] = clusters["silhouette"], clusters["davies_bouldin"]
        return finite_metrics(metrics)
