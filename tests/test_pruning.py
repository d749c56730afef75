"""What the sweep folder keeps of the trials that ended (contrasweep.tracking.pruning), on real state
folders and a real ``tracking.json``: the best weights of each setting's ``max(keep_models, 1)``
best complete groups so far, of open groups, of the reported point, of a group the budget cut or
one with a failed repeat; every other complete repeat's state folder goes, and the record says so.
A new driver (a resume) finishes what a killed one left, and an extension's larger group is judged
again on its new mean."""

from __future__ import annotations

from pathlib import Path

import pytest
from contrasweep.folder.record import MODEL_LOGGED, TrackingState
from contrasweep.spec.identity import group_of
from contrasweep.spec.static import SweepStatic, VariantStatic
from contrasweep.tracking.pruning import PRUNED, Pruner
from contrasweep.tracking.store import BUDGET_CUT, ELIMINATED

METRIC = "best/val/accuracy"


class Sweep:
    """A sweep's record and its trials' state folders, filled as the tracker fills them."""

    def __init__(self, tmp_path: Path, keep_models=1, reported: str | None = None, sizes: dict | None = None,
                 mode: str = "max", settings: tuple = ({},)):
        self.tmp = tmp_path
        self.path = tmp_path / "tracking.json"
        self.state = TrackingState(self.path)
        self.sizes = sizes or {}
        variants = tuple(VariantStatic(index=i, setting=s) for i, s in enumerate(settings))
        self.static = SweepStatic(method="ce", keep_models=keep_models, metric="val/accuracy", mode=mode,
                                  reported_config=reported, variants=variants)
        self.count = 0

    def pruner(self, dropped: dict | None = None) -> Pruner:
        return Pruner(self.state, self.static, lambda g: self.sizes.get(g, 2),
                      lambda g: [e for e in self.state.trials.values() if e.get("group") == g], dropped or {})

    def end(self, pruner: Pruner, config: str, value: float | None, outcome: str = "complete", variant: int = 0,
            dropped: dict | None = None, **extra) -> dict:
        """One trial of ``config`` ended: its state folder (best weights, a resume state), its entry."""
        self.count += 1
        folder = self.tmp / "tune" / f"run_trial_{self.count}" / "state"
        for name in ("best-e0002", "resume-e0002"):
            (folder / name).mkdir(parents=True)
            (folder / name / "model.safetensors").write_bytes(b"w" * 10)
        entry = {"run_id": f"r{self.count}", "group": self.group(config, variant), "variant": variant,
                 "status": "FINISHED" if outcome != "failed" else "FAILED", "outcome": outcome,
                 "final": {} if value is None else {METRIC: value}, "state_dir": str(folder), **extra}
        self.state.trials[f"t{self.count}"] = entry
        self.state.save_key("trials", f"t{self.count}")
        pruner.trial_ended(entry, dropped or {})
        return entry

    def group(self, config: str, variant: int = 0) -> str:
        label = " ".join(f"{k}={v}" for k, v in self.static.variants[variant].setting.items())
        return group_of(config, label)

    def held(self) -> dict[str, bool]:
        """config run id -> whether its state folder is still there."""
        return {e["run_id"]: Path(e["state_dir"]).is_dir() for e in self.state.trials.values()}

    def pruned(self) -> set[str]:
        """Run ids the record (read back from disk) marks pruned."""
        return {e["run_id"] for e in TrackingState(self.path).trials.values() if e.get("weights") == PRUNED}


def test_only_the_best_groups_and_open_ones_keep_their_weights(tmp_path):
    sweep = Sweep(tmp_path, keep_models=1)
    p = sweep.pruner()
    sweep.end(p, "a", 0.5)  # r1: a open
    assert sweep.held() == {"r1": True}
    sweep.end(p, "a", 0.7)  # r2: a closes, mean 0.6, the best so far
    assert all(sweep.held().values()) and sweep.pruned() == set()
    sweep.end(p, "b", 0.9)  # r3: b open: kept whatever its value
    sweep.end(p, "c", 0.1)  # r4: c open
    assert all(sweep.held().values())
    sweep.end(p, "b", 0.5)  # r5: b closes at 0.7 > 0.6: a leaves the kept one
    assert sweep.pruned() == {"r1", "r2"}
    assert sweep.held() == {"r1": False, "r2": False, "r3": True, "r4": True, "r5": True}
    sweep.end(p, "c", 0.2)  # r6: c closes at 0.15: never the best
    assert sweep.pruned() == {"r1", "r2", "r4", "r6"}


def test_keep_models_ties_settings_and_minimising(tmp_path):
    """keep_models: 2 keeps two groups per setting; ties go to the smaller group key (as
    aggregate.select breaks them); with mode min the lowest means stay."""
    sweep = Sweep(tmp_path, keep_models=2, sizes={}, mode="min", settings=({"k": 10}, {"k": 20}))
    sweep.sizes = {sweep.group(c, v): 1 for c in "abcd" for v in (0, 1)}
    p = sweep.pruner()
    for config, value in (("a", 0.3), ("b", 0.1), ("c", 0.3), ("d", 0.2)):
        sweep.end(p, config, value, variant=0)
    sweep.end(p, "a", 0.9, variant=1)  # the other setting keeps its own best
    kept = {sweep.state.trials[t]["group"] for t in sweep.state.trials if sweep.held()[sweep.state.trials[t]["run_id"]]}
    assert kept == {sweep.group("b"), sweep.group("d"), sweep.group("a", 1)}


def test_what_is_exempt_and_what_goes_at_once(tmp_path):
    sweep = Sweep(tmp_path, keep_models=1, reported="rep")
    p = sweep.pruner()
    sweep.end(p, "best", 0.9)
    sweep.end(p, "best", 0.9)
    sweep.end(p, "rep", 0.1)  # the reported point: kept however it does
    sweep.end(p, "rep", 0.1)
    cut = {sweep.group("cut"): {"outcome": BUDGET_CUT, "ran": 1}}
    sweep.end(p, "cut", 0.1, dropped=cut)  # cut short by the budget: an extension may complete it
    sweep.end(p, "failed", 0.2)
    sweep.end(p, "failed", None, outcome="failed")  # resume retries the failed repeat
    out = {sweep.group("elim"): {"outcome": ELIMINATED, "round": 1, "p_value": 0.01, "best": "x"}}
    sweep.end(p, "elim", 0.95, dropped=out)  # a race eliminated it: goes even with a high value
    assert sweep.pruned() == {"r8"}
    assert sweep.held() == {"r1": True, "r2": True, "r3": True, "r4": True, "r5": True, "r6": True, "r7": True,
                            "r8": False}


def test_a_new_driver_finishes_what_a_killed_one_left_and_an_extension_rejudges(tmp_path):
    sweep = Sweep(tmp_path, keep_models=1)
    p = sweep.pruner()
    for config, value in (("a", 0.5), ("a", 0.5), ("b", 0.8), ("b", 0.8)):
        sweep.end(p, config, value)
    assert sweep.pruned() == {"r1", "r2"}
    # a driver killed after recording c's end, before pruning anything: the next one prunes c
    for config in ("c", "c"):
        sweep.count += 1
        folder = tmp_path / "tune" / f"run_trial_{sweep.count}" / "state" / "best-e0002"
        folder.mkdir(parents=True)
        sweep.state.trials[f"t{sweep.count}"] = {"run_id": f"r{sweep.count}", "group": sweep.group("c"), "variant": 0,
                                                 "status": "FINISHED", "outcome": "complete",
                                                 "final": {METRIC: 0.1}, "state_dir": str(folder.parent)}
    sweep.state.save()
    sweep.state = TrackingState(sweep.path)
    sweep.pruner()
    assert sweep.pruned() == {"r1", "r2", "r5", "r6"} and sum(sweep.held().values()) == 2
    # an extension grows every group to 3 repeats: b's third repeat brings its mean below a's
    sweep.sizes = {sweep.group(c): 3 for c in "abc"}
    grown = sweep.pruner()
    assert sweep.pruned() == {"r1", "r2", "r5", "r6"}  # open again: nothing more goes
    sweep.end(grown, "a", 0.5)  # a closes at 0.5 (its first repeats' weights had gone): best of the closed ones
    assert sweep.held()["r7"] is True
    sweep.end(grown, "b", 0.0)  # b closes at 0.533 > 0.5: a leaves the kept one
    assert sweep.held()["r7"] is False and sweep.held()["r8"] is True and sweep.held()["r3"] is True
    assert sweep.pruned() == {"r1", "r2", "r5", "r6", "r7"}


def test_every_model_logged_leaves_no_folder(tmp_path):
    sweep = Sweep(tmp_path, keep_models="all")
    p = sweep.pruner()
    sweep.end(p, "a", 0.5, model=MODEL_LOGGED)
    sweep.end(p, "b", 0.1)  # no model (none could be built): its weights stay while it matters
    assert sweep.held() == {"r1": False, "r2": True} and sweep.pruned() == set()


@pytest.mark.parametrize("value", [None, float("nan")])
def test_a_group_without_a_value_is_never_kept(tmp_path, value):
    sweep = Sweep(tmp_path, keep_models=1, sizes={})
    sweep.sizes = {sweep.group("a"): 1, sweep.group("b"): 1}
    p = sweep.pruner()
    sweep.end(p, "a", 0.5)
    sweep.end(p, "b", value)
    assert sweep.pruned() == {"r2"}
