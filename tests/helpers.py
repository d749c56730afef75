"""Test helpers: learnable toy tables built without the data pipeline; racing's equal configurations;
the source of a user's method file (``method_source``)."""

from __future__ import annotations

import numpy as np

from trainables.toy import MULTI_LABELS, multilabel_tables, toy_tables  # noqa: F401  (the tests' names)


def loop_config(model_dir: str, **hp) -> dict:
    base = {"lr": 1e-3, "batch_size": 8, "epochs": 3, "warmup_ratio": 0.0, "seed": 0, "eval_batch_size": 32}
    base.update(hp)
    return {"method": "ce", "encoder": {"name": model_dir, "pooling": "mean"}, "hp": base,
            "metric": "val/accuracy", "mode": "max", "num_labels": 2}


LABELS = MULTI_LABELS


def equal_rounds(k: int, rounds: int, rng, repeats: int = 3) -> np.ndarray:
    """``rounds`` × ``k`` configurations × ``repeats`` values: every configuration in truth the
    same (normal noise, plus a shared per-repeat effect: the matched repeats' seed)."""
    return rng.normal(size=(rounds, k, repeats)) + rng.normal(size=(rounds, 1, repeats))


CE_STEP = '{"loss": F.cross_entropy(self.classifier(self.encode(batch)[0]), batch["labels"])}'


def method_source(name: str, params: str, step: str = CE_STEP) -> str:
    """A user's method file: class ``name`` (a linear head on the pooled encoder) with
    ``params`` (the dict's source) whose ``training_step`` returns ``step`` (its source)."""
    return f"""
import torch
import torch.nn.functional as F
from torch import nn
from trainables.base import Method
from trainables.params import Param

class {name}(Method):
    params = {params}
    def __init__(self, encoder, num_labels, hp):
        super().__init__(encoder, num_labels, hp)
        self.classifier = nn.Linear(encoder.hidden_size, num_labels)
    def training_step(self, batch):
        return {step}
    @torch.no_grad()
    def predict(self, batch):
        return self.classifier(self.encode(batch)[0])
"""
