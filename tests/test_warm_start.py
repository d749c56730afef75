"""``sweep.warm_start`` (contrasweep.search.warm_start) on a real local Ray, MLflow store and Optuna
study: an earlier Optuna sweep's complete configurations enter a new sweep's study as COMPLETE
trials with the values the earlier study was told, before any new suggestion, outside the
budget, named on the sweep run; the new searcher's first suggestion differs from a cold start
with the same seed; a named sweep that is missing, ran something else or has no point inside
the space is one line (exit 2), as is warm_start on a grid."""

from __future__ import annotations

import pytest
import yaml
from conftest import write_spec

pytestmark = pytest.mark.slow

SEARCH = {"lr": {"loguniform": [1.0e-4, 1.0e-2]}, "weight_decay": {"uniform": [0.0, 0.1]}}


def _spec(tmp_path, model_dir, name: str, **sweep):
    return write_spec(tmp_path / f"{name}.yaml", model_dir, grid={}, reported={}, search=SEARCH,
                      fixed={"epochs": 1, "batch_size": 8},
                      sweep={"searcher": "optuna", "scheduler": "none", "seeds": [0], "max_concurrent": 2, **sweep})


def _study(root, name: str):
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{root / name / 'optuna.db'}")


def _cold_suggestions(spec, folder) -> list[dict]:
    """The first two suggestions of a sweep without warm start, from the searcher `run` builds
    (``OptunaSearch.sampler`` and ``study_build.build``: the reported point enqueued first, the
    sampler seeded by the first seed), as Tune would ask for them with two trials live."""
    from types import SimpleNamespace

    from contrasweep.search.optuna_search import OptunaSearch
    from contrasweep.search.study_build import build
    from contrasweep.spec.load import load_spec

    sweep = load_spec(str(spec), [])
    folder.mkdir(parents=True)
    searcher = build(sweep, SimpleNamespace(name=folder.name, path=folder, stage="tune",
                                           optuna_uri=f"sqlite:///{folder / 'optuna.db'}"),
                     sweep.max_concurrent, OptunaSearch().sampler(sweep), [])
    suggested = [searcher.suggest(f"t{i}") for i in range(2)]
    return [{k: v for k, v in s.items() if not k.startswith("__")} for s in suggested]


def test_an_earlier_sweeps_results_seed_the_study(ray_session, tiny_model_dir, tmp_path, cache_dir, capsys):
    from optuna.trial import TrialState

    from contrasweep.cli import main
    from contrasweep.folder import sweeps
    from contrasweep.runner import tune
    from contrasweep.spec.load import load_spec
    from contrasweep.tracking.store import get_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    root = sweeps.sweeps_root(str(tmp_path / "sweeps"))
    tune.run(load_spec(str(_spec(tmp_path, tiny_model_dir, "a", num_samples=3)), []), "a", root, uri, None)
    earlier = {tuple(sorted(t.params.items())): t.value for t in _study(root, "a").trials
               if t.state == TrialState.COMPLETE}
    assert len(earlier) == 3

    warm = load_spec(str(_spec(tmp_path, tiny_model_dir, "b", num_samples=2, warm_start=["a"])), [])
    results = tune.run(warm, "b", root, uri, None)
    assert len(results) == 2  # the budget: new suggestions only
    trials = _study(root, "b").trials
    # the earlier points first, COMPLETE, with the earlier study's values, named
    assert [t.user_attrs.get("warm_start") for t in trials] == ["a", "a", "a", None, None]
    assert {tuple(sorted(t.params.items())): t.value for t in trials[:3]} == pytest.approx(earlier)
    assert all(t.state == TrialState.COMPLETE for t in trials)
    parent = get_client(uri).search_runs([get_client(uri).get_experiment_by_name("tests").experiment_id],
                                         filter_string="tags.`contrasweep.sweep` = 'b' and tags.`contrasweep.kind` = 'sweep'")
    assert parent[0].data.params["warm_start"] == "a"

    # after the reported point (enqueued first in both), a cold start with the same seed samples
    # something else than the warm-started TPE: the cold sweep's searcher, built as `run` builds
    # it, asked for its two suggestions (no training needed to compare them)
    cold = _cold_suggestions(_spec(tmp_path, tiny_model_dir, "c", num_samples=2), tmp_path / "cold" / "c")
    assert cold[0] == trials[3].params  # the reported lr, weight_decay at its default
    assert cold[1] != trials[4].params

    # refused in one line before anything starts
    capsys.readouterr()
    other_method = write_spec(tmp_path / "d.yaml", tiny_model_dir, method="ce_scl", grid={}, reported={}, search=SEARCH,
                              fixed={"epochs": 1, "batch_size": 8},
                              sweep={"searcher": "optuna", "scheduler": "none", "warm_start": ["a"]})
    outside = _spec(tmp_path, tiny_model_dir, "e", warm_start=["a"])
    raw = yaml.safe_load(outside.read_text())
    raw["search"]["lr"] = {"loguniform": [0.5, 0.9]}  # none of a's learning rates
    raw.pop("reported")
    outside.write_text(yaml.safe_dump(raw))
    grid = write_spec(tmp_path / "f.yaml", tiny_model_dir, sweep={"warm_start": ["a"]})
    for spec, expected in ((_spec(tmp_path, tiny_model_dir, "g", warm_start=["nope"]), "no sweep named 'nope'"),
                           (other_method, "'a' ran something else (its method is 'ce', this sweep's 'ce_scl')"),
                           (outside, "'a' has no complete configuration inside this sweep's search space"),
                           (grid, "sweep.warm_start needs sweep.searcher optuna or random")):
        code = main(["--root", str(root), "run", str(spec), "--tracking-uri", uri])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and expected in err[0], err
    assert {s.name for s in sweeps.list_sweeps(root)} == {"a", "b"}  # nothing started
