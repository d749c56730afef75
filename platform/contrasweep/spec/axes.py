"""Data axes of a sweep: ``data`` values that are lists (the papers' split seeds, k, N, ρ,
class counts, datasets) expand into data variants, each prepared once (tokenised, cached).

A trial is one configuration (hyperparameters) × one data variant × one training seed. The
variants split into two kinds of axes:

* **setting** axes (``source``, ``k``, ``n_total``, ``rho``, ``num_classes``): a different
  experiment, e.g. the few-shot curve's k = 5 and k = 20 (LaCon Fig. 2). Configurations are
  compared and selected within one setting.
* **repeat** axes (``seed``: the protocol's sampling seed, i.e. which few-shot examples;
  ``split_seed``: the train/validation/test split): the same experiment on another sample of
  the data. A configuration's repeats in a setting are its data repeats × ``sweep.seeds``
  (LaCon Sec. 4.1: 10 sampled repeats; SCL-MOO Sec. 3: 10 seeds), and every aggregate
  (mean, std, n) is over exactly those repeats.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contrasweep.errors import SpecError

REPEAT_AXES = ("seed", "split_seed")
SETTING_AXES = ("source", "k", "n_total", "rho", "num_classes")
MULTILABEL_AXES = ("source", "seed", "split_seed")


@dataclass(frozen=True)
class DataVariant:
    index: int
    data: dict  # the data section of this variant: every axis at one value
    setting: dict  # its setting axes' values ({} when the sweep varies none)
    repeat: dict  # its repeat axes' values

    @property
    def label(self) -> str:
        """``k=20 seed=3``: the varied axes only (empty for a sweep without data axes)."""
        return " ".join(f"{k}={short_value(v)}" for k, v in {**self.setting, **self.repeat}.items())


def axes_of(section: Mapping[str, Any], multilabel: bool = False) -> list[str]:
    """The keys of ``section`` whose value is a list of alternatives (validated)."""
    allowed = MULTILABEL_AXES if multilabel else REPEAT_AXES + SETTING_AXES
    axes = [k for k, v in section.items() if isinstance(v, list) and not _list_valued(k, multilabel)]
    for key in axes:
        if key not in allowed:
            raise SpecError(
                f"data.{key}={section[key]!r}: a list is not allowed here; allowed as lists (sweep axes): "
                f"{', '.join('data.' + a for a in allowed)}"
            )
        values = section[key]
        if not values:
            raise SpecError(f"data.{key}=[] is empty; allowed: a non-empty list of values")
        if len({repr(v) for v in values}) != len(values):
            raise SpecError(f"data.{key}={values!r} repeats a value; allowed: distinct values")
    return axes


def expand(section: Mapping[str, Any], multilabel: bool = False) -> list[DataVariant]:
    """Every combination of the axis values as data sections with scalar values: setting axes
    outer, repeat axes inner (so one setting's repeats are contiguous), each kind in the order
    its keys appear; the last key varies fastest."""
    found = axes_of(section, multilabel)
    axes = [k for k in found if k not in REPEAT_AXES] + [k for k in found if k in REPEAT_AXES]
    out = []
    for index, values in enumerate(itertools.product(*(section[k] for k in axes))):
        chosen = dict(zip(axes, values))
        out.append(
            DataVariant(
                index=index,
                data={**section, **chosen},
                setting={k: v for k, v in chosen.items() if k not in REPEAT_AXES},
                repeat={k: v for k, v in chosen.items() if k in REPEAT_AXES},
            )
        )
    return out


def _list_valued(key: str, multilabel: bool) -> bool:
    """Keys whose single value is itself a list (not an axis)."""
    if multilabel:
        return key == "label_columns"
    return key in ("minority_classes", "classes")


def short_value(value) -> str:
    """An axis value as it reads in a name: a file source by its file name."""
    if isinstance(value, dict):  # a source given as {train: path, ...}
        return "+".join(os.path.basename(str(v)) for v in value.values())
    value = str(value)
    return os.path.basename(value) if ("/" in value or "\\" in value) else value


def keep_order(variants: list[DataVariant], earlier: list[dict]) -> list[DataVariant]:
    """``variants`` with those a sweep already ran (``earlier``: their data sections, in the
    order they ran) at their old indices and the others after them, in ``expand`` order: a
    trial's config names its variant by index (``__data__``), so an extended sweep
    (``contrasweep extend``) must not move the variants its trials ran on."""
    import json

    def ident(data) -> str:
        return json.dumps(data, sort_keys=True, default=str)

    position = {ident(data): i for i, data in enumerate(earlier)}
    old = sorted((v for v in variants if ident(v.data) in position), key=lambda v: position[ident(v.data)])
    new = [v for v in variants if ident(v.data) not in position]
    return [DataVariant(index=i, data=v.data, setting=v.setting, repeat=v.repeat) for i, v in enumerate(old + new)]
