"""Per-trial overhead: the in-process trial path vs the TorchTrainer path, side by side.

Both run the same 1-epoch CE trial (tiny random BERT, BBC News few-shot k=4) through
``contrasweep.runner.tune.run`` on one local Ray session; the ratio of wall times is the cost of
starting a Ray Train worker group (measured here: ~30 s vs ~1 s). When the machine has a GPU,
a second pair compares a one-GPU trial in the trial process (what ``resources: {gpu: 1}`` does
now) with the same trial forced through a one-worker ``TorchTrainer`` (what it did before).
Not a test: run it as

    python benchmarks/trial_overhead.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from conftest import build_tiny_bert, write_spec

    from contrasweep.folder import sweeps
    from contrasweep.runner import ray_start, tune
    from contrasweep.spec import load as spec

    work = Path(tempfile.mkdtemp(prefix="contrasweep-bench-"))
    model = str(build_tiny_bert(work / "tiny"))
    ray_start.init_ray(None, num_cpus=2)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    common = dict(fixed={"epochs": 1}, grid={"lr": [1.0e-3]}, sweep={"seeds": [0], "scheduler": "none"})
    paths = {
        "in_process": write_spec(work / "a.yaml", model, **common),
        "torchtrainer_2w": write_spec(work / "b.yaml", model, **{**common, "sweep": {**common["sweep"], "resources": {"cpu": 0.9, "workers": 2}}}),
    }
    import ray

    gpu = ray.cluster_resources().get("GPU", 0) >= 1
    if gpu:
        one_gpu = {**common, "sweep": {**common["sweep"], "resources": {"cpu": 1, "gpu": 1}}}
        paths["gpu_in_process"] = write_spec(work / "c.yaml", model, **one_gpu)
        paths["gpu_torchtrainer_1w"] = write_spec(work / "d.yaml", model, **one_gpu)
    times: dict[str, list[float]] = {k: [] for k in paths}
    # warm-up: the data cache and Ray's worker pool, so both paths start equal
    tune.run(spec.load_spec(paths["in_process"]), "warmup", sweeps.sweeps_root(str(work / "sw")), uri, None)
    for i in range(args.repeats):
        for key, path in paths.items():
            sweep = spec.load_spec(path)
            if key == "gpu_torchtrainer_1w":  # the old path of a one-GPU trial, forced
                sweep = force_torchtrainer(sweep)
            started = time.perf_counter()
            results = tune.run(sweep, f"{key}-{i}", sweeps.sweeps_root(str(work / "sw")), uri, None)
            times[key].append(time.perf_counter() - started)
            assert not results[0].error, results[0].error
    pairs = [("in_process", "torchtrainer_2w", "TorchTrainer (2 CPU workers)")]
    if gpu:
        pairs.append(("gpu_in_process", "gpu_torchtrainer_1w", "one GPU: TorchTrainer (1 worker)"))
    else:
        print("no GPU on this machine: the one-GPU in-process vs TorchTrainer pair is skipped")
    for fast, slow, label in pairs:
        a, b = statistics.median(times[fast]), statistics.median(times[slow])
        print(f"{fast}: median {a:.1f} s {['%.1f' % t for t in times[fast]]}")
        print(f"{slow}: median {b:.1f} s {['%.1f' % t for t in times[slow]]}")
        print(f"ratio {label} / in-process: {b / a:.1f}x  (extra per trial: {b - a:.1f} s)")


def force_torchtrainer(sweep):
    """A copy of ``sweep`` whose one-worker trials still go through ``TorchTrainer``."""
    import copy

    forced = copy.copy(sweep)
    forced.__class__ = type("TorchTrainerSweep", (type(sweep),), {"distributed": property(lambda self: True)})
    return forced


if __name__ == "__main__":
    main()
