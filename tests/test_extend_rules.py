"""What ``contrasweep extend`` may grow (``contrasweep.runner.extend.check_growth``) and how the data
variants keep the indices their trials ran with (``contrasweep.spec.axes.keep_order``): no Ray."""

from __future__ import annotations

import copy

import pytest

from contrasweep.errors import UserError
from contrasweep.runner.extend import check_growth
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


def grown(**changes):
    return validate(_grown(**changes))


def test_unset_repeat_axes_grow_from_their_defaults():
    ran = validate(RAW)
    assert ran.seeds == [0]
    assert check_growth(ran, grown(sweep__seeds=[0, 3])) == ["sweep.seeds"]
    assert check_growth(ran, grown(data__seed=[0, 1], data__k=[5, 20, 50])) == ["data.k", "data.seed"]
    with pytest.raises(UserError, match=r"sweep.seeds=\[1, 2\] leaves out \[0\] that the sweep ran"):
        check_growth(ran, grown(sweep__seeds=[1, 2]))
    with pytest.raises(UserError, match=r"data.split_seed=\[3\] leaves out \[0\]"):
        check_growth(ran, grown(data__split_seed=[3]))
    with pytest.raises(UserError, match="extend cannot change encoder.max_length"):
        check_growth(ran, grown(encoder__max_length=64))
    with pytest.raises(UserError, match="data.k=5 ran as one value"):
        check_growth(validate(_grown(data__k=5)), grown(data__k=[5, 20]))
    with pytest.raises(UserError, match="extend cannot change fixed.epochs"):
        check_growth(ran, grown(fixed__epochs=2))
    # the grown spec is compared as validated: a default written out changes nothing
    with pytest.raises(UserError, match="nothing to extend"):
        check_growth(ran, grown(sweep__max_concurrent=1))


def test_a_searchers_budget_grows_from_what_it_ran():
    raw = {**copy.deepcopy(RAW), "grid": None, "search": {"lr": {"loguniform": [1.0e-5, 1.0e-3]}},
           "sweep": {"searcher": "optuna", "num_samples": 3}}
    ran = validate(raw)
    more = copy.deepcopy(raw)
    more["sweep"]["num_samples"] = 2
    with pytest.raises(UserError, match="sweep.num_samples=2 is not larger than the 3 the sweep ran"):
        check_growth(ran, validate(more))
    more["sweep"]["num_samples"] = 4
    assert check_growth(ran, validate(more)) == ["sweep.num_samples"]


def test_variants_that_ran_keep_their_indices():
    ran = expand({"source": "bbc_news", "k": [5, 20], "seed": [0, 1]})
    grown = expand({"source": "bbc_news", "k": [5, 10, 20], "seed": [0, 1, 2]})
    kept = keep_order(grown, [v.data for v in ran])
    assert [v.data for v in kept[:4]] == [v.data for v in ran]
    assert [v.index for v in kept] == list(range(9))
    assert sorted((v.data["k"], v.data["seed"]) for v in kept) == sorted((v.data["k"], v.data["seed"]) for v in grown)
