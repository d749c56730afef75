"""Evaluation batches go longest first (little padding) and outputs come back in row order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from trainables.batches import eval_batches
from trainables.gather import split_outputs


def table_of_lengths(lengths) -> pa.Table:
    ids = [[101] + [1000 + i] * (n - 2) + [102] for i, n in enumerate(lengths)]
    return pa.table({"input_ids": pa.array(ids, type=pa.list_(pa.int32())),
                     "labels": pa.array(np.arange(len(lengths)) % 3, type=pa.int64())})


LENGTHS = [5, 30, 7, 30, 12, 3, 9, 28, 4, 16, 6]


def test_each_row_once_longest_first_and_little_padding():
    table = table_of_lengths(LENGTHS)
    seen, padded = [], 0
    for idx, batch in eval_batches(table, 4):
        seen.extend(idx.tolist())
        padded += int((batch["attention_mask"] == 0).sum())
        assert np.array_equal(batch["attention_mask"].sum(1), np.asarray(LENGTHS)[idx])
    assert sorted(seen) == list(range(len(LENGTHS)))
    assert [LENGTHS[i] for i in seen] == sorted(LENGTHS, reverse=True)
    in_row_order = sum(max(LENGTHS[s:s + 4]) * len(LENGTHS[s:s + 4]) - sum(LENGTHS[s:s + 4]) for s in range(0, 11, 4))
    assert padded < in_row_order / 3, (padded, in_row_order)


def test_ranks_share_the_rows():
    table = table_of_lengths(LENGTHS)
    shares = [np.concatenate([idx for idx, _ in eval_batches(table, 3, rank, 2)]) for rank in (0, 1)]
    assert sorted(shares[0].tolist()) == list(range(0, 11, 2)) and sorted(shares[1].tolist()) == list(range(1, 11, 2))


class _Session:
    rank, world_size, device = 0, 1, torch.device("cpu")

    @staticmethod
    def all_gather(value):
        return [value]


def test_outputs_come_back_in_row_order():
    table = table_of_lengths(LENGTHS)
    method = torch.nn.Identity()
    outs, labels = split_outputs(method, table, 4, _Session(), lambda b: b["attention_mask"].sum(1))
    assert outs.tolist() == LENGTHS and labels.tolist() == (np.arange(11) % 3).tolist()
