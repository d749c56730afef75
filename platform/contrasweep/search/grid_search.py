"""The ``grid`` searcher: the spec's exact grid (its ``grid`` section, or its blocks) × data
variants × training seeds, the paper's reported point first, handed to Tune one trial at a time
by its search algorithm (``contrasweep.search.grid_queue``; a race's with ``sweep.racing``,
``contrasweep.search.race_search``).

How it resumes: each driver's queue leaves out what the sweep's record says finished
(``tracking.ledger.finished``), never trained again. What it stores: nothing of its own (a
race: ``race.json``).

May import: ``contrasweep.spec``, ``contrasweep.data`` (an unset data axis's default),
``contrasweep.errors``, ``contrasweep.tracking`` (an extension reads what ran), ``contrasweep.folder``
(a race's journal); Ray Tune (inside its methods).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from contrasweep.data.config import DataConfig
from contrasweep.errors import SpecError, UserError
from contrasweep.folder import budget_record, race_record
from contrasweep.search.base import Extension, Searcher
from contrasweep.search.racing import Race, entries_of
from contrasweep.spec.identity import GroupKey, key_of
from contrasweep.spec.static import SweepStatic
from contrasweep.tracking.aggregate import best_groups, groups_of
from contrasweep.tracking.store import OUTCOME_TAG, trial_runs

SETTING_GROWTH = ("data.k", "data.n_total", "data.rho", "data.num_classes")
REPEAT_GROWTH = ("sweep.seeds", "data.seed", "data.split_seed")


class GridSearch(Searcher):
    name = "grid"
    reports_slices = True  # a grid's sensitivity slices through the selected point (LaCon Fig. 5)
    growth = REPEAT_GROWTH + SETTING_GROWTH
    resumes_from = "the sweep's record (tracking.json: which repeats finished)"
    cannot_grow = "a grid runs its exact grid, whatever num_samples says"

    def param_space(self, sweep) -> dict:
        """Nothing: every trial (its hyperparameters, ``__data__``, seed) comes from the search
        algorithm as ``{"hp": trial}``, one at a time."""
        return {}

    def search_alg(self, sweep, sweep_dir, live: int, queue: list[dict] | None = None):
        """The grid's queue (``contrasweep.search.grid_queue``) over ``queue`` (an extension's new
        trials) or the grid's trials; a racing grid's race (``contrasweep.search.race_search``)."""
        if sweep.racing:
            from contrasweep.search.race_search import build  # Ray Tune: plan and the console never need it

            return build(sweep, sweep_dir, live)
        from contrasweep.search import grid_queue  # Ray Tune: plan and the console never need it
        from contrasweep.tracking import ledger

        done = ledger.finished(sweep_dir.path / "tracking.json")
        return grid_queue.build(sweep.grid_trials() if queue is None else queue, live, done)

    def num_samples(self, sweep) -> int:
        """Every trial (a race ends itself sooner; an extension's queue when it runs out)."""
        return self.total_trials(sweep)

    def total_trials(self, sweep) -> int:
        return len(sweep.grid_trials())

    def fewest_trials(self, sweep) -> int:
        if not sweep.racing:
            return self.total_trials(sweep)
        entries = entries_of(sweep.grid_trials(), SweepStatic.of(sweep))
        return Race(entries, sweep.racing.min_repeats, sweep.racing.alpha, sweep.objective.sign).fewest()

    def candidate_configs(self, sweep) -> list[tuple[dict, str]]:
        """The configurations a method's ``check`` judges before the sweep: every grid point."""
        return [(config, "") for config in sweep.grid_configs()]

    def group_sizes(self, sweep) -> dict[str, int]:
        """Trials per repeat group, counted on the grid (a ``--smoke-test`` grid may cut a group short)."""
        key = GroupKey(SweepStatic.of(sweep))
        return dict(Counter(key({"hp": trial}) for trial in sweep.grid_trials()))

    def check(self, sweep) -> None:
        if sweep.search and not sweep.grid:
            raise SpecError(
                "sweep.searcher=grid but the spec has only a 'search' section; allowed: searcher optuna "
                "or random, or add a 'grid'"
            )
        if sweep.warm_start:
            raise SpecError(
                "sweep.warm_start needs sweep.searcher optuna or random (a grid runs every point of its "
                "own); allowed: warm_start with a searcher, or no warm_start"
            )

    def reported_names(self, sweep) -> dict | None:
        return sweep.outside_reported()

    def every_configuration_reported(self, sweep) -> bool:
        """At most one searched hyperparameter takes several values: every configuration lies on
        the selected one's sensitivity slice."""
        return sweep.on_one_slice()

    def trial_configs(self, sweep) -> list[dict]:
        return [{"hp": trial} for trial in sweep.grid_trials()]

    def reported_configurations(self, sweep) -> int:
        """The selected configuration and those on its sensitivity slices (equal to it in every
        searched value but one), counted for the grid point that has the most."""
        keys = [k for k in sweep.varied if k != "seed"]
        points = list({repr(sorted((k, repr(p.get(k))) for k in keys)): p for p in sweep.grid_points()}.values())
        # key -> the other keys' values -> how many points share them
        others: dict[str, dict[tuple[str, ...], int]] = {k: {} for k in keys}
        for p in points:
            for k in keys:
                sig = tuple(repr(p.get(o)) for o in keys if o != k)
                others[k][sig] = others[k].get(sig, 0) + 1
        return max(
            (1 + sum(others[k][tuple(repr(p.get(o)) for o in keys if o != k)] - 1 for k in keys) for p in points),
            default=1,
        )

    def check_growth(self, key: str, was, now, ran) -> bool:
        """A repeat or setting axis grows to a superset of what ran (an unset axis ran its default;
        a setting axis must have run as a list: its trials carry the setting)."""
        if key in SETTING_GROWTH and not isinstance(was, list):
            raise UserError(
                f"{key}={shown(was)} ran as one value, not as a setting axis, so its trials carry no "
                f"setting to grow; allowed: grow sweep.seeds, data.seed or data.split_seed here, or a "
                f"new sweep with {key} as a list (`contrasweep run`)"
            )
        values = (
            was
            if isinstance(was, list)
            else (list(ran.seeds) if key == "sweep.seeds" else [default_of(key)] if was is None else [was])
        )
        missing = [v for v in values if not isinstance(now, list) or v not in now]
        if not isinstance(now, list) or missing:
            raise UserError(
                f"{key}={now!r} leaves out {missing} that the sweep ran; allowed: a list holding "
                f"every value that ran ({values}) and the new ones"
            )
        return len(now) > len(values)

    def extension(self, new, client, state: dict, parent: str, top: int | None, again: bool, folder=None) -> Extension:
        """The grown grid's trials that did not run (``new_trials``), the queue of its search
        algorithm, and the repeat groups' sizes with them (what ran plus what it adds). A race
        goes on instead (``race_extension``)."""
        if new.racing:
            return race_extension(new, state, top, folder, self.group_sizes(new))
        found = groups_of(trial_runs(client, parent))
        cut = set(budget_record.cut_groups(Path(folder) / budget_record.BUDGET_FILE)) if folder else set()
        trials = new_trials(new, state, found, top, open_groups(client, state) if again else frozenset(), cut)
        group_of = GroupKey(SweepStatic.of(new))
        ended = [e for e in state["trials"].values() if "status" in e]
        sizes = dict(Counter(e["group"] for e in ended) + Counter(group_of({"hp": t}) for t in trials))
        return Extension(space={}, trials=len(trials), sizes=sizes, unit="new trial", queue=trials)


def race_extension(new, state: dict, top: int | None, folder, sizes: dict[str, int]) -> Extension:
    """A racing grid grown (more repeats, more settings): the race goes on from its journal.
    Configurations still racing get the new repeats round by round (a round not judged because
    the repeats had run out is judged now); those it dropped, or that the scheduler stopped or a
    failure took out, get none; a new setting races from its first round. Its trials come from
    the race's search algorithm (``contrasweep.search.race_search``); ``trials``: the most it runs;
    ``sizes``: the grown grid's repeat groups (an eliminated group keeps the repeats it ran)."""
    if top is not None:
        raise UserError(
            f"--top {top} with sweep.racing: the race chooses which configurations get new repeats; "
            "allowed: extend without --top"
        )
    journal = race_record.read(Path(folder) / race_record.RACE_FILE) if folder else None
    race = Race(
        entries_of(new.grid_trials(), SweepStatic.of(new)),
        new.racing.min_repeats,
        new.racing.alpha,
        new.objective.sign,
        journal,
    )
    ran = Counter(e["group"] for e in state["trials"].values() if "status" in e)
    return Extension(
        space={},
        trials=race.needed(),
        sizes={g: ran[g] if g in race.out() else n for g, n in sizes.items()},
        unit="new trial at most",
    )


def new_trials(
    new,
    state: dict,
    found: list,
    top: int | None,
    reopened: set | frozenset = frozenset(),
    cut: set | frozenset = frozenset(),
) -> list[dict]:
    """The extended grid's trials that did not run: repeats of the complete configurations of
    each setting that ran (``top``: of its ``top`` best by validation mean; groups stopped early
    or failed get none), and every configuration of a new setting. ``reopened``: the groups an
    earlier try of the same extension reopened (``contrasweep.runner.extend.resume_extension``): they,
    and no others, get repeats (their group size grew, so they no longer count as complete).
    ``cut``: the groups a budget cut short (``budget.json``): their other repeats run."""
    ran = {e["config_key"] for e in state["trials"].values() if "status" in e}  # unfinished: created again
    group_of = GroupKey(SweepStatic.of(new))
    existing = set(state.get("configs", {}))
    # best first; ties by group key, as the selection breaks them (aggregate.select)
    keep = {g.group for g in best_groups(found, new.objective.metric, new.objective.mode, top or None)}
    out = []
    for trial in new.grid_trials():
        group = group_of({"hp": trial})
        if key_of({"hp": trial}) not in ran and (group not in existing or group in (reopened or keep) or group in cut):
            out.append(trial)
    return out


def open_groups(client, state: dict) -> set[str]:
    """Groups whose configuration run has no outcome: reopened for new repeats (or never closed)."""
    return {
        group
        for group, run_id in state.get("configs", {}).items()
        if OUTCOME_TAG not in client.get_run(run_id).data.tags
    }


def default_of(key: str):
    """The value an unset repeat axis has (``contrasweep.data.config.DataConfig``)."""
    return DataConfig.__dataclass_fields__[key.split(".", 1)[1]].default


def shown(value) -> str:
    """A spec value as an error line shows it (``unset`` for none)."""
    return "unset" if value is None else json.dumps(value, default=str)
