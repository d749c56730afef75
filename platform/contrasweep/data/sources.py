"""Data sources: bundled corpora, local files, Hugging Face hub datasets.

Each source offers ``fingerprint()`` (a content hash for the cache key, cheap for files and
bundled corpora) and ``load()`` → :class:`RawData`: Arrow tables with the columns ``text``,
``text_pair`` (pairs only) and ``label`` (int64 in ``0..C-1``), plus the label names.

Label names: the ``ClassLabel`` names for hub datasets; otherwise the sorted unique values
(numbers sorted numerically, then written as strings). Rows without a label (null, NaN,
or ``-1`` in a hub ``ClassLabel`` column, e.g. GLUE's unlabelled test split) or without
text are dropped, counted per split and reason (``RawData.dropped``, which the sweep's first
lines and its ``data_stats.json`` show). A ``-1`` in a local file is a real class, not "unlabelled".
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from contrasweep.data import corpora, labels
from contrasweep.data.config import BUNDLED, HUB_PREFIX, DataConfig
from contrasweep.errors import DataError

log = logging.getLogger(__name__)

# Hub split names mapped to ours (first match wins; MNLI names its splits *_matched).
VALIDATION_NAMES = ("validation", "validation_matched", "valid", "val", "dev")
TEST_NAMES = ("test", "test_matched")


@dataclass
class RawData:
    splits: dict[str, pa.Table]  # "train", and "validation"/"test" when the source has them
    label_names: list[str]
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)  # {split: {"no label": n, "empty text": n}}
    labels: dict = field(default_factory=dict)  # spellings merged into one class, or kept apart (data.labels.encode)


def open_source(cfg: DataConfig):
    if isinstance(cfg.source, dict):
        return FileSource(cfg.source)
    if cfg.source in BUNDLED:
        return BundledSource(cfg.source)
    if cfg.source.startswith(HUB_PREFIX):
        return HubSource(cfg.source)
    return FileSource({"train": cfg.source})


class BundledSource:
    def __init__(self, name: str):
        self.name = name

    def fingerprint(self) -> str:
        return corpora.corpus_fingerprint(self.name)

    def load(self, cfg: DataConfig) -> RawData:
        return normalize({"train": corpora.load_corpus(self.name)}, cfg, where=self.name)


class FileSource:
    def __init__(self, paths: dict[str, str]):
        self.paths = paths

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for split, path in sorted(self.paths.items()):
            # The suffix is hashed because it decides how the bytes are parsed.
            digest.update(f"{split}:{path.rsplit('.', 1)[-1].lower()}:".encode())
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()

    def load(self, cfg: DataConfig) -> RawData:
        text_columns = [c for c in (cfg.text, cfg.text_pair) if c]
        tables = {split: read_file(path, text_columns) for split, path in self.paths.items()}
        return normalize(tables, cfg, where=" / ".join(self.paths.values()))


class HubSource:
    def __init__(self, spec: str, bundled: tuple[str, ...] = BUNDLED):
        name, _, config = spec[len(HUB_PREFIX) :].partition(":")
        self.name, self.config, self.bundled = name, (config or None), bundled
        self._dataset = None

    def dataset(self):
        """The ``DatasetDict``, loaded once (fingerprint() and the reading share one download)."""
        if self._dataset is None:
            self._dataset = load_hub(self.name, self.config, self.bundled)
        return self._dataset

    def fingerprint(self) -> str:
        dd = self.dataset()
        parts = [self.name, str(self.config)] + [f"{s}:{split_identity(dd[s])}:{dd[s].num_rows}" for s in sorted(dd)]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def load(self, cfg: DataConfig) -> RawData:
        from datasets import ClassLabel

        dd = self.dataset()
        tables = {}
        for ours, names in (("train", ("train",)), ("validation", VALIDATION_NAMES), ("test", TEST_NAMES)):
            found = next((n for n in names if n in dd), None)
            if found is not None:
                tables[ours] = dd[found].with_format("arrow")[:]
        if "train" not in tables:
            raise DataError(f"hub dataset {self.name!r} has no 'train' split; it has: {', '.join(dd)}")
        feature = dd["train"].features.get(cfg.label)
        class_names = list(feature.names) if isinstance(feature, ClassLabel) else None
        return normalize(tables, cfg, where=f"hub:{self.name}", class_names=class_names)


def split_identity(ds) -> str:
    """What identifies one split of a hub dataset, through ``datasets``' public API. A split
    read from ``datasets``' cache: its Arrow files' paths below the cache root
    (``NAME/CONFIG/VERSION/HASH/FILE.arrow``), where ``HASH`` is what ``datasets`` computes from
    the builder's config and data files; the same folder ``Dataset``'s own fingerprint hashes, so
    a new download or config gets a new identity, while a moved cache root keeps it. A split held
    in memory (no cache files): ``datasets.fingerprint.Hasher`` of its Arrow table, its content."""
    from pathlib import PurePath

    files = [PurePath(f["filename"]).parts[-5:] for f in ds.cache_files]
    if files:
        return ",".join("/".join(parts) for parts in files)
    from datasets.fingerprint import Hasher

    return Hasher.hash(ds.data.table)


def load_hub(name: str, config: str | None, bundled: tuple[str, ...] = BUNDLED):
    import datasets

    try:
        return datasets.load_dataset(name, config)
    except ConnectionError as exc:
        raise DataError(
            f"hub dataset {name!r}: the Hugging Face hub is unreachable ({_first_line(exc)}); "
            f"use a local .csv/.jsonl/.parquet file or a bundled corpus ({', '.join(bundled)})"
        ) from None
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "cannot use it"
        raise DataError(f"hub dataset {name!r} (config {config!r}) cannot be loaded: {_first_line(exc)}") from None


def read_file(path: str, text_columns: list[str]) -> pa.Table:
    """Read a local file; text columns are read as strings so a tweet "123" stays text."""
    suffix = path.rsplit(".", 1)[-1].lower()
    try:
        if suffix == "csv":
            import pyarrow.csv as pacsv

            return pacsv.read_csv(
                path,
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in text_columns}),
            )
        if suffix == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path)
        return _read_json(path, suffix)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise DataError(f"cannot read {path}: {_first_line(exc)}") from None


def _read_json(path: str, suffix: str) -> pa.Table:
    import pyarrow.json as pajson

    try:
        return pajson.read_json(path)  # JSON lines
    except pa.ArrowInvalid:
        if suffix == "jsonl":
            raise
    with open(path, encoding="utf-8") as handle:  # a .json array of records, or {"data": [...]}
        records = json.load(handle)
    if isinstance(records, dict) and isinstance(records.get("data"), list):
        records = records["data"]
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ValueError('expected JSON lines, a JSON list of objects, or {"data": [objects]}')
    return pa.Table.from_pylist(records)


def normalize(tables: dict[str, pa.Table], cfg: DataConfig, where: str, class_names=None) -> RawData:
    """Pick and rename the configured columns, drop unlabelled rows, encode labels."""
    picked = {split: _pick_columns(table, cfg, f"{where} ({split})") for split, table in tables.items()}
    dropped = {}
    for split, table in picked.items():
        picked[split], reasons = _drop_missing(table, split, class_names)
        if reasons:
            dropped[split] = reasons
    if picked["train"].num_rows == 0:
        raise DataError(
            f"{where}: the train split has no row with both a text and a label (empty or missing cells "
            "are dropped); allowed: rows with a non-empty text and label"
        )
    report = {}
    if class_names is None:
        picked, class_names, report = _encode_labels(picked, cfg)
    else:
        picked = {s: _set_label(t, t["label"].cast(pa.int64())) for s, t in picked.items()}
    if len(class_names) < 2:
        raise DataError(
            f"{where}: column {cfg.label!r} has {len(class_names)} class(es) {class_names}; allowed: at least 2"
        )
    return RawData(picked, [str(n) for n in class_names], dropped, report)


def _pick_columns(table: pa.Table, cfg: DataConfig, where: str) -> pa.Table:
    wanted = {"text": cfg.text, **({"text_pair": cfg.text_pair} if cfg.text_pair else {}), "label": cfg.label}
    for ours, column in wanted.items():
        if column not in table.column_names:
            unused = [c for c in table.column_names if c not in wanted.values()]
            hint = f", e.g. data.{ours}: {unused[0]}" if unused else ""
            raise DataError(
                f"{where}: column {column!r} not found; available columns: "
                f"{', '.join(table.column_names)}; allowed: name the column with data.{ours}{hint}"
            )
    out = {}
    for ours, theirs in wanted.items():
        column = table[theirs]
        if pa.types.is_dictionary(column.type):  # parquet categoricals
            column = column.cast(column.type.value_type)
        if ours != "label" and not pa.types.is_string(column.type):
            column = _cast(column, pa.string(), f"{where}: column {theirs!r} is not text ({column.type})")
        out[ours] = column
    return pa.table(out)


def _drop_missing(table: pa.Table, split: str, class_names) -> tuple[pa.Table, dict[str, int]]:
    """The rows with a label and a text, and how many were dropped for each reason (a row
    without either counts as "no label")."""
    label = table["label"]
    labelled = pc.is_valid(label)
    if pa.types.is_floating(label.type):
        labelled = pc.and_(labelled, pc.invert(pc.is_nan(label)))
    if pa.types.is_string(label.type):  # a CSV's empty cell is '' (not null): no label, not a class ''
        labelled = pc.and_(labelled, _non_empty(label))
    if class_names is not None:  # ClassLabel: -1 marks an unlabelled row (GLUE test)
        labelled = pc.and_(labelled, pc.greater_equal(label, 0))
    labelled = pc.fill_null(labelled, False)
    keep = labelled
    for column in ("text", "text_pair"):
        if column in table.column_names:
            keep = pc.and_(keep, _non_empty(table[column]))
    kept = table.filter(keep)
    no_label = table.num_rows - pc.sum(labelled.cast(pa.int64())).as_py() if table.num_rows else 0
    reasons = {
        k: n for k, n in (("no label", no_label), ("empty text", table.num_rows - kept.num_rows - no_label)) if n
    }
    if reasons:
        log.info("%s: dropped %s", split, reasons)
    return kept, reasons


def _non_empty(column):
    """True where a text cell holds something besides whitespace (null and '' are empty)."""
    return pc.fill_null(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(column)), 0), False)


def _encode_labels(tables: dict[str, pa.Table], cfg: DataConfig):
    """Class indices in the order of the sorted label values: numbers as they are, names under
    ``data.labels`` (``contrasweep.data.labels``: spellings that differ only in spaces are one class)."""
    columns = {split: table["label"] for split, table in tables.items()}
    if not all(pa.types.is_integer(c.type) or pa.types.is_floating(c.type) for c in columns.values()):
        columns = {s: _cast(c, pa.string(), "labels must be strings or integers") for s, c in columns.items()}
        codes, names, report = labels.encode(columns, cfg.labels)
        return {s: _set_label(t, codes[s]) for s, t in tables.items()}, names, report
    columns = {s: _as_int(c) for s, c in columns.items()}
    values = sorted({v for c in columns.values() for v in pc.unique(c).to_pylist()})
    value_set = pa.array(values, type=pa.int64())
    out = {}
    for split, table in tables.items():
        out[split] = _set_label(table, pc.index_in(columns[split], value_set=value_set).cast(pa.int64()))
    return out, [str(v) for v in values], {}


def _set_label(table: pa.Table, labels) -> pa.Table:
    return table.set_column(table.schema.get_field_index("label"), "label", labels)


def _as_int(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_floating(column.type):  # CSV/pandas turn integer labels into floats
        if pc.all(pc.equal(pc.floor(column), column)).as_py() is False:
            raise DataError("labels are non-integer numbers; allowed: class labels (strings or integers)")
    return column.cast(pa.int64())


def _cast(column, type_, message: str):
    try:
        return column.cast(type_)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise DataError(message) from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
