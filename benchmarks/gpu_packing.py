"""Fractional GPUs: aggregate training examples/s of 1, 2 and 4 concurrent trials on one GPU.

What ``resources: {gpu: 0.25}`` does in a sweep: four trial processes, each with its own model,
optimiser and ``TrainStep`` (the loop's step, bf16 by default), train batch-32 steps on the same
GPU at once. A small model's step is launch-bound, so one trial leaves most of the GPU idle;
several processes fill it. Each process builds the model (``--model base``: a randomly
initialised BERT-base, no download; ``default``: the bundled MiniLM), runs ``--warmup`` untimed
steps (compilation happens there with ``--compile``), waits at a barrier so that all start
together, then trains ``--steps`` timed steps. Aggregate examples/s = all processes' examples /
the wall time from the common start to the last process's end. Eager and compiled are measured
in the same run. Goal: 4 trials reach >= 3x one trial's examples/s.

GPU only: without CUDA it prints that it skipped and writes a JSON saying so. Needs torch,
transformers and ``trainables/`` only (no Ray). Not a test; run it as

    python benchmarks/gpu_packing.py --model base [--steps 100] [--counts 1,2,4] [--no-compile]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (str(ROOT), str(ROOT / "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "gpu_packing.json"


def trial(rank: int, args: dict, barrier, results) -> None:
    """One trial process: build, warm up, wait for the others, train the timed steps."""
    import torch

    from step_throughput import HP, NUM_LABELS, build_encoder, make_batches, optimiser
    from trainables.registry import get_method
    from trainables.step import TrainStep

    torch.manual_seed(rank)
    device = torch.device(args["device"])
    if device.type == "cpu":
        torch.set_num_threads(1)
    encoder = build_encoder(args["model"])
    method = get_method(args["method"])(encoder, NUM_LABELS, HP.get(args["method"], {})).to(device)
    total = args["warmup"] + args["steps"]
    optimizer, scheduler = optimiser(method, total, 0)
    step = TrainStep(method, method, optimizer, scheduler, device=device, amp=args["amp"], compile=args["compile"])
    batches = make_batches(8, args["batch_size"], args["seq_len"], int(encoder.backbone.config.vocab_size), device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for i in range(args["warmup"]):
        step(batches[i % len(batches)])
    sync()
    barrier.wait()
    started = time.perf_counter()
    for i in range(args["steps"]):
        step(batches[i % len(batches)])
    sync()
    results.put({"rank": rank, "start": started, "end": time.perf_counter(), "examples": args["steps"] * args["batch_size"],
                 "compiled": step.compiled, "mode": step.mode})


def packed(count: int, args: dict) -> dict:
    """``count`` concurrent trial processes; their aggregate examples/s."""
    ctx = mp.get_context("spawn")  # CUDA cannot be forked
    barrier, results = ctx.Barrier(count), ctx.Queue()
    procs = [ctx.Process(target=trial, args=(r, args, barrier, results)) for r in range(count)]
    for p in procs:
        p.start()
    rows = [results.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
    wall = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    examples = sum(r["examples"] for r in rows)
    return {"trials": count, "examples_per_s": examples / wall, "wall_s": wall,
            "per_trial_examples_per_s": [r["examples"] / (r["end"] - r["start"]) for r in rows],
            "compiled": all(r["compiled"] for r in rows), "mode": rows[0]["mode"]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("default", "base", "tiny"), default="base")
    parser.add_argument("--method", default="ce")
    parser.add_argument("--amp", choices=("auto", "bf16", "fp16", "off"), default="auto")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--counts", default="1,2,4")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu only checks the mechanics (one thread per process); the numbers mean nothing")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        result = {"skipped": "no CUDA GPU on this machine"}
        out.write_text(json.dumps(result, indent=1))
        print("gpu_packing: skipped (no CUDA GPU on this machine)")
        return result
    counts = [int(c) for c in args.counts.split(",")]
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu (mechanics check only)"
    result = {"device": device_name, "args": vars(args), "runs": []}
    for compiled in ([False] if args.no_compile else [False, True]):
        for count in counts:
            setting = {**vars(args), "compile": compiled}
            row = {**packed(count, setting), "compile_requested": compiled}
            result["runs"].append(row)
            print(f"{'compiled' if compiled else 'eager'} x{count}: {row['examples_per_s']:.0f} examples/s "
                  f"(per trial {', '.join(f'{v:.0f}' for v in row['per_trial_examples_per_s'])})", flush=True)
    summary = []
    for compiled in sorted({r["compile_requested"] for r in result["runs"]}):
        rows = {r["trials"]: r for r in result["runs"] if r["compile_requested"] == compiled}
        if 1 in rows and max(rows) > 1:
            top = max(rows)
            ratio = rows[top]["examples_per_s"] / rows[1]["examples_per_s"]
            verdict = ("PASS" if ratio >= 3 else "MISS") if top == 4 else "the goal is for 4 trials"
            summary.append(f"{'compiled' if compiled else 'eager'}: {top} trials / 1 trial = {ratio:.2f}x "
                           f"({verdict}: goal >= 3x with 4)")
    result["summary"] = summary
    out.write_text(json.dumps(result, indent=1))
    for line in summary:
        print(line)
    return result


if __name__ == "__main__":
    main()
