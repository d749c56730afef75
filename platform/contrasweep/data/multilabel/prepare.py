"""Multi-label data for a sweep (abalone_multilabel.txt Sec. 4.1): ``data: {task: multilabel,
...}`` → source → seeded split → label filtering → tokenise once → content-hashed Arrow cache.

Sources: ``bbc_multilabel`` (the derived long-tailed corpus of ``bbc.bbc_multilabel``,
not a published benchmark), a local CSV/JSONL/JSON/parquet file read by
``read.read_multilabel`` (a list-valued label column, or one 0/1 column per label), or
``hub:NAME[:CONFIG]`` when the Hugging Face hub is reachable (``hub``: the same two
layouts; the dataset's own splits are kept, missing ones carved out of train).
The prepared splits store ``labels`` as a fixed-size list of L 0/1 values per row, which
``collate_numpy`` turns into a ``[B, L]`` multi-hot batch. The label statistics of the
training split (frequencies, head/tail, combinations) are kept with the cache entry and
logged with the sweep.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from contrasweep.data.cache import FORMAT_VERSION, cache_key, cache_root, read_marker, write_entry
from contrasweep.data.config import FILE_SUFFIXES, HUB_PREFIX, check_hub_source
from contrasweep.data.corpora import corpus_fingerprint
from contrasweep.data.multilabel.bbc import BBC_N_DOCS, bbc_multilabel
from contrasweep.data.multilabel.filtering import filter_labels
from contrasweep.data.multilabel.hub import hub_multilabel
from contrasweep.data.multilabel.labels import multi_hot
from contrasweep.data.multilabel.read import read_multilabel
from contrasweep.data.multilabel.split import split_multilabel
from contrasweep.data.multilabel.statistics import label_statistics
from contrasweep.data.prepare import SPLITS, PreparedData, _check_max_length
from contrasweep.data.sources import HubSource
from contrasweep.data.tokens import tokenize_splits, tokenizer_identity
from contrasweep.errors import DataError

TASK = "multilabel"
BUNDLED_MULTILABEL = "bbc_multilabel"
KEYS = (
    "task",
    "source",
    "text",
    "label",
    "label_columns",
    "min_label_count",
    "drop_empty",
    "validation_fraction",
    "test_fraction",
    "split_seed",
    "n_docs",
    "seed",
)


def is_multilabel(section: Mapping[str, Any]) -> bool:
    return isinstance(section, Mapping) and section.get("task") == TASK


@dataclass(frozen=True)
class MultiLabelConfig:
    source: str
    text: str = "text"
    label: str = "labels"
    label_columns: tuple[str, ...] | str | None = None  # 0/1 columns, "auto", or None (a list column)
    min_label_count: int = 1  # Sec. 4.1 keeps labels seen >= 30 times in train (RCV1-v2)
    drop_empty: bool = False
    validation_fraction: float = 0.1
    test_fraction: float = 0.2
    split_seed: int = 0
    n_docs: int = BBC_N_DOCS  # bbc_multilabel only
    seed: int = 0  # bbc_multilabel only: the corpus recipe's seed

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MultiLabelConfig:
        unknown = sorted(str(k) for k in d if k not in KEYS)
        if unknown:
            raise DataError(f"unknown data key(s) {', '.join(unknown)} for task multilabel; allowed: {', '.join(KEYS)}")
        source = d.get("source")
        if isinstance(source, str) and source.startswith(HUB_PREFIX):
            check_hub_source(source)
        elif source != BUNDLED_MULTILABEL:
            if not isinstance(source, str) or not source.lower().endswith(FILE_SUFFIXES):
                raise DataError(
                    f"data.source {source!r} is not allowed for task multilabel; allowed: "
                    f"{BUNDLED_MULTILABEL}, hub:NAME[:CONFIG] or a local {'/'.join(FILE_SUFFIXES)} file"
                )
            source = os.path.abspath(os.path.expanduser(source))
            if not os.path.isfile(source):
                raise DataError(f"data.source: file not found: {source}")
        columns = d.get("label_columns")
        if columns is not None and columns != "auto":
            if not isinstance(columns, (list, tuple)) or not columns or not all(isinstance(c, str) for c in columns):
                raise DataError(
                    f"data.label_columns={columns!r} is not allowed; allowed: a list of 0/1 column names or 'auto'"
                )
            columns = tuple(columns)
        out = cls(
            source=source,
            text=_name(d, "text", "text"),
            label=_name(d, "label", "labels"),
            label_columns=columns,
            min_label_count=_int(d, "min_label_count", 1, 1),
            drop_empty=_bool(d, "drop_empty", False),
            validation_fraction=_fraction(d, "validation_fraction", 0.1),
            test_fraction=_fraction(d, "test_fraction", 0.2),
            split_seed=_int(d, "split_seed", 0, 0),
            n_docs=_int(d, "n_docs", BBC_N_DOCS, 10),
            seed=_int(d, "seed", 0, 0),
        )
        if out.validation_fraction + out.test_fraction >= 1.0:
            raise DataError("data.validation_fraction + data.test_fraction must be below 1; allowed: e.g. 0.1 and 0.2")
        return out

    def key_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("source")  # its content is hashed instead
        out["label_columns"] = (
            list(out["label_columns"]) if isinstance(out["label_columns"], tuple) else out["label_columns"]
        )
        if self.source != BUNDLED_MULTILABEL:
            out.pop("n_docs"), out.pop("seed")
        return out


def prepare_multilabel(
    cfg: MultiLabelConfig, tokenizer: str = "default", max_length: int = 128, cache_dir: str | None = None
) -> PreparedData:
    max_length = _check_max_length(max_length)
    hub = (
        HubSource(cfg.source, (BUNDLED_MULTILABEL,)) if cfg.source.startswith(HUB_PREFIX) else None
    )  # one download for both uses
    fingerprint = hub.fingerprint() if hub else _fingerprint(cfg)
    key = cache_key(fingerprint, {"task": TASK, **cfg.key_dict()}, _tokenizer_identity(tokenizer), max_length)
    final = cache_root(cache_dir) / key
    meta = read_marker(final)
    if meta is None:
        splits, names, stats = _splits(cfg, hub)
        from trainables.encoder import load_tokenizer  # transformers: only on a cache miss

        tokenised = _tokenise(splits, names, load_tokenizer(tokenizer), max_length, key)
        meta = {
            "format": FORMAT_VERSION,
            "task": TASK,
            "label_names": names,
            "stats": stats,
            "is_pair": False,
            "config": {**cfg.key_dict(), "source": cfg.source},
            "tokenizer": str(tokenizer),
            "max_length": max_length,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        final = write_entry(final.parent, key, tokenised, meta)
        hit = False
    else:
        hit = True
    names = list(meta["label_names"])
    return PreparedData(
        path=str(final),
        label_names=names,
        num_labels=len(names),
        key=key,
        cache_hit=hit,
        stats=meta["stats"],
        is_pair=False,
    )


def _splits(cfg: MultiLabelConfig, hub: HubSource | None):
    columns = list(cfg.label_columns) if isinstance(cfg.label_columns, tuple) else cfg.label_columns
    if hub is not None:
        splits, names = hub_multilabel(
            hub, cfg.text, cfg.label, columns, cfg.validation_fraction, cfg.test_fraction, cfg.split_seed
        )
    else:
        if cfg.source == BUNDLED_MULTILABEL:
            table, names, _ = bbc_multilabel(seed=cfg.seed, n_docs=cfg.n_docs)
        else:
            table, names = read_multilabel(cfg.source, text=cfg.text, label=cfg.label, label_columns=columns)
        splits = split_multilabel(
            table, cfg.validation_fraction, cfg.test_fraction, cfg.split_seed, num_labels=len(names)
        )
    kept = filter_labels(splits, names, cfg.min_label_count, count_split="train", drop_empty=cfg.drop_empty)
    splits, names = kept.data, kept.label_names
    stats: dict[str, Any] = {
        split: {"n": splits[split].num_rows, **label_statistics(splits[split]["labels"], names)} for split in SPLITS
    }
    stats["removed_labels"] = kept.removed
    for split in SPLITS:
        if splits[split].num_rows == 0:
            raise DataError(
                f"split {split} would be empty ({splits['train'].num_rows} train rows); allowed: more documents "
                "or larger validation_fraction/test_fraction"
            )
    return splits, names, stats


def _tokenise(splits: dict[str, pa.Table], names: list[str], tokenizer, max_length: int, key: str):
    """Tokenise the text (through the single-label tokeniser, with the row index standing in
    for the label), then store the labels as a fixed-size multi-hot list per row."""
    from datasets import Dataset, DatasetDict

    plain = {
        s: pa.table({"text": t["text"], "label": pa.array(np.arange(t.num_rows, dtype=np.int64))})
        for s, t in splits.items()
    }
    tokenised = tokenize_splits(plain, tokenizer, max_length, False, key)
    out = {}
    for split, table in splits.items():
        arrow = tokenised[split].with_format("arrow")[:]
        hot = multi_hot(table["labels"], len(names)).astype(np.int8)
        labels = pa.FixedSizeListArray.from_arrays(pa.array(hot.reshape(-1), type=pa.int8()), len(names))
        arrow = arrow.set_column(arrow.schema.get_field_index("labels"), "labels", labels)
        out[split] = Dataset(arrow)
    return DatasetDict(out)


def _fingerprint(cfg: MultiLabelConfig) -> str:
    if cfg.source == BUNDLED_MULTILABEL:
        return "bbc_multilabel:" + corpus_fingerprint("bbc_news")
    with open(cfg.source, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _tokenizer_identity(name: str) -> str:
    return tokenizer_identity(name)


def _name(d, key, default) -> str:
    value = d.get(key, default)
    if not isinstance(value, str) or not value:
        raise DataError(f"data.{key} must be a column name (a non-empty string), got {value!r}")
    return value


def _int(d, key, default, lo) -> int:
    value = d.get(key, default)
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= lo
    if not ok:
        raise DataError(f"data.{key} must be an integer >= {lo}, got {value!r}")
    return int(value)


def _bool(d, key, default) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise DataError(f"data.{key} must be true or false, got {value!r}")
    return value


def _fraction(d, key, default) -> float:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value < 1:
        raise DataError(f"data.{key} must be a number in (0, 1), got {value!r}")
    return float(value)
