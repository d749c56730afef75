"""The spec's schedulers (``sweep.scheduler``): ``none`` (Tune's FIFO order over the live trials:
``fifo.LiveFIFO``) and ``asha`` (ASHA over repeat groups:
``group_asha.GroupASHA``). Each object builds its Tune scheduler and says at which epochs a
trial may pause (the loop writes a resume state there) and how many trials the searcher may
keep live. A resumed driver's searcher never hands out what the sweep's record says finished;
group ASHA resumes from ``group_asha.json`` (its rung values and decisions). A new scheduler is one class here and one
line in ``contrasweep.search.registry``.

Both ask ``sweep.budget``'s gate (``budget_gate``) before a trial that never ran starts.

May import: ``contrasweep.search.fifo``, ``contrasweep.search.group_asha``,
``contrasweep.search.budget_gate``, ``contrasweep.spec``, ``contrasweep.folder.budget_record``.
"""

from __future__ import annotations

from contrasweep.folder.budget_record import BUDGET_FILE
from contrasweep.search.base import Scheduler
from contrasweep.spec.budget import trial_slots
from contrasweep.spec.identity import GroupKey


def budget_gate(sweep, sweep_dir, group_sizes, static):
    """``sweep.budget``'s gate, which both schedulers ask before a trial that never ran starts; None
    without a budget."""
    if sweep.budget is None:
        return None
    from contrasweep.search.budget_gate import BudgetGate  # Ray Tune, as the schedulers

    res = static.resources
    slots, _ = trial_slots(res.cpu, res.gpu, res.workers)
    return BudgetGate(
        sweep_dir.path / BUDGET_FILE,
        sweep.budget.slot_hours,
        slots,
        GroupKey(static),
        group_sizes,
        sweep_dir.path / "tracking.json",
    )


class NoScheduler(Scheduler):
    name = "none"

    def build(self, sweep, sweep_dir, group_sizes, static):
        from contrasweep.search.fifo import LiveFIFO  # Ray Tune: plan and the console never need it

        return LiveFIFO(budget_gate(sweep, sweep_dir, group_sizes, static))

    def pause_epochs(self, sweep, train_rows: tuple[int, ...] = ()) -> list[int]:
        return []

    def live_limit(self, sweep, group_sizes) -> int:
        return sweep.max_concurrent


class GroupAshaScheduler(Scheduler):
    """A configuration's repeats continue or stop together, on their mean at each rung."""

    name = "asha"

    def grace_period(self, sweep, train_rows: tuple[int, ...] = ()) -> int:
        return min(sweep.asha["grace_period"], sweep.most_epochs(train_rows))

    def build(self, sweep, sweep_dir, group_sizes, static):
        """``static``: the sweep's fixed part (``contrasweep.spec.static``), whose repeat groups it
        ranks and whose variants' training rows resolve a ``max_steps`` budget into epochs (the
        rungs ``pause_epochs`` gave the loop for the same rows)."""
        from contrasweep.search.group_asha import GroupASHA

        rows = static.train_rows
        return GroupASHA(
            metric=sweep.objective.metric,
            mode=sweep.objective.mode,
            max_t=sweep.most_epochs(rows),
            grace_period=self.grace_period(sweep, rows),
            reduction_factor=sweep.asha["reduction_factor"],
            group_of=GroupKey(static),
            group_sizes=group_sizes,
            max_running=sweep.max_concurrent,
            state_path=sweep_dir.path / "group_asha.json",
            budget=budget_gate(sweep, sweep_dir, group_sizes, static),
        )

    def pause_epochs(self, sweep, train_rows: tuple[int, ...] = ()) -> list[int]:
        """ASHA's rungs: a trial paused there continues exactly from the resume state written there."""
        from contrasweep.search.group_asha import rungs

        return rungs(
            sweep.most_epochs(train_rows), self.grace_period(sweep, train_rows), sweep.asha["reduction_factor"]
        )

    def live_limit(self, sweep, group_sizes) -> int:
        """A whole repeat group must be live to pass a rung; the trials running or waiting to stay
        within ``sweep.max_concurrent`` (``GroupASHA.may_hand_out``, the searcher's gate)."""
        largest = max(group_sizes.values()) if isinstance(group_sizes, dict) else group_sizes
        return max(sweep.max_concurrent, largest)
