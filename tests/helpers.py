"""Test helpers: learnable toy tables built without the data pipeline."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def toy_tables(tokenizer_dir: str, n_per_class: int = 24, seed: int = 0) -> dict:
    """Two classes decided by one word ('good'/'bad') among random filler words."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    rng = np.random.default_rng(seed)
    filler = ["the", "a", "movie", "plot", "was", "very", "actor", "scene", "story", "really"]

    def split(n):
        texts, labels = [], []
        for label, word in enumerate(["bad", "good"]):
            for _ in range(n):
                words = list(rng.choice(filler, size=5)) + [word]
                rng.shuffle(words)
                texts.append(" ".join(words))
                labels.append(label)
        enc = tok(texts, truncation=True, max_length=16)
        return pa.table({
            "input_ids": pa.array(enc["input_ids"], type=pa.list_(pa.int32())),
            "token_type_ids": pa.array(enc["token_type_ids"], type=pa.list_(pa.int32())),
            "labels": pa.array(labels, type=pa.int64()),
        })

    return {"tables": {"train": split(n_per_class), "validation": split(8), "test": split(8)}, "num_labels": 2}


def loop_config(model_dir: str, **hp) -> dict:
    base = {"lr": 1e-3, "batch_size": 8, "epochs": 3, "warmup_ratio": 0.0, "seed": 0, "eval_batch_size": 32}
    base.update(hp)
    return {"method": "ce", "encoder": {"name": model_dir, "pooling": "mean"}, "hp": base,
            "metric": "val/accuracy", "mode": "max", "num_labels": 2}


LABELS = ["alpha", "beta", "gamma"]


def multilabel_tables(tokenizer_dir: str, seed: int = 0) -> dict:
    """Three long-tailed labels, each marked by its word among random filler; multi-hot labels
    stored as fixed-size lists (the layout of contrasweep.data.multilabel.prepare)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    rng = np.random.default_rng(seed)
    filler = ["the", "a", "news", "report", "was", "very", "today", "story", "said", "really"]

    def split(n):
        texts, hot = [], np.zeros((n, len(LABELS)), dtype=np.int8)
        for i in range(n):
            hot[i] = rng.random(len(LABELS)) < [0.7, 0.4, 0.2]
            if not hot[i].any():
                hot[i, 0] = 1
            words = list(rng.choice(filler, size=5)) + [w for w, on in zip(LABELS, hot[i]) if on]
            rng.shuffle(words)
            texts.append(" ".join(words))
        enc = tok(texts, truncation=True, max_length=16)
        return pa.table({
            "input_ids": pa.array(enc["input_ids"], type=pa.list_(pa.int32())),
            "token_type_ids": pa.array(enc["token_type_ids"], type=pa.list_(pa.int32())),
            "labels": pa.FixedSizeListArray.from_arrays(pa.array(hot.reshape(-1), type=pa.int8()), len(LABELS)),
        })

    return {"tables": {"train": split(48), "validation": split(16), "test": split(24)}, "num_labels": len(LABELS),
            "label_names": LABELS}
