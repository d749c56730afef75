"""A tiny random BERT and learnable toy tables, built without the data pipeline or a download:
what ``contrasweep check-method`` (``trainables.contract``) trains a method on, and the test
suite's fixtures (``tests/conftest.py``, ``tests/helpers.py``).

May import: transformers, huggingface_hub (its progress bars' switch), torch, numpy, pyarrow,
``trainables.encoder_names`` (the bundled MiniLM's tokenizer).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

MULTI_LABELS = ["alpha", "beta", "gamma"]


def build_tiny_bert(directory: Path, hidden_size: int = 32) -> Path:
    """Save a 2-layer BERT, ``hidden_size`` wide, with random weights (seed 0) and the MiniLM
    tokenizer, without transformers' "Writing model shards" bar (a console that builds it, as
    ``check-method`` and a run's check of a user's method do, prints its own lines only)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from trainables.encoder_names import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("default"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    with quiet_progress():
        BertModel(config).save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    return Path(directory)


@contextmanager
def quiet_progress():
    """transformers' (and the Hugging Face hub's) progress bars off inside, as they were after
    (their public switches: ``transformers.utils.logging.disable_progress_bar``)."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars
    from transformers.utils import logging as hf_logging

    shown, hub_hidden = hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
            if hub_hidden:
                disable_progress_bars()


def _table(tokenizer, texts: list[str], labels) -> pa.Table:
    enc = tokenizer(texts, truncation=True, max_length=16)
    return pa.table(
        {
            "input_ids": pa.array(enc["input_ids"], type=pa.list_(pa.int32())),
            "token_type_ids": pa.array(enc["token_type_ids"], type=pa.list_(pa.int32())),
            "labels": labels,
        }
    )


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
        return _table(tok, texts, pa.array(labels, type=pa.int64()))

    return {"tables": {"train": split(n_per_class), "validation": split(8), "test": split(8)}, "num_labels": 2}


def multilabel_tables(tokenizer_dir: str, seed: int = 0) -> dict:
    """Three long-tailed labels, each marked by its word among random filler; multi-hot labels
    stored as fixed-size lists (the layout of contrasweep.data.multilabel.prepare)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    rng = np.random.default_rng(seed)
    filler = ["the", "a", "news", "report", "was", "very", "today", "story", "said", "really"]

    def split(n):
        texts, hot = [], np.zeros((n, len(MULTI_LABELS)), dtype=np.int8)
        for i in range(n):
            hot[i] = rng.random(len(MULTI_LABELS)) < [0.7, 0.4, 0.2]
            if not hot[i].any():
                hot[i, 0] = 1
            words = list(rng.choice(filler, size=5)) + [w for w, on in zip(MULTI_LABELS, hot[i]) if on]
            rng.shuffle(words)
            texts.append(" ".join(words))
        labels = pa.FixedSizeListArray.from_arrays(pa.array(hot.reshape(-1), type=pa.int8()), len(MULTI_LABELS))
        return _table(tok, texts, labels)

    return {
        "tables": {"train": split(48), "validation": split(16), "test": split(24)},
        "num_labels": len(MULTI_LABELS),
        "label_names": MULTI_LABELS,
    }
