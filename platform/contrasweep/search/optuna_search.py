"""The ``optuna`` searcher: TPE over the spec's ``search`` domains, NSGA-II when the spec
names several metrics (Optuna's samplers), each suggestion run once per repeat and told once
(``contrasweep.search.study_search.StudySearcher``). ``random_search`` is the same with
Optuna's ``RandomSampler``.

How it resumes: the Optuna study in ``<sweep>/optuna.db`` is its memory (suggestions, each
repeat's outcome, the tells); Tune's copy says only which repeats Tune holds. What it stores:
the study.

May import: ``contrasweep.spec``, ``contrasweep.errors``, ``contrasweep.search.study_build``,
``contrasweep.search.warm_start``; Optuna (inside its methods).
"""

from __future__ import annotations

from contrasweep.errors import SpecError, UserError
from contrasweep.search.base import Searcher
from contrasweep.search.warm_start import startup_trials, warm_points
from contrasweep.spec.domains import as_spec
from contrasweep.spec.sweep import reported_point
from contrasweep.spec.trial import TRIAL_INDEX

EXTENSION_SEED_STEP = 7919  # a sampler's seed moves by this much per extension of its sweep


class OptunaSearch(Searcher):
    name = "optuna"
    growth = ("sweep.num_samples",)
    resumes_from = "the sweep's Optuna study (optuna.db: suggestions, each repeat's outcome, the tells)"
    cannot_grow = (
        "its suggestions were told to the Optuna study as the mean over their repeats, and a finished "
        "study trial cannot be told again"
    )

    def sampler(self, sweep, warm: int = 0, extension: int = 0):
        """TPE (NSGA-II for several metrics) seeded by the sweep's first seed; with ``warm``
        finished points from earlier sweeps, TPE has no random start-up (``startup_trials``).
        The ``extension``-th growth of the sweep (``contrasweep extend``) seeds it anew: its
        random draws are independent of the study's trials, so the first seed again would draw
        the sweep's first start-up suggestions a second time."""
        import optuna

        seed = sweep.seeds[0] + EXTENSION_SEED_STEP * extension
        if len(sweep.metric) > 1:
            return optuna.samplers.NSGAIISampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup_trials(warm))

    def param_space(self, sweep) -> dict:
        """Tune's param_space holds the fixed values; each suggestion is merged over them."""
        return dict(sweep.fixed)

    def search_alg(self, sweep, sweep_dir, live: int, queue: list[dict] | None = None):
        from contrasweep.search.study_build import build  # Ray Tune: plan and the console count without it

        warm = warm_points(sweep, sweep_dir.path.parent) if sweep.warm_start else []
        extension = len(sweep_dir.meta().get("extensions", []))
        return build(sweep, sweep_dir, live, self.sampler(sweep, len(warm), extension), warm)

    def num_samples(self, sweep) -> int:
        return sweep.num_samples * sweep.repeats  # Tune trials: every repeat of every suggestion

    def total_trials(self, sweep) -> int:
        return self.num_samples(sweep)

    def candidate_configs(self, sweep) -> list[tuple[dict, str]]:
        """(configuration, where it comes from) for every value a method's ``check`` can judge:
        the fixed and reported values, then each searched key's values (a choice's options,
        every integer of a ``randint`` or ``quniform`` range, a continuous domain's bounds) with
        the others at that base."""
        # a searched key not reported starts at its first value, never at the method's default
        # (which the searcher may never suggest)
        first = {key: domain.first() for key, domain in sweep.domains.items()}
        point = reported_point(sweep)  # evaluated first; unreported keys at their default when in the domain
        base = {**sweep.fixed, **first, **(point or {})}
        where = (
            f"the reported point ({', '.join(f'{k}={v}' for k, v in point.items())}) is evaluated first: "
            if point
            else ""
        )
        out = [(base, where)]
        for key, domain in sweep.domains.items():
            ((kind, args),) = as_spec(domain).items()
            out += [
                ({**base, key: value}, f"search.{key}={{{kind}: {args}}} includes {key}={value}: ")
                for value in domain.check_values()
            ]
        return out

    def group_sizes(self, sweep) -> int:
        """The repeats of one suggestion in one setting."""
        return sweep.setting_repeats

    def check(self, sweep) -> None:
        if not sweep.search:
            raise SpecError(
                f"sweep.searcher={sweep.searcher} needs a 'search' section of domains; allowed: searcher "
                "grid for exact grids"
            )

    def fewest_trials(self, sweep) -> int:
        """A race's fewest (``contrasweep.search.study_race``): every suggestion's first round in every setting."""
        if not sweep.racing:
            return self.total_trials(sweep)
        settings = sweep.repeats // sweep.setting_repeats
        return sweep.num_samples * settings * sweep.racing.min_repeats

    def every_configuration_reported(self, sweep) -> bool:
        return sweep.num_samples <= 1  # one suggestion

    def trial_configs(self, sweep) -> list[dict]:
        """Its suggestions × their repeats, each at the point it judges first (the fixed and
        reported values, each searched key's first value: ``candidate_configs``)."""
        base = {k: v for k, v in self.candidate_configs(sweep)[0][0].items() if k != "seed"}
        return [{**base, TRIAL_INDEX: i % sweep.repeats} for i in range(self.total_trials(sweep))]

    def reported_configurations(self, sweep) -> int:
        return 1  # the selected suggestion

    def check_growth(self, key: str, was, now, ran) -> bool:
        """More suggestions: the study goes on with the larger budget."""
        if isinstance(now, bool) or not isinstance(now, int) or now <= ran.num_samples:
            raise UserError(
                f"sweep.num_samples={now!r} is not larger than the {ran.num_samples} the sweep ran; "
                "allowed: a larger number of suggestions"
            )
        return True

    def new_suggestions(self, ran, new) -> int:
        return new.num_samples - ran.num_samples
