"""The contracts of a searcher and a scheduler (docs/architecture.md, "Resume: one rule for every
searcher and scheduler"), in the manner of Optuna's ``BaseSampler`` and Ray Tune's
``Searcher``/``TrialScheduler``: one small, stateless object per name in
``contrasweep.search.registry``; what a sweep remembers lives in the sweep's record
(``tracking.json``), its journals and, for a study, ``optuna.db``, never in Tune's saved state.

May import: ``contrasweep.spec``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from contrasweep.spec.sweep import Sweep


@dataclass(frozen=True)
class Extension:
    """What an extension of a sweep runs (``contrasweep extend``): Tune's ``param_space`` for its
    experiment, the trials it adds (None where the search algorithm draws them: a study's larger
    budget), the repeat groups' sizes with them (None: the spec's), what the console calls them
    and, where it lists its trials, their configs for the search algorithm (``queue``)."""

    space: dict
    trials: int | None = None
    sizes: dict[str, int] | None = None
    unit: str = "new suggestion"
    queue: list[dict] | None = None


class Searcher(ABC):
    """How a sweep chooses its configurations. contrasweep calls it in this order:

    0. **Spec**: ``check`` says what it needs of the spec's sections, once they are read
       (``contrasweep.search.registry.validate``); ``reported_names`` says which reported point
       its run names mark.
    1. **Plan** (``contrasweep plan``, the pre-start checks, the console's progress):
       ``total_trials``, ``group_sizes`` (trials per repeat group), ``candidate_configs`` (the
       values a method's ``check`` judges before anything runs), ``trial_configs`` (every trial
       as the Tune config ``run`` will start), ``reported_configurations`` (how many
       configurations per setting a report shows, so how many the test phase evaluates),
       ``fewest_trials`` (where a race may end sooner: ``sweep.racing``).
    2. **Launch** (``contrasweep.runner.tune.build_tuner``): ``param_space``, ``search_alg`` and
       ``num_samples`` make Tune's part. A trial's Tune config takes one of two forms, which
       ``contrasweep.spec.trial.plan_of`` decodes for every reader (the executor, the tracker,
       the repeat groups' key): ``{"hp": {...}}`` for one trial of a grid, or
       the suggestion's values flat, with ``__suggestion__`` and ``__trial_index__``.
    3. **Selection** (``contrasweep.tracking.aggregate``): ``reports_slices`` says whether a
       report shows the selected configuration's sensitivity slices besides it, and
       ``tests_in_trials`` whether the trials evaluate the test split themselves.
    4. **Resume** (``contrasweep resume``): what ``resumes_from`` says; every driver builds its
       search algorithm again, which never hands out a repeat the sweep's record says finished.
    5. **Extend** (``contrasweep extend``): ``growth`` names the spec keys it can grow (and
       ``cannot_grow`` says why it cannot grow the others), ``check_growth`` judges one grown
       key's values, ``new_suggestions`` counts what a larger budget adds, and ``extension``
       says what the extension's Tune experiment runs.
    """

    name: str
    reports_slices: bool = False
    growth: tuple[str, ...] = ()
    cannot_grow: str = ""
    resumes_from: str = ""  # where its memory is, in a sentence (docs and errors quote it)

    def check(self, sweep: Sweep) -> None:  # noqa: B027 - a hook: a searcher that needs nothing keeps it
        """What it needs of the spec's sections; anything else is one ``SpecError``."""

    def reported_names(self, sweep: Sweep) -> dict | None:
        """The reported point its run names mark as "(reported)" (``Sweep.outside_reported``), or None."""
        return None

    def tests_in_trials(self, sweep: Sweep) -> bool:
        """Whether each complete trial evaluates the test split after its last epoch: with
        ``evaluation.test: all``, and with ``reported`` where a report shows every configuration
        anyway (``every_configuration_reported``). Those trials give the numbers the test phase
        would, without its tasks' processes afterwards."""
        return sweep.test_split == "all" or self.every_configuration_reported(sweep)

    @abstractmethod
    def every_configuration_reported(self, sweep: Sweep) -> bool:
        """Whether a report shows every configuration the sweep runs."""

    @abstractmethod
    def param_space(self, sweep: Sweep) -> dict:
        """Tune's ``param_space``."""

    @abstractmethod
    def search_alg(self, sweep: Sweep, sweep_dir, live: int, queue: list[dict] | None = None):
        """Tune's search algorithm; ``live``: how many trials it may keep running or paused;
        ``queue``: an extension's listed trials (``Extension.queue``), where it lists them."""

    @abstractmethod
    def num_samples(self, sweep: Sweep) -> int:
        """Tune's ``num_samples``."""

    @abstractmethod
    def total_trials(self, sweep: Sweep) -> int:
        """Every trial the sweep runs (all repeats of all configurations)."""

    def fewest_trials(self, sweep: Sweep) -> int:
        """The fewest trials the sweep may run (a race's first rounds alone); all of them without racing."""
        return self.total_trials(sweep)

    @abstractmethod
    def group_sizes(self, sweep: Sweep) -> dict[str, int] | int:
        """Trials per repeat group: ``{group: n}``, or one number for every group."""

    @abstractmethod
    def candidate_configs(self, sweep: Sweep) -> list[tuple[dict, str]]:
        """(configuration, where it comes from) for every value a method's ``check`` judges."""

    @abstractmethod
    def trial_configs(self, sweep: Sweep) -> list[dict]:
        """Every trial ``run`` will start, as its Tune config (a suggestion at the point it is
        judged first), in the order Tune starts them."""

    @abstractmethod
    def reported_configurations(self, sweep: Sweep) -> int:
        """The most configurations per setting a report shows test numbers for."""

    def check_growth(self, key: str, was, now, ran: Sweep) -> bool:
        """Whether the extension grows ``key`` (one of ``growth``) from ``was`` (as it ran) to
        ``now``; a value it cannot grow to is one ``UserError``."""
        return False

    def new_suggestions(self, ran: Sweep, new: Sweep) -> int | None:
        """The suggestions a larger budget adds (None: the extension lists its own trials)."""
        return None

    def extension(
        self, new: Sweep, client, state: dict, parent: str, top: int | None, again: bool, folder=None
    ) -> Extension:
        """The grown sweep's Tune experiment: by default the search algorithm goes on with the
        larger budget (its memory has every earlier suggestion). ``client``, ``state`` and
        ``parent``: the sweep's MLflow client, its record and its sweep run; ``top``: only the
        ``top`` best configurations get new repeats; ``again``: the same extension, run again;
        ``folder``: the sweep's folder (a race's journal)."""
        return Extension(space=self.param_space(new))


def held_back(searcher) -> bool:
    """Whether a searcher hands out no trial now: it keeps ``max_concurrent`` trials live, or its
    scheduler's gate (``gate``, a callable set by ``contrasweep.runner.tune.build_tuner``:
    ``Scheduler``'s ``may_hand_out``) is shut. Tune starts an actor for every trial handed out,
    up to ``TUNE_MAX_PENDING_TRIALS_PG`` at once (``runner.tune.fit``), before any scheduler chooses
    it: what may run is decided here, at the hand-out."""
    gate = getattr(searcher, "gate", None)
    return len(searcher.live) >= searcher.max_concurrent or (gate is not None and not gate())


class Scheduler(ABC):
    """When a sweep's trials start, pause and stop. contrasweep calls it in this order:

    1. **Plan**: ``pause_epochs`` (where the loop must write a full resume state; ``train_rows``,
       each data variant's, resolve a ``max_steps`` budget into epochs: ``Sweep.most_epochs``) and
       ``live_limit`` (how many trials the searcher may keep live).
    2. **Launch**: ``build`` makes Tune's scheduler over the sweep's repeat groups (its
       ``static``: ``contrasweep.spec.static.SweepStatic``, whose key names a trial's group and
       whose ``train_rows`` give the same epochs as ``pause_epochs``); the Tune scheduler's
       ``may_hand_out`` is the searcher's gate (``held_back``): whether one more trial may start.
    3. **Resume**: every driver builds it again; group ASHA reads ``group_asha.json`` (its rung
       values and decisions, by repeat key); the searchers never hand out what finished.
    """

    name: str

    @abstractmethod
    def build(self, sweep: Sweep, sweep_dir, group_sizes: dict[str, int] | int, static):
        """Tune's scheduler."""

    @abstractmethod
    def pause_epochs(self, sweep: Sweep, train_rows: tuple[int, ...] = ()) -> list[int]:
        """Epochs at which it may pause a trial."""

    @abstractmethod
    def live_limit(self, sweep: Sweep, group_sizes: dict[str, int] | int) -> int:
        """How many trials the searcher may keep running or paused."""
