"""Representation quality on BBC News: the untrained encoder vs SimCSE vs VaSCL, same budget.

The two methods train through their small-scale search spaces (`contrasweep run
search_spaces/simcse_small.yaml` and `vascl_small.yaml`: same data, length, batch, epochs);
the untrained encoder is judged by the very same evaluation code (``RepresentationMethod.
evaluate``) on the same prepared data. Reported: test clustering accuracy (K-means +
Hungarian, mean of 10 runs) and NMI, and the few-shot probe accuracy for k = 5, 10, 20 (mean ±
std over the 5 fixed splits) — vascl.txt Sec. 4.2.1 protocol. VaSCL's row is its best
validation-clustering trial of the Δ grid. Not a test:

    python benchmarks/bbc_representation.py [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

KEYS = ("cluster_acc", "nmi", "probe5_acc", "probe10_acc", "probe20_acc")


def untrained(spec_path: Path) -> dict[str, float]:
    import torch

    from contrasweep.data import load_splits
    from contrasweep.runner.inputs import prepare_data
    from contrasweep.spec import load as spec
    from trainables.gather import StageContext
    from trainables.loop import build_method
    from trainables.sessions import LocalSession

    torch.set_num_threads(2)
    sweep = spec.load_spec(spec_path)
    prepared = prepare_data(sweep)[0]  # the spec has one data variant
    data = {"tables": load_splits(prepared.path), "num_labels": prepared.num_labels}
    config = {"method": "simcse", "encoder": {"name": sweep.encoder["name"], "pooling": sweep.encoder["pooling"]}, "hp": {}}
    method = build_method(config, prepared.num_labels)  # only its encoder is evaluated
    context = StageContext(data["tables"], prepared.num_labels, 64, LocalSession(), seed=0, epoch=0, data=data)
    method.evaluate(context, "validation")  # fills the embedding cache as a trial would
    return method.evaluate(context, "test")


def trained(spec_path: Path, name: str, work: Path, uri: str) -> dict[str, float]:
    from dashboards.trials import parent_runs, trial_table

    env = {**os.environ, "CONTRASWEEP_HOME": str(work / "sweeps")}
    if not (work / "sweeps" / name).exists():
        cmd = [sys.executable, "-m", "contrasweep", "run", str(spec_path), "--name", name, "--tracking-uri", uri,
               "--set", "tracking.experiment=bbc-representation"]
        subprocess.run(cmd, check=True, env=env, cwd=work)
    parent = parent_runs(uri, "bbc-representation", name)[0]
    metrics = ["best/val/cluster_acc", *(f"test/{k}" for k in KEYS), *(f"test/{k}_std" for k in KEYS[2:])]
    rows = [r for r in trial_table(uri, parent.info.run_id, tuple(metrics)) if r["status"] == "FINISHED"]
    best = max(rows, key=lambda r: r["best/val/cluster_acc"])
    return {k.removeprefix("test/"): best[k] for k in metrics if k.startswith("test/")} | {
        "params": {k: v for k, v in best.items() if k in ("hp.delta", "hp.lr")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="contrasweep-rep-"))
    work.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    spaces = ROOT / "search_spaces"
    rows = {"MiniLM (untrained)": untrained(spaces / "vascl_small.yaml")}
    rows["SimCSE"] = trained(spaces / "simcse_small.yaml", "bbc-simcse", work, uri)
    rows["VaSCL"] = trained(spaces / "vascl_small.yaml", "bbc-vascl", work, uri)
    print("\nBBC News test split; budget of search_spaces/*_small.yaml (500 texts, 64 tokens, batch 64, 1 epoch)")
    print("| encoder | cluster acc | NMI | 5-shot | 10-shot | 20-shot |")
    print("|---|---|---|---|---|---|")
    for label, m in rows.items():
        probes = " | ".join(f"{m[f'probe{k}_acc']:.3f} ± {m[f'probe{k}_acc_std']:.3f}" for k in (5, 10, 20))
        extra = f" {m['params']}" if m.get("params") else ""
        print(f"| {label}{extra} | {m['cluster_acc']:.3f} | {m['nmi']:.3f} | {probes} |")


if __name__ == "__main__":
    main()
