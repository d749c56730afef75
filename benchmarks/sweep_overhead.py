"""What a sweep adds to its trials: the same trials as direct loop calls and through contrasweep run.

The same N trials run as direct calls of the loop and through ``contrasweep run`` (Ray Tune,
the trial executor, MLflow tracking), side by side in one run.

What it measures: N trials (one method, default CE; the bundled MiniLM on BBC News few-shot,
LaCon Sec. 4.1 protocol, k per class; one learning rate per trial from a geometric grid, seed 0)
run twice, serially on the same cores:

(a) direct: ``trainables.loop.train`` called in this process with a pruning ``LocalSession``
    (``prune = True``, like Tune's session), the same loop configs (built from the same spec by
    the executor's own ``trial_hp``: same hyperparameters, seeds, torch threads) and the same
    tokenised data (the same cache entry);
(b) sweep: ``contrasweep.runner.tune.run`` on the same spec, in this process (not the CLI as a
    subprocess: (a) does not pay an interpreter start and imports either, so neither does (b);
    the CLI's report generation after the sweep is left out too), with ``sweep.max_concurrent:
    1``, ``sweep.resources: {cpu: N_CPU}``, ``sweep.scheduler: none`` (every trial runs every
    epoch) and MLflow tracking into a fresh SQLite store. (b)'s time includes starting the local
    Ray (``contrasweep.runner.ray_start.init_ray``) and everything ``tune.run`` does (encoder check, data
    cache hit, object store, sweep folder, MLflow runs, best configuration and model registry).

(a) runs before Ray starts and again after Ray has shut down (``--direct-rounds 2``: a, b, a),
so that Ray's own processes never run beside it and drift or other load on the machine hits
both sides; (a)'s numbers are the mean of its rounds.

Per trial, from the loop's reported phase times (``time/<phase>_s``: Tune's results, also in
MLflow) and the trial's MLflow run (created when Tune starts the trial, ended after its last
result and best checkpoint are logged): setup (model build), first step (the first epoch's
training time above the later epochs' median: lazy initialisation, first batches), training,
evaluation, checkpoint, test, the loop's own sum (setup + its epochs), the trial's wall time
(MLflow run start to end; Tune's ``time_total_s`` beside it) and the remainder = wall − the
loop's own sum = what Tune, the executor and tracking add to the trial (actor start, imports,
data from the object store, reports, checkpoint pointers, MLflow logging); plus the gap until
the next trial starts. Data ready: ``ray.get`` of the data reference in a Ray task, timed
separately after the sweep (zero-copy Arrow from the object store).

Goals: a single-worker trial adds <= 2 s to its training and test pass (remainder + gap to the
next trial + the set-up its fresh process pays above a direct run's: lazy imports, cold caches);
sweep / direct wall time <= 1.10 (printed last). Not a test; run it (it starts Ray: one Ray
instance at a time on this machine) as

    flock /tmp/contrasweep-ray.lock python benchmarks/sweep_overhead.py            # 4 trials x 10 epochs, MiniLM
    flock /tmp/contrasweep-ray.lock python benchmarks/sweep_overhead.py --model tiny --trials 2 --epochs 2 --k 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]
# what a trial process gets (contrasweep.runner.shipping.worker_env) and the driver sets (torch_threads_env)
for key, value in {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_OFFLINE": "1"}.items():
    os.environ.setdefault(key, value)

from contrasweep.runner.ray_env import local_ray_environment  # noqa: E402
from trainables.sessions import LocalSession  # noqa: E402

local_ray_environment()  # before Ray's import: the local Ray init_ray starts (loopback, token mode)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "sweep_overhead.json"
EXPERIMENT = "sweep-overhead"
NAME = "overhead"
PER_TRIAL_GOAL_S = 2.0
RATIO_GOAL = 1.10


class PruningSession(LocalSession):
    """A local session that prunes superseded checkpoint states, as Tune's session does."""

    prune = True


def learning_rates(n: int) -> list[float]:
    """One learning rate per trial, geometric between 1e-5 and 1e-4 (2e-5 for one trial)."""
    if n == 1:
        return [2.0e-5]
    return [float(f"{1.0e-5 * 10 ** (i / (n - 1)):.3g}") for i in range(n)]


def write_spec(path: Path, args, model: str) -> Path:
    import yaml

    spec = {
        "method": args.method,
        "paper": {"title": "benchmarks/sweep_overhead.py", "where": "direct loop vs sweep, same trials"},
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": args.k, "seed": 0},
        "encoder": {"name": model, "pooling": "mean", "max_length": args.max_length},
        "grid": {"lr": learning_rates(args.trials)},
        "fixed": {"epochs": args.epochs, "batch_size": args.batch_size, "warmup_ratio": 0.06},
        "sweep": {"searcher": "grid", "metric": "val/accuracy", "mode": "max", "scheduler": "none", "seeds": [0],
                  "max_concurrent": 1, "resources": {"cpu": args.cpu}},
        "tracking": {"experiment": EXPERIMENT},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def loop_configs(sweep, num_labels: int) -> list[dict]:
    """What ``contrasweep.runner.executor.run_trial`` hands the loop, for every grid trial."""
    from contrasweep.search.registry import pause_epochs
    from contrasweep.spec.static import SweepStatic
    from contrasweep.spec.trial import trial_hp

    static = SweepStatic.of(sweep)
    out = []
    for trial in sweep.grid_trials():
        config = {"method": sweep.method, "encoder": {"name": sweep.encoder["name"], "pooling": sweep.encoder["pooling"]},
                  "hp": trial_hp({"hp": trial}, static), "metric": sweep.metric[0], "mode": sweep.mode[0],
                  "num_labels": num_labels}
        if pause_epochs(sweep):
            config["checkpoint_at"] = pause_epochs(sweep)
        out.append(config)
    return out


def breakdown(reports: list[dict]) -> dict:
    """The loop's own time of one trial, by phase, from its per-epoch reports."""

    def total(phase: str) -> float:
        return sum(float(r.get(f"time/{phase}_s", 0.0)) for r in reports)

    reports = sorted(reports, key=lambda r: r["epoch"])
    train = [float(r.get("time/train_s", 0.0)) for r in reports]
    first_step = max(0.0, train[0] - statistics.median(train[1:])) if len(train) > 1 else None
    out = {"epochs": len(reports), "setup_s": total("setup"), "first_step_s": first_step, "train_s": total("train"),
           "stage2_s": total("stage2"), "eval_s": total("eval"), "checkpoint_s": total("checkpoint"),
           "test_s": total("test")}
    out["loop_s"] = out["setup_s"] + total("epoch")
    out["loop_other_s"] = total("epoch") - sum(out[k] for k in ("train_s", "stage2_s", "eval_s", "checkpoint_s", "test_s"))
    return out


def mean_rounds(rounds: list[dict]) -> dict:
    """The direct side over its rounds: each number averaged, trial by trial (matched by lr)."""
    def mean(values):
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else None

    trials = []
    for group in zip(*(r["trials"] for r in rounds)):
        trials.append({k: (mean([t[k] for t in group]) if isinstance(group[0][k], (int, float)) or group[0][k] is None
                           else group[0][k]) for k in group[0]})
    return {"total_s": mean([r["total_s"] for r in rounds]), "data_s": mean([r["data_s"] for r in rounds]),
            "trials": trials, "rounds": rounds}


def run_direct(configs: list[dict], sweep, work: Path, round_: int) -> dict:
    """(a): the loop called directly, trial after trial; the data read as a trial's would be
    (the same cache entry, a cache hit as in (b))."""
    from contrasweep.data import load_splits
    from contrasweep.runner.inputs import prepare_data
    from trainables.loop import train

    started = time.perf_counter()
    prepared = prepare_data(sweep)[0]
    data = {"tables": load_splits(prepared.path), "num_labels": prepared.num_labels, "label_names": prepared.label_names}
    data_s = time.perf_counter() - started
    trials = []
    for i, config in enumerate(configs):
        folder = work / "direct" / f"trial-{i}"
        session = PruningSession(str(folder))
        cpu, began = time.process_time(), time.perf_counter()
        final = train(config, data, session)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        trials.append({"lr": config["hp"]["lr"], "seed": config["hp"]["seed"], "wall_s": wall, "cpu_s": cpu,
                       "best": final.get("best/val/accuracy"), "test_accuracy": final.get("test/accuracy"),
                       **breakdown(session.reports)})
        shutil.rmtree(folder, ignore_errors=True)
        t = trials[-1]
        print(f"(a) direct round {round_} trial {i}: lr {t['lr']:.3g}  wall {wall:6.2f} s  loop {t['loop_s']:6.2f} s  "
              f"train {t['train_s']:6.2f} s  cpu/wall {cpu / wall:.2f}  test acc {t['test_accuracy']}", flush=True)
    return {"total_s": time.perf_counter() - started, "data_s": data_s, "trials": trials}


def run_sweep(spec_path: Path, work: Path) -> dict:
    """(b): the same trials through ``contrasweep.runner.tune.run`` (Tune, executor, MLflow)."""
    from contrasweep.folder import sweeps
    from contrasweep.runner import ray_start, tune
    from contrasweep.spec import load as spec

    uri = f"sqlite:///{work / 'mlflow.db'}"
    started, wall_start = time.perf_counter(), time.time()
    sweep = spec.load_spec(spec_path)
    # what tune.run would start itself: sized to this machine, the dashboard only where trials need it
    ray_start.init_ray(None, dashboard=ray_start.wants_dashboard(sweep, asked=False))
    ray_s = time.perf_counter() - started
    results = tune.run(sweep, NAME, sweeps.sweeps_root(str(work / "sweeps")), uri, None)
    total = time.perf_counter() - started
    wall_end = time.time()
    errors = [str(r.error) for r in results if r.error is not None]
    if errors:
        raise SystemExit(f"the sweep had failed trials: {errors[0]}")

    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], "tags.`contrasweep.kind` = 'trial'", max_results=10000)
    span = {r.data.tags["contrasweep.trial_id"]: (r.info.start_time / 1000.0, r.info.end_time / 1000.0) for r in runs}
    trials = []
    for result in results:
        frame = result.metrics_dataframe
        reports = [{k: v for k, v in row.items() if (k == "epoch" or str(k).startswith("time/")) and v == v}  # NaN: not reported
                   for row in frame.to_dict("records")]
        trial_id = result.metrics["trial_id"]
        start, end = span[trial_id]
        trials.append({"trial_id": trial_id, "lr": float(result.config["hp"]["lr"]), "seed": int(result.config["hp"]["seed"]),
                       "start": start, "end": end, "wall_s": end - start, "tune_time_total_s": float(result.metrics["time_total_s"]),
                       "best": result.metrics.get("best/val/accuracy"), "test_accuracy": result.metrics.get("test/accuracy"),
                       **breakdown(reports)})
    trials.sort(key=lambda t: t["start"])
    for i, t in enumerate(trials):
        t["remainder_s"] = t["wall_s"] - t["loop_s"]
        t["gap_to_next_s"] = trials[i + 1]["start"] - t["end"] if i + 1 < len(trials) else None
        print(f"(b) sweep trial {i}: lr {t['lr']:.3g}  wall {t['wall_s']:6.2f} s  loop {t['loop_s']:6.2f} s  "
              f"train {t['train_s']:6.2f} s  test acc {t['test_accuracy']}", flush=True)
    return {"total_s": total, "ray_init_s": ray_s, "tune_run_s": total - ray_s,
            "before_first_trial_s": trials[0]["start"] - wall_start - ray_s,
            "after_last_trial_s": wall_end - trials[-1]["end"], "trials": trials, "tracking_uri": uri}


def data_ready(sweep, cpu: float) -> dict:
    """Seconds a Ray task takes to get the trial data from the object store (what a trial does
    before its loop starts), on the running Ray: three fresh references, timed in the task."""
    import ray

    from contrasweep.runner.inputs import prepare_data, put_data

    @ray.remote(num_cpus=cpu)
    def fetch(refs):
        began = time.perf_counter()
        data = ray.get(refs[0])
        rows = sum(t.num_rows for t in data["tables"].values())
        return time.perf_counter() - began, rows

    times = []
    for _ in range(3):
        refs = put_data(prepare_data(sweep))
        seconds, rows = ray.get(fetch.remote(refs))
        times.append(seconds)
    return {"ray_get_s": times, "median_s": statistics.median(times), "rows": rows}


def warm_up(model: str) -> None:
    """Read the encoder's files once, so that (a)'s first trial does not pay a cold file cache
    alone. Nothing is imported or built: a direct run pays its lazy imports (transformers'
    model classes) once, in its first trial, where every sweep trial (a fresh process) pays them."""
    from trainables.encoder import resolve_model_path

    for file in Path(resolve_model_path(model)).rglob("*"):
        if file.is_file():
            file.read_bytes()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=10,
                        help="MiniLM, k=20, 2 threads on an idle 2-core machine: about 3.7 s of training an epoch")
    parser.add_argument("--k", type=int, default=20, help="few-shot examples per class (BBC News: 5 classes)")
    parser.add_argument("--model", choices=("default", "tiny"), default="default",
                        help="default: the bundled MiniLM; tiny: the tests' 2-layer random BERT (a quick check)")
    parser.add_argument("--method", default="ce", help="a registry name with its default hyperparameters")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--cpu", type=float, default=float(os.cpu_count() or 1),
                        help="sweep.resources.cpu (torch threads of both sides; default: every core)")
    parser.add_argument("--direct-rounds", type=int, default=2,
                        help="(a) runs before the sweep and again after it (2: a, b, a); its numbers are the mean")
    parser.add_argument("--workdir", default=None, help="default: a temporary folder, removed at the end")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)

    import torch

    from contrasweep.spec import load as spec

    work = Path(args.workdir or tempfile.mkdtemp(prefix="contrasweep-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.model == "tiny":
        from conftest import build_tiny_bert

        model = str(build_tiny_bert(work / "tiny-bert"))
    else:
        model = "default"
    spec_path = write_spec(work / "spec.yaml", args, model)
    sweep = spec.load_spec(spec_path)

    from contrasweep.runner.inputs import prepare_data

    prepared = prepare_data(sweep)[0]  # write the cache entry now: both sides then read a hit
    configs = loop_configs(sweep, prepared.num_labels)
    warm_up(model)
    load = os.getloadavg()[0]
    print(f"sweep overhead: {args.trials} trials x {args.epochs} epochs, method {args.method}, model {args.model}, "
          f"BBC News few-shot k={args.k} ({prepared.stats['train']['n']} train / {prepared.stats['validation']['n']} "
          f"validation / {prepared.stats['test']['n']} test rows), batch {args.batch_size}, length {args.max_length}, "
          f"{configs[0]['hp']['torch_threads']} torch threads, {os.cpu_count()} cores, load average {load:.2f}", flush=True)

    import ray

    rounds = [run_direct(configs, sweep, work, 0)]
    load_between = os.getloadavg()[0]
    try:
        swept = run_sweep(spec_path, work)
        ready = data_ready(sweep, args.cpu)
    finally:
        ray.shutdown()  # Ray's processes gone before the second direct round and the summary
    for i in range(1, args.direct_rounds):  # a, b, a: drift and other load hit both sides
        rounds.append(run_direct(configs, sweep, work, i))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    direct = mean_rounds(rounds)

    # match the trials of both sides by their learning rate (the only thing that differs)
    by_lr = {round(t["lr"], 12): t for t in direct["trials"]}
    pairs = [(by_lr[round(t["lr"], 12)], t) for t in swept["trials"]]
    gaps = [t["gap_to_next_s"] for t in swept["trials"] if t["gap_to_next_s"] is not None]
    mean_gap = statistics.fmean(gaps) if gaps else 0.0
    # a direct run's usual set-up: the median over every direct trial of every round (only the
    # process's first trial pays the lazy imports)
    direct_setup = statistics.median(t["setup_s"] for r in rounds for t in r["trials"])
    for a, t in pairs:
        # what the sweep adds to this trial, each part measured without the training's own noise:
        # outside the loop (span - loop), the wait for the next trial, and the set-up a fresh
        # trial process pays above a direct run's usual set-up (lazy imports, cold process)
        t["setup_excess_s"] = t["setup_s"] - direct_setup
        t["added_s"] = (t["remainder_s"] + (t["gap_to_next_s"] if t["gap_to_next_s"] is not None else mean_gap)
                        + max(0.0, t["setup_excess_s"]))
        t["vs_direct_s"] = t["wall_s"] + (t["gap_to_next_s"] if t["gap_to_next_s"] is not None else mean_gap) - a["wall_s"]
    ratio = swept["total_s"] / direct["total_s"]
    phase_ratio = {k: sum(b[k] for _, b in pairs) / max(sum(a[k] for a, _ in pairs), 1e-9)
                   for k in ("setup_s", "train_s", "eval_s", "checkpoint_s", "test_s", "loop_s")}
    record = {
        "benchmark": "sweep_overhead",
        "goal": f"a single-worker trial adds <= {PER_TRIAL_GOAL_S:g} s (MLflow span - loop + gap to the next trial "
                f"+ set-up above the direct median); sweep / direct wall time <= {RATIO_GOAL:.2f}",
        "config": {**vars(args), "model_path": model if args.model != "tiny" else "tiny (tests/conftest.py build_tiny_bert)",
                   "sweep_path": "contrasweep.runner.tune.run in-process (no CLI subprocess, no report)",
                   "torch": torch.__version__, "cpu_count": os.cpu_count(), "loadavg_1min": [load, load_between, os.getloadavg()[0]],
                   "loop_config": configs[0]},
        "direct": direct,
        "sweep": swept,
        "data_ready": ready,
        "phase_ratio_sweep_over_direct": phase_ratio,
        "ratio": ratio,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")

    print(f"\nresults: {out}")
    print("per trial, seconds: the loop's own phases (from its reports), wall time, and what the sweep adds")
    print("| side | lr | setup | first step | train | stage 2 | eval | checkpoint | test | loop | wall | Tune total | "
          "remainder | gap to next |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def fmt(v) -> str:
        return "–" if v is None else f"{v:.2f}"

    for a, b in pairs:
        for side, t in (("direct", a), ("sweep", b)):
            print(f"| {side} | {t['lr']:.3g} | {fmt(t['setup_s'])} | {fmt(t['first_step_s'])} | {fmt(t['train_s'])} | "
                  f"{fmt(t['stage2_s'])} | {fmt(t['eval_s'])} | {fmt(t['checkpoint_s'])} | {fmt(t['test_s'])} | "
                  f"{fmt(t['loop_s'])} | {fmt(t['wall_s'])} | {fmt(t.get('tune_time_total_s'))} | "
                  f"{fmt(t['wall_s'] - t['loop_s'])} | {fmt(t.get('gap_to_next_s'))} |")
    print(f"\ndata ready (ray.get of the trial data in a Ray task, median of 3): {ready['median_s']:.3f} s "
          f"({ready['rows']} rows); direct side: cache hit + memory-mapped Arrow {direct['data_s']:.2f} s")
    print(f"sweep, once: Ray start {swept['ray_init_s']:.2f} s, tune.run until the first trial starts "
          f"{swept['before_first_trial_s']:.2f} s, after the last trial ends {swept['after_last_trial_s']:.2f} s")
    print("sweep / direct, summed over the trials: " + ", ".join(f"{k.removesuffix('_s')} {v:.3f}" for k, v in phase_ratio.items()))
    if max(load, load_between) > (os.cpu_count() or 1) + 0.5:
        print(f"warning: load average {max(load, load_between):.2f} on {os.cpu_count()} cores (other processes): "
              "the two sides may have run under different load", file=sys.stderr)
    added = [t["added_s"] for t in swept["trials"]]
    parts = {k: statistics.fmean(t[k] if t[k] is not None else mean_gap for t in swept["trials"])
             for k in ("remainder_s", "gap_to_next_s", "setup_excess_s", "vs_direct_s")}
    print(f"per trial, mean: outside the loop (MLflow span - loop) {parts['remainder_s']:.2f} s, gap to the next trial "
          f"{parts['gap_to_next_s']:.2f} s, set-up above the direct run's median {parts['setup_excess_s']:.2f} s; "
          f"span + gap - the matched direct trial's wall time {parts['vs_direct_s']:.2f} s (training noise included)")
    print(f"\nper-trial overhead (span - loop + gap to the next trial + set-up excess): mean "
          f"{statistics.fmean(added):.2f} s, max {max(added):.2f} s -> {'PASS' if max(added) <= PER_TRIAL_GOAL_S else 'MISS'} "
          f"(goal <= {PER_TRIAL_GOAL_S:g} s per single-worker trial)")
    per_round = ", ".join(f"{r['total_s']:.1f}" for r in rounds)
    print(f"wall time: direct {direct['total_s']:.1f} s (mean of {len(rounds)} rounds: {per_round}), sweep {swept['total_s']:.1f} s (Ray start included; "
          f"{swept['tune_run_s']:.1f} s without it)")
    print(f"ratio sweep / direct: {ratio:.3f} -> {'PASS' if ratio <= RATIO_GOAL else 'MISS'} (goal <= {RATIO_GOAL:.2f})")
    return record


if __name__ == "__main__":
    main()
