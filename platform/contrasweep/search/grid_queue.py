"""The search algorithm of a grid sweep without racing: Tune asks it for trials one at a time and
it hands them out in the grid's order (``Sweep.grid_trials``: the reported point first, a
configuration's repeats next to each other), at most ``max_concurrent`` live at once.

Why not Tune's ``BasicVariantGenerator`` over one ``tune.grid_search`` of every trial (what the
grid ran on before issue 54): the generator resolves its spec once per variant and deep-copies
the whole spec each time, so a 15,000-trial grid (``search_spaces/lacon.yaml``) spent minutes in
a square of the grid's size before its first trial, with Tune's Ctrl-C check waiting behind it;
and every save of Tune's experiment state pickled the generator's iterators over the whole grid.
Here a suggestion is one dict copied, and what Tune saves of this object (``save``) is a
position and the live trials: O(live), whatever the grid's size.

How it resumes: Tune's copy of the position and the live trials, made to agree with the trials
Tune restored (``contrasweep.search.held``: a point Tune lacks is handed out again, before the
position); a trial the sweep's record says finished is ended by the schedulers' ``settle``
(``group_asha.MovableFIFO``), never trained again. An extension's grid is the grown
grid's trials that did not run (``grid_search.new_trials``), in the same order.

May import: Ray Tune's ``Searcher``, ``contrasweep.search.held``.
"""

from __future__ import annotations

import logging
import pickle

from ray.tune.search import Searcher

from contrasweep.search.held import HeldByTune, hp_key

logger = logging.getLogger(__name__)


class GridQueue(HeldByTune, Searcher):
    """``trials``: the grid's trials, each the ``hp`` of one Tune config (``{"hp": trial}``), in the
    order they start; ``max_concurrent``: how many it keeps live (running or paused) at once."""

    def __init__(self, trials: list[dict], max_concurrent: int):
        super().__init__()
        self.trials = trials
        self.max_concurrent = max_concurrent
        self.position = 0  # the next trial to hand out
        self.live: dict[str, int] = {}  # Tune trial id -> the trial's index, handed out and not ended
        self.again: list[int] = []  # indices handed out that Tune never saved: handed out first
        self._index: dict[str, int] | None = None  # a trial's key -> its index (built on an adoption)

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the trials are the spec's; the objective is the scheduler's and the tracker's

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as fh:
            pickle.dump({"position": self.position, "live": self.live, "again": self.again}, fh)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as fh:
            state = pickle.load(fh)
        live = state["live"]  # a set of ids before the indices were kept: none to hand out again
        self.position, self.again = state["position"], list(state.get("again", []))
        self.live = live if isinstance(live, dict) else dict.fromkeys(live)
        self.await_held()

    def suggest(self, trial_id: str) -> dict | str | None:
        self.settle_held()
        if self.position >= len(self.trials) and not self.again:
            return Searcher.FINISHED
        if len(self.live) >= self.max_concurrent:
            return None
        index = self.again.pop(0) if self.again else self.position
        self.position += index == self.position
        self.live[trial_id] = index
        return {"hp": dict(self.trials[index])}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.settle_held()
        self.live.pop(trial_id, None)

    # -- contrasweep.search.held ---------------------------------------------------------
    def identity(self, config: dict) -> int | None:
        if self._index is None:
            self._index = {hp_key(t): i for i, t in enumerate(self.trials)}
        return self._index.get(hp_key(config.get("hp", {})))

    def forgotten(self, values: list) -> None:
        self.again = sorted({*self.again, *(v for v in values if v is not None)})

    def adopted(self, values: list) -> None:
        indices = [v for v in values if v is not None]
        self.again = [i for i in self.again if i not in indices]
        self.position = max([self.position, *(i + 1 for i in indices)])


def build(trials: list[dict], live: int) -> GridQueue:
    """The grid's search algorithm over ``trials`` (``Sweep.grid_trials``, or an extension's)."""
    return GridQueue(trials, live)
