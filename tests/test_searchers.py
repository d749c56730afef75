"""The searcher and scheduler contracts (``contrasweep.search.base``): every registered one keeps
them, and a searcher's trials, encoded into Tune's configs, decode back (``spec.trial.plan_of``)
to every configuration × data variant × training seed exactly once. No Ray."""

from __future__ import annotations

from collections import Counter

import pytest
from test_axes import spec

from contrasweep.search.base import Scheduler, Searcher
from contrasweep.search.registry import SCHEDULERS, SEARCHERS, group_sizes
from contrasweep.spec.identity import identify
from contrasweep.spec.static import SweepStatic


def test_every_registered_searcher_and_scheduler_keeps_its_contract():
    for name, searcher in SEARCHERS.items():
        assert isinstance(searcher, Searcher) and searcher.name == name and searcher.resumes_from
        assert searcher.cannot_grow and set(searcher.growth)  # what it grows, and why not the rest
    for name, scheduler in SCHEDULERS.items():
        assert isinstance(scheduler, Scheduler) and scheduler.name == name


@pytest.mark.parametrize("searcher", sorted(SEARCHERS))
def test_trials_encode_into_tune_configs_and_decode_back(searcher):
    """3 split seeds × 2 k × 2 training seeds = 12 repeats of each configuration; a grid has 2
    configurations, a searcher 3 suggestions (drawn later: here all at the first point)."""
    sections = ({"sweep": {"seeds": [0, 1]}} if searcher == "grid" else
                {"grid": {}, "search": {"lr": {"loguniform": [1.0e-5, 1.0e-4]}},
                 "sweep": {"seeds": [0, 1], "searcher": searcher, "num_samples": 3}})
    sweep = spec(**sections)
    impl = SEARCHERS[searcher]
    configs = impl.trial_configs(sweep)
    assert len(configs) == impl.total_trials(sweep) == (2 if searcher == "grid" else 3) * 12
    static = SweepStatic.of(sweep)
    ids = [identify(c, static) for c in configs]
    repeats = Counter((i.variant.index, i.seed) for i in ids)
    assert set(repeats) == {(v, s) for v in range(6) for s in (0, 1)}  # every variant × seed
    assert set(repeats.values()) == {2 if searcher == "grid" else 3}  # once per configuration
    sizes = group_sizes(sweep)
    per_group = Counter(i.group for i in ids)
    if searcher == "grid":  # counted on the grid: 2 configurations × 2 settings (k)
        assert sizes == dict(per_group) and set(sizes.values()) == {6}
    else:  # one number: a suggestion's repeats in one setting
        assert sizes == 6
