"""A sweep's repeat groups built from its record at the sweep's end, for the selection
(``tracking.selection``): the groups ``aggregate.groups_of`` reads back from MLflow, without
reading every trial run (3.3 s of MLflow's at 2,000 runs, benchmarks/bookkeeping.py).

May import: ``contrasweep.tracking.aggregate``, ``contrasweep.tracking.rows``, ``contrasweep.spec``.
"""

from __future__ import annotations

from collections.abc import Callable

from contrasweep.spec.identity import identify, tags
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import hp_defaults
from contrasweep.tracking.aggregate import Group, config_hp
from contrasweep.tracking.rows import param_entities


def closed_groups(
    trials: dict[str, dict],
    static: SweepStatic,
    final: dict[str, dict[str, dict]],
    group_size: Callable[[str], int],
    trial_params: Callable,
) -> list[Group] | None:
    """``trials``: the record's entries; ``final``: group -> run id -> the final metrics its group
    was closed with (``RunTree.close_group``); ``group_size`` and ``trial_params`` as the run tree
    tags and logs a trial run. None where an entry is in a group not closed by this driver (an
    earlier driver's, or still open) or has no config: then only MLflow's paged read has them
    all. Repeats and groups in the record's order (the runs' creation), not MLflow's start time."""
    out: dict[str, Group] = {}
    for entry in trials.values():
        group, config = entry.get("group"), entry.get("config")
        if group is None:  # in no group closed here (final's keys are groups)
            return None
        metrics = final.get(group, {}).get(entry["run_id"])
        if metrics is None or config is None:
            return None
        identity = identify(config, static)
        run_tags = tags(identity, static.method)
        if group not in out:
            params = {p.key: p.value for p in param_entities(trial_params(identity))}
            out[group] = Group(
                group,
                run_tags["contrasweep.setting"],
                run_tags["contrasweep.config"],
                config_hp(params),
                size=group_size(group),
                info={k: run_tags[f"contrasweep.{k}"] for k in ("method", "dataset", "protocol")},
            )
        assert identity.plan is not None  # identify() always gives the plan
        out[group].add(
            entry["outcome"],
            {
                "run_id": entry["run_id"],
                "seed": _text({**hp_defaults(static.method), **identity.plan.hp}.get("seed")),
                "data_seed": run_tags.get("contrasweep.data_seed"),
                "split_seed": run_tags.get("contrasweep.split_seed"),
                "metrics": dict(metrics),
            },
        )
    return list(out.values())


def _text(value) -> str | None:
    """A value as MLflow keeps it as a param (``rows.param_entities``), None for none."""
    return None if value is None else str(value)[:6000]
