"""Multi-label text classification with a balanced supervised contrastive loss (Audibert et al.,
abalone_multilabel.txt): the contrastive losses L_MSC, L_Base, L_BQueue, L_BQProto with a
momentum encoder, a queue and label prototypes, judged by linear evaluation; and the BCE-based
baselines (L_BCE, L_FCL, L_ASY), also used to fine-tune a stage-1 encoder (Sec. 5.2).

One method, ``loss`` picks the row of Tables 2/3 (the losses live in
``trainables.losses.multilabel_contrastive`` / ``multilabel_bce``, queue and momentum update in
``trainables.momentum_queue``):

==========  ==========================================  ============  ======  ==========
``loss``    loss                                        queue + key   protos  judged by
==========  ==========================================  ============  ======  ==========
msc         L_MSC, Eq. 1-5 (Sec. 3.3)                   yes           yes     linear eval
bqproto     L_BQProto (Sec. 4.2.1)                      yes           yes     linear eval
bqueue      L_BQueue (Sec. 4.2.1)                       yes           no      linear eval
base        L_Base, Jaccard SupCon (Sec. 3.1)           no            no      linear eval
bce         L_BCE (Sec. 4.2.2)                          no            no      its classifier
focal       L_FCL, γ = 2 (Sec. 4.2.2, App. A)           no            no      its classifier
asl         L_ASY, γ+ = 0, γ− = 3, m = 0.3 (App. A)     no            no      its classifier
==========  ==========================================  ============  ======  ==========

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

DDP: each rank's keys and labels are all-gathered (``torch.distributed.all_gather``, padded to
the largest shard) when ``training_step`` computes them, so every rank enqueues the same keys in
the same (rank) order and all queues stay identical (MoCo does the same); each rank's loss uses
its own shard as anchors. Every rank calls ``training_step`` the same number of times (the
loop's batching guarantees it), so the collective is matched.

Linear evaluation (stage 2, ``second_stage``), "As in SupCon the projection head is discarded to
evaluate the representation space" (App. A) and App. B "Discard the projection head h ...
f_θ.freeze() ∘ p_θ̃": the features are the frozen pooled encoder outputs f(x) (not z). "For each
label we trained logistics regression with learning rate in the set {1, 1e−1, 1e−2} and weight
decay in {1, 1e−1, 1e−2, 1e−4, 1e−6} for a number of 40 epochs. To eliminate sensitivity to
initialization, we trained 3 logistic regressions per label, and the output was computed as the
mean probability. For each label individually, the best parameters for the micro-F1 are kept."
(App. A), with AdamW (Sec. 4.3). ``fit_linear_probe`` trains all grid points × restarts × labels
at once on the features (computed once per epoch and reused across the grid), each logistic
regression with its own AdamW state (the update is elementwise, so one batched update is L·G·R
independent optimisers); bias without weight decay (App. A). Selection on the validation split:
per label (``probe_select: label``, the paper: the grid point with the best F1 of that label,
ties to the lower validation BCE), or one grid point for all labels by validation micro-F1
(``joint``). The chosen weights are buffers ``probe_weight`` [R, L, d] / ``probe_bias`` [R, L]
(saved with every checkpoint, invisible to the stage-1 optimiser); the score of label j is the
mean over the R restarts of σ(w·f(x) + b). Because the grid point is chosen on the validation
split, ``val/*`` of these losses is optimistic (as in the paper, which selects on validation and
reports test).

BCE-family losses: plain fine-tuning of a dropout + linear classifier on f(x); prediction σ of
its logits; no queue, momentum encoder or stage 2. "Fine-Tuning after Supervised Contrastive
Learning" (Sec. 5.2; App. A: "we discard the projection head and train a linear layer using BCE
... learning rate in {5e−5, 2e−5} and a number of epochs in {5, 10}") is a second sweep: set
``init_from`` to the directory of the best stage-1 checkpoint (its ``model.pt``) and ``loss: bce``.
Only the keys under ``encoder.`` are loaded (the head, momentum model, queue, prototypes and probe
are discarded), at the first ``training_step`` (``load_init``): a resumed trial restores its own
checkpoint instead (the ``init_loaded`` buffer is saved with it), and ``load_trained`` of a
fine-tuned checkpoint never needs the stage-1 file. Every DDP rank reads the file (shared storage).

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

import math
import os
import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contrasweep.errors import UserError
from trainables.base import Method
from trainables.evaluation.multilabel import combination_clustering, multilabel_metrics, threshold_predictions
from trainables.loop import MODEL_FILE
from trainables.losses.multilabel_bce import asymmetric_loss, bce_loss, focal_loss
from trainables.losses.multilabel_contrastive import bqproto_loss, jaccard_supcon_loss, msc_loss
from trainables.momentum_queue import EmbeddingQueue, momentum_copy, momentum_update
from trainables.params import Param

CONTRASTIVE = ("msc", "base", "bqueue", "bqproto")
BCE_FAMILY = ("bce", "focal", "asl")
WITH_QUEUE = ("msc", "bqueue", "bqproto")
WITH_PROTOTYPES = ("msc", "bqproto")


class MultiLabelContrastive(Method):
    name = "abalone"
    label_kind = "multi"
    metric_names = ("micro_f1", "macro_f1", "hamming_loss", "head_macro_f1", "tail_macro_f1")
    params = {
        "loss": Param("str", "msc", choices=(*CONTRASTIVE, *BCE_FAMILY),
                      help="msc = L_MSC (Eq. 1-5); base/bqueue/bqproto = Table 2 ablations (Sec. 3.1, 4.2.1); "
                           "bce/focal/asl = BCE-based baselines (Sec. 4.2.2)"),
        "temperature": Param("float", 0.1, 0.0, 10.0, low_open=True,
                             help="τ (Table 2 grid {0.07, 0.1, 0.2}; Sec. 5: 0.1 best, used for Table 3)"),
        "beta": Param("float", 0.1, 0.0, 1.0, low_open=True,
                      help="β, weight of non-prototype repulsion terms (Eq. 1; App. A: 0.1, not searched)"),
        "queue_size": Param("int", 512, 1, 10_000_000, help="K, the MoCo queue size (App. A: 512)"),
        "momentum": Param("float", 0.999, 0.0, 1.0, help="m of θ_k ← m·θ_k + (1 − m)·θ (App. A: 0.999)"),
        "proj_dim": Param("int", 256, 1, 65536, help="d, output size of the projection head (App. A: 256)"),
        "head_lr": Param("float", 5.0e-5, 0.0, 1.0, low_open=True,
                         help="learning rate of everything but the backbone (App. A: 5e-5)"),
        "classifier_dropout": Param("float", 0.1, 0.0, 1.0, high_open=True,
                                    help="dropout before the BCE-family classifier (App. A: dropout 0.1)"),
        "focal_gamma": Param("float", 2.0, 0.0, 100.0, help="γ of L_FCL (App. A: 2)"),
        "asl_gamma_pos": Param("float", 0.0, 0.0, 100.0, help="γ+ of L_ASY (App. A: 0)"),
        "asl_gamma_neg": Param("float", 3.0, 0.0, 100.0, help="γ− of L_ASY (App. A: 3)"),
        "asl_clip": Param("float", 0.3, 0.0, 1.0, high_open=True, help="m, hard threshold of L_ASY (App. A: 0.3)"),
        "threshold": Param("float", 0.5, 0.0, 1.0, low_open=True, high_open=True,
                           help="a label is predicted when its probability is >= threshold"),
        "probe_lrs": Param("floats", [1.0, 0.1, 0.01], 0.0, 100.0, low_open=True,
                           help="linear evaluation: AdamW learning rates searched (App. A: {1, 1e-1, 1e-2})"),
        "probe_weight_decays": Param("floats", [1.0, 0.1, 0.01, 1.0e-4, 1.0e-6], 0.0, 100.0,
                                     help="linear evaluation: weight decays searched (App. A: {1, 1e-1, 1e-2, 1e-4, 1e-6})"),
        "probe_epochs": Param("int", 40, 1, 100000, help="linear evaluation: epochs (App. A: 40)"),
        "probe_batch_size": Param("int", 32, 1, 1_000_000,
                                  help="linear evaluation: batch size (not given by the paper; Sec. 4.3's 32)"),
        "probe_restarts": Param("int", 3, 1, 100,
                                help="linear evaluation: logistic regressions per label, probabilities averaged (App. A: 3)"),
        "probe_select": Param("str", "label", choices=("label", "joint"),
                              help="grid point per label by its validation F1 (App. A) or one for all labels by micro-F1"),
        "cluster_keep_fraction": Param("float", 0.5, 0.0, 1.0, low_open=True,
                                       help="share of the label combinations (most frequent first) scored by Silhouette / "
                                            "Davies-Bouldin (Table 4: 50 %; App. D, Fig. 2 varies it)"),
        "cluster_max_points": Param("int", 10000, 2, 10_000_000,
                                    help="test embeddings scored by Silhouette / Davies-Bouldin (Table 4: 10^4)"),
        "init_from": Param("str", "", help="fine-tuning after contrastive learning (Sec. 5.2): a stage-1 checkpoint "
                                           "directory whose encoder.* weights start a bce/focal/asl run"),
    }

    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        self._check_combination(self.hp)
        loss, d = self.hp["loss"], encoder.hidden_size
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None  # keys of the last step, not yet enqueued
        if loss in CONTRASTIVE:
            self.projection = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, self.hp["proj_dim"]))
            if loss in WITH_PROTOTYPES:
                self.prototypes = nn.Parameter(F.normalize(torch.randn(num_labels, self.hp["proj_dim"]), dim=-1))
            if loss in WITH_QUEUE:
                self.momentum = nn.ModuleDict({"encoder": momentum_copy(encoder), "projection": momentum_copy(self.projection)})
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
        cls._check_combination(hp)
        init_from = hp.get("init_from", "")
        if init_from and not os.path.isfile(_model_file(init_from)):
            raise UserError(f"init_from={init_from!r}: no {MODEL_FILE} there; allowed: a checkpoint directory of a "
                            f"finished stage-1 trial (holding {MODEL_FILE}), or ''")

    @staticmethod
    def _check_combination(hp):
        loss = hp.get("loss", "msc")
        if hp.get("init_from", "") and loss not in BCE_FAMILY:
            raise UserError(f"init_from is set with loss={loss!r}; allowed: init_from with loss bce, focal or asl "
                            "(fine-tuning after contrastive learning, Sec. 5.2), or init_from ''")

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
            loss = self._bce_family(logits, y)
            return {"loss": loss, f"loss/{self.hp['loss']}": loss.detach()}
        self.flush()  # App. B steps 5-6 of the previous iteration (module docstring)
        z = self.projection(self.features(batch))
        queue_z = queue_y = None
        if hasattr(self, "queue"):
            with torch.no_grad():
                keys = self.momentum["projection"](self.momentum["encoder"](
                    batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))[0])
            self._pending = gather_from_ranks(keys.detach(), y.to(keys.dtype))
            queue_z, queue_y = self.queue.embeddings, self.queue.labels
        loss = self._contrastive(z, y, queue_z, queue_y)
        return {"loss": loss, f"loss/{self.hp['loss']}": loss.detach()}

    def _contrastive(self, z, y, queue_z, queue_y) -> torch.Tensor:
        tau, loss = self.hp["temperature"], self.hp["loss"]
        if loss == "base":
            return jaccard_supcon_loss(z, y, tau)
        if loss == "bqueue":
            return jaccard_supcon_loss(z, y, tau, queue_z=queue_z, queue_y=queue_y)
        if loss == "bqproto":
            return bqproto_loss(z, y, self.prototypes, tau, queue_z=queue_z, queue_y=queue_y)
        return msc_loss(z, y, tau, self.hp["beta"], prototypes=self.prototypes, queue_z=queue_z, queue_y=queue_y)

    def _bce_family(self, logits, y) -> torch.Tensor:
        if self.hp["loss"] == "bce":
            return bce_loss(logits, y)
        if self.hp["loss"] == "focal":
            return focal_loss(logits, y, self.hp["focal_gamma"])
        return asymmetric_loss(logits, y, self.hp["asl_gamma_pos"], self.hp["asl_gamma_neg"], self.hp["asl_clip"])

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
        path = _model_file(self.hp["init_from"])
        if not os.path.isfile(path):
            raise UserError(f"init_from={self.hp['init_from']!r}: no {MODEL_FILE} there; allowed: a stage-1 checkpoint directory")
        state = torch.load(path, map_location="cpu")
        encoder_state = {k[len("encoder."):]: v for k, v in state.items() if k.startswith("encoder.")}
        try:
            self.encoder.load_state_dict(encoder_state)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"init_from={self.hp['init_from']!r}: its encoder does not match this run's encoder "
                            f"({first}); allowed: a checkpoint trained with the same encoder.name") from None
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
            x_train, y_train, x_val, y_val, lrs=self.hp["probe_lrs"], weight_decays=self.hp["probe_weight_decays"],
            epochs=self.hp["probe_epochs"], batch_size=self.hp["probe_batch_size"], restarts=self.hp["probe_restarts"],
            threshold=self.hp["threshold"], select=self.hp["probe_select"], seed=_probe_seed(context.seed, context.epoch),
            device=self.probe_weight.device)
        self.probe_weight.copy_(fit["weight"])
        self.probe_bias.copy_(fit["bias"])
        metrics = {"train_loss": fit["train_loss"], "val_micro_f1": fit["val_micro_f1"], "grid_points": float(len(fit["grid"]))}
        names = _metric_names(_label_names(context, self.num_labels))
        for j, g in enumerate(fit["choice"]):
            metrics[f"lr/{names[j]}"], metrics[f"weight_decay/{names[j]}"] = fit["grid"][g]
        if self.hp["probe_select"] == "joint":
            metrics["lr"], metrics["weight_decay"] = fit["grid"][fit["choice"][0]]
        return _finite(metrics)

    def evaluate(self, context, split):
        x, y = self._split_features(context, split)
        with torch.no_grad():
            device = next(self.parameters()).device
            scores = self.scores(torch.as_tensor(x, dtype=torch.float32, device=device)).cpu().numpy()
        pred = threshold_predictions(scores, self.hp["threshold"])
        label_names = _label_names(context, self.num_labels)
        out = multilabel_metrics(y, pred, label_names=label_names, train_counts=train_label_counts(context))
        metrics = {k: out[k] for k in self.metric_names if k in out}
        for name, key in zip(label_names, _metric_names(label_names)):
            metrics[f"f1/{key}"] = out["per_label_f1"][name]
        if split == "test":
            clusters = combination_clustering(x, y, keep_fraction=self.hp["cluster_keep_fraction"],
                                              max_points=self.hp["cluster_max_points"], seed=context.seed)
            metrics["silhouette"], metrics["davies_bouldin"] = clusters["silhouette"], clusters["davies_bouldin"]
        return _finite(metrics)


# ---------------------------------------------------------------------- linear evaluation


def fit_linear_probe(x_train, y_train, x_val, y_val, lrs, weight_decays, epochs: int = 40, batch_size: int = 32,
                     restarts: int = 3, threshold: float = 0.5, select: str = "label", seed: int = 0,
                     device: torch.device | str = "cpu", betas=(0.9, 0.999), eps: float = 1e-8) -> dict:
    """One logistic regression per label, per (lr, weight decay) grid point and per restart,
    trained with AdamW on frozen features, then chosen on the validation split (App. A).

    Every regression has its own parameters and AdamW moments; they are updated together in one
    batched (elementwise) step, which is the same as training each alone: the BCE of one label
    and grid point depends only on its own weights. Weight decay is decoupled (AdamW:
    w ← w − lr·wd·w) and not applied to the bias. Init: U(−1/√d, 1/√d) like ``nn.Linear``,
    from ``torch.Generator`` seeded with ``seed`` (the row order of each epoch too), so the fit is
    a function of its inputs (the same on every DDP rank).

    Selection: a label's score is the mean probability of its ``restarts`` regressions;
    ``select="label"`` takes, for each label, the grid point with the best validation F1 of that
    label, ``"joint"`` one grid point for all labels with the best validation micro-F1; ties go
    to the lower validation BCE, then to the earlier grid point (lrs outer, weight decays inner).

    Returns ``weight`` [R, L, d], ``bias`` [R, L], ``grid`` [(lr, wd)], ``choice`` (a grid index
    per label), ``val_micro_f1`` of the chosen probe, ``train_loss`` (its mean BCE on train).
    """
    if select not in ("label", "joint"):
        raise ValueError(f"select={select!r}; allowed: 'label' or 'joint'")
    grid = [(float(lr), float(wd)) for lr in lrs for wd in weight_decays]
    if not grid:
        raise ValueError("empty probe grid; allowed: at least one learning rate and one weight decay")
    x = torch.as_tensor(np.asarray(x_train), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.asarray(y_train), dtype=torch.float32, device=device)
    n, d = x.shape
    n_labels, g, r = y.shape[1], len(grid), restarts
    p = g * r * n_labels                                     # flat index = ((grid · R) + restart) · L + label
    gen = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / math.sqrt(d)
    w = ((torch.rand(p, d, generator=gen) * 2 - 1) * bound).to(device)
    b = ((torch.rand(p, generator=gen) * 2 - 1) * bound).to(device)
    lr = torch.tensor([lr for lr, _ in grid], device=device).repeat_interleave(r * n_labels)        # [P]
    wd = torch.tensor([wd for _, wd in grid], device=device).repeat_interleave(r * n_labels)
    label_of = torch.arange(p, device=device) % n_labels                                           # [P]
    state = [torch.zeros_like(w), torch.zeros_like(w), torch.zeros_like(b), torch.zeros_like(b)]
    step = 0
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen).to(device)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            xb, yb = x[idx], y[idx][:, label_of]                                                  # [B, d], [B, P]
            err = (torch.sigmoid(xb @ w.T + b) - yb) / len(idx)     # ∂(mean BCE)/∂logit
            step += 1
            _adamw(w, err.T @ xb, state[0], state[1], lr[:, None], wd[:, None], step, betas, eps)
            _adamw(b, err.sum(0), state[2], state[3], lr, None, step, betas, eps)

    def mean_prob(features: torch.Tensor) -> torch.Tensor:          # [N, G, L]: mean over restarts
        return torch.sigmoid(features @ w.T + b).view(len(features), g, r, n_labels).mean(2)

    tp, fp, fn, val_loss = (torch.zeros(g, n_labels, dtype=torch.float64, device=device) for _ in range(4))
    xv = torch.as_tensor(np.asarray(x_val), dtype=torch.float32, device=device)
    yv = torch.as_tensor(np.asarray(y_val), dtype=torch.float32, device=device)
    for start in range(0, len(xv), 1024):
        prob = mean_prob(xv[start : start + 1024])
        truth = yv[start : start + 1024][:, None, :].expand_as(prob)
        hit = prob >= threshold
        tp += (hit & (truth > 0)).sum(0)
        fp += (hit & (truth == 0)).sum(0)
        fn += (~hit & (truth > 0)).sum(0)
        val_loss += F.binary_cross_entropy(prob.double(), truth.double(), reduction="none").sum(0)
    if select == "label":
        f1 = _f1(tp, fp, fn)                                                                        # [G, L]
        best = torch.where(f1 == f1.max(0).values, val_loss, torch.inf).argmin(0)                  # [L]
    else:
        micro = _f1(tp.sum(1), fp.sum(1), fn.sum(1))                                                # [G]
        best = torch.where(micro == micro.max(), val_loss.sum(1), torch.inf).argmin().repeat(n_labels)
    labels = torch.arange(n_labels, device=device)
    weight = w.view(g, r, n_labels, d)[best, :, labels, :].permute(1, 0, 2).contiguous()          # [R, L, d]
    bias = b.view(g, r, n_labels)[best, :, labels].T.contiguous()                                  # [R, L]
    val_micro = _f1(tp[best, labels].sum(), fp[best, labels].sum(), fn[best, labels].sum())
    train_loss = 0.0
    for start in range(0, n, 1024):
        prob = torch.sigmoid(torch.einsum("nd,rld->nrl", x[start : start + 1024], weight) + bias).mean(1)
        train_loss += float(F.binary_cross_entropy(prob.double(), y[start : start + 1024].double(), reduction="sum"))
    return {"weight": weight, "bias": bias, "grid": grid, "choice": best.tolist(), "val_micro_f1": float(val_micro),
            "train_loss": train_loss / max(n * n_labels, 1)}


def _adamw(param, grad, exp_avg, exp_avg_sq, lr, weight_decay, step, betas, eps) -> None:
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments), with a
    learning rate (and weight decay) per parameter row."""
    beta1, beta2 = betas
    if weight_decay is not None:
        param.mul_(1 - lr * weight_decay)
    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = (exp_avg_sq / (1 - beta2**step)).sqrt_().add_(eps)
    param.sub_(lr / (1 - beta1**step) * exp_avg / denom)


def _f1(tp, fp, fn):
    """2·tp / (2·tp + fp + fn), 0 where nothing is predicted or present (zero_division=0)."""
    den = 2 * tp + fp + fn
    return torch.where(den > 0, 2 * tp / den.clamp_min(1), torch.zeros_like(den))


def _probe_seed(seed: int, epoch: int) -> int:
    return (int(seed) * 1_000_003 + int(epoch)) % 2**63


# ---------------------------------------------------------------------- helpers


def gather_from_ranks(z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every rank's ``z`` [n_r, d] and ``y`` [n_r, L] concatenated in rank order (identity
    without an initialised process group). Shards may differ in size (the last batch): they
    are padded to the largest before ``all_gather`` and trimmed after."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return z, y
    world = dist.get_world_size()
    size = torch.tensor([z.shape[0]], device=z.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    cap = int(max(int(s) for s in sizes))
    both = torch.cat([z, y.to(z.dtype)], dim=1)
    padded = torch.cat([both, both.new_zeros(cap - both.shape[0], both.shape[1])])
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    out = torch.cat([part[: int(s)] for part, s in zip(parts, sizes)])
    return out[:, : z.shape[1]], out[:, z.shape[1]:]


def train_label_counts(context) -> np.ndarray:
    """Documents per label in the training split (defines head and tail), once per epoch."""
    key = "abalone/train_counts"
    if key not in context.cache:
        import pyarrow.compute as pc

        column = context.tables["train"].column("labels")
        width = column.type.list_size
        context.cache[key] = pc.list_flatten(column).to_numpy().astype(np.int64).reshape(-1, width).sum(0)
    return context.cache[key]


def _label_names(context, num_labels: int) -> list[str]:
    names = (context.data or {}).get("label_names")
    return [str(n) for n in names] if names is not None and len(names) == num_labels else [str(j) for j in range(num_labels)]


def _metric_names(names: list[str]) -> list[str]:
    """Label names usable in a metric key (MLflow: letters, digits, ``_ - .``), unique."""
    out = []
    for j, name in enumerate(names):
        key = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or str(j)
        out.append(key if key not in out else f"{j}_{key}")
    return out


def _finite(metrics: dict) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


def _model_file(path: str) -> str:
    path = os.path.expanduser(path)
    return path if os.path.isfile(path) else os.path.join(path, MODEL_FILE)
