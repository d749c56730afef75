"""The spec's ``sweep:`` section, validated onto a ``Sweep`` (``contrasweep.spec.load.validate``
calls ``parse_sweep_section`` once the other sections are read): the searcher's name, the
scheduler and its ASHA values, the resources, the storage location (``storage_location``), what
a cluster ships, the metrics and modes, the seeds, warm starts, racing and the budget. Every
error is one line naming the bad value and what is allowed.

May import: ``contrasweep.errors``, ``trainables.params``.
"""

from __future__ import annotations

from contrasweep.errors import SpecError
from contrasweep.spec.budget import parse_budget
from contrasweep.spec.racing import parse_racing
from contrasweep.spec.sweep import (
    ASHA_PARAMS,
    MODES,
    NAME_RE,
    RESOURCE_PARAMS,
    SCHEDULERS,
    SHIP_MODES,
    SWEEP_PARAMS,
    Sweep,
)
from trainables.params import LOOP_PARAMS, Param

STORAGE_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss", "file")


def storage_location(value, where: str) -> str | None:
    """A storage path or URI (what Ray Tune's ``storage_path`` and ``pyarrow.fs`` take); only
    the form is checked here, reaching it is the preflight's job (``contrasweep.storage``)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}={value!r} is not a location; allowed: a path, or a URI such as s3://bucket/prefix")
    scheme = value.split("://", 1)[0] if "://" in value else None
    if scheme is not None and scheme not in STORAGE_SCHEMES:
        raise SpecError(
            f"{where}={value!r}: pyarrow.fs opens no {scheme}:// storage; allowed: a path, or "
            + ", ".join(f"{s}://" for s in STORAGE_SCHEMES)
        )
    return value


def parse_sweep_section(sweep: Sweep, section: dict, method_cls) -> None:
    """The ``sweep:`` section onto ``sweep`` (its grid, search, fixed and reported values already
    validated: the checks across sections are made here)."""
    allowed = {
        "searcher",
        "metric",
        "mode",
        "scheduler",
        "asha",
        "seeds",
        "resources",
        "storage",
        "ship",
        "warm_start",
        "racing",
        "budget",
        *SWEEP_PARAMS,
    }
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise SpecError(f"unknown key sweep.{unknown[0]}; allowed: {', '.join('sweep.' + k for k in sorted(allowed))}")
    # the searcher's name and what it needs of the spec: contrasweep.search.registry.check
    sweep.searcher = section.get("searcher", "grid")
    sweep.scheduler = _choice(section.get("scheduler", "asha"), SCHEDULERS, "sweep.scheduler")
    for key, param in SWEEP_PARAMS.items():
        setattr(sweep, key, param.coerce(f"sweep.{key}", section.get(key, param.default)))
    sweep.asha = _sub(section.get("asha") or {}, ASHA_PARAMS, "sweep.asha")
    sweep.storage = storage_location(section.get("storage"), "sweep.storage")
    sweep.ship = _choice(section.get("ship", "code"), SHIP_MODES, "sweep.ship")
    sweep.resources = _sub(section.get("resources") or {}, RESOURCE_PARAMS, "sweep.resources")
    gpu, workers = sweep.resources["gpu"], sweep.resources["workers"]
    if workers > 1 and gpu != int(gpu):
        raise SpecError(
            f"sweep.resources.gpu={gpu:g} with workers={workers}: DDP ranks need a whole GPU each; allowed: "
            "a fraction of a GPU with workers 1 (trials share a GPU), or whole GPUs with several workers"
        )
    _metrics(sweep, section, method_cls)
    seeds = section.get("seeds", [0])
    seeds = seeds if isinstance(seeds, list) else [seeds]
    if not seeds:
        raise SpecError("sweep.seeds is empty; allowed: a non-empty list of integers in [0, 2147483647]")
    sweep.seeds = [LOOP_PARAMS["seed"].coerce("sweep.seeds", s) for s in seeds]
    if len(set(sweep.seeds)) != len(sweep.seeds):
        raise SpecError(f"sweep.seeds={seeds!r} repeats a seed; allowed: distinct integers")
    overlap = sorted((set(sweep.grid) | set(sweep.search)) & set(sweep.fixed))
    if overlap:
        raise SpecError(f"{overlap[0]} is both fixed and searched; allowed: one of fixed or grid/search")
    for key, value in sweep.reported.items():
        if key in sweep.domains and not sweep.domains[key].contains(value):
            raise SpecError(
                f"reported.{key}={value!r} lies outside search.{key}={sweep.search[key]}; allowed: a value inside "
                "the domain"
            )
    warm = section.get("warm_start") or []
    for other in warm if isinstance(warm, list) else [warm]:
        if not isinstance(other, str) or not NAME_RE.match(other):
            raise SpecError(
                f"sweep.warm_start names {other!r}; allowed: the names of earlier sweeps (`contrasweep list`)"
            )
        sweep.warm_start.append(other)
    if "seed" in sweep.grid or "seed" in sweep.search or "seed" in sweep.fixed:
        raise SpecError("seed is set through sweep.seeds; allowed: sweep.seeds: [0, 1, 2]")
    sweep.racing = parse_racing(section.get("racing"), sweep.setting_repeats)
    sweep.budget = parse_budget(section.get("budget"))


def _choice(value, allowed: tuple, where: str) -> str:
    if value not in allowed:
        raise SpecError(f"{where}={value!r} is not allowed; allowed: {', '.join(allowed)}")
    return value


def _sub(section: dict, params: dict[str, Param], where: str) -> dict:
    if not isinstance(section, dict):
        raise SpecError(f"{where} must be a mapping; allowed keys: {', '.join(params)}")
    unknown = sorted(set(section) - set(params))
    if unknown:
        raise SpecError(f"unknown key {where}.{unknown[0]}; allowed: {', '.join(where + '.' + k for k in params)}")
    return {k: p.coerce(f"{where}.{k}", section.get(k, p.default)) for k, p in params.items()}


def _metrics(sweep: Sweep, section: dict, method_cls) -> None:
    metric = section.get("metric", f"val/{method_cls.metric_names[0]}")
    mode = section.get("mode", "max")
    metrics = metric if isinstance(metric, list) else [metric]
    modes = mode if isinstance(mode, list) else [mode] * len(metrics)
    names = method_cls.metric_names + (method_cls.sts_metric_names if sweep.evaluation.get("sts") else ())
    # cost metrics (trainables/loop.py) for quality-cost Pareto sweeps, e.g. [val/accuracy, cost/train_s]
    allowed = [f"val/{m}" for m in names] + ["train/loss", "cost/train_s", "cost/parameters"]
    for m in metrics:
        if m not in allowed:
            raise SpecError(f"sweep.metric={m!r} is not allowed; allowed: {', '.join(allowed)}")
    if len(modes) != len(metrics):
        raise SpecError(f"sweep.mode={mode!r} must name one mode per metric ({len(metrics)}); allowed: max, min")
    for m in modes:
        _choice(m, MODES, "sweep.mode")
    if len(set(metrics)) != len(metrics):
        raise SpecError(f"sweep.metric={metric!r} repeats a metric; allowed: distinct metrics")
    sweep.metric, sweep.mode = list(metrics), list(modes)
