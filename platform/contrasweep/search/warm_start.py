"""``sweep.warm_start: [OTHER, ...]`` for ``optuna`` and ``random`` sweeps (docs/architecture.md,
"Warm start"): the complete results of earlier sweeps go into the new study as finished trials
before its first suggestion. They are not trained again and do not count in ``num_samples``.

An earlier sweep can give points when it ran the same method with the same metrics, data section
and encoder (its ``spec.yaml``). Its configurations are read from MLflow: the trial runs
under its sweep run, grouped by configuration across data settings. Only configurations whose
every repeat is complete are used. A point is used when each searched key has a value inside
this sweep's domain and each fixed key has the value this sweep fixes. Its value is what this
sweep's study is told for a suggestion: the mean over the repeats of each metric's
``selection_key`` value (its best epoch's; ``study_search.told``). The trials carry
``WARM_ATTR`` (the sweep they came from), which ``StudySearcher.asked`` leaves out of the budget.

Warm points take the place of TPE's random start-up (``n_startup_trials``, 10 by default): with
at least one, the sampler models from the first suggestion (``startup_trials``). The random
searcher samples the same way whatever it has seen; it gets the points for the record and for
the study's best trial.

A named sweep that does not exist, that ran something else, or that has no point inside this
space is one line (exit 2) before Ray starts.

May import: ``contrasweep.folder`` (sweep folders), ``contrasweep.tracking`` (the store,
aggregation), ``contrasweep.spec``, ``contrasweep.errors``, ``trainables.params``; Optuna.
"""

from __future__ import annotations

import math
from pathlib import Path

from contrasweep.errors import UserError
from contrasweep.folder import sweeps
from contrasweep.folder.record import TrackingState
from contrasweep.spec.sweep import Sweep
from contrasweep.tracking.aggregate import groups, selection_key
from contrasweep.tracking.store import default_tracking_uri
from trainables.params import as_text

WARM_ATTR = "warm_start"  # a study trial's user attribute: the sweep it was taken from
TPE_STARTUP = 10  # Optuna's TPESampler default n_startup_trials


def startup_trials(warm: int) -> int:
    """TPE's random start-up trials: none when ``warm`` finished points seed the study (they are
    its start-up: TPE's random draws do not depend on what the study holds, so any start-up left
    would repeat a cold start's first suggestions), else Optuna's default."""
    return 0 if warm else TPE_STARTUP


def _same(sweep: Sweep, other: dict) -> str | None:
    """Why the earlier sweep's spec ``other`` cannot warm-start ``sweep``, or None."""
    metric = (other.get("sweep") or {}).get("metric", sweep.metric)
    checks = {
        "method": (other.get("method"), sweep.method),
        "sweep.metric": (metric if isinstance(metric, list) else [metric], list(sweep.metric)),
        "data": (other.get("data"), sweep.raw.get("data")),
        "encoder": (
            {k: (other.get("encoder") or {}).get(k) for k in ("name", "max_length")},
            {k: (sweep.raw.get("encoder") or {}).get(k) for k in ("name", "max_length")},
        ),
    }
    for key, (theirs, ours) in checks.items():
        if theirs != ours:
            return f"its {key} is {theirs!r}, this sweep's {ours!r}"
    return None


def _param(dist, text: str):
    """An MLflow param (text) as a value of the Optuna distribution, or None outside it."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        found = [c for c in dist.choices if str(as_text(c)) == text or str(c) == text]
        return found[0] if found else None
    try:
        value = int(float(text)) if isinstance(dist, IntDistribution) else float(text)
    except ValueError:
        return None
    return value if _inside(dist, value) else None


def _inside(dist, value: float) -> bool:
    """Whether ``value`` lies in an Int/Float distribution, from its public ``low``, ``high``
    and ``step`` (as Optuna's own check: on the grid of ``step`` from ``low``, within 1e-8)."""
    if not dist.low <= value <= dist.high:
        return False
    if dist.step is None:
        return True
    steps = (value - dist.low) / dist.step
    return abs(steps - round(steps)) < 1e-8


def points(sweep: Sweep, groups: list, name: str) -> list[dict]:
    """``{"params", "values", "sweep"}`` for every complete configuration of ``groups`` (an earlier
    sweep's repeat groups, ``contrasweep.tracking.aggregate``) inside ``sweep``'s space."""
    dists = {key: domain.distribution() for key, domain in sweep.domains.items()}
    by_config: dict[str, list] = {}
    for group in groups:
        by_config.setdefault(group.config, []).append(group)
    out = []
    for found in by_config.values():
        if not all(g.complete for g in found):
            continue
        hp = found[0].hp
        params = {k: _param(d, hp[k]) if k in hp else None for k, d in dists.items()}
        if any(v is None for v in params.values()):
            continue
        if any(k in hp and hp[k] != str(as_text(v)) for k, v in sweep.fixed.items()):
            continue
        repeats = [r["metrics"] for g in found for r in g.repeats]
        values = [
            sum(r.get(selection_key(m), r.get(m, math.nan)) for r in repeats) / len(repeats) for m in sweep.metric
        ]
        if any(math.isnan(v) for v in values):
            continue
        out.append({"params": params, "values": values, "sweep": name})
    return out


def warm_points(sweep: Sweep, root: Path) -> list[dict]:
    """The points of every sweep ``sweep.warm_start`` names (see the module docstring)."""
    out = []
    for name in sweep.warm_start:
        other = sweeps.open_existing(root, name)
        why = _same(sweep, other.spec())
        if why is not None:
            raise UserError(
                f"sweep.warm_start: {name!r} ran something else ({why}); allowed: earlier sweeps of the "
                "same method, metrics, data and encoder"
            )
        parent = TrackingState(other.path / "tracking.json").data.get("parent_run_id")
        uri = other.meta().get("tracking_uri") or default_tracking_uri()
        found = points(sweep, groups(uri, parent), name) if parent else []
        if not found:
            raise UserError(
                f"sweep.warm_start: {name!r} has no complete configuration inside this sweep's search space; "
                "allowed: sweeps whose searched values lie in the domains and whose fixed values are these"
            )
        out += found
    return out


def warm_trials(dists: dict, found: list[dict]) -> list:
    """The points as finished Optuna trials (COMPLETE, ``WARM_ATTR`` set) over the study's
    distributions ``dists``, for ``study.add_trials``."""
    import optuna

    return [
        optuna.trial.create_trial(
            params=p["params"],
            distributions=dists,
            user_attrs={WARM_ATTR: p["sweep"]},
            **({"values": p["values"]} if len(p["values"]) > 1 else {"value": p["values"][0]}),
        )
        for p in found
    ]
