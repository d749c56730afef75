"""Batches from the tokenised Arrow tables: seeded shuffling, sharding across DDP ranks and
dynamic padding (each batch is padded to its own longest row, not to max_length)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow.compute as pc
import torch

from trainables.collate import collate_numpy
from trainables.phase_progress import track


def train_batches(table, batch_size: int, seed: int, epoch: int, rank: int, world: int) -> Iterator[dict]:
    """Shuffle with (seed, epoch), cut into global batches, give this rank its slice.

    ``batch_size`` is global: with 2 workers and batch 32 each rank sees 16 rows per step, so
    one optimiser step still averages 32 examples (DDP averages gradients across ranks).
    Every rank gets the same number of steps (a short last batch is split as evenly as it can).
    Shards are contiguous, so every rank's rows concatenated in rank order are the global batch
    in its own order (``trainables.global_batch``: one worker's batch, row for row).
    """
    order = np.random.default_rng([seed, epoch]).permutation(table.num_rows)
    for start in range(0, len(order), batch_size):
        shard = np.array_split(order[start : start + batch_size], world)[rank]
        if len(shard) == 0:  # fewer rows than ranks in the last batch: reuse one row
            shard = order[start : start + 1]
        yield collate_numpy(table, shard)


def eval_batches(table, batch_size: int, rank: int = 0, world: int = 1) -> Iterator[tuple[np.ndarray, dict]]:
    """This rank's strided share of the rows with their row indices, longest rows first: rows
    of similar length share a batch, so dynamic padding pads little (short texts such as
    tweets: far fewer padded positions than in row order). Callers put outputs back in row
    order by the indices (``trainables.gather.split_outputs``)."""
    rows = np.arange(rank, table.num_rows, world)
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy(zero_copy_only=False)
    rows = rows[np.argsort(-lengths[rows], kind="stable")]
    starts = range(0, len(rows), batch_size)
    for start in track(starts, "evaluating", len(starts), rank):  # a progress line in long evaluations
        idx = rows[start : start + batch_size]
        yield idx, collate_numpy(table, idx)


def to_device(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.asarray(v)).to(device, non_blocking=True) for k, v in batch.items()}
