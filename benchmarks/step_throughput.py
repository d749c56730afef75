"""Training-step throughput: the loop's step (``trainables.step.TrainStep``) vs a hand-written
PyTorch step, side by side in one run.

Goal: TrainStep reaches >= 0.95 of the hand-written step's examples/s (bf16 on a GPU, fp32 on
CPU): the generic loop's step (precision resolution, GradScaler plumbing, output detaching, the
compile guard) must cost next to nothing over the plainest PyTorch.

Both sides train their own copy of the same freshly built method (same initial weights) on
the same pre-built batches with the same precision: forward + the method's loss (``model(batch)``),
backward, gradient clipping at 1.0, AdamW (the method's parameter groups), a linear warm-up
schedule. The hand-written side writes those calls out (with a GradScaler only for fp16). Each
method is measured in ``--repeats`` blocks, rotating which side goes first so that drift
(clocks, caches, other load) hits every side; with ``--compile`` a third side, the same TrainStep
eager, joins the rotation, so that compiled / eager is a paired ratio as well (``compile_ratio``:
the median of its per-block ratios; the eager step's examples/s differed by 1.5x between two
runs on two lent H200s, 2026-11-26, so a ratio across runs or parts is not to be trusted); ``--warmup`` steps per side are run first and not
timed (with ``--compile`` the compilation happens there). On a GPU every block is bracketed by
``torch.cuda.synchronize()``. Examples/s are over all timed steps; the ratio is the median of the
per-block ratios (a burst of other load on a shared machine spoils one pair of blocks, not the
estimate), the ratio of the totals is printed and recorded beside it.

Methods: ``ce`` (cross-entropy) and ``ce_scl`` (CE + supervised contrastive loss), or
``--methods``. Models: ``default`` (the bundled MiniLM, 22.7 M parameters, offline), ``base``
(a randomly initialised BERT-base from ``transformers.BertConfig()``, no download, wrapped in the
project's ``Encoder``) or ``tiny`` (the tests' 2-layer BERT: a mechanics check). Needs only torch, transformers and ``trainables/`` (no Ray, no MLflow:
checked at the end and recorded in the JSON result). Not a test; run it as

    python benchmarks/step_throughput.py --device cpu --steps 12 --warmup 2
    python benchmarks/step_throughput.py --model base --device cuda   # bf16, batch 32, length 128

The last line printed is the ratio TrainStep / hand-written examples/s per method.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import get_linear_schedule_with_warmup  # noqa: E402

from trainables.encoder import Encoder, load_encoder  # noqa: E402
from trainables.registry import get_method  # noqa: E402
from trainables.step import TrainStep, resolve_amp  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "step_throughput.json"
NUM_LABELS = 4
LR, WEIGHT_DECAY, MAX_GRAD_NORM = 2.0e-5, 0.01, 1.0
HP = {"ce": {}, "ce_scl": {"temperature": 0.3, "lam": 0.9}, "supcl_seq": {"dropouts": [0.1, 0.1], "temperature": 0.05}}


TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
        "max_position_embeddings": 128}  # the tests' tiny BERT (tests/conftest.py): mechanics checks only


def build_encoder(model: str) -> Encoder:
    if model in ("base", "tiny"):
        from transformers import BertConfig, BertModel

        # BERT-base (or the tiny one), random weights, no download
        return Encoder(BertModel(BertConfig(**(TINY if model == "tiny" else {}))), "mean")
    return load_encoder("default", "mean")


def make_batches(n: int, batch_size: int, seq_len: int, vocab: int, device: torch.device) -> list[dict]:
    """``n`` distinct batches of the loop's layout; rows padded at the end to random lengths in
    [seq_len/2, seq_len] (fixed shape [B, T], so compiled code is not recompiled)."""
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(n):
        lengths = torch.randint(seq_len // 2, seq_len + 1, (batch_size,), generator=g)
        mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()
        ids = torch.randint(1000, vocab, (batch_size, seq_len), generator=g) * mask
        batches.append({k: v.to(device) for k, v in {
            "input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(mask),
            "labels": torch.randint(0, NUM_LABELS, (batch_size,), generator=g),
        }.items()})
    return batches


def optimiser(method, total_steps: int, warmup: int):
    optimizer = torch.optim.AdamW(method.param_groups(LR, WEIGHT_DECAY), lr=LR)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, total_steps)


def hand_written_step(method, device: torch.device, mode: str, compile_: bool, total_steps: int, warmup: int):
    """The plainest PyTorch training step with the same precision and clipping."""
    optimizer, scheduler = optimiser(method, total_steps, warmup)
    forward = torch.compile(method) if compile_ else method
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode)
    scaler = torch.amp.GradScaler("cuda") if mode == "fp16" else None

    def step(batch):
        with torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext():
            loss = forward(batch)["loss"]
        optimizer.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(method.parameters(), MAX_GRAD_NORM)
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(method.parameters(), MAX_GRAD_NORM)
            scaler.step(optimizer)
            scaler.update()
        scheduler.step()
        return loss

    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_block(step, batches, start: int, n: int, device: torch.device) -> float:
    sync(device)
    started = time.perf_counter()
    for i in range(start, start + n):
        step(batches[i % len(batches)])
    sync(device)
    return time.perf_counter() - started


def measure(name: str, encoder: Encoder, args, device: torch.device, mode: str, batches) -> dict:
    torch.manual_seed(0)
    method = get_method(name)(copy.deepcopy(encoder), NUM_LABELS, HP.get(name, {})).to(device).train()
    ours_model, hand_model = method, copy.deepcopy(method)
    total = args.warmup + args.steps
    optimizer, scheduler = optimiser(ours_model, total, args.warmup)
    ours = TrainStep(ours_model, ours_model, optimizer, scheduler, device=device, amp=mode, compile=args.compile,
                     max_grad_norm=MAX_GRAD_NORM)
    assert ours.mode == mode, (ours.mode, mode)
    hand = hand_written_step(hand_model, device, mode, args.compile, total, args.warmup)
    sides = {"train_step": ours, "hand_written": hand}
    if args.compile:  # the eager TrainStep in the same rotation: compile / eager is paired too
        eager_model = copy.deepcopy(method)
        eager_opt, eager_sched = optimiser(eager_model, total, args.warmup)
        sides["eager_train_step"] = TrainStep(eager_model, eager_model, eager_opt, eager_sched, device=device, amp=mode,
                                              compile=False, max_grad_norm=MAX_GRAD_NORM)

    warm = {k: run_block(step, batches, 0, args.warmup, device) for k, step in sides.items()}
    per_block = [args.steps // args.repeats + (1 if r < args.steps % args.repeats else 0) for r in range(args.repeats)]
    times: dict[str, list[float]] = {k: [] for k in sides}
    done = args.warmup
    for r, n in enumerate(per_block):
        keys = list(sides)
        order = keys[r % len(keys):] + keys[:r % len(keys)]  # rotate who goes first
        for key in order:
            times[key].append(run_block(sides[key], batches, done, n, device))
        done += n
    rate = {k: args.batch_size * args.steps / sum(t) for k, t in times.items()}
    block_ratios = [(n / a) / (n / b) for n, a, b in zip(per_block, times["train_step"], times["hand_written"])]
    result = {
        "method": name,
        "examples_per_s": rate,
        # the median over paired blocks: a burst of other load hits one block, not the estimate
        "ratio": statistics.median(block_ratios),
        "ratio_total": rate["train_step"] / rate["hand_written"],
        "block_ratios": block_ratios,
        "block_steps": per_block,
        "block_seconds": times,
        "warmup_seconds": warm,
        "train_step_mode": ours.mode,
        "train_step_compiled": ours.compiled,
    }
    if "eager_train_step" in sides:
        compile_ratios = [b / a for a, b in zip(times["train_step"], times["eager_train_step"])]
        result["compile_ratio"] = statistics.median(compile_ratios)
        result["compile_block_ratios"] = compile_ratios
    print(f"{name:8s} TrainStep {rate['train_step']:9.2f} ex/s   hand-written {rate['hand_written']:9.2f} ex/s   "
          f"ratio {result['ratio']:.3f} (median of {args.repeats} paired blocks; of the totals {result['ratio_total']:.3f})"
          + ("" if ours.compiled or not args.compile else "   [TrainStep fell back to eager]"), flush=True)
    if "compile_ratio" in result:
        print(f"{name:8s} eager TrainStep {rate['eager_train_step']:9.2f} ex/s   compiled / eager {result['compile_ratio']:.3f} "
              f"(median of {args.repeats} paired blocks)", flush=True)
    del ours, hand, sides, ours_model, hand_model, method
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("default", "base", "tiny"), default="default",
                        help="tiny: a 2-layer 32-wide random BERT, to check the mechanics (its numbers mean nothing)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--amp", choices=("bf16", "fp16", "off"), default=None,
                        help="precision of both sides (default: bf16 on a GPU, off on CPU; TrainStep ignores "
                             "mixed precision on CPU, so CPU is always fp32)")
    parser.add_argument("--compile", action="store_true", help="torch.compile on both sides")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=None, help="128 for base, 64 for default")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per side and method (GPU 100, CPU 12)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps per side first (GPU 10, CPU 2)")
    parser.add_argument("--repeats", type=int, default=None, help="alternating blocks the timed steps are cut into (GPU 5, CPU one per step)")
    parser.add_argument("--methods", default="ce,ce_scl", help="comma-separated registry names")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here")
    gpu = device.type == "cuda"
    args.amp = args.amp or ("bf16" if gpu else "off")
    args.seq_len = args.seq_len or (128 if args.model == "base" else 64)
    args.steps = args.steps or (100 if gpu else 12)
    args.warmup = args.warmup if args.warmup is not None else (10 if gpu else 2)
    args.repeats = max(1, min(args.repeats or (5 if gpu else args.steps), args.steps))
    if args.threads:
        torch.set_num_threads(args.threads)
    mode = resolve_amp(args.amp, device)  # both sides train in the precision TrainStep resolves to
    if mode != args.amp:
        print(f"note: --amp {args.amp} on {device.type} means {mode} for TrainStep; the hand-written side follows")

    torch.manual_seed(0)
    encoder = build_encoder(args.model)
    vocab = int(encoder.backbone.config.vocab_size)
    batches = make_batches(8, args.batch_size, args.seq_len, vocab, device)
    where = torch.cuda.get_device_name(device) if gpu else f"cpu ({torch.get_num_threads()} threads)"
    print(f"step throughput: model {args.model} ({sum(p.numel() for p in encoder.parameters()) / 1e6:.1f} M), "
          f"{where}, precision {mode}, compile {args.compile}, batch {args.batch_size} x {args.seq_len}, "
          f"{args.steps} timed steps per side in {args.repeats} alternating blocks after {args.warmup} warm-up steps",
          flush=True)
    results = [measure(name.strip(), encoder, args, device, mode, batches) for name in args.methods.split(",") if name.strip()]

    imported = sorted({m.split(".")[0] for m in sys.modules} & {"ray", "mlflow", "contrasweep"})
    record = {
        "benchmark": "step_throughput",
        "goal": "TrainStep >= 0.95 x hand-written examples/s (bf16 on GPU, fp32 on CPU)",
        "config": {**vars(args), "precision": mode, "device_name": where, "torch": torch.__version__},
        "results": results,
        "imported_orchestration": imported,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    if imported:
        print(f"warning: the benchmark imported {', '.join(imported)}", file=sys.stderr)
    print(f"results: {out}")
    print("ratio TrainStep / hand-written examples/s (median of paired blocks): "
          + ", ".join(f"{r['method']} {r['ratio']:.3f}" for r in results) + "  (goal >= 0.95)")
    return record


if __name__ == "__main__":
    main()
