"""The global batch of an in-batch contrastive loss under DDP: every rank's rows, gradients kept.

With ``workers: 2`` each rank holds half of the loop's global batch (``batches.train_batches``).
A contrastive loss computed on the rank's shard alone sees half of the batch's positives and
negatives, so its value — and what a sweep finds — would change with the number of workers.
``global_batch`` concatenates every rank's rows (rank order) through
``torch.distributed.nn.functional.all_gather``, whose backward hands each rank the sum over
ranks of the gradients for its own rows.

Why this gives one worker's gradient exactly: every rank computes the same loss L on the same
global rows. Rank r's encoder gradient is then W·∂L/∂θ restricted to the paths through its
own rows (W = world size, one term per rank from the all_gather backward); parameters used
after the gather (heads, label embeddings, prototypes) get the whole ∂L/∂θ on every rank.
DDP averages gradients over the W ranks, so both become ∂L/∂θ of the global batch, as one
worker computes it (tests/test_global_batch.py: 1 vs 2 gloo ranks, float64, every method).
Per-example terms that a method keeps on its own rows (cross-entropy) are averaged by DDP as
before; they equal the global mean when the shards are equally large.

Row order: rank 0's shard, then rank 1's, …; ``batches.train_batches`` cuts contiguous
shards, so that is the global batch in one worker's order, row for row (what makes VaSCL's
random start of δ, drawn per batch position, the same for 1 and 2 workers).

Not covered: a last global batch with fewer rows than ranks lends one row to the empty ranks
(``train_batches``); that copy is part of the gathered batch.
"""

from __future__ import annotations

import torch


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def global_batch(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each tensor's rows from every rank, concatenated in rank order (identity without a
    process group or with one rank).

    Args:
        *tensors: This rank's rows, e.g. ``z: [B, d]`` and ``labels: [B]``. All tensors share
            their first dimension on a rank; ranks may hold different numbers of rows (a short
            last batch). Floating tensors carry gradients back to this rank's rows; others
            (labels) are gathered as values.

    Returns:
        One tensor per argument, in order: ``[N, ...]`` with N the rows of all ranks
        (``[B, d]`` → ``[N, d]``); the arguments themselves without DDP.

    Raises:
        ValueError: The tensors do not share their number of rows.
    """
    if not _distributed():
        return tensors
    import torch.distributed as dist
    from torch.distributed.nn.functional import all_gather

    rows = {t.shape[0] for t in tensors}
    if len(rows) != 1:
        raise ValueError(f"global_batch: tensors must share their number of rows, got {sorted(rows)}")
    n = rows.pop()
    device = tensors[0].device
    count = torch.tensor([n], device=device)
    counts = [torch.zeros_like(count) for _ in range(dist.get_world_size())]
    dist.all_gather(counts, count)
    sizes = [int(c) for c in counts]
    cap = max(sizes)
    out = []
    for t in tensors:
        # all_gather needs equal shapes: pad to the largest shard, trim after
        padded = torch.cat([t, t.new_zeros((cap - n, *t.shape[1:]))]) if cap > n else t
        if t.is_floating_point():
            parts = all_gather(padded.contiguous())
        else:
            parts = [torch.empty_like(padded) for _ in sizes]
            dist.all_gather(parts, padded.contiguous())
        out.append(torch.cat([part[:c] for part, c in zip(parts, sizes)]))
    return tuple(out)
