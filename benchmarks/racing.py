"""Racing over repeats against every repeat (issue 43): the tweet-sentiment CE grid (lr {1e-5,
2e-5, 3e-5} × batch size {16, 32}, ``benchmarks/tweet_sentiment_ce.yaml``) with 5 training
seeds, run with every repeat and with ``sweep.racing: {min_repeats: 3, alpha: 0.05}``, side by
side in one run.

Both sweeps run in this process through ``contrasweep.runner.tune.run`` (what ``contrasweep run``
does, without the report), on the same local Ray (started once, before either runs), the same
tokenised data (the cache, filled first) and a fresh MLflow store each; the full sweep first.

Per sweep: its trials, wall time, the selected configuration and its validation mean ± std over
its repeats (the configuration run's ``mean/best/val/accuracy``). Then the goal: racing's trials
/ the full sweep's trials ≤ 0.6, and racing selects the full sweep's configuration, or one
whose mean *in the full sweep* lies inside the full sweep's 95 % t-interval of its best
configuration's mean.

The bound: every configuration runs ``min_repeats`` first, so racing runs at least
``configurations × min_repeats`` trials (+ the last one's remaining repeats): 6 × 3 + 2 = 20 of
30 here (0.667), above 0.6 whatever the test says. So the full sweep's per-repeat values are
also replayed through the race (``contrasweep.search.racing.Race``) for other ``min_repeats``
and ``alpha`` (training is deterministic per seed: ``values_match`` checks that the racing
sweep's repeats got the full sweep's values). Not a test; run it as

    flock /tmp/contrasweep-ray.lock python benchmarks/racing.py
    flock /tmp/contrasweep-ray.lock python benchmarks/racing.py --set fixed.epochs=1   # a quick look

Without Ray or training (issue 69), ``--simulate`` measures the race's test on made-up values:
how often a round of equal configurations (2, 10, 30; 3 matched normal repeats, alpha 0.05)
eliminates one, and how often one 0.3 below the rest (seeds' spread 0.03) leaves at round 3
and 4; ``--replay RECORD`` runs the race on the per-trial values of an earlier record
(``docs/measurements/racing_2026-11-28.json``'s full sweep) for every ``min_repeats``/``alpha``.

    python benchmarks/racing.py --simulate --replay docs/measurements/racing_2026-11-28.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SEEDS = "sweep.seeds=[0, 1, 2, 3, 4]"
RACING = "sweep.racing={min_repeats: 3, alpha: 0.05}"


def one_sweep(spec: str, overrides: list[str], name: str, work: Path) -> dict:
    from contrasweep.folder import sweeps
    from contrasweep.folder.record import read
    from contrasweep.runner import tune
    from contrasweep.spec.load import load_spec
    from contrasweep.tracking.store import KIND_TAG, get_client

    sweep = load_spec(spec, overrides)
    uri = f"sqlite:///{work / name / 'mlflow.db'}"
    (work / name).mkdir(parents=True)
    root = sweeps.sweeps_root(str(work / name / "sweeps"))
    started = time.perf_counter()
    results = tune.run(sweep, name, root, uri, None)
    wall = time.perf_counter() - started
    state = read(root / name / "tracking.json")
    client = get_client(uri)
    parent = client.get_run(state["parent_run_id"])
    key = "best/" + sweep.objective.metric
    configs = {}
    for run in client.search_runs([parent.info.experiment_id], filter_string=f"tags.`{KIND_TAG}` = 'configuration'"):
        hp = {k[3:]: v for k, v in run.data.params.items() if k.startswith("hp.") and k[3:] in sweep.varied}
        configs[json.dumps(hp, sort_keys=True)] = {
            "mean": run.data.metrics.get(f"mean/{key}"), "std": run.data.metrics.get(f"std/{key}"),
            "n": int(run.data.metrics.get("n_repeats", 0)), "outcome": run.data.tags.get("contrasweep.outcome"),
            "round": run.data.tags.get("contrasweep.race.round"), "p_value": run.data.tags.get("contrasweep.race.p_value")}
    from contrasweep.tracking.aggregate import groups_of
    from contrasweep.tracking.store import trial_runs

    values = {g.group: {repeat_key(r): r["metrics"].get(key) for r in g.repeats}
              for g in groups_of(trial_runs(client, parent.info.run_id))}
    chosen = client.get_run(parent.data.tags["contrasweep.best_config"])
    selected = {k[3:]: v for k, v in chosen.data.params.items() if k.startswith("hp.") and k[3:] in sweep.varied}
    return {"name": name, "wall_s": wall, "trials": len(results), "selected": json.dumps(selected, sort_keys=True),
            "configurations": configs, "values": values}


def repeat_key(repeat: dict) -> str:
    return f"data_seed={repeat.get('data_seed')} split_seed={repeat.get('split_seed')} seed={repeat.get('seed')}"


def replay(values: dict[str, dict[str, float]], min_repeats: int, alpha: float) -> dict:
    """The race run on recorded per-repeat values (group -> repeat -> value): trials, survivors."""
    from contrasweep.search.racing import Entry, Race

    race = Race([Entry(g, r, "") for g, repeats in values.items() for r in sorted(repeats)], min_repeats, alpha, 1.0)
    ran = 0
    while (chosen := race.next(set())) is not None:
        race.record(*chosen, values[chosen[0]][chosen[1]], "complete")
        ran += 1
        race.advance()
    return {"min_repeats": min_repeats, "alpha": alpha, "trials": ran, "ratio": ran / race.total(),
            "fewest": race.fewest(), "kept": sorted(g for g in values if g not in race.out())}


def simulate(rounds: int = 4000, seed: int = 0) -> dict:
    """The race's test on made-up rounds (see the module docstring)."""
    import numpy as np

    from contrasweep.search.racing import judge

    rng = np.random.default_rng(seed)
    out = {"rounds": rounds, "equal": {}, "worse_leaves": {}}
    for k in (2, 10, 30):
        hits = 0
        for _ in range(rounds):
            v = rng.normal(size=(k, 3)) + rng.normal(size=(1, 3))
            hits += any(p <= 0.05 for p in judge({f"g{i:02d}": list(r) for i, r in enumerate(v)}, 1.0)[1].values())
        out["equal"][k] = hits / rounds
        for n in (3, 4):
            left = 0
            for _ in range(rounds // 10):
                v = 0.8 + 0.03 * (rng.normal(size=(k, n)) + rng.normal(size=(1, n)))
                v[-1] -= 0.3
                left += judge({f"g{i:02d}": list(r) for i, r in enumerate(v)}, 1.0)[1][f"g{k - 1:02d}"] <= 0.05
            out["worse_leaves"][f"k={k} round {n}"] = left / (rounds // 10)
    return out


def recorded_values(path: str) -> dict[str, dict[str, float]]:
    """group -> repeat -> value, from an earlier record's ``full.best_val_per_trial``."""
    values: dict[str, dict[str, float]] = {}
    for name, value in json.loads(Path(path).read_text())["full"]["best_val_per_trial"].items():
        config, repeat = name.split(" · ")
        values.setdefault(config, {})[repeat] = value
    return values


def interval(mean: float, std: float, n: int) -> tuple[float, float]:
    """The 95 % t-interval of a mean over ``n`` repeats."""
    from scipy import stats

    half = float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return float(mean - half), float(mean + half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "benchmarks" / "tweet_sentiment_ce.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default="racing.json")
    parser.add_argument("--simulate", action="store_true", help="the test on made-up rounds; no Ray")
    parser.add_argument("--replay", metavar="RECORD", help="the race on an earlier record's values; no Ray")
    args = parser.parse_args()
    if args.simulate or args.replay:
        out = {"simulate": simulate() if args.simulate else None,
               "replays": [replay(recorded_values(args.replay), m, a) for m in (2, 3, 4) for a in (0.05, 0.1)]
               if args.replay else None}
        Path(args.out).write_text(json.dumps(out, indent=1, default=_plain))
        print(json.dumps(out, indent=1, default=_plain))
        return

    from contrasweep.runner.inputs import prepare_data
    from contrasweep.runner.ray_start import init_ray
    from contrasweep.spec.load import load_spec

    full_overrides = [*args.overrides, SEEDS]
    prepare_data(load_spec(args.spec, full_overrides))  # the cache both sweeps hit
    init_ray(None, num_cpus=os.cpu_count())
    work = Path(tempfile.mkdtemp(prefix="racing-"))
    try:
        full = one_sweep(args.spec, full_overrides, "full", work)
        race = one_sweep(args.spec, [*full_overrides, RACING], "racing", work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = summarise(full, race, args.spec, full_overrides)
    Path(args.out).write_text(json.dumps(out, indent=1, default=_plain))
    show(out)


def _plain(value):
    """numpy's scalars (a bool of float comparisons) as JSON's own."""
    return value.item() if hasattr(value, "item") else str(value)


def summarise(full: dict, race: dict, spec: str, overrides: list[str]) -> dict:
    """The two sweeps side by side: ratios, the goal, the replays."""
    best = full["configurations"][full["selected"]]
    low, high = interval(best["mean"], best["std"], best["n"])
    in_full = full["configurations"][race["selected"]]["mean"]
    out = {"spec": spec, "overrides": overrides, "racing": RACING, "full": full, "race": race,
           "trial_ratio": race["trials"] / full["trials"], "wall_ratio": race["wall_s"] / full["wall_s"],
           "same_selection": race["selected"] == full["selected"], "full_best_interval": [low, high],
           "race_selection_mean_in_full": in_full, "within_interval": low <= in_full <= high}
    out["within_interval"] = bool(out["within_interval"])
    out["goal_met"] = out["trial_ratio"] <= 0.6 and (out["same_selection"] or out["within_interval"])
    out["values_match"] = all(full["values"][g][r] == v for g, rs in race["values"].items() for r, v in rs.items())
    out["replays"] = [replay(full["values"], m, a) for m in (2, 3, 4) for a in (0.05, 0.1)]
    return out


def show(out: dict) -> None:
    full, race = out["full"], out["race"]
    low, high = out["full_best_interval"]
    in_full = out["race_selection_mean_in_full"]
    for r in (full, race):
        print(f"{r['name']:7}: {r['trials']} trials, {r['wall_s']:.0f} s; selected {r['selected']}")
        for hp, c in sorted(r["configurations"].items()):
            left = f", eliminated at round {c['round']} (p {c['p_value']})" if c["outcome"] == "eliminated" else ""
            print(f"    {hp}: {c['mean']:.4f} ± {c['std'] or 0.0:.4f} (n={c['n']}){left}")
    print(f"trials racing / full: {out['trial_ratio']:.3f} (goal <= 0.6); wall time {out['wall_ratio']:.3f}; same "
          f"selection: {out['same_selection']}; racing's choice has mean {in_full:.4f} in the full sweep, whose best's "
          f"95 % interval is [{low:.4f}, {high:.4f}]; goal met: {out['goal_met']}")
    print(f"the full sweep's values replayed through the race (values match: {out['values_match']}):")
    for r in out["replays"]:
        print(f"    min_repeats {r['min_repeats']}, alpha {r['alpha']}: {r['trials']} trials ({r['ratio']:.3f}; fewest "
              f"{r['fewest']}), kept {len(r['kept'])}")


if __name__ == "__main__":
    main()
