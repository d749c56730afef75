"""ABALONE's losses side by side on the BBC-derived long-tailed multi-label corpus, several seeds.

Stage 1 is one real sweep of `search_spaces/abalone_small.yaml` (`contrasweep run`, MLflow
tracking) over the losses (default L_BCE, L_Base, L_MSC; abalone_multilabel.txt Tables 2-3),
with the corpus size, epochs and queue size given here; the contrastive losses are judged by
the linear evaluation of App. A. Stage 2 (``--finetune``, Sec. 5.2: L_Base-FT, L_MSC-FT) fine-tunes
each stage-1 trial's best checkpoint with BCE, the projection head discarded: the checkpoints
are downloaded from the trials' MLflow runs (their models' ``artifacts/checkpoint``) and become the grid
of ``init_from``. Every number is read back from MLflow: test micro-F1, macro-F1, Hamming loss
and tail macro-F1 at the best validation epoch, mean ± sample std over the seeds (for the
fine-tuned rows: over the stage-1 seeds). Not a test:

    python benchmarks/abalone_multilabel.py [--seeds 0 1 2] [--n-docs 600] [--epochs 5]
        [--queue-size 512] [--losses bce base msc] [--finetune msc base] [--workdir DIR]

A sweep already in the work dir (same name) is only read back. The corpus is derived from BBC
News (not a published benchmark); the numbers are whatever they are on it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

SPACE = ROOT / "search_spaces" / "abalone_small.yaml"
METRICS = ("test/micro_f1", "test/macro_f1", "test/hamming_loss", "test/tail_macro_f1")


def sweep(work: Path, name: str, uri: str, overrides: list[str]) -> str:
    """Run ``contrasweep run abalone_small.yaml`` unless the work dir has it; returns minutes."""
    if (work / "sweeps" / name).exists():
        return "(earlier run)"
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "contrasweep", "run", str(SPACE), "--name", name, "--tracking-uri", uri]
    for override in overrides:
        cmd += ["--set", override]
    env = {**os.environ, "CONTRASWEEP_HOME": str(work / "sweeps")}
    subprocess.run(cmd, check=True, env=env, cwd=work)
    return f"{(time.perf_counter() - started) / 60:.1f}"


def rows(uri: str, experiment: str, name: str, label_of, minutes: str) -> list[str]:
    from dashboards.compare import seed_summary

    by = ("loss",)
    summaries = [seed_summary(uri, experiment, name, metric, by) for metric in METRICS]
    out = []
    for group in zip(*summaries):
        cells = " | ".join(f"{g['mean']:.3f} ± {g['std']:.3f}" for g in group)
        out.append(f"| {label_of(group[0]['loss'])} | {group[0]['n']} | {cells} | {minutes} |")
        print(out[-1], flush=True)
    return out


def best_checkpoints(uri: str, experiment: str, name: str, loss: str, work: Path) -> list[str]:
    """The best weights of every finished stage-1 trial with this loss (its MLflow model's
    checkpoint), downloaded."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from contrasweep.tracking.artifacts import logged_weights

    from dashboards.trials import parent_runs, trial_runs

    parent = parent_runs(uri, experiment, name)[0].info.run_id
    paths = []
    for run in sorted(trial_runs(uri, parent), key=lambda r: r.data.params.get("hp.seed", "")):
        if run.info.status != "FINISHED" or run.data.params.get("hp.loss") != loss:
            continue
        target = work / "checkpoints" / run.info.run_id
        target.mkdir(parents=True, exist_ok=True)
        folder = logged_weights(MlflowClient(uri), run.info.run_id)  # its model's checkpoint (or older plain files)
        paths.append(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path=folder,
                                                         dst_path=str(target), tracking_uri=uri))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-docs", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--queue-size", type=int, default=512)
    parser.add_argument("--losses", nargs="+", default=["bce", "base", "msc"])
    parser.add_argument("--finetune", nargs="*", default=["msc", "base"], help="stage-1 losses to fine-tune (Sec. 5.2)")
    parser.add_argument("--ft-epochs", type=int, default=5, help="App. A: {5, 10}")
    parser.add_argument("--ft-lr", type=float, default=5.0e-5, help="App. A: {5e-5, 2e-5}")
    parser.add_argument("--stage1-name", default=None)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    from contrasweep.spec.load import load_spec

    work = Path(args.workdir or tempfile.mkdtemp(prefix="contrasweep-abalone-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    experiment = load_spec(SPACE).experiment
    name = args.stage1_name or f"abalone-n{args.n_docs}-e{args.epochs}-k{args.queue_size}"
    stage1 = [f"data.n_docs={args.n_docs}", f"fixed.epochs={args.epochs}", f"fixed.queue_size={args.queue_size}",
              f"grid.loss=[{', '.join(args.losses)}]", f"sweep.seeds=[{', '.join(map(str, args.seeds))}]"]
    lines = rows(uri, experiment, name, lambda loss: loss, sweep(work, name, uri, stage1))
    for loss in args.finetune:
        checkpoints = best_checkpoints(uri, experiment, name, loss, work)
        ft_name = f"{name}-{loss}-ft-e{args.ft_epochs}"
        finetune = [f"data.n_docs={args.n_docs}", f"fixed.epochs={args.ft_epochs}", f"fixed.lr={args.ft_lr}",
                    "grid.loss=[bce]", "reported={}", "sweep.seeds=[0]", "sweep.max_concurrent=2",
                    "grid.init_from=[" + ", ".join(f'"{p}"' for p in checkpoints) + "]"]
        lines += rows(uri, experiment, ft_name, lambda _, loss=loss: f"{loss}-FT", sweep(work, ft_name, uri, finetune))
    print(f"\nBBC-derived multi-label corpus, {args.n_docs} documents, MiniLM, stage 1: {args.epochs} epochs, "
          f"K {args.queue_size}, seeds {args.seeds}; fine-tuning: BCE, {args.ft_epochs} epochs, lr {args.ft_lr:g}")
    print("| loss | n | test micro-F1 | test macro-F1 | test Hamming loss | test tail macro-F1 | sweep min |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print(f"\nMLflow: {uri}")


if __name__ == "__main__":
    main()
