"""SeedRepeater: the searcher hears the mean over seeds of every metric."""

from __future__ import annotations

import math

from ray.tune.search import Searcher

from contrasweep.search.repeat import SeedRepeater


class Recorder(Searcher):
    def __init__(self, metric, mode):
        super().__init__(metric=metric, mode=mode)
        self.told = []
        self.n = 0

    def suggest(self, trial_id):
        self.n += 1
        return {"lr": 0.1 * self.n}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.told.append((trial_id, result))


def test_mean_of_each_metric_over_seeds():
    inner = Recorder(["val/accuracy", "val/macro_f1"], ["max", "max"])
    rep = SeedRepeater(inner, repeat=3, set_index=True)
    configs = [rep.suggest(f"t{i}") for i in range(3)]
    assert [c["__trial_index__"] for c in configs] == [0, 1, 2]
    assert len({c["lr"] for c in configs}) == 1  # one suggestion, three seeds
    rep.on_trial_complete("t0", {"val/accuracy": 0.5, "val/macro_f1": 0.4})
    rep.on_trial_complete("t1", {"val/accuracy": 0.7, "val/macro_f1": 0.6})
    assert inner.told == []  # waits for every seed
    rep.on_trial_complete("t2", {"val/accuracy": 0.9})  # macro_f1 missing -> NaN, ignored
    (trial_id, result), = inner.told
    assert trial_id == "t0"
    assert math.isclose(result["val/accuracy"], 0.7) and math.isclose(result["val/macro_f1"], 0.5)


def test_single_metric():
    inner = Recorder("val/accuracy", "max")
    rep = SeedRepeater(inner, repeat=2, set_index=True)
    rep.suggest("a"), rep.suggest("b")
    rep.on_trial_complete("a", {"val/accuracy": 0.2})
    rep.on_trial_complete("b", {"val/accuracy": 0.4})
    assert math.isclose(inner.told[0][1]["val/accuracy"], 0.3)
