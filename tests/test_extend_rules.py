"""What ``contrasweep extend`` may grow (``contrasweep.run.extend.check_growth``) and how the data
variants keep the indices their trials ran with (``contrasweep.spec.axes.keep_order``): no Ray."""

from __future__ import annotations

import copy

import pytest

from contrasweep.errors import UserError
from contrasweep.run.extend import check_growth
from contrasweep.spec.axes import expand, keep_order
from contrasweep.spec.load import validate

RAW = {"method": "ce", "data": {"source": "bbc_news", "protocol": "few_shot", "k": [5, 20]},
       "encoder": {"name": "default"}, "grid": {"lr": [1.0e-5, 2.0e-5]}, "fixed": {"epochs": 1},
       "sweep": {"searcher": "grid"}}


def _grown(**changes) -> dict:
    raw = copy.deepcopy(RAW)
    for key, value in changes.items():
        section, name = key.split("__")
        raw[section][name] = value
    return raw


def test_unset_repeat_axes_grow_from_their_defaults():
    ran = validate(RAW)
    assert ran.seeds == [0]
    assert check_growth(RAW, _grown(sweep__seeds=[0, 3]), ran) == ["sweep.seeds"]
    assert check_growth(RAW, _grown(data__seed=[0, 1], data__k=[5, 20, 50]), ran) == ["data.k", "data.seed"]
    with pytest.raises(UserError, match=r"sweep.seeds=\[1, 2\] leaves out \[0\] that the sweep ran"):
        check_growth(RAW, _grown(sweep__seeds=[1, 2]), ran)
    with pytest.raises(UserError, match=r"data.split_seed=\[3\] leaves out \[0\]"):
        check_growth(RAW, _grown(data__split_seed=[3]), ran)
    with pytest.raises(UserError, match="extend cannot change data.protocol"):
        check_growth(RAW, _grown(data__protocol="full"), ran)
    with pytest.raises(UserError, match="data.n_total=unset ran as one value"):
        check_growth(RAW, _grown(data__n_total=[100, 200]), ran)


def test_a_searchers_budget_grows_from_what_it_ran():
    raw = {**copy.deepcopy(RAW), "grid": None, "search": {"lr": {"loguniform": [1.0e-5, 1.0e-3]}},
           "sweep": {"searcher": "optuna"}}
    ran = validate(raw)
    more = copy.deepcopy(raw)
    more["sweep"]["num_samples"] = ran.num_samples  # the default, written out: no growth
    with pytest.raises(UserError, match=f"is not larger than the {ran.num_samples} the sweep ran"):
        check_growth(raw, more, ran)
    more["sweep"]["num_samples"] = ran.num_samples + 1
    assert check_growth(raw, more, ran) == ["sweep.num_samples"]


def test_variants_that_ran_keep_their_indices():
    ran = expand({"source": "bbc_news", "k": [5, 20], "seed": [0, 1]})
    grown = expand({"source": "bbc_news", "k": [5, 10, 20], "seed": [0, 1, 2]})
    kept = keep_order(grown, [v.data for v in ran])
    assert [v.data for v in kept[:4]] == [v.data for v in ran]
    assert [v.index for v in kept] == list(range(9))
    assert sorted((v.data["k"], v.data["seed"]) for v in kept) == sorted((v.data["k"], v.data["seed"]) for v in grown)
