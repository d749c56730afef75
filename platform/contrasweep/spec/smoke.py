"""``--smoke-test``: the spec as written, cut to one epoch and at most two trials.

One epoch goes where the spec sets its epochs: ``fixed.epochs`` when the epochs are fixed, and
every grid block's, the search domain's and the reported point's ``epochs`` when they are
searched (ABALONE's grid picks the baselines' epochs from {10, 40, 80}: a ``fixed.epochs`` there
would be "both fixed and searched"). A grid of blocks that differ only in their epochs then
repeats a configuration; the first two trials of the grid are what a smoke test trains anyway.
A ``max_steps`` budget, which would override the epochs, is set to 0 (off) wherever the spec sets it.

May import: nothing of the project (it edits the raw spec that ``load`` validates).
"""

from __future__ import annotations

TRIALS = 2  # at most this many trials: the first grid points, or searcher samples


def smoke_raw(raw: dict) -> None:
    """Edit a raw spec (after ``--set``) in place: one epoch everywhere the spec says how many,
    and ``sweep.num_samples`` of at most ``TRIALS``."""
    searched = False
    grid = raw.get("grid")
    for block in grid if isinstance(grid, list) else [grid]:
        if isinstance(block, dict) and "epochs" in block:
            block["epochs"], searched = [1], True
    search = raw.get("search")
    if isinstance(search, dict) and "epochs" in search:
        search["epochs"], searched = {"choice": [1]}, True
    reported = raw.get("reported")
    if searched and isinstance(reported, dict) and "epochs" in reported:
        reported["epochs"] = 1
    if not searched:
        fixed = raw.get("fixed")
        fixed = fixed if isinstance(fixed, dict) else {}
        raw["fixed"] = {**fixed, "epochs": 1}
        if isinstance(reported, dict):
            reported.pop("epochs", None)  # the fixed value wins: one epoch for the reported point too
    no_max_steps(raw)
    sweep = raw.get("sweep")
    sweep = sweep if isinstance(sweep, dict) else {}
    raw["sweep"] = {**sweep, "num_samples": min(int(sweep.get("num_samples") or TRIALS), TRIALS)}


def no_max_steps(raw: dict) -> None:
    """``max_steps`` 0 (the epochs decide) wherever the raw spec sets it: fixed, grid, search, reported."""
    grid = raw.get("grid")
    for block in grid if isinstance(grid, list) else [grid]:
        if isinstance(block, dict) and "max_steps" in block:
            block["max_steps"] = [0]
    if isinstance(raw.get("search"), dict) and "max_steps" in raw["search"]:
        raw["search"]["max_steps"] = {"choice": [0]}
    for section in ("fixed", "reported"):
        if isinstance(raw.get(section), dict) and "max_steps" in raw[section]:
            raw[section]["max_steps"] = 0
