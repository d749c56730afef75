"""Unsupervised sentence-representation methods (SimCSE, VaSCL; vascl.txt Sec. 3-4): the base
class every such method shares. Labels never reach ``training_step``; they are used only to
judge the frozen representation e = pooled encoder output, the way vascl.txt Sec. 4.2.1 does:

* short-text clustering: K-means on e with K = number of classes, clustering accuracy through
  the Hungarian algorithm averaged over ``eval_kmeans_runs`` runs, plus NMI (Table 2 protocol);
* few-shot probe: a linear softmax layer on frozen e, k ∈ {5, 10, 20} per class, 5 fixed splits,
  lr 1e-4, batch 32, 1000 iterations, validation every 100, accuracy at the best validation
  checkpoint (Table 3 protocol; ``trainables.evaluation.probe``).

Split roles, so that validation metrics never see test rows: for ``val/*`` the probe samples
its k + k examples per class from the training split and is scored on the validation split;
for ``test/*`` (the best validation epoch) it samples from training ∪ validation — "we merge
the training and validation sets" (Sec. 4.2.1) — and is scored on the test split. Clustering
runs on the split itself. Embeddings are computed once per split and context and reused by
every K-means run, probe split and k (``StageContext.cache``). The probes of all splits and
every k are trained together as one batched computation on the trial's device
(``context.session.device``: the GPU when the trial has one; ``few_shot_probe``), K-means runs
on CPU (scikit-learn, one seeded k-means++ init per run).

* STS (when the spec gives ``evaluation.sts``): Spearman correlation between the cosine of the
  two sentences' e and the gold score (Sec. 4.2.1, Table 1 protocol), reported with the
  validation metrics as ``val/sts_spearman`` (one set of pairs: it is not a test metric).
"""

from __future__ import annotations

import numpy as np
import torch

from trainables.base import Method
from trainables.evaluation import few_shot_probe, kmeans_scores, sts_spearman
from trainables.gather import split_outputs
from trainables.methods.declarations import DECLARATIONS, PROBE_KS, REPRESENTATION, REPRESENTATION_METRICS


class RepresentationMethod(Method):
    metric_names = REPRESENTATION_METRICS
    sts_metric_names = ("sts_spearman",)
    params = REPRESENTATION  # trainables.methods.declarations
    serving_output = DECLARATIONS["simcse"].serving_output  # e, as evaluated

    def instance_embeddings(self, batch) -> torch.Tensor:
        return self.representation(batch)

    def representation(self, batch) -> torch.Tensor:
        """e: what is evaluated (the pooled encoder output; heads are for training only)."""
        return self.encode(batch)[0]

    @torch.no_grad()
    def predict(self, batch):
        raise NotImplementedError(f"{self.name} learns representations; it is judged by evaluate(), not predict()")

    def embeddings(self, context, split: str) -> tuple[np.ndarray, np.ndarray]:
        key = ("embeddings", split)
        if key not in context.cache:
            context.cache[key] = context.outputs(self, split, self.representation)
        return context.cache[key]

    def evaluate(self, context, split: str) -> dict[str, float]:
        x, y = self.embeddings(context, split)
        metrics = kmeans_scores(x, y, n_clusters=context.num_labels, seeds=range(self.hp["eval_kmeans_runs"]))
        if self.hp["probe_splits"] > 0:
            pool = ["train"] if split == "validation" else ["train", "validation"]
            parts = [self.embeddings(context, s) for s in pool]
            pool_x, pool_y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
            metrics.update(
                few_shot_probe(
                    pool_x,
                    pool_y,
                    x,
                    y,
                    context.num_labels,
                    ks=PROBE_KS,
                    n_splits=self.hp["probe_splits"],
                    seed=0,
                    lr=self.hp["probe_lr"],
                    iterations=self.hp["probe_iterations"],
                    device=context.session.device,
                )
            )
        sts = context.data.get("sts")
        if sts is not None and split == "validation":
            metrics["sts_spearman"] = self.sts_score(context, sts)
        return metrics

    def sts_score(self, context, sts: dict) -> float:
        """Spearman correlation of cosine(e(sentence1), e(sentence2)) with the gold scores
        (Sec. 4.2.1, footnote 3: all pairs at once)."""
        a, rows = split_outputs(self, sts["a"], context.eval_batch_size, context.session, self.representation)
        b, _ = split_outputs(self, sts["b"], context.eval_batch_size, context.session, self.representation)
        return float(sts_spearman(a, b, sts["scores"][rows]))
