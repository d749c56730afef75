"""An evaluation pass in row order vs longest rows first, side by side in one run.

The loop evaluates a split with ``trainables.gather.split_outputs``, whose batches
(``trainables.batches.eval_batches``) go longest rows first, so that dynamic padding pads
little. Before, batches were cut in row order and each was padded to its longest row: on short
texts of mixed length (tweets) most positions were padding. This benchmark times the CE
prediction pass of the bundled MiniLM over one split both ways, in ``--repeats`` alternating
pairs (drift and other load hit both), and checks that both give the same predictions.

Default: the tweet-sentiment test split (7,632 tweets, 64 tokens), the split the tweet sweep of
``benchmarks/tweet_sentiment_ce.yaml`` evaluates once per trial; ``--source bbc_news`` for long
texts (every row at the length limit: no gain expected). Needs no Ray and no MLflow. Run as

    python benchmarks/eval_order.py --repeats 3

The last line printed is the ratio row-order seconds / length-order seconds (higher is better).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

import numpy as np  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import torch  # noqa: E402

from trainables.batches import to_device  # noqa: E402
from trainables.collate import collate_numpy  # noqa: E402
from trainables.gather import split_outputs  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "eval_order.json"


class Session:
    rank, world_size, device = 0, 1, torch.device("cpu")

    @staticmethod
    def all_gather(value):
        return [value]


@torch.no_grad()
def row_order_pass(method, table, batch_size: int) -> np.ndarray:
    """The evaluation pass as it was: batches cut in row order, each padded to its longest row."""
    method.eval()
    out = []
    for start in range(0, table.num_rows, batch_size):
        batch = to_device(collate_numpy(table, np.arange(start, min(start + batch_size, table.num_rows))), Session.device)
        out.append(method.predict(batch).argmax(-1).numpy())
    return np.concatenate(out)


def padded_positions(lengths: np.ndarray, order: np.ndarray, batch_size: int) -> int:
    return int(sum(len(order[s:s + batch_size]) * lengths[order[s:s + batch_size]].max()
                   for s in range(0, len(order), batch_size)))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="tweet_sentiment")
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=128, help="the loop's eval_batch_size default")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from contrasweep.data import DataConfig, prepare
    from contrasweep.data.prepare import load_splits
    from trainables.loop import build_method

    prepared = prepare(DataConfig.from_dict({"source": args.source, "protocol": "few_shot", "k": 20, "seed": 0}),
                       tokenizer="default", max_length=args.max_length)
    table = load_splits(prepared.path)[args.split]
    torch.manual_seed(0)
    method = build_method({"method": "ce", "encoder": {"name": "default"}, "hp": {}}, prepared.num_labels)
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy()

    def by_length() -> np.ndarray:
        return split_outputs(method, table, args.batch_size, Session(), lambda b: method.predict(b).argmax(-1))[0]

    by_length()  # warm-up, not timed (first-call allocations, lazy initialisation)
    row_s, length_s = [], []
    for repeat in range(args.repeats):
        for side in (("row", "length") if repeat % 2 == 0 else ("length", "row")):
            started = time.perf_counter()
            predicted = row_order_pass(method, table, args.batch_size) if side == "row" else by_length()
            (row_s if side == "row" else length_s).append(time.perf_counter() - started)
            if side == "row":
                row_pred = predicted
            else:
                length_pred = predicted
        agree = float((row_pred == length_pred.astype(row_pred.dtype)).mean())
        print(f"repeat {repeat}: row order {row_s[-1]:.2f} s, longest first {length_s[-1]:.2f} s, "
              f"predictions agree {agree:.4f}", flush=True)
    ratio = statistics.median(r / s for r, s in zip(row_s, length_s))
    record = {
        "source": args.source, "split": args.split, "rows": table.num_rows, "max_length": args.max_length,
        "batch_size": args.batch_size, "threads": args.threads, "mean_length": float(lengths.mean()),
        "positions_row_order": padded_positions(lengths, np.arange(len(lengths)), args.batch_size),
        "positions_longest_first": padded_positions(lengths, np.argsort(-lengths, kind="stable"), args.batch_size),
        "row_order_s": row_s, "longest_first_s": length_s, "predictions_agree": agree, "ratio": ratio,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"token positions: row order {record['positions_row_order']:,}, longest first "
          f"{record['positions_longest_first']:,} ({record['positions_row_order'] / record['positions_longest_first']:.2f}x)")
    print(f"evaluation pass, row order / longest first (median of {args.repeats} pairs): {ratio:.2f}")
    return record


if __name__ == "__main__":
    main()
