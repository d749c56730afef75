"""Semantic textual similarity pairs for judging sentence representations (vascl.txt Sec. 4.1,
4.2.1: Spearman correlation between the cosine similarity of the two sentences' embeddings and
the gold score, all pairs together).

A source is a local ``.csv`` / ``.jsonl`` / ``.json`` / ``.parquet`` file with columns
``sentence1``, ``sentence2``, ``score``, or ``hub:NAME[:CONFIG]`` (e.g. ``hub:mteb/stsbenchmark-sts``)
when the Hugging Face hub is reachable (its validation split, else test, else train). Both
sides are tokenised once on the driver, like the classification data, and travel with it.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pyarrow as pa

from contrasweep.data.config import FILE_SUFFIXES, HUB_PREFIX
from contrasweep.data.sources import load_hub, read_file
from contrasweep.data.tokens import tokenize_splits
from contrasweep.errors import DataError

COLUMNS = ("sentence1", "sentence2", "score")
ALLOWED = f"a .csv/.jsonl/.json/.parquet file with columns {', '.join(COLUMNS)}, or hub:NAME[:CONFIG]"


def check_source(source) -> str:
    """The source as given, if it can be one; else a one-line DataError (no reading yet)."""
    if not isinstance(source, str) or not source:
        raise DataError(f"evaluation.sts={source!r} is not allowed; allowed: {ALLOWED}")
    if source.startswith(HUB_PREFIX):
        return source
    if not source.lower().endswith(FILE_SUFFIXES):
        raise DataError(f"evaluation.sts={source!r} is not allowed; allowed: {ALLOWED}")
    if not os.path.isfile(source):
        raise DataError(f"evaluation.sts file {source!r} does not exist; allowed: {ALLOWED}")
    return source


def load_pairs(source: str) -> pa.Table:
    """The pairs as a table (sentence1: string, sentence2: string, score: float64)."""
    check_source(source)
    if source.startswith(HUB_PREFIX):
        name, _, config = source[len(HUB_PREFIX) :].partition(":")
        dd = load_hub(name, config or None)
        split = next(s for s in ("validation", "test", "train", *dd) if s in dd)
        table = dd[split].with_format("arrow")[:]
    else:
        table = read_file(source, ["sentence1", "sentence2"])
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise DataError(
            f"evaluation.sts {source!r} has no column {missing[0]!r} (it has {', '.join(table.column_names)}); "
            f"allowed: {ALLOWED}"
        )
    try:
        scores = table.column("score").cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise DataError(
            f"evaluation.sts {source!r}: column 'score' is not numeric; allowed: numbers such as 0-5"
        ) from None
    table = pa.table(
        {
            "sentence1": table.column("sentence1").cast(pa.string()),
            "sentence2": table.column("sentence2").cast(pa.string()),
            "score": scores,
        }
    )
    table = table.drop_null()  # incomplete pairs carry no signal
    if table.num_rows < 2:
        raise DataError(f"evaluation.sts {source!r} has {table.num_rows} complete pairs; allowed: at least 2")
    return table


def prepare_sts(source: str, tokenizer: str, max_length: int) -> dict:
    """``{"a": table, "b": table, "scores": float64 [N]}``: each side tokenised like a split
    (``labels`` holds the pair's row index, so gathered embeddings line up with ``scores``)."""
    from trainables.encoder import load_tokenizer  # transformers: only where pairs are tokenised

    pairs = load_pairs(source)
    index = pa.array(np.arange(pairs.num_rows, dtype=np.int64))
    sides = {
        "a": pa.table({"text": pairs.column("sentence1"), "label": index}),
        "b": pa.table({"text": pairs.column("sentence2"), "label": index}),
    }
    fingerprint = hashlib.sha256(f"sts:{source}:{tokenizer}:{max_length}:{pairs.num_rows}".encode()).hexdigest()
    tokenised = tokenize_splits(sides, load_tokenizer(tokenizer), max_length, False, fingerprint)
    out = {side: tokenised[side].with_format("arrow")[:] for side in sides}
    out["scores"] = pairs.column("score").to_numpy()
    return out
