"""The papers' own grids: what contrasweep's driver spends per trial as a sweep grows to 10,000
trials, beside plain Ray Tune in the same run (issue 54, "a scale benchmark").

*Bookkeeping.* Trials that train nothing (a function that reports one epoch of made-up metrics,
``noop_trial``) go through the real driver (``contrasweep.runner.tune.run``: the sweep folder, the
searcher, the scheduler, the MLflow tracker into a fresh SQLite store), each kind in a fresh
Python process:

- ``grid``: CE, a grid of ``trials / 10`` learning rates × 10 seeds (1 epoch), group ASHA, as
  ``search_spaces/lacon.yaml`` runs (its 1,500 configurations × 10 seeds);
- ``optuna``: TPE over a log-uniform learning rate, ``trials / 2`` suggestions × 2 seeds, no scheduler;
- ``tune``: plain Ray Tune, the issue's anchor: a no-op function trial, random search over one
  float (Tune's own generator), Tune's own checkpoint schedule, no callback of ours.

All run 2 trials at a time on 1 CPU each, actors reused, on a local Ray each. What the test
phase does after Tune (once per sweep, not per trial) is left out. A callback in the child
records every trial's end: the driver's wall and CPU clocks and its peak memory; at each mark
(``--marks``, default 100, 1,000, 5,000 and 10,000 ended trials) also the size of the sweep's own
records (its folder with Tune's state, and the MLflow database). Per segment between marks: the
marginal wall per trial, the driver's CPU per trial, its MLflow writer's and the whole machine's
(every process: trials, Ray, driver, writer), the optuna kind's sampler's own CPU
(``timed_sampler``), the driver's peak memory at its end and the records' size; each kind's
flatness (last segment over the first) and contrasweep's marginal
over Tune's in the same segment. Every row is appended to ``<out>.partial.jsonl`` as it comes, so
a long run stopped early keeps what it measured.

Not a test (it starts Ray; one Ray at a time on this machine)::

    flock /tmp/contrasweep-ray.lock python benchmarks/paper_scale.py                        # 10,000 trials each
    flock /tmp/contrasweep-ray.lock python benchmarks/paper_scale.py --trials 1000 --marks 100 500 1000
    flock /tmp/contrasweep-ray.lock python benchmarks/paper_scale.py --baseline 9dfe1bb --kinds grid tune

``--baseline REF`` also runs the contrasweep kinds on a git worktree of REF, one after the other
with this checkout's (drift and other load hit both), and prints this checkout's marginal over REF's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trial_scale import worktree  # benchmarks/trial_scale.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "paper_scale.json"
KINDS = ("grid", "optuna", "tune")
SEEDS = {"grid": 10, "optuna": 2}
# the goals: flat (last segment <= 1.15x the first), <= 2x plain Tune, <= 60 ms of driver CPU
GOALS = {"flatness": 1.15, "vs_tune": 2.0, "driver_cpu_ms": 60.0}


def noop_metrics(config: dict, epoch: int = 1) -> dict:
    """One epoch's made-up metrics, as the loop reports them (a value that depends on the
    configuration, so that selection and ASHA have something to rank)."""
    hp = config.get("hp", config)
    value = 0.5 + 0.2 * math.sin(1.0e4 * float(hp.get("lr", 1.0e-4))) + 0.001 * int(hp.get("seed", 0))
    return {"epoch": epoch, "train/loss": 1.0 - value, "val/accuracy": value, "best/val/accuracy": value,
            "best/epoch": epoch, "test/accuracy": value, "pid": os.getpid()}


def noop_trial(config: dict) -> None:
    """A trial that trains nothing: one epoch of made-up metrics (``noop_metrics``)."""
    from ray import tune

    tune.report(noop_metrics(config))


def spec_dict(kind: str, trials: int, model: str, slots: int = 2, epochs: int = 1) -> dict:
    """The kind's spec: ``slots`` trials at a time on 1 CPU each, ``epochs`` epochs a trial
    (``benchmarks/bookkeeping.py`` runs the grid at 16 and 64 slots)."""
    seeds = list(range(SEEDS[kind]))
    spec = {
        "method": "ce",
        "paper": {"title": "benchmarks/paper_scale.py", "where": "the driver's cost per trial at 10,000 trials"},
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": 4, "seed": 0, "test_fraction": 0.05},
        "encoder": {"name": model, "pooling": "mean", "max_length": 32},
        "fixed": {"epochs": epochs, "batch_size": 8, "warmup_ratio": 0.0},
        "evaluation": {"test": "all"},
        "sweep": {"metric": "val/accuracy", "mode": "max", "seeds": seeds, "max_concurrent": slots, "resources": {"cpu": 1}},
        "tracking": {"experiment": f"paper-scale-{kind}"},
    }
    if kind == "grid":
        spec["grid"] = {"lr": [round(1.0e-6 * (i + 1), 9) for i in range(trials // len(seeds))]}
        spec["sweep"].update(searcher="grid", scheduler="asha")
    else:
        spec["search"] = {"lr": {"loguniform": [1.0e-6, 1.0e-2]}}
        spec["sweep"].update(searcher="optuna", scheduler="none", num_samples=trials // len(seeds))
    return spec


def writer_cpu_s() -> float:
    """CPU seconds of this process's MLflow writer processes (``contrasweep.tracking.writer``), if any."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            mine = int(fields[1]) == os.getpid()
            if mine and b"contrasweep.tracking.writer" in (stat.parent / "cmdline").read_bytes():
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            continue
    return total


def machine_cpu_s() -> float:
    """CPU seconds every process of this machine has spent since boot (``/proc/stat``: user, nice,
    system, irq, softirq): with 2 cores, a wall per trial of half the machine's CPU per trial means
    the trials, Ray, the driver and the writer together keep both cores busy."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return busy / os.sysconf("SC_CLK_TCK")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.exists() else 0


# -- the child: one sweep in a process of its own ---------------------------------------------------
def timed_sampler() -> list[float]:
    """The optuna kind's sampler timed apart: the CPU seconds the driver's thread spends in TPE's
    own calls (``[0]``). TPE builds its estimators from every finished trial of the study at each
    ask, so its time per ask grows with the trials so far by design (as in plain Optuna); the
    rows give it beside the wall (not subtracted: the wall is not the driver's CPU alone)."""
    import optuna

    spent = [0.0]
    for name in ("infer_relative_search_space", "sample_relative", "sample_independent"):
        real = getattr(optuna.samplers.TPESampler, name)

        def timed(self, *args, _real=real, **kwargs):
            began = time.thread_time()
            try:
                return _real(self, *args, **kwargs)
            finally:
                spent[0] += time.thread_time() - began
        setattr(optuna.samplers.TPESampler, name, timed)
    return spent


def marks_callback(marks: list[int], rows: Path, records: list[Path], sampler: list[float] | None = None):
    """A Tune callback appending a row per mark of ended trials to ``rows`` (JSON lines)."""
    from ray import tune

    class Marks(tune.Callback):
        def __init__(self):
            self.ended = 0
            self.began = (time.perf_counter(), time.process_time())

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.ended += 1
            if self.ended in marks:
                row = {"ended": self.ended, "wall_s": time.perf_counter() - self.began[0],
                       "cpu_s": time.process_time() - self.began[1], "writer_cpu_s": writer_cpu_s(),
                       "machine_cpu_s": machine_cpu_s(), "sampler_cpu_s": sampler[0] if sampler else 0.0,
                       "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                       "records_bytes": sum(folder_bytes(p) if p.is_dir() else (p.stat().st_size if p.exists() else 0)
                                            for p in records)}
                with rows.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")

        def on_experiment_end(self, trials, **info):  # after the tracker's: its queued MLflow writes applied
            row = {"end": True, "ended": self.ended, "wall_s": time.perf_counter() - self.began[0]}
            with rows.open("a") as fh:
                fh.write(json.dumps(row) + "\n")

    return Marks()


def swap_driver(trainable, callback=None) -> None:
    """contrasweep's full driver (``contrasweep.runner.tune``: the sweep folder, searcher, scheduler,
    MLflow tracker and writer) with ``trainable`` in place of the loop's trial (1 CPU each) and
    ``callback`` after the sweep's own callbacks (after the tracker's: its hooks see the
    tracker's work done)."""
    from ray import tune

    from contrasweep.runner import tune as run_tune

    run_config = run_tune.run_config
    if callback is not None:
        run_tune.run_config = lambda sweep, sweep_dir, callbacks: run_config(sweep, sweep_dir, [*callbacks, callback])
    run_tune.make_trainable = lambda static, refs: tune.with_resources(trainable, {"cpu": 1})


def child(kind: str, trials: int, marks: list[int], model: str, work: Path, rows: Path) -> None:
    import ray

    work.mkdir(parents=True, exist_ok=True)
    if kind == "tune":
        from ray import tune

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        callback = marks_callback(marks, rows, [work / "tune"])
        tune.Tuner(tune.with_resources(noop_trial, {"cpu": 1}), param_space={"lr": tune.uniform(1.0e-6, 1.0e-2)},
                   tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=2, reuse_actors=True),
                   run_config=tune.RunConfig(storage_path=str(work), name="tune", callbacks=[callback], verbose=0)).fit()
        return

    import yaml

    from contrasweep.folder import sweeps
    from contrasweep.runner import ray_start, test_phase
    from contrasweep.runner import tune as run_tune
    from contrasweep.search.registry import load_spec

    path = work / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_dict(kind, trials, model), sort_keys=False))
    swap_driver(noop_trial, marks_callback(marks, rows, [work / "sweeps", work / "mlflow.db"], timed_sampler()))
    test_phase.after_tune = lambda *args, **kwargs: None  # once per sweep, after Tune: not per-trial bookkeeping
    ray_start.init_ray(None, dashboard=False)
    run_tune.run(load_spec(path), "scale", sweeps.sweeps_root(str(work / "sweeps")), f"sqlite:///{work / 'mlflow.db'}",
                 None)


# -- the parent ---------------------------------------------------------------------------------------
def run_child(checkout: Path, kind: str, trials: int, marks: list[int], model: str, work: Path, cache: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "platform"), str(checkout)]),
           "CONTRASWEEP_CACHE": str(cache), "PYTHONWARNINGS": "ignore"}
    rows = work / "rows.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "stderr.log"  # the child's console (Tune's own lines: e.g. how long its last save took), kept
    with log.open("w") as err:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", kind, "--trials", str(trials),
                               "--marks", *map(str, marks), "--model", model, "--work", str(work), "--rows", str(rows)],
                              env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=err, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the {kind} sweep of {trials} trials in {checkout} failed (exit {proc.returncode}):\n"
                         f"{log.read_text()[-3000:]}")
    return [json.loads(line) for line in rows.read_text().splitlines()]


def drain_s(rows: list[dict]) -> float | None:
    """Seconds from the last mark to the end of Tune's run (the MLflow writes still queued then)."""
    marks, ends = [r for r in rows if not r.get("end")], [r for r in rows if r.get("end")]
    return ends[0]["wall_s"] - marks[-1]["wall_s"] if marks and ends else None


def segments(rows: list[dict]) -> list[dict]:
    """Per segment between consecutive marks: marginal wall and driver CPU per trial, the peak
    memory and the records' size at its end."""
    out = []
    rows = [r for r in rows if not r.get("end")]
    for a, b in zip(rows, rows[1:]):
        n = b["ended"] - a["ended"]
        out.append({"from": a["ended"], "to": b["ended"], "wall_per_trial_ms": 1000 * (b["wall_s"] - a["wall_s"]) / n,
                    "cpu_per_trial_ms": 1000 * (b["cpu_s"] - a["cpu_s"]) / n, "peak_rss_mb": b["peak_rss_mb"],
                    "writer_cpu_per_trial_ms": 1000 * (b.get("writer_cpu_s", 0) - a.get("writer_cpu_s", 0)) / n,
                    "machine_cpu_per_trial_ms": 1000 * (b.get("machine_cpu_s", 0) - a.get("machine_cpu_s", 0)) / n,
                    "sampler_cpu_per_trial_ms": 1000 * (b.get("sampler_cpu_s", 0) - a.get("sampler_cpu_s", 0)) / n,
                    "records_mb": b["records_bytes"] / 1e6})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--marks", type=int, nargs="+", default=[100, 1000, 5000, 10000])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--baseline", metavar="REF", help="also run the contrasweep kinds on a git worktree of REF")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    args = parser.parse_args()
    marks = sorted(m for m in set(args.marks) if m <= args.trials)
    if args.child:
        child(args.child, args.trials, marks, args.model, Path(args.work), Path(args.rows))
        return

    sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]
    from conftest import build_tiny_bert

    base = Path(tempfile.mkdtemp(prefix="paper-scale-"))
    model = str(build_tiny_bert(base / "tiny-bert"))
    cache = base / "cache"
    sides = [("this", ROOT)] + ([("baseline", worktree(args.baseline, base))] if args.baseline else [])
    partial = Path(args.out).with_suffix(".partial.jsonl")
    partial.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, dict] = {}
    for kind in args.kinds:
        for side, checkout in (sides if kind != "tune" else sides[:1]):
            name = kind if side == "this" else f"{kind}@{args.baseline}"
            rows = run_child(checkout, kind, args.trials, marks, model, base / name.replace("@", "-"), cache)
            result[name] = {"rows": rows, "segments": segments(rows), "drain_s": drain_s(rows)}
            with partial.open("a") as fh:
                fh.write(json.dumps({name: result[name]}) + "\n")
            for s in result[name]["segments"]:
                print(f"{name:16s} trials {s['from']:5d}-{s['to']:5d}: wall {s['wall_per_trial_ms']:7.1f} ms/trial, "
                      f"driver CPU {s['cpu_per_trial_ms']:6.1f} ms/trial (writer {s['writer_cpu_per_trial_ms']:5.1f}, "
                      f"machine {s['machine_cpu_per_trial_ms']:5.1f}, sampler {s['sampler_cpu_per_trial_ms']:5.1f}), "
                      f"peak {s['peak_rss_mb']:7.0f} MB, "
                      f"records {s['records_mb']:8.1f} MB", flush=True)
    for name, entry in result.items():
        segs = entry["segments"]
        if len(segs) >= 2:
            entry["flatness"] = segs[-1]["wall_per_trial_ms"] / segs[0]["wall_per_trial_ms"]
        if "tune" in result and name != "tune":
            entry["vs_tune"] = [s["wall_per_trial_ms"] / t["wall_per_trial_ms"]
                                for s, t in zip(segs, result["tune"]["segments"])]
        if args.baseline and "@" not in name and f"{name}@{args.baseline}" in result:
            entry["vs_baseline"] = [s["wall_per_trial_ms"] / b["wall_per_trial_ms"]
                                    for s, b in zip(segs, result[f"{name}@{args.baseline}"]["segments"])]
        print(f"{name}: flatness {entry.get('flatness', float('nan')):.2f} (goal <= {GOALS['flatness']}); "
              f"vs Tune per segment {[round(v, 2) for v in entry.get('vs_tune', [])]} (goal <= {GOALS['vs_tune']}); "
              f"vs baseline {[round(v, 2) for v in entry.get('vs_baseline', [])]}; Tune's run ended "
              f"{entry.get('drain_s') or float('nan'):.1f} s after the last mark")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    Path(args.out).write_text(json.dumps({"commit": commit, "baseline": args.baseline, "trials": args.trials,
                                          "marks": marks, "when": time.strftime("%Y-%m-%d %H:%M"), "goals": GOALS,
                                          "kinds": result}, indent=1))
    if args.baseline:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(sides[1][1])], check=False)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
