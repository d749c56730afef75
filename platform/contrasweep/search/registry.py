"""Searchers and schedulers by the name the spec gives them (``sweep.searcher``,
``sweep.scheduler``), in the manner of Ray Tune's ``tune/search`` and ``tune/schedulers``
registries: a name maps to a small object (``contrasweep.search.base``) that builds its Tune
part. ``SEARCHERS`` is the one list of searcher names: a new searcher is one module and one line
here. A spec is whole once its searcher has checked it: ``validate`` and ``load_spec`` are the
spec's (``contrasweep.spec.load``) with that check.

The functions below are what the Tuner asks of a sweep's searcher and scheduler.

May import: the searcher and scheduler modules of this room, ``contrasweep.spec``, ``contrasweep.errors``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from contrasweep.errors import SpecError
from contrasweep.search.base import Searcher
from contrasweep.search.grid_search import GridSearch
from contrasweep.search.optuna_search import OptunaSearch
from contrasweep.search.random_search import RandomSearch
from contrasweep.search.schedulers import GroupAshaScheduler, NoScheduler
from contrasweep.spec import load as spec_load
from contrasweep.spec.sweep import Sweep

SEARCHERS = {s.name: s for s in (GridSearch(), OptunaSearch(), RandomSearch())}
SCHEDULERS = {s.name: s for s in (NoScheduler(), GroupAshaScheduler())}


def searcher_of(sweep) -> Searcher:
    name = sweep.searcher
    if not isinstance(name, str) or name not in SEARCHERS:
        raise SpecError(f"sweep.searcher={name!r} is not allowed; allowed: {', '.join(SEARCHERS)}")
    return SEARCHERS[name]


def check(sweep: Sweep) -> Sweep:
    """The sweep, once its searcher has checked what it needs of the spec (one line otherwise)."""
    searcher_of(sweep).check(sweep)
    return sweep


def validate(raw: dict) -> Sweep:
    """A spec as a plain dict → a whole, validated ``Sweep`` (``contrasweep.spec.load.validate``, checked)."""
    return check(spec_load.validate(raw))


def load_spec(
    spec: str | os.PathLike | Mapping[str, Any],
    overrides: Sequence[str] | None = None,
    smoke: bool = False,
) -> Sweep:
    """A spec (a file or a mapping) and its ``--set`` overrides → a whole, validated ``Sweep``
    (``contrasweep.spec.load.load_spec``, checked)."""
    return check(spec_load.load_spec(spec, overrides, smoke))


def tests_in_trials(sweep: Sweep) -> bool:
    return searcher_of(sweep).tests_in_trials(sweep)


def reported_names(sweep: Sweep) -> dict | None:
    return searcher_of(sweep).reported_names(sweep)


def scheduler_of(sweep):
    return SCHEDULERS[sweep.scheduler]


def param_space(sweep) -> dict:
    return searcher_of(sweep).param_space(sweep)


def group_sizes(sweep) -> dict[str, int] | int:
    """Trials per repeat group: ``{group: n}`` counted on a grid, one number for a searcher."""
    return searcher_of(sweep).group_sizes(sweep)


def live_limit(sweep) -> int:
    """How many trials the searcher may keep live (running or paused)."""
    return scheduler_of(sweep).live_limit(sweep, group_sizes(sweep))


def search_alg(sweep, sweep_dir, queue: list[dict] | None = None):
    """Tune's search algorithm; ``queue``: an extension's listed trials (``Extension.queue``)."""
    return searcher_of(sweep).search_alg(sweep, sweep_dir, live_limit(sweep), queue)


def scheduler(sweep, sweep_dir, static, sizes: dict[str, int] | int | None = None):
    """The Tune scheduler over the sweep's fixed part (``static``: its repeat groups' key);
    ``sizes``: the repeat groups' sizes where they are not the spec's (an extension's). In a
    race a group's repeats start a round at a time: group ASHA's rungs wait for the first
    round's (``sweep.racing.min_repeats``); a later repeat meets rungs its group has passed."""
    sizes = group_sizes(sweep) if sizes is None else sizes
    if sweep.racing:
        first = sweep.racing.min_repeats
        sizes = min(sizes, first) if isinstance(sizes, int) else {g: min(n, first) for g, n in sizes.items()}
    return scheduler_of(sweep).build(sweep, sweep_dir, sizes, static)


def num_samples(sweep) -> int:
    return searcher_of(sweep).num_samples(sweep)


def total_trials(sweep) -> int:
    return searcher_of(sweep).total_trials(sweep)


def fewest_trials(sweep) -> int:
    return searcher_of(sweep).fewest_trials(sweep)


def pause_epochs(sweep, train_rows: tuple[int, ...] = ()) -> list[int]:
    """Epochs at which the scheduler may pause a trial: the loop writes a full resume state there.
    ``train_rows``: each data variant's (``SweepStatic.train_rows``), for a ``max_steps`` budget."""
    return scheduler_of(sweep).pause_epochs(sweep, tuple(train_rows))


def candidate_configs(sweep) -> list[tuple[dict, str]]:
    return searcher_of(sweep).candidate_configs(sweep)


def trial_configs(sweep) -> list[dict]:
    return searcher_of(sweep).trial_configs(sweep)


def reported_configurations(sweep) -> int:
    return searcher_of(sweep).reported_configurations(sweep)
