"""``prepare``: source → splits → protocol → tokenise once → content-hashed Arrow cache."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from contrasweep.data.cache import FORMAT_VERSION, MARKER, cache_key, cache_root, read_marker, write_entry
from contrasweep.data.chance import chance_levels, levels
from contrasweep.data.config import DataConfig
from contrasweep.data.labels import merge_hint
from contrasweep.data.labels import notes as label_notes
from contrasweep.data.protocols import apply_protocol
from contrasweep.data.sources import open_source
from contrasweep.data.splits import labels_of, make_splits
from contrasweep.data.tokens import tokenize_splits, tokenizer_identity
from contrasweep.errors import DataError

SPLITS = ("train", "validation", "test")
MIN_MAX_LENGTH = 8  # room for special tokens ([CLS] a [SEP] b [SEP]) and some text


@dataclass(frozen=True)
class PreparedData:
    """A tokenised, cached data set: ``path`` is a ``DatasetDict.save_to_disk`` directory with
    splits train/validation/test (open it with :func:`load_splits`)."""

    path: str
    label_names: list[str]
    num_labels: int
    key: str
    cache_hit: bool
    stats: dict  # {split: {"n": rows, "per_class": {label name: rows}}}
    is_pair: bool
    dropped: dict = field(default_factory=dict)  # {source split: {reason: rows}} (sources.RawData.dropped)
    labels: dict = field(default_factory=dict)  # label spellings merged or kept apart (contrasweep.data.labels)
    # labelled rows read from the source, every split of it (after the rows ``dropped``); None: a
    # cache entry written before they were counted, or multi-label data
    source_rows: int | None = None

    @property
    def unused(self) -> int | None:
        """Labelled source rows in no split (docs/spec.md, "How the splits are carved"): what a
        protocol left out of its draw (the few-shot pool's rest, the carved validation split a
        few-shot validation set replaces, a class ``num_classes`` drops, a labelled test split
        the dev rule does not read); None where the source's rows are not known."""
        if self.source_rows is None:
            return None
        return self.source_rows - sum(int(self.stats[s]["n"]) for s in SPLITS)

    @property
    def chance(self) -> dict:
        """What predictors that never read a text score on the validation and test splits
        (``contrasweep.data.chance``): ``{split: {predictor: {metric: value}}}``."""
        return chance_levels(self.stats)

    @property
    def chance_levels(self) -> dict[str, float]:
        """Each metric's chance level, keyed as trials report it (``val/accuracy``)."""
        return levels(self.chance)


def prepare(
    cfg: DataConfig | Mapping[str, Any],
    tokenizer: str = "default",
    max_length: int = 128,
    cache_dir: str | None = None,
) -> PreparedData:
    """Build (or find in the cache) the tokenised splits for ``cfg``.

    The cache key hashes the source content, the normalised config, the tokenizer files and
    ``max_length``; on a hit nothing is loaded or tokenised (not even the tokenizer).
    """
    cfg = DataConfig.from_dict(cfg)
    max_length = _check_max_length(max_length)
    source = open_source(cfg)
    key = cache_key(source.fingerprint(), cfg.key_dict(), tokenizer_identity(tokenizer), max_length)
    final = cache_root(cache_dir) / key
    meta = read_marker(final)
    if meta is not None:
        return _prepared(final, key, meta, cache_hit=True)

    raw = source.load(cfg)
    try:
        splits, names = apply_protocol(make_splits(raw, cfg), raw.label_names, cfg)
    except DataError as exc:  # a class short of rows may be one spelling of another
        short = getattr(exc, "label", None)
        raise DataError(f"{exc}{merge_hint(raw.labels, short)}" if short else str(exc)) from None
    meta = {
        "format": FORMAT_VERSION,
        "label_names": names,
        "stats": split_stats(splits, names),
        "dropped": raw.dropped,
        "labels": raw.labels,
        "source_rows": sum(int(t.num_rows) for t in raw.splits.values()),
        "is_pair": cfg.is_pair,
        "config": cfg.to_dict(),
        "tokenizer": str(tokenizer),
        "max_length": max_length,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _check_nonempty(meta["stats"])
    from trainables.encoder import load_tokenizer  # transformers: only on a cache miss

    tokenised = tokenize_splits(splits, load_tokenizer(tokenizer), max_length, cfg.is_pair, key)
    path = write_entry(final.parent, key, tokenised, meta)
    return _prepared(path, key, meta, cache_hit=False)


def load_splits(path: str | Path) -> dict[str, pa.Table]:
    """The prepared splits as memory-mapped Arrow tables (no copy: safe to open per trial)."""
    from datasets import load_from_disk

    if read_marker(Path(path)) is None:
        raise DataError(f"{path} is not a prepared data directory (no {MARKER} inside); run prepare first")
    dataset_dict = load_from_disk(str(path))
    return {split: dataset_dict[split].with_format("arrow")[:] for split in dataset_dict}


def split_stats(splits: dict[str, pa.Table], names: list[str]) -> dict:
    out = {}
    for split in SPLITS:
        counts = np.bincount(labels_of(splits[split]), minlength=len(names))
        per_class = {name: int(c) for name, c in zip(names, counts, strict=True)}
        out[split] = {"n": int(splits[split].num_rows), "per_class": per_class}
    return out


def data_notes(stats: dict, dropped: dict, labels: dict | None = None) -> list[str]:
    """What a user should know about prepared data besides its sizes: the source rows dropped
    and why (``PreparedData.dropped``), label spellings merged or kept apart
    (``PreparedData.labels``), and each class that some split has no row of (a stray
    label such as a typo: it is never learned, or never judged, there)."""
    notes = label_notes(labels or {})
    for split, reasons in dropped.items():
        total = sum(reasons.values())
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))  # the cache's JSON sorts them too
        notes.append(f"dropped {total} {'row' if total == 1 else 'rows'} of the source's {split} split: {parts}")
    splits = [s for s in SPLITS if isinstance(stats.get(s), dict) and stats[s].get("n")]
    names = list(stats[splits[0]].get("per_class", {})) if splits else []
    for name in names:
        counts = {s: stats[s]["per_class"].get(name, 0) for s in splits}
        if 0 in counts.values():
            sizes = " / ".join(f"{s} {n}" for s, n in counts.items())
            notes.append(
                f"class {name!r} has no row in {', '.join(s for s, n in counts.items() if not n)} "
                f"({sizes} rows): it is never learned or never judged there (a stray label?)"
            )
    return notes


def _prepared(path: Path, key: str, meta: dict, cache_hit: bool) -> PreparedData:
    names = list(meta["label_names"])
    return PreparedData(
        path=str(path),
        label_names=names,
        num_labels=len(names),
        key=key,
        cache_hit=cache_hit,
        stats=meta["stats"],
        is_pair=bool(meta["is_pair"]),
        dropped=meta.get("dropped") or {},
        labels=meta.get("labels") or {},
        source_rows=meta.get("source_rows"),
    )


def _check_max_length(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < MIN_MAX_LENGTH:
        raise DataError(f"max_length must be an integer >= {MIN_MAX_LENGTH}, got {value!r}")
    return int(value)


def _check_nonempty(stats: dict) -> None:
    empty = [split for split in SPLITS if stats[split]["n"] == 0]
    if empty:
        raise DataError(
            f"split(s) {', '.join(empty)} would be empty ({stats['train']['n']} train rows); "
            "allowed: a data set with more rows, or larger validation_fraction/test_fraction"
        )
