"""Outputs of a function over a whole split, computed in eval mode and gathered over DDP ranks,
so that every rank ends up with the same arrays in row order (evaluation, frozen features)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trainables.batches import eval_batches, to_device
from trainables.metrics import classification_metrics


@torch.no_grad()
def split_outputs(
    method, table, batch_size: int, session, fn: Callable[[dict], torch.Tensor]
) -> tuple[np.ndarray, np.ndarray]:
    """``fn(batch)`` over every row of ``table`` -> (outputs ``[N, ...]``, labels ``[N]``).

    Each rank computes a strided share; the shares are gathered and put back in row order.
    The method is in eval mode meanwhile (no dropout) and back in its previous mode afterwards.
    """
    was_training = method.training
    method.eval()
    rows, outs, labels = [], [], []
    for idx, batch in eval_batches(table, batch_size, session.rank, session.world_size):
        batch = to_device(batch, session.device)
        outs.append(fn(batch).float().cpu().numpy())
        labels.append(batch["labels"].cpu().numpy())
        rows.append(idx)
    method.train(was_training)
    local = [np.concatenate(x) if x else None for x in (rows, outs, labels)]
    gathered = [g for g in session.all_gather(local) if g[0] is not None]
    if not gathered:
        return np.zeros((0,)), np.zeros((0,), dtype=np.int64)
    order = np.concatenate([g[0] for g in gathered])
    _, first = np.unique(order, return_index=True)  # sorted row ids, first occurrence each
    return np.concatenate([g[1] for g in gathered])[first], np.concatenate([g[2] for g in gathered])[first]


def classification_evaluate(method, table, num_labels: int, batch_size: int, session) -> dict[str, float]:
    """Metrics of ``method.predict`` on a split (every rank gets the numbers of the whole split)."""
    y_pred, y_true = split_outputs(method, table, batch_size, session, lambda b: method.predict(b).argmax(-1))
    return classification_metrics(y_true, y_pred.astype(np.int64), num_labels)


@dataclass
class StageContext:
    """One epoch's view of the trial for a method's ``second_stage`` and ``evaluate``: the
    splits, the batch size for frozen-feature passes, the session (device, ranks, all_gather),
    the trial seed, the epoch, the whole data payload (extra evaluation data such as STS
    pairs under ``data["sts"]``), and a cache that lives for this epoch only (e.g. frozen
    embeddings computed once and reused by the validation and the test evaluation)."""

    tables: dict[str, Any]
    num_labels: int
    eval_batch_size: int
    session: Any
    seed: int
    epoch: int
    data: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)

    def outputs(self, method, split: str, fn: Callable[[dict], torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
        return split_outputs(method, self.tables[split], self.eval_batch_size, self.session, fn)
