"""``DataConfig``: the validated data section of a sweep (source, columns, splits, protocol).

Every value is checked where it enters, and a bad one raises a one-line ``DataError`` that
names the key, the bad value and what is allowed (docs/architecture.md, "Rules of the spine").
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, cast

from contrasweep.errors import DataError

BUNDLED = ("bbc_news", "tweet_sentiment")
FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
SPLITS = ("train", "validation", "test")
HUB_PREFIX = "hub:"
MAX_SEED = 2**32 - 1  # numpy's RandomState accepts seeds up to this

# Keys every protocol accepts, then the keys only one protocol accepts.
COMMON_KEYS = (
    "source",
    "text",
    "text_pair",
    "label",
    "split_seed",
    "validation_fraction",
    "test_fraction",
    "protocol",
    "seed",
    "dev_test_fraction",
    "dev_validation_max",
    "labels",
)
# Keys that are left out of ``to_dict`` (and so of the cache key) while unset, so that data
# sections written before they existed keep their cache entries.
OPTIONAL_KEYS = ("dev_test_fraction", "dev_validation_max")
LABEL_RULES = {"strip": True, "casefold": False}  # data.labels and its defaults (LabelRule)
PROTOCOL_KEYS = {
    "full": (),
    "max_per_class": ("max_per_class",),
    "few_shot": ("k", "n_total"),
    "imbalance": ("minority", "rho", "minority_classes"),
    "num_classes": ("num_classes", "classes", "per_class"),
}
PROTOCOLS = tuple(PROTOCOL_KEYS)
ALL_KEYS = COMMON_KEYS + tuple(k for keys in PROTOCOL_KEYS.values() for k in keys)


@dataclass(frozen=True)
class LabelRule:
    """``data.labels``: how class names are compared. ``strip`` (default on) removes the spaces
    around a name, so ``'Billing '`` is ``'Billing'``; ``casefold`` (default off) also ignores
    case, so ``'Billing'`` is ``'billing'``. Names equal under the rule are one class
    (``contrasweep.data.labels``)."""

    strip: bool = True
    casefold: bool = False

    def key(self, name: str) -> str:
        name = name.strip() if self.strip else name
        return name.casefold() if self.casefold else name

    @property
    def is_default(self) -> bool:
        return (self.strip, self.casefold) == tuple(LABEL_RULES.values())


@dataclass(frozen=True)
class DataConfig:
    """The data section of a sweep. Build it with :meth:`from_dict`, which validates.

    Protocol keys are ``None`` unless their protocol is selected; defaults that the paper
    fixes are filled in by ``from_dict`` (few-shot ``k`` has none and is required).
    """

    source: Any
    text: str = "text"
    text_pair: str | None = None
    label: str = "label"
    split_seed: int = 0
    validation_fraction: float = 0.1
    test_fraction: float = 0.2
    dev_test_fraction: float | None = None  # splits.dev_splits: test and validation from the dev split
    dev_validation_max: int | None = None
    protocol: str = "full"
    seed: int = 0
    max_per_class: int | None = None  # None: LaCon Sec. 3.1 rule, resolved once C is known
    k: int | None = None
    n_total: int | None = None
    minority: int | None = None
    rho: float | None = None
    minority_classes: tuple[str, ...] | None = None
    num_classes: int | None = None
    classes: tuple[str, ...] | None = None
    per_class: int | None = None
    labels: LabelRule = LabelRule()

    @classmethod
    def from_dict(cls, d: DataConfig | Mapping[str, Any]) -> DataConfig:
        if isinstance(d, DataConfig):
            return d
        if not isinstance(d, Mapping):
            raise DataError(f"data must be a mapping of keys ({', '.join(ALL_KEYS)}), got {type(d).__name__}")
        unknown = sorted(str(k) for k in d if k not in ALL_KEYS)
        if unknown:
            raise DataError(f"unknown data key(s) {', '.join(unknown)}; allowed: {', '.join(ALL_KEYS)}")
        if "source" not in d or d["source"] in (None, ""):
            raise DataError(_SOURCE_HELP.format(value="nothing"))
        protocol = d.get("protocol", "full")
        if protocol not in PROTOCOLS:
            raise DataError(f"data.protocol {protocol!r} is not allowed; allowed: {', '.join(PROTOCOLS)}")
        for key, value in d.items():
            owner = _owner(key)
            if owner is not None and owner != protocol and value is not None:
                raise DataError(f"data.{key} only applies to protocol {owner!r} (protocol is {protocol!r})")
        values = {"source": normalize_source(d["source"]), "protocol": protocol}
        values.update(_common(d))
        values.update(_PROTOCOL_PARSERS[protocol](d))
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Normalised config: common keys plus the selected protocol's keys (for logging)."""
        out = {k: v for k, v in asdict(self).items() if k in COMMON_KEYS or k in PROTOCOL_KEYS[self.protocol]}
        for key in OPTIONAL_KEYS:
            if out.get(key) is None:
                out.pop(key, None)
        for key in ("minority_classes", "classes"):
            if out.get(key) is not None:
                out[key] = list(out[key])
        if self.labels.is_default:  # left out while default, like OPTIONAL_KEYS
            out.pop("labels")
        return out

    def key_dict(self) -> dict[str, Any]:
        """What the cache key hashes besides the source content: the source's *location*
        is left out (its bytes are hashed instead), and ``seed`` when ``full`` ignores it, so
        runs that differ only there share one tokenised copy."""
        out = self.to_dict()
        out.pop("source")
        if self.protocol == "full":
            out.pop("seed")
        return out

    @property
    def is_pair(self) -> bool:
        return self.text_pair is not None


_SOURCE_HELP = (
    "data.source {value} is not allowed; allowed: a bundled corpus (" + ", ".join(BUNDLED) + "), "
    "'hub:NAME[:CONFIG]', a local " + "/".join(FILE_SUFFIXES) + " file, "
    "or a mapping {{train: path, validation: path, test: path}}"
)


def normalize_source(value: Any) -> Any:
    """Bundled name and hub spec as given; file paths made absolute and checked to exist."""
    if isinstance(value, Mapping):
        unknown = [str(k) for k in value if k not in SPLITS]
        if unknown or "train" not in value:
            raise DataError(
                f"data.source mapping has keys {sorted(map(str, value))}; allowed: train (required), validation, test"
            )
        return {split: _file_path(value[split], f"data.source.{split}") for split in SPLITS if value.get(split)}
    if not isinstance(value, (str, os.PathLike)):
        raise DataError(_SOURCE_HELP.format(value=repr(value)))
    value = os.fspath(value)
    if value in BUNDLED:
        return value
    if value.startswith(HUB_PREFIX):
        return check_hub_source(value)
    return _file_path(value, "data.source")


def check_hub_source(value: str) -> str:
    """``hub:NAME`` or ``hub:NAME:CONFIG`` (a Hugging Face dataset and its configuration)."""
    parts = value[len(HUB_PREFIX) :].split(":")
    if len(parts) > 2 or not parts[0]:
        raise DataError(f"data.source {value!r} is not allowed; allowed hub form: hub:NAME or hub:NAME:CONFIG")
    return value


def _file_path(value: Any, key: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise DataError(_SOURCE_HELP.format(value=repr(value)))
    path = os.path.abspath(os.path.expanduser(os.fspath(value)))
    if not path.lower().endswith(FILE_SUFFIXES):
        raise DataError(_SOURCE_HELP.format(value=repr(os.fspath(value))))
    if not os.path.isfile(path):
        raise DataError(
            f"{key}: file not found: {path} (a relative path in a spec file is read from the spec's "
            "folder, one given with --set from the working directory)"
        )
    return path


def _owner(key: str) -> str | None:
    for protocol, keys in PROTOCOL_KEYS.items():
        if key in keys:
            return protocol
    return None


def _common(d: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        "text": _column(d, "text", "text"),
        "text_pair": _column(d, "text_pair", None),
        "label": _column(d, "label", "label"),
        "split_seed": _int(d, "split_seed", 0, lo=0, hi=MAX_SEED),
        "validation_fraction": _fraction(d, "validation_fraction", 0.1),
        "test_fraction": _fraction(d, "test_fraction", 0.2),
        "seed": _int(d, "seed", 0, lo=0, hi=MAX_SEED),
        "dev_test_fraction": _fraction(d, "dev_test_fraction", None)
        if d.get("dev_test_fraction") is not None
        else None,
        "dev_validation_max": _int(d, "dev_validation_max", None, lo=1),
        "labels": _label_rule(d.get("labels")),
    }
    if out["dev_test_fraction"] is not None:
        # the dev rule (splits.dev_splits): test comes from the dev split, never from train
        if d.get("test_fraction") is not None:
            raise DataError(
                "data.test_fraction does not apply with data.dev_test_fraction (the test split is that "
                "fraction of the dev split); allowed: one of them"
            )
    elif out["dev_validation_max"] is not None:
        raise DataError(
            "data.dev_validation_max needs data.dev_test_fraction; allowed: both (SCL-MOO Sec. 3: "
            "dev_test_fraction 0.5, dev_validation_max 500) or neither"
        )
    elif out["validation_fraction"] + out["test_fraction"] >= 1.0:
        raise DataError(
            f"data.validation_fraction + data.test_fraction = "
            f"{out['validation_fraction'] + out['test_fraction']:g}; allowed: a sum below 1 (train needs rows)"
        )
    names = [out["text"], out["label"]] + ([out["text_pair"]] if out["text_pair"] else [])
    if len(set(names)) != len(names):
        raise DataError(f"data.text, data.text_pair and data.label must name different columns, got {names}")
    return out


def _label_rule(value) -> LabelRule:
    if value is None:
        return LabelRule()
    allowed = ", ".join(f"{k} (true/false, default {str(v).lower()})" for k, v in LABEL_RULES.items())
    if not isinstance(value, Mapping) or any(k not in LABEL_RULES for k in value):
        raise DataError(f"data.labels {value!r} is not allowed; allowed: a mapping of {allowed}")
    bad = [k for k, v in value.items() if not isinstance(v, bool)]
    if bad:
        raise DataError(f"data.labels.{bad[0]} must be true or false, got {value[bad[0]]!r}")
    return LabelRule(**{k: bool(v) for k, v in value.items()})


def _parse_max_per_class(d):
    return {"max_per_class": _int(d, "max_per_class", None, lo=1)}


def _parse_few_shot(d):
    if d.get("k") is not None and d.get("n_total") is not None:
        raise DataError(
            "data.k and data.n_total are exclusive; allowed: k per class (LaCon) or n_total in all (SCL-MOO)"
        )
    if d.get("k") is None and d.get("n_total") is None:
        raise DataError(
            "data.k is required for protocol 'few_shot' (or data.n_total); allowed: k, an integer >= 1 per class "
            "(LaCon Sec. 4.1 uses 10, 20, 50, 100), or n_total, an integer >= 2 in all, stratified "
            "(SCL-MOO Sec. 3: 20, 50, 100)"
        )
    return {"k": _int(d, "k", None, lo=1), "n_total": _int(d, "n_total", None, lo=2)}


def _parse_imbalance(d):
    return {
        "minority": _int(d, "minority", 32, lo=1),
        "rho": _number(d, "rho", 1.0, lo=1.0),
        "minority_classes": _names(d, "minority_classes"),
    }


def _parse_num_classes(d):
    if d.get("num_classes") is not None and d.get("classes") is not None:
        raise DataError("data.num_classes and data.classes are exclusive; allowed: give one of them")
    if d.get("num_classes") is None and d.get("classes") is None:
        raise DataError(
            "protocol 'num_classes' needs data.num_classes (an integer >= 2) or data.classes (a list of label names)"
        )
    classes = _names(d, "classes")
    if classes is not None and len(classes) < 2:
        raise DataError(f"data.classes {list(classes)} is not allowed; allowed: at least 2 distinct label names")
    return {
        "num_classes": _int(d, "num_classes", None, lo=2),
        "classes": classes,
        "per_class": _int(d, "per_class", 1000, lo=1),  # LaCon Sec. 4.5: 1000 per label
    }


_PROTOCOL_PARSERS = {
    "full": lambda d: {},
    "max_per_class": _parse_max_per_class,
    "few_shot": _parse_few_shot,
    "imbalance": _parse_imbalance,
    "num_classes": _parse_num_classes,
}


def _column(d, key, default):
    value = d.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, str) or not value:
        raise DataError(f"data.{key} must be a column name (a non-empty string), got {value!r}")
    return value


def _int(d, key, default, lo, hi=None):
    value = d.get(key, default)
    if value is None:
        return default
    parsed = _as_number(value)
    integral = parsed is not None and math.isfinite(parsed) and float(parsed).is_integer()
    if not integral or parsed < lo or (hi is not None and parsed > hi):
        allowed = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise DataError(f"data.{key} must be an integer {allowed}, got {value!r}")
    return int(parsed)


def _number(d, key, default, lo):
    value = d.get(key, default)
    parsed = _as_number(value)
    if parsed is None or not math.isfinite(parsed) or parsed < lo:
        raise DataError(f"data.{key} must be a number >= {lo:g}, got {value!r}")
    return float(parsed)


def _fraction(d, key, default):
    value = d.get(key, default)
    parsed = _as_number(value)
    if parsed is None or not 0.0 < parsed < 1.0:
        raise DataError(f"data.{key} must be a number in (0, 1), got {value!r}")
    return float(parsed)


def _as_number(value) -> float | None:
    # Strings are accepted because PyYAML reads `1e-5`-style floats as strings
    # (docs/architecture.md, "The spec format").
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):  # int, float and numpy scalars
        return cast(float, value)  # as given: mypy does not take a numbers.Real for a float
    if isinstance(value, str):
        for parse in (int, float):
            try:
                return parse(value)
            except ValueError:
                pass
    return None


def _names(d, key):
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise DataError(f"data.{key} must be a non-empty list of label names, got {value!r}")
    names = tuple(str(v) for v in value)
    if len(set(names)) != len(names):
        raise DataError(f"data.{key} {list(names)} repeats a name; allowed: distinct label names")
    return names
