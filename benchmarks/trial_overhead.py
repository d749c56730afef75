"""Per-trial overhead: the in-process trial path vs the TorchTrainer path, side by side.

Both run the same 1-epoch CE trial (tiny random BERT, BBC News few-shot k=4) through
``contrasweep.tune.run`` on one local Ray session; the ratio of wall times is the cost of
starting a Ray Train worker group (measured here: ~30 s vs ~1 s). Not a test: run it as

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
    from contrasweep import spec, sweeps, tune

    work = Path(tempfile.mkdtemp(prefix="contrasweep-bench-"))
    model = str(build_tiny_bert(work / "tiny"))
    tune.init_ray(None, num_cpus=2)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    common = dict(fixed={"epochs": 1}, grid={"lr": [1.0e-3]}, sweep={"seeds": [0], "scheduler": "none"})
    paths = {
        "in_process": write_spec(work / "a.yaml", model, **common),
        "torchtrainer_2w": write_spec(work / "b.yaml", model, **{**common, "sweep": {**common["sweep"], "resources": {"cpu": 0.9, "workers": 2}}}),
    }
    times: dict[str, list[float]] = {k: [] for k in paths}
    # warm-up: the data cache and Ray's worker pool, so both paths start equal
    tune.run(spec.load_spec(paths["in_process"]), "warmup", sweeps.sweeps_root(str(work / "sw")), uri, None)
    for i in range(args.repeats):
        for key, path in paths.items():
            started = time.perf_counter()
            results = tune.run(spec.load_spec(path), f"{key}-{i}", sweeps.sweeps_root(str(work / "sw")), uri, None)
            times[key].append(time.perf_counter() - started)
            assert not results[0].error, results[0].error
    a, b = statistics.median(times["in_process"]), statistics.median(times["torchtrainer_2w"])
    print(f"in-process trial sweep: median {a:.1f} s {['%.1f' % t for t in times['in_process']]}")
    print(f"TorchTrainer (2 workers) trial sweep: median {b:.1f} s {['%.1f' % t for t in times['torchtrainer_2w']]}")
    print(f"ratio TorchTrainer / in-process: {b / a:.1f}x  (extra per trial: {b - a:.1f} s)")


if __name__ == "__main__":
    main()
