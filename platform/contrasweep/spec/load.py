"""Sweep specs: one YAML per paper (docs/architecture.md, "The spec format") + ``--set`` overrides,
validated into a ``Sweep``. Every number is coerced and range-checked here, where it enters,
and every error is one line naming the bad value and what is allowed.

Layout of a spec::
    name: ce-demo                   # optional: the sweep's name (default: file stem + time)
    method: ce                      # a name in trainables.registry
    paper: {title: ..., where: ...} # provenance, logged with the sweep
    data: {source: bbc_news, protocol: few_shot, k: 20}      # contrasweep.data.DataConfig
    evaluation: {sts: pairs.csv,    # optional: STS pairs (sentence1, sentence2, score)
                 test: reported}    # the test split for what is reported (default) | all trials
    encoder: {name: default, pooling: mean, max_length: 128}
    reported: {lr: 2.0e-5}          # the paper's setting: evaluated first
    grid: {lr: [1.0e-5, 2.0e-5]}    # exact grid (searcher: grid); or a list of such
                                    # blocks, run one after another (tied values, e.g.
                                    # SupCL-Seq Table 1's batch size per dropout set)
    search: {lr: {loguniform: [1.0e-5, 1.0e-4]}}   # domains (searcher: optuna | random)
    fixed: {epochs: 10}             # the same for every trial
    sweep: {searcher: grid, metric: val/accuracy, mode: max, num_samples: 1,
            max_concurrent: 1, scheduler: asha, seeds: [0], resources: {cpu: 1, gpu: 0, workers: 1}}
    tracking: {experiment: contrasweep, keep_models: 2}   # or keep_models: all

The ``sweep:`` section's checks: ``contrasweep.spec.sweep_section``.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import yaml

from contrasweep.data import DataConfig
from contrasweep.data.multilabel.prepare import MultiLabelConfig, is_multilabel
from contrasweep.data.sts import check_source
from contrasweep.errors import SpecError
from contrasweep.spec.axes import expand
from contrasweep.spec.domains import Domain, as_spec, parse_domain
from contrasweep.spec.paths import absolute_paths
from contrasweep.spec.smoke import TRIALS, smoke_raw
from contrasweep.spec.sweep import ENCODER_PARAMS, NAME_RE, TEST_MODES, TOP_KEYS, Sweep, all_params
from contrasweep.spec.sweep_section import (
    parse_sweep_section,
    storage_location,  # noqa: F401  (the CLI's and tests' name)
)
from contrasweep.spec.tracking import parse_tracking
from trainables.params import Param
from trainables.registry import declaration, method_names


class DuplicateKey(Exception):
    def __init__(self, key, first: int, again: int):
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: PyYAML
    keeps the last value silently, so a spec with two ``lr:`` lines would run what the reader
    of the file did not see."""


def _unique_mapping(loader: UniqueKeyLoader, node, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        key, line = loader.construct_object(key_node, deep=deep), key_node.start_mark.line + 1
        try:
            if key in seen:
                raise DuplicateKey(key, seen[key], line)
            seen[key] = line
        except TypeError:  # an unhashable key: PyYAML's own error says so below
            continue
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
# YAML 1.2's floats: ``1e-4`` is a number (PyYAML's YAML 1.1 reads it as the text "1e-4" without a dot)
EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, list("-+0123456789"))


def load_spec(
    spec: str | os.PathLike | Mapping[str, Any],
    overrides: Sequence[str] | None = None,
    smoke: bool = False,
) -> Sweep:
    """The spec at ``spec`` (a YAML file, or the mapping it would hold: the Python API's) with
    its ``--set`` overrides, validated;
    ``smoke``: cut to one epoch and two trials after the overrides (``--smoke-test``,
    ``contrasweep.spec.smoke``)."""
    if isinstance(spec, Mapping):  # relative paths in it: from the working directory
        return _loaded(copy.deepcopy(dict(spec)), Path.cwd(), overrides, smoke)
    path = Path(spec)
    if not path.is_file():
        raise SpecError(f"spec file {str(path)!r} does not exist; allowed: a path to a sweep YAML (see search_spaces/)")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"spec file {str(path)!r} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); allowed: a YAML file saved as UTF-8"
        ) from None
    try:
        raw = yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKey as exc:
        raise SpecError(
            f"spec file {str(path)!r}: key {exc.key!r} appears twice (lines {exc.first} and {exc.again}); "
            "allowed: each key once in a mapping (YAML would silently keep the last)"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        if "'\\t'" in str(getattr(exc, "problem", "")):  # PyYAML: "found character '\t' that cannot start any token"
            raise SpecError(
                f"spec file {str(path)!r} is not valid YAML{where}: a tab character; allowed: indentation "
                "with spaces (YAML forbids tabs)"
            ) from None
        raise SpecError(f"spec file {str(path)!r} is not valid YAML{where}; allowed: a YAML mapping") from None
    if not isinstance(raw, dict):
        raise SpecError(f"spec file {str(path)!r} must hold a YAML mapping with keys {', '.join(TOP_KEYS)}")

    return _loaded(raw, path.parent, overrides, smoke)


def _loaded(raw: dict, base: Path, overrides: Sequence[str] | None, smoke: bool) -> Sweep:
    absolute_paths(raw, base)  # the spec's own relative paths: from its folder
    for item in overrides or []:
        apply_override(raw, item)
    absolute_paths(raw, Path.cwd())  # --set ones: from the working directory, as the shell's
    if not smoke:
        return validate(raw)

    smoke_raw(raw)
    sweep = validate(raw)
    sweep.grid_limit = TRIALS  # the first two grid trials (a searcher: num_samples above)
    return sweep


def apply_override(raw: dict, item: str) -> None:
    """``--set a.b=value``: the value is read as YAML (``[1, 2]``, ``true``, ``1.0e-5``)."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise SpecError(f"--set {item!r} is not allowed; allowed: KEY=VALUE with a dotted KEY such as fixed.epochs=3")
    parts = key.strip().split(".")
    if parts[0] not in TOP_KEYS:
        raise SpecError(f"--set {key!r}: unknown section {parts[0]!r}; allowed: {', '.join(TOP_KEYS)}")
    try:
        value = yaml.load(text, Loader=UniqueKeyLoader) if text.strip() else None
    except DuplicateKey as exc:
        raise SpecError(f"--set {item!r}: key {exc.key!r} appears twice; allowed: each key once in a mapping") from None
    except yaml.YAMLError:
        value = text
    set_value(raw, key, value, f"--set {key!r}")


def set_value(raw: dict, key: str, value: Any, where: str) -> None:
    """``raw``'s value at dotted ``key`` (``fixed.epochs``) set to ``value``; ``where``: what an error names."""
    parts = key.strip().split(".")
    if parts[0] not in TOP_KEYS:
        raise SpecError(f"{where}: unknown section {parts[0]!r}; allowed: {', '.join(TOP_KEYS)}")
    node = raw
    for part in parts[:-1]:
        if node.get(part) is None:
            node[part] = {}
        if not isinstance(node[part], dict):
            raise SpecError(f"{where}: {part!r} is not a mapping in the spec")
        node = node[part]
    node[parts[-1]] = value


def validate(raw: dict) -> Sweep:
    raw = copy.deepcopy(raw)
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise SpecError(f"unknown spec key {unknown[0]!r}; allowed: {', '.join(TOP_KEYS)}")
    if "method" not in raw:
        raise SpecError(
            f"spec has no 'method'; allowed: {', '.join(method_names())}, or your own as "
            "package.module:Class or path/to/file.py:Class"
        )
    if not isinstance(raw["method"], str):
        raise SpecError(
            f"method={raw['method']!r} is not allowed; allowed: {', '.join(method_names())}, or your "
            "own as package.module:Class or path/to/file.py:Class"
        )
    method_cls = declaration(str(raw["method"]))
    params = all_params(str(raw["method"]))
    sweep = Sweep(method=str(raw["method"]))
    sweep.name = _name(raw.get("name"))
    sweep.paper = _mapping(raw, "paper")
    sweep.data, sweep.variants = _data(_mapping(raw, "data"), method_cls)
    sweep.encoder = _encoder(_mapping(raw, "encoder"))
    sweep.evaluation = _evaluation(_mapping(raw, "evaluation"))
    sweep.reported = _values(_mapping(raw, "reported"), params, "reported")
    sweep.fixed = _values(_mapping(raw, "fixed"), params, "fixed")
    sweep.grids = _grids(raw.get("grid") or {}, params)
    sweep.grid = _union(sweep.grids)
    sweep.domains = _search(_mapping(raw, "search"), params)
    sweep.search = {key: as_spec(domain) for key, domain in sweep.domains.items()}
    parse_sweep_section(sweep, _mapping(raw, "sweep"), method_cls)
    sweep.experiment, sweep.keep_models = parse_tracking(_mapping(raw, "tracking"))
    raw["method"] = sweep.method
    sweep.raw = raw
    return sweep


@overload
def _name(value: None) -> None: ...
@overload
def _name(value: str) -> str: ...
def _name(value: Any) -> str | None:
    """A sweep's name as given (``name:``, ``--name``, a command's NAME), checked: never a path."""
    if value is None:
        return None
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise SpecError(
            f"name={value!r} is not allowed; allowed: letters, digits, '_', '.', '-' (max 100, no leading punctuation)"
        )
    return value


def _mapping(raw: dict, key: str) -> dict:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{key} must be a mapping, got {type(value).__name__}")
    return value


def _data(section: dict, method_cls) -> tuple[dict, list]:
    """The data section and its variants (one per combination of list-valued axes, each
    validated on its own: a bad combination is a one-line error before anything runs)."""
    kind = "multi" if is_multilabel(section) else "single"
    if kind != method_cls.label_kind:
        takes = [n for n in method_names() if declaration(n).label_kind == kind]
        raise SpecError(
            f"method {method_cls.name or method_cls.__name__!r} takes {method_cls.label_kind}-label data "
            "but data.task is "
            f"{'multilabel' if kind == 'multi' else 'single-label'}; allowed methods for this data: "
            f"{', '.join(takes) or 'none registered yet'}"
        )
    if kind == "single" and "source" not in section:
        raise SpecError(
            "data.source is missing; allowed: bbc_news, tweet_sentiment, a CSV/JSONL/parquet path, or hub:NAME[:CONFIG]"
        )
    variants = expand(section, multilabel=kind == "multi")
    for variant in variants:
        # raises DataError (a UserError) with its own one-line message
        (MultiLabelConfig if kind == "multi" else DataConfig).from_dict(variant.data)
    return section, variants


# evaluation.alpha: the level of the test that a configuration beat its data's chance level
# (contrasweep.tracking.verdict)
ALPHA = Param("float", 0.05, 0.0, 0.5, low_open=True)


def _evaluation(section: dict) -> dict:
    """``sts``: STS pairs; ``test``: which trials evaluate the test split (``TEST_MODES``:
    ``reported``, the default, after selection for what the report shows; ``all``, every
    complete trial after its last epoch); ``alpha``: ``ALPHA``."""
    unknown = sorted(set(section) - {"sts", "test", "alpha"})
    if unknown:
        raise SpecError(
            f"unknown key evaluation.{unknown[0]}; allowed: evaluation.sts, evaluation.test, evaluation.alpha"
        )
    test = section.get("test", TEST_MODES[0])
    if test not in TEST_MODES:
        raise SpecError(
            f"evaluation.test={test!r} is not allowed; allowed: {', '.join(TEST_MODES)} (reported: the "
            "selected configurations and their sensitivity slices, after selection; all: every trial)"
        )
    out = {"test": test, "alpha": ALPHA.coerce("evaluation.alpha", section.get("alpha", ALPHA.default))}
    if section.get("sts") is not None:
        out["sts"] = check_source(section["sts"])
    return out


def _encoder(section: dict) -> dict:
    unknown = sorted(set(section) - {"name", "pooling", "max_length"})
    if unknown:
        raise SpecError(f"unknown key encoder.{unknown[0]}; allowed: encoder.name, encoder.pooling, encoder.max_length")
    pooling = section.get("pooling", "mean")
    if pooling not in ("cls", "mean"):
        raise SpecError(f"encoder.pooling={pooling!r} is not allowed; allowed: 'cls', 'mean'")
    return {
        "name": str(section.get("name") or "default"),
        "pooling": pooling,
        "max_length": ENCODER_PARAMS["max_length"].coerce("encoder.max_length", section.get("max_length", 128)),
    }


def _param(params: dict[str, Param], key: str, where: str) -> Param:
    if key not in params:
        raise SpecError(f"{where}.{key}: unknown hyperparameter; allowed: {', '.join(sorted(params))}")
    return params[key]


def _values(section: dict, params: dict[str, Param], where: str) -> dict:
    return {k: _param(params, k, where).coerce(f"{where}.{k}", v) for k, v in section.items()}


def _grids(section, params: dict[str, Param]) -> list[dict]:
    """``grid`` as one mapping (one product) or a list of mappings (blocks run in order: values
    tied across keys, e.g. a batch size per dropout set)."""
    if isinstance(section, dict):
        return [_grid(section, params)] if section else []
    if not isinstance(section, list) or not section or not all(isinstance(b, dict) and b for b in section):
        raise SpecError(
            f"grid={section!r} is not allowed; allowed: a mapping {{name: [values]}} or a non-empty list "
            "of such mappings (blocks)"
        )
    return [_grid(block, params) for block in section]


def _union(blocks: list[dict]) -> dict:
    """Every key of the blocks with every value it takes in any of them (first-seen order)."""
    out: dict[str, list] = {}
    for block in blocks:
        for key, values in block.items():
            seen = out.setdefault(key, [])
            seen += [v for v in values if v not in seen]
    return out


def _grid(section: dict, params: dict[str, Param]) -> dict:
    out = {}
    for key, values in section.items():
        param = _param(params, key, "grid")
        if not isinstance(values, list) or not values:
            raise SpecError(f"grid.{key}={values!r} is not allowed; allowed: a non-empty list of values")
        out[key] = [param.coerce(f"grid.{key}", v) for v in values]
    return out


def _search(section: dict, params: dict[str, Param]) -> dict[str, Domain]:
    return {key: parse_domain(key, domain, _param(params, key, "search")) for key, domain in section.items()}
