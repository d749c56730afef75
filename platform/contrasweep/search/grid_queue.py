"""The search algorithm of a grid sweep without racing: Tune asks it for trials one at a time and
it hands them out in the grid's order (``Sweep.grid_trials``: the reported point first, a
configuration's repeats next to each other), at most ``max_concurrent`` live at once.

Why not Tune's ``BasicVariantGenerator`` over one ``tune.grid_search`` of every trial (what the
grid ran on before issue 54): the generator resolves its spec once per variant and deep-copies
the whole spec each time, so a 15,000-trial grid (``search_spaces/lacon.yaml``) spent minutes in
a square of the grid's size before its first trial, with Tune's Ctrl-C check waiting behind it.
Here a suggestion is one dict copied.

How it resumes: every driver builds it anew (``runner.tune``) with ``done``, the configuration keys
the sweep's record says finished (``tracking.ledger.finished``): those are never handed out; the
rest come in the grid's order, so an unfinished repeat (its loop goes on from its state folder)
and one that failed (retried) come first, as every point before them finished. An extension's
grid is the grown grid's trials that did not run (``grid_search.new_trials``), in the same order.

May import: Ray Tune's ``Searcher``, ``contrasweep.spec.identity``, ``contrasweep.search.base``.
"""

from __future__ import annotations

from ray.tune.search import Searcher

from contrasweep.search.base import held_back
from contrasweep.spec.identity import key_of


class GridQueue(Searcher):
    """``trials``: the grid's trials, each the ``hp`` of one Tune config (``{"hp": trial}``), in the
    order they start; ``max_concurrent``: how many it keeps live (running or paused) at once;
    ``done``: configuration keys never to hand out (the record's finished repeats)."""

    def __init__(self, trials: list[dict], max_concurrent: int, done=()):
        super().__init__()
        done = set(done)
        self.trials = [t for t in trials if not done or key_of({"hp": t}) not in done]
        self.skipped = len(trials) - len(self.trials)  # what an earlier driver finished
        self.max_concurrent = max_concurrent
        self.position = 0  # the next trial to hand out
        self.live: set[str] = set()  # Tune trial ids handed out and not ended
        self.gate = None  # the scheduler's may_hand_out (search.base.held_back)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the trials are the spec's; the objective is the scheduler's and the tracker's

    def suggest(self, trial_id: str) -> dict | str | None:  # type: ignore[override]  # Ray's types omit its FINISHED
        if self.position >= len(self.trials):
            return Searcher.FINISHED
        if held_back(self):
            return None
        self.position += 1
        self.live.add(trial_id)
        return {"hp": dict(self.trials[self.position - 1])}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.live.discard(trial_id)

    def forget(self, trial_id: str) -> None:
        """A trial handed out that will never run (the budget ended the sweep first)."""
        self.live.discard(trial_id)


def build(trials: list[dict], live: int, done=()) -> GridQueue:
    """The grid's search algorithm over ``trials`` (``Sweep.grid_trials``, or an extension's),
    without those whose keys are in ``done``."""
    return GridQueue(trials, live, done)
