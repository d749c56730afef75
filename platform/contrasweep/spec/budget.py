"""``sweep.budget``: the slot time a sweep may spend (docs/spec.md, "Budget"; the gate that keeps
to it: ``contrasweep.search.budget_gate``).

``budget: {slot_hours: 40}``: the trials' slot time in all, a trial's wall time × the CPUs it
holds, or × its GPUs where it has GPUs (GPU-hours), may not exceed 40 hours. The sweep stops
launching trials when what it spent plus what the running trials and the next one will take
would exceed it, lets the running trials finish, selects from what completed and exits 0.
Absent: no limit.

May import: ``trainables.params``, ``contrasweep.errors``, ``contrasweep.spec.section``.
"""

from __future__ import annotations

from dataclasses import dataclass

from contrasweep.errors import SpecError
from contrasweep.spec.section import check_keys
from trainables.params import Param

BUDGET_PARAMS: dict[str, Param] = {"slot_hours": Param("float", None, 0.0, None, low_open=True, high_open=True)}


@dataclass(frozen=True)
class Budget:
    slot_hours: float

    @property
    def slot_seconds(self) -> float:
        return self.slot_hours * 3600.0


def parse_budget(section) -> Budget | None:
    """``sweep.budget`` as written → a ``Budget`` (None where absent)."""
    if section is None:
        return None
    check_keys(section, BUDGET_PARAMS, "sweep.budget", " such as {slot_hours: 40}")
    if "slot_hours" not in section:
        raise SpecError(
            "sweep.budget needs slot_hours (the trials' wall time × their CPUs, or GPUs, in hours); "
            "allowed: sweep.budget: {slot_hours: 40}"
        )
    return Budget(slot_hours=BUDGET_PARAMS["slot_hours"].coerce("sweep.budget.slot_hours", section["slot_hours"]))


def trial_slots(cpu: float, gpu: float, workers: int) -> tuple[float, str]:
    """What one trial's wall second costs: (slots, their unit): its GPUs where it has any
    (every worker's share), else its CPUs."""
    if gpu > 0:
        return gpu * workers, "GPU"
    return cpu * workers, "CPU"
