"""Where an epoch's time goes, per method: training vs evaluation, second stage and checkpoints.

What it measures: for every registered method (``trainables/registry.py``; SCL-MOO with both
solvers, ABALONE with its paper loss L_MSC and the BCE baseline) one trial of the generic loop
(``trainables.loop.train``) is run directly in this process (no Ray, no MLflow: checked at the
end and recorded in the JSON result) with a pruning ``LocalSession`` (``prune = True``, like
Tune's session), at two data sizes, side by side in one run:

* few-shot: the LaCon protocol (Sec. 4.1) on bundled BBC News, k = 20 per class (100 training
  rows, as many for validation, the test split whole), batch 16;
* full: ``--full-rows`` training rows (default 1,000: ``max_per_class`` = rows / 5), batch 32.

ABALONE trains on ``bbc_multilabel`` (its data section in search_spaces/abalone.yaml) with
``n_docs`` chosen so that its training split has about as many rows (70 % of the documents).
Each method runs with its papers' settings from search_spaces/*.yaml (τ, λ, SCL-MOO's solver
and preference, SupCL-Seq's dropout views, LaCon's heads = a divisor of the encoder's width,
VaSCL's Δ, K and learning rates, ABALONE's queue, projection and App. A linear-evaluation
grid), the budget (epochs, batch, length) of this benchmark.

From the loop's own per-epoch phase times (``time/<phase>_s``) it reports, per method and size,
the mean seconds per epoch of training, second stage, evaluation and checkpoint, over the
non-last epochs and over all epochs, the share of an epoch spent outside training,
``1 - train / epoch`` (the once-per-trial test pass left out of the epoch: it is reported
separately, as are the set-up seconds of the first epoch).

Torch threads: every core by default (``--threads``). On a shared machine, other processes on the
cores inflate the phases unevenly (an OpenMP team waits for its slowest thread): each trial's
CPU time / wall time and the load average are recorded, a warning is printed when the load
exceeded the cores, and ``--repeats N`` runs every arm N times, in rounds, and reports medians.

Goal: share outside training (all epochs, test excluded) <= 10 % for the classification
methods, <= 25 % for the representation methods (simcse, vascl); the last lines printed are one
PASS/MISS line per method. Not a test; run it as

    python benchmarks/epoch_costs.py                                  # MiniLM, 3 epochs, every method
    python benchmarks/epoch_costs.py --model tiny --methods ce,lacon  # a quick check (tiny random BERT)
    python benchmarks/epoch_costs.py --epochs 3 --full-rows 1000 --out benchmarks/results/epoch_costs.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from trainables.sessions import LocalSession  # noqa: E402  (torch only: no Ray, no MLflow)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "epoch_costs.json"
PHASES = ("train", "stage2", "eval", "checkpoint")
REPRESENTATION = ("simcse", "vascl")
GOALS = {"classification": 0.10, "representation": 0.25}
TRAIN_FRACTION_MULTILABEL = 0.7  # bbc_multilabel's split: 10 % validation, 20 % test, the rest train

# arm -> (registry name, the method's settings; search_spaces/<method>.yaml)
ARMS: dict[str, tuple[str, dict]] = {
    "ce": ("ce", {"classifier_dropout": 0.1}),
    "ce_scl": ("ce_scl", {"temperature": 0.3, "lam": 0.9, "classifier_dropout": 0.1}),
    "lacon": ("lacon", {"temperature": 0.1, "lam": 0.5, "heads": 6}),  # heads: a divisor of the width (below)
    "supcl_seq": ("supcl_seq", {"dropouts": [0.0, 0.1, 0.2], "temperature": 0.05, "lr": 1.0e-4}),
    "scl_moo/ls": ("scl_moo", {"moo": "ls", "temperature": 0.3, "lam": 0.3, "r1": 0.1, "classifier_dropout": 0.1}),
    "scl_moo/epo": ("scl_moo", {"moo": "epo", "temperature": 0.3, "lam": 0.3, "r1": 0.1, "classifier_dropout": 0.1}),
    "simcse": ("simcse", {"temperature": 0.05, "lr": 3.0e-5, "lr_schedule": "constant", "warmup_ratio": 0.0,
                          "weight_decay": 0.0}),
    "vascl": ("vascl", {"delta": 15.0, "lr": 5.0e-6, "head_lr": 5.0e-4, "head_dim": 128, "temperature": 0.05,
                        "neighbours": 16, "lr_schedule": "constant", "warmup_ratio": 0.0, "weight_decay": 0.0}),
    "abalone/msc": ("abalone", {"loss": "msc", "temperature": 0.1, "lr": 5.0e-5, "head_lr": 5.0e-5, "queue_size": 512,
                                "momentum": 0.999, "proj_dim": 256, "beta": 0.1, "warmup_ratio": 0.05,
                                "lr_schedule": "method", "classifier_dropout": 0.1,
                                "probe_lrs": [1.0, 0.1, 0.01], "probe_weight_decays": [1.0, 0.1, 0.01, 1.0e-4, 1.0e-6],
                                "probe_epochs": 40, "probe_restarts": 3, "probe_select": "label"}),
    "abalone/bce": ("abalone", {"loss": "bce", "lr": 5.0e-5, "head_lr": 5.0e-5, "warmup_ratio": 0.05,
                                "lr_schedule": "method", "classifier_dropout": 0.1}),
}


class PruningSession(LocalSession):
    """A local session that prunes superseded checkpoint states, as Tune's session does."""

    prune = True


def pick_arms(spec: str | None) -> list[str]:
    """``--methods``: comma-separated registry names (all their arms) or arm names."""
    if not spec:
        return list(ARMS)
    out = []
    for name in (s.strip() for s in spec.split(",")):
        if not name:
            continue
        hits = [a for a, (m, _) in ARMS.items() if name in (a, m)]
        if not hits:
            raise SystemExit(f"--methods: {name!r} is not a method or arm; allowed: "
                             f"{', '.join(sorted({m for m, _ in ARMS.values()} | set(ARMS)))}")
        out += [a for a in hits if a not in out]
    return out


def data_section(method: str, size: str, args) -> dict:
    from trainables.registry import get_method

    rows = args.k * 5 if size == "few_shot" else args.full_rows
    if get_method(method).label_kind == "multi":  # search_spaces/abalone.yaml: data.task multilabel
        return {"task": "multilabel", "source": "bbc_multilabel", "n_docs": round(rows / TRAIN_FRACTION_MULTILABEL)}
    if size == "few_shot":  # LaCon Sec. 4.1: k per class for training, as many for validation, test unchanged
        return {"source": "bbc_news", "protocol": "few_shot", "k": args.k, "seed": 0}
    return {"source": "bbc_news", "protocol": "max_per_class", "max_per_class": rows // 5}


def hidden_size(model: str) -> int:
    from transformers import AutoConfig

    from trainables.encoder import resolve_model_path

    return int(AutoConfig.from_pretrained(resolve_model_path(model)).hidden_size)


def method_hp(arm: str, batch: int, width: int) -> dict:
    method, hp = ARMS[arm]
    hp = dict(hp)
    if "heads" in hp:  # LaCon: the heads must divide the encoder's width (6 for MiniLM's 384)
        hp["heads"] = max(d for d in range(1, hp["heads"] + 1) if width % d == 0)
    if "neighbours" in hp:  # VaSCL: K <= batch - 1
        hp["neighbours"] = min(hp["neighbours"], batch - 1)
    return hp


def build_trial(arm: str, size: str, args, model: str, width: int, datasets: dict) -> tuple[dict, dict, dict]:
    """The loop config (validated by the spec, as a sweep's trial would be) and its data."""
    from contrasweep.data import DataConfig, load_splits, prepare
    from contrasweep.data.multilabel.prepare import MultiLabelConfig, is_multilabel, prepare_multilabel
    from contrasweep.spec import load as spec
    from trainables.registry import get_method

    method, _ = ARMS[arm]
    batch = args.batch_few if size == "few_shot" else args.batch_full
    hp = method_hp(arm, batch, width)
    raw = {
        "method": method,
        "data": data_section(method, size, args),
        "encoder": {"name": model, "pooling": "mean", "max_length": args.max_length},
        "fixed": {**hp, "epochs": args.epochs, "batch_size": batch, "eval_batch_size": args.eval_batch_size,
                  "torch_threads": args.threads},
        "sweep": {"searcher": "grid", "scheduler": "none", "seeds": [args.seed]},
    }
    sweep = spec.validate(raw)
    point = sweep.grid_trials()[0]
    trial_hp = {k: v for k, v in point.items() if not k.startswith("__")}
    get_method(method).check(trial_hp, width)
    data_cfg = sweep.variants[0].data if sweep.variants else sweep.data
    key = json.dumps(data_cfg, sort_keys=True, default=str)
    if key not in datasets:
        if is_multilabel(data_cfg):
            prepared = prepare_multilabel(MultiLabelConfig.from_dict(data_cfg), model, args.max_length)
        else:
            prepared = prepare(DataConfig.from_dict(data_cfg), tokenizer=model, max_length=args.max_length)
        datasets[key] = ({"tables": load_splits(prepared.path), "num_labels": prepared.num_labels,
                          "label_names": prepared.label_names}, prepared)
    data, prepared = datasets[key]
    config = {"method": method, "encoder": {"name": model, "pooling": "mean"}, "hp": trial_hp,
              "metric": sweep.metric[0], "mode": sweep.mode[0], "num_labels": prepared.num_labels}
    rows = {split: data["tables"][split].num_rows for split in ("train", "validation", "test")}
    return config, data, rows


def pct(block: dict | None) -> str:
    return "n/a" if block is None else f"{100 * block['share_outside_training']:.1f} %"


def phase_stats(reports: list[dict]) -> dict:
    """Mean seconds per epoch of each phase and the share outside training, over the non-last
    epochs and over all epochs; the test pass is left out of the epoch (reported on its own)."""

    def seconds(r: dict, phase: str) -> float:
        return float(r.get(f"time/{phase}_s", 0.0))

    def block(rs: list[dict]) -> dict | None:
        if not rs:
            return None
        epoch = [float(r["time/epoch_s"]) - seconds(r, "test") for r in rs]
        out = {f"{p}_s": statistics.fmean(seconds(r, p) for r in rs) for p in PHASES}
        out["epoch_s"] = statistics.fmean(epoch)
        out["other_s"] = out["epoch_s"] - sum(out[f"{p}_s"] for p in PHASES)  # bookkeeping between phases
        out["share_outside_training"] = 1.0 - sum(seconds(r, "train") for r in rs) / sum(epoch)
        return out

    last = reports[-1]
    with_test = sum(float(r["time/epoch_s"]) for r in reports)
    return {
        "non_last": block(reports[:-1]),
        "all": block(reports),
        "test_s": seconds(last, "test"),
        "setup_s": seconds(reports[0], "setup"),
        "share_outside_training_with_test": 1.0 - sum(seconds(r, "train") for r in reports) / with_test,
        "per_epoch": [{k: v for k, v in r.items() if k.startswith("time/") or k in ("epoch", "cost/train_s")}
                      for r in reports],
    }


def run_arm(arm: str, size: str, args, model: str, width: int, datasets: dict, work: Path, repeat: int) -> dict:
    from trainables.loop import train

    config, data, rows = build_trial(arm, size, args, model, width, datasets)
    folder = Path(tempfile.mkdtemp(prefix=f"{arm.replace('/', '-')}-{size}-", dir=work))
    session = PruningSession(str(folder), use_gpu=args.device == "cuda")
    load_before = os.getloadavg()[0]
    cpu, started = time.process_time(), time.perf_counter()
    final = train(config, data, session)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    shutil.rmtree(folder, ignore_errors=True)
    stats = phase_stats(session.reports)
    kind = "representation" if ARMS[arm][0] in REPRESENTATION else "classification"
    result = {"arm": arm, "method": ARMS[arm][0], "kind": kind, "size": size, "repeat": repeat, "rows": rows,
              "batch_size": config["hp"]["batch_size"], "steps_per_epoch": math.ceil(rows["train"] / config["hp"]["batch_size"]),
              "hp": config["hp"], "metric": config["metric"], "best": final.get(f"best/{config['metric']}"),
              # cpu / wall well below the thread count while the load average exceeds the cores: other
              # processes took the cores, and the phase times are inflated unevenly (OpenMP waits)
              "wall_s": wall, "cpu_s": cpu, "loadavg_1min": [load_before, os.getloadavg()[0]], **stats}
    a, n = stats["all"], stats["non_last"]
    print(f"{arm:12s} {size:8s} #{repeat} train {rows['train']:5d} rows  epoch {a['epoch_s']:7.2f} s = train {a['train_s']:7.2f} "
          f"+ stage2 {a['stage2_s']:6.2f} + eval {a['eval_s']:6.2f} + ckpt {a['checkpoint_s']:5.2f} + other {a['other_s']:4.2f}  "
          f"outside training {100 * a['share_outside_training']:5.1f} % (non-last epochs {pct(n)})  "
          f"test {stats['test_s']:.2f} s  setup {stats['setup_s']:.2f} s  cpu/wall {cpu / wall:.2f}", flush=True)
    return result


def summarise(runs: list[dict]) -> dict:
    """One row per arm and size: the median over repeats of every number."""

    def median_block(key: str) -> dict | None:
        blocks = [r[key] for r in runs if r[key] is not None]
        if not blocks:
            return None
        return {k: statistics.median(b[k] for b in blocks) for k in blocks[0]}

    first = runs[0]
    return {"arm": first["arm"], "method": first["method"], "kind": first["kind"], "size": first["size"],
            "rows": first["rows"], "batch_size": first["batch_size"], "steps_per_epoch": first["steps_per_epoch"],
            "repeats": len(runs), "all": median_block("all"), "non_last": median_block("non_last"),
            **{k: statistics.median(r[k] for r in runs) for k in ("test_s", "setup_s", "share_outside_training_with_test",
                                                                    "wall_s", "cpu_s")}}


def warm_up(model: str) -> None:
    """Load the encoder once and run a forward pass, so that the first arm does not pay the
    cold file cache and lazy initialisations alone."""
    import torch

    from trainables.encoder import load_encoder, load_tokenizer

    encoder = load_encoder(model, "mean")
    batch = load_tokenizer(model)(["a warm-up sentence"] * 4, return_tensors="pt", padding=True)
    with torch.no_grad():
        encoder.backbone(**{k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")})


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("default", "tiny"), default="default",
                        help="default: the bundled MiniLM; tiny: the tests' 2-layer random BERT (a quick check)")
    parser.add_argument("--methods", default=None, help="comma-separated registry names or arms (default: all): "
                        + ", ".join(ARMS))
    parser.add_argument("--sizes", default="few_shot,full", help="few_shot, full or both")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--k", type=int, default=20, help="few-shot examples per class (BBC News: 5 classes)")
    parser.add_argument("--full-rows", type=int, default=1000, help="training rows of the full-data size")
    parser.add_argument("--batch-few", type=int, default=16)
    parser.add_argument("--batch-full", type=int, default=32)
    parser.add_argument("--eval-batch-size", type=int, default=128, help="the loop's default")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: every core)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the trials train (cuda: the loop's GPU path, bf16 autocast where supported)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over every arm; medians are reported")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    arms = pick_arms(args.methods)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in ("few_shot", "full"):
            parser.error(f"--sizes: {s!r}; allowed: few_shot, full")

    import torch

    work = Path(tempfile.mkdtemp(prefix="contrasweep-epoch-costs-"))
    if args.model == "tiny":
        from conftest import build_tiny_bert

        model = str(build_tiny_bert(work / "tiny-bert"))
    else:
        model = "default"
    width = hidden_size(model)
    torch.set_num_threads(args.threads)
    warm_up(model)
    print(f"epoch costs: model {args.model} (width {width}), {args.epochs} epochs, length {args.max_length}, "
          f"batch {args.batch_few} (few-shot k={args.k}) / {args.batch_full} (full {args.full_rows} rows), "
          f"{args.threads} torch threads, cpu ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}), "
          f"{args.repeats} round(s)", flush=True)

    datasets: dict = {}
    runs = []
    try:
        for repeat in range(args.repeats):  # every arm once per round: drift and other load hit all arms
            for size in sizes:
                for arm in arms:
                    runs.append(run_arm(arm, size, args, model, width, datasets, work, repeat))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = [summarise([r for r in runs if (r["arm"], r["size"]) == (arm, size)]) for size in sizes for arm in arms]
    busy = [r for r in runs if max(r["loadavg_1min"]) > (os.cpu_count() or 1) + 0.5]

    goals = []
    for arm in arms:
        rows = [r for r in results if r["arm"] == arm]
        limit = GOALS[rows[0]["kind"]]
        shares = {r["size"]: r["all"]["share_outside_training"] for r in rows}
        passed = all(v <= limit for v in shares.values())
        goals.append({"arm": arm, "kind": rows[0]["kind"], "limit": limit, "shares": shares, "pass": passed})

    imported = sorted({m.split(".")[0] for m in sys.modules} & {"ray", "mlflow"})
    record = {
        "benchmark": "epoch_costs",
        "goal": "share of an epoch outside training (all epochs, test excluded) <= 10 % for classification methods, "
                "<= 25 % for representation methods (simcse, vascl)",
        "config": {**vars(args), "model_path": model if args.model != "tiny" else "tiny (tests/conftest.py build_tiny_bert)",
                   "hidden_size": width, "torch": torch.__version__, "cpu_count": os.cpu_count()},
        "results": results,
        "runs": runs,
        "goals": goals,
        "imported_orchestration": imported,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")
    if imported:
        print(f"warning: the benchmark imported {', '.join(imported)}", file=sys.stderr)

    if busy:
        print(f"warning: the 1-minute load average exceeded the {os.cpu_count()} cores during {len(busy)} of "
              f"{len(runs)} trials (other processes): their phase times are inflated unevenly", file=sys.stderr)
    print(f"\nresults: {out}")
    print(f"per epoch, seconds (median of {args.repeats} round(s)); test: once per trial, on the best epoch's weights")
    print("| method | size | train rows | epoch s | train | stage 2 | eval | checkpoint | outside training "
          "(all / non-last) | test s (once) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        a, n = r["all"], r["non_last"]
        print(f"| {r['arm']} | {r['size']} | {r['rows']['train']} | {a['epoch_s']:.2f} | {a['train_s']:.2f} | "
              f"{a['stage2_s']:.2f} | {a['eval_s']:.2f} | {a['checkpoint_s']:.2f} | {100 * a['share_outside_training']:.1f} % / "
              f"{pct(n)} | {r['test_s']:.2f} |")
    print("\nshare of an epoch outside training (all epochs, test excluded); goal <= 10 % classification, "
          "<= 25 % representation:")
    for g in goals:
        shares = ", ".join(f"{size} {100 * v:.1f} %" for size, v in g["shares"].items())
        print(f"{'PASS' if g['pass'] else 'MISS'} {g['arm']:12s} ({g['kind']}, goal <= {100 * g['limit']:.0f} %): {shares}")
    return record


if __name__ == "__main__":
    main()
