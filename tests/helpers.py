"""Test helpers: learnable toy tables built without the data pipeline; racing's equal configurations."""

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
