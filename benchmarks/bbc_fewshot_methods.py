"""The supervised methods side by side on BBC News few-shot, same budget, several seeds.

CE, CE+SCL, LaCon, SupCL-Seq and SCL-MOO (LS and EPO) each train the bundled MiniLM on the
same few-shot sample (k examples per class, LaCon Sec. 4.1 protocol: a validation set of the
same size, the test split unchanged) with the same optimiser budget (epochs, batch, lr) and
their papers' reported method settings (the methods' defaults); every arm is one real sweep
(`contrasweep run`, MLflow tracking), and the table is read back from MLflow: test accuracy
and macro-F1 at the best validation epoch, mean ± sample std over the seeds. Not a test:

    python benchmarks/bbc_fewshot_methods.py [--seeds 0 1 2] [--k 20] [--epochs 5] [--workdir DIR]

Numbers are whatever they are: one few-shot sample, a small encoder, a short budget.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

# arm label -> (method, extra spec sections, hyperparameters the arm's rows are grouped by)
ARMS = {
    "CE": ("ce", {}, ()),
    "CE+SCL": ("ce_scl", {}, ()),
    "LaCon": ("lacon", {}, ()),
    "SupCL-Seq": ("supcl_seq", {}, ()),
    "SCL-MOO": ("scl_moo", {"grid": {"moo": ["ls", "epo"]}}, ("moo",)),
}


def spec_for(method: str, extra: dict, args) -> dict:
    spec = {
        "name": f"bbc-k{args.k}-{method}",
        "method": method,
        "paper": {"title": "benchmarks/bbc_fewshot_methods.py", "where": "same-budget comparison"},
        "data": {"source": "bbc_news", "protocol": "few_shot", "k": args.k, "seed": 0},
        "encoder": {"name": "default", "pooling": "mean", "max_length": args.max_length},
        "fixed": {"epochs": args.epochs, "batch_size": 16, "lr": args.lr, "warmup_ratio": 0.06, "eval_batch_size": 64},
        "sweep": {"searcher": "grid", "metric": "val/accuracy", "mode": "max", "scheduler": "none",
                  "seeds": list(args.seeds), "max_concurrent": 2, "resources": {"cpu": 1}},
        "tracking": {"experiment": "bbc-fewshot-methods"},
    }
    spec.update(extra)
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1.0e-4)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    from dashboards.compare import seed_summary

    work = Path(args.workdir or tempfile.mkdtemp(prefix="contrasweep-bbc-"))
    work.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    env = {**os.environ, "CONTRASWEEP_HOME": str(work / "sweeps")}
    lines = []
    for label in args.arms:
        method, extra, by = ARMS[label]
        spec = spec_for(method, extra, args)
        path = work / f"{method}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        minutes = "(earlier run)"  # a sweep already in the work dir is only read back
        if not (work / "sweeps" / spec["name"]).exists():
            started = time.perf_counter()
            cmd = [sys.executable, "-m", "contrasweep", "run", str(path), "--name", spec["name"], "--tracking-uri", uri]
            subprocess.run(cmd, check=True, env=env, cwd=work)
            minutes = f"{(time.perf_counter() - started) / 60:.1f}"
        acc = seed_summary(uri, "bbc-fewshot-methods", spec["name"], "test/accuracy", by)
        f1 = seed_summary(uri, "bbc-fewshot-methods", spec["name"], "test/macro_f1", by)
        for a, f in zip(acc, f1):
            name = label + "".join(f" {a[k]}".upper() for k in by)
            lines.append(f"| {name} | {a['n']} | {a['mean']:.3f} ± {a['std']:.3f} | {f['mean']:.3f} ± {f['std']:.3f} | "
                         f"{', '.join(f'{v:.3f}' for v in a['values'])} | {minutes} |")
            print(lines[-1], flush=True)
    print(f"\nBBC News few-shot k={args.k}/class, MiniLM, {args.epochs} epochs, batch 16, lr {args.lr:g}, seeds {args.seeds}")
    print("| method | seeds | test accuracy | test macro-F1 | accuracy per seed | sweep min |")
    print("|---|---|---|---|---|---|")
    print("\n".join(lines))
    print(f"\nMLflow: {uri}")


if __name__ == "__main__":
    main()
