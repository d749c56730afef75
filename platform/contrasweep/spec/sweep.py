"""A validated sweep (``Sweep``): its method, data, domains, budget and resources, and what the
spec's words mean (the searchers, schedulers, modes and domains it allows). Built by
``contrasweep.spec.load``; imports ``trainables.params`` and ``trainables.registry``'s
declarations (torch-free) only.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from contrasweep.spec.budget import Budget
from contrasweep.spec.objective import MODES, Objective  # noqa: F401  (MODES: the spec's words, spec.load checks them)
from contrasweep.spec.racing import Racing
from contrasweep.spec.trial import DATA_KEY
from trainables.params import LOOP_PARAMS, Param, epochs_for
from trainables.registry import declaration

SHIP_MODES = ("code", "installed")  # sweep.ship (contrasweep.runner.shipping)
# evaluation.test: the test split for the configurations a report shows, after selection
# (docs/architecture.md, "Selection and the test split"), or in every complete trial
TEST_MODES = ("reported", "all")
TOP_KEYS = (
    "name",
    "method",
    "paper",
    "data",
    "evaluation",
    "encoder",
    "reported",
    "grid",
    "search",
    "fixed",
    "sweep",
    "tracking",
)
SCHEDULERS = ("asha", "none")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

SWEEP_PARAMS: dict[str, Param] = {
    "num_samples": Param("int", 1, 1, 100000),
    "max_concurrent": Param("int", 1, 1, 1024),
    "max_failures": Param("int", 1, 0, 100),
}
ASHA_PARAMS: dict[str, Param] = {
    "grace_period": Param("int", 1, 1, 10000),
    "reduction_factor": Param("float", 2.0, 1.0, 100.0, low_open=True),
}
RESOURCE_PARAMS: dict[str, Param] = {
    "cpu": Param("float", 1.0, 0.0, 4096.0, low_open=True),
    "gpu": Param("float", 0.0, 0.0, 64.0),
    "workers": Param("int", 1, 1, 4096),
}
ENCODER_PARAMS: dict[str, Param] = {
    "max_length": Param("int", 128, 8, 8192),
}


@dataclass
class Sweep:
    method: str
    name: str | None = None
    paper: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    encoder: dict = field(default_factory=lambda: {"name": "default", "pooling": "mean", "max_length": 128})
    reported: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)  # every grid key with all its values (the blocks' union)
    grids: list = field(default_factory=list)  # the grid's blocks, each a product of its own lists
    search: dict = field(default_factory=dict)  # {key: {kind: [args]}}, as the spec writes it (saved, logged)
    domains: dict = field(default_factory=dict)  # {key: contrasweep.spec.domains.Domain}: what code reads
    fixed: dict = field(default_factory=dict)
    searcher: str = "grid"
    metric: list = field(default_factory=lambda: ["val/accuracy"])
    mode: list = field(default_factory=lambda: ["max"])
    num_samples: int = 1
    max_concurrent: int = 1
    max_failures: int = 1
    scheduler: str = "asha"
    asha: dict = field(default_factory=lambda: {"grace_period": 1, "reduction_factor": 2.0})
    seeds: list = field(default_factory=lambda: [0])
    warm_start: list = field(default_factory=list)  # earlier sweeps whose results seed the study (search.warm_start)
    racing: Racing | None = None  # sweep.racing (contrasweep.spec.racing): None, every configuration runs every repeat
    budget: Budget | None = None  # sweep.budget (contrasweep.spec.budget): None, no limit on the trials' slot time
    resources: dict = field(default_factory=lambda: {"cpu": 1.0, "gpu": 0.0, "workers": 1})
    experiment: str = "contrasweep"
    keep_models: int | str = (
        2  # configurations of each setting that keep an MLflow model besides the reported ones, or "all"
    )
    storage: str | None = None  # where Tune state and trial state folders live (a path or a pyarrow.fs URI)
    ship: str = "code"  # on a cluster: ship the project's code with the job, or check the installed version
    evaluation: dict = field(default_factory=dict)  # {"test": reported | all} and extra data, e.g. {"sts": path}
    grid_limit: int | None = None  # --smoke-test: only the first N grid trials
    raw: dict = field(default_factory=dict)  # the validated spec as a plain dict (saved with the sweep)
    variants: list = field(default_factory=list)  # contrasweep.spec.axes.DataVariant per data combination

    def _with_defaults(self, config: dict) -> dict:
        return {**hp_defaults(self.method), **config}

    @property
    def distributed(self) -> bool:
        """Ray Train (TorchTrainer, DDP) for several workers; one worker (CPU, a GPU or a
        fraction of one) trains in the Tune trial process itself (no worker group to start)."""
        return self.resources["workers"] > 1

    @property
    def objective(self) -> Objective:
        """The first metric and its mode: what selection, ASHA and the console rank by."""
        return Objective(self.metric[0], self.mode[0])

    @property
    def test_split(self) -> str:
        """``evaluation.test``: ``reported`` (after selection) or ``all`` (in every trial)."""
        return self.evaluation.get("test", TEST_MODES[0])

    @property
    def alpha(self) -> float:
        """``evaluation.alpha``: the level of the test that a configuration beat chance."""
        return float(self.evaluation.get("alpha", 0.05))

    @property
    def max_epochs(self) -> int:
        """The most epochs a trial of this sweep may train by its ``epochs`` values (fixed, reported,
        grid and search); with a ``max_steps`` budget: ``most_epochs``."""
        candidates = [self.fixed.get("epochs"), self.reported.get("epochs"), *self.grid.get("epochs", [])]
        if "epochs" in self.domains:
            candidates.append(self.domains["epochs"].largest())
        values = [int(c) for c in candidates if c is not None]
        return max(values) if values else LOOP_PARAMS["epochs"].default

    def most_epochs(self, train_rows: tuple[int, ...] | list[int] = ()) -> int:
        """The most epochs a trial may train with ``max_steps`` resolved (``trainables.params.epochs_for``
        on the fewest of ``train_rows``, each variant's, and the largest batch): group ASHA's ``max_t``,
        above its rungs. Without ``train_rows`` (nothing prepared) a ``max_steps`` trial is bounded
        by one step an epoch: ``max_steps`` epochs."""
        steps = [int(v) for v in self.loop_values("max_steps")]
        most = self.max_epochs if min(steps) <= 0 else 0
        if max(steps) > 0:
            hp = {"max_steps": max(steps), "batch_size": max(int(b) for b in self.loop_values("batch_size"))}
            most = max(most, epochs_for(hp, min(train_rows) if train_rows else 1))
        return most

    def loop_values(self, key: str) -> list:
        """Every value loop hyperparameter ``key`` may take in a trial: its domain's (a large one's
        bounds) or its grid blocks' values, the fixed value or the default where a trial sets none,
        and the reported point's."""
        base = self.fixed.get(key, LOOP_PARAMS[key].default)
        if key in self.domains:
            values = [*self.domains[key].check_values(), self.domains[key].largest()]
        else:
            blocks = self.grids or [self.grid]
            values = list(self.grid.get(key, [])) + ([base] if any(key not in b for b in blocks) else [])
        if self.reported:
            values.append(self.reported.get(key, base))
        return values

    @property
    def repeats(self) -> int:
        """Trials per configuration: data variants × training seeds."""
        return max(1, len(self.variants)) * len(self.seeds)

    @property
    def setting_repeats(self) -> int:
        """Trials per configuration in one setting: its repeat variants × training seeds."""
        settings = {tuple(sorted(v.setting.items(), key=str)) for v in self.variants} or {()}
        return self.repeats // len(settings)

    @property
    def varied(self) -> list[str]:
        """The hyperparameters that differ between configurations (grid or search keys)."""
        return list(dict.fromkeys([*self.grid, *self.search]))

    def _block_points(self) -> list[dict]:
        """Every point of the grid's blocks as written (no reported point, no fixed values)."""
        return [
            dict(zip(block, values))
            for block in (self.grids or [self.grid])
            for values in itertools.product(*block.values())
        ]

    @property
    def has_reported_point(self) -> bool:
        """A grid whose paper's reported point runs first (``grid_points``); a searcher's reported
        point is one suggestion among others."""
        return bool(self.reported and self.grid)

    def outside_reported(self) -> dict | None:
        """The reported point where the grid's blocks do not hold it (it runs first all the same:
        a user's grid replaced the paper's): its configuration and the defaults it trains with
        for varied hyperparameters it sets no value of, which its run name shows
        (``contrasweep.spec.identity``). None where it is one of the points, or none is reported."""
        if not self.reported:
            return None
        config = {**self.fixed, **self.reported}
        same = self._with_defaults(config)
        if any(self._with_defaults({**self.fixed, **p}) == same for p in self._block_points()):
            return None
        defaults = hp_defaults(self.method)
        return {
            "config": config,
            "defaults": {k: defaults[k] for k in self.varied if k not in config and k in defaults},
        }

    def on_one_slice(self) -> bool:
        """Whether at most one searched hyperparameter takes several values in the grid: every
        configuration then lies on the selected one's sensitivity slice."""
        points = self.grid_points()
        return sum(len({repr(p.get(k)) for p in points}) > 1 for k in self.varied if k != "seed") <= 1

    def grid_trials(self) -> list[dict]:
        """Every trial of a grid sweep: configuration × data variant (``__data__``) × seed, the
        paper's reported configuration first, a configuration's repeats next to each other."""
        variants = range(max(1, len(self.variants)))
        trials = [{**c, DATA_KEY: v, "seed": s} for c in self.grid_points() for v in variants for s in self.seeds]
        return trials[: self.grid_limit]

    def grid_configs(self) -> list[dict]:
        """The exact grid × seeds, the paper's reported setting first (syne-tune convention)."""
        return [{**c, "seed": s} for c in self.grid_points() for s in self.seeds][: self.grid_limit]

    def grid_points(self) -> list[dict]:
        """The configurations of the exact grid, the paper's reported setting first."""
        points = self._block_points()
        base = {**self.fixed}
        reported = {**base, **self.reported}
        configs = [{**base, **p} for p in points]
        if self.reported:
            # a grid point that trains exactly like the reported one (defaults filled in) is
            # not run twice
            same = self._with_defaults(reported)
            configs = [reported] + [c for c in configs if self._with_defaults(c) != same]
        unique = []  # two blocks may share a point: it runs once
        for config in configs:
            if config not in unique:
                unique.append(config)
        return unique or [reported]


def reported_point(sweep: Sweep) -> dict | None:
    """The paper's setting as a full point of the search space (Optuna needs every dimension):
    a dimension the paper does not report takes the parameter's default if it lies in the
    domain, else the domain's first choice or lower bound. None if nothing is reported."""
    if not any(k in sweep.search for k in sweep.reported):
        return None
    params = all_params(sweep.method)
    point = {}
    for key, domain in sweep.domains.items():
        default = params[key].default
        fallback = default if domain.contains(default) else domain.first()
        point[key] = sweep.reported.get(key, fallback)
    return point


def all_params(method: str) -> dict[str, Param]:
    """The hyperparameters a trial of ``method`` takes: the loop's and the method's own."""
    return {**LOOP_PARAMS, **declaration(method).params}


def hp_defaults(method: str) -> dict:
    """Every hyperparameter of the loop and the method at its default value."""
    return {k: p.default for k, p in all_params(method).items()}
