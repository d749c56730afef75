"""The batched few-shot probe (``linear_probes``, what ``few_shot_probe`` runs) against the
reference ``linear_probe`` run once per probe: same initialisation, same mini-batch streams,
same Adam, same checkpoint rule, so the same selections and accuracies and weights equal to
float32 rounding. Toy sizes keep the file fast."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainables.evaluation import few_shot_probe, linear_probe, linear_probes, probe_splits
from trainables.evaluation.probe import _BatchStream
from trainables.evaluation.probe_reference import _batches, _fit_linear

torch.set_num_threads(1)

FAST = dict(lr=1e-2, iterations=110, eval_every=25)  # 110: the last checkpoint is off the grid


def run_seed(i: int, seed: int = 0) -> int:
    return int(np.random.SeedSequence(seed, spawn_key=(i,)).generate_state(1)[0])


def pool(seed: int = 0, dim: int = 12, spread: float = 1.5):
    """Overlapping blobs of 5 classes with 30, 30, 30, 7 and 1 examples (shuffled): for k >= 4
    class 3 has fewer than 2k examples, for k > 7 fewer than k, and class 4 is never validated."""
    rng = np.random.default_rng(seed)
    y = np.array([0] * 30 + [1] * 30 + [2] * 30 + [3] * 7 + [4] * 1)[rng.permutation(98)]
    x = np.eye(5, dim)[y] * spread + rng.normal(size=(len(y), dim))
    test_y = rng.integers(0, 5, size=60)
    test_x = np.eye(5, dim)[test_y] * spread + rng.normal(size=(60, dim))
    return x.astype(np.float32), y, test_x.astype(np.float32), test_y


def reference(x, y, probes, sx, sy, num_classes, **kwargs):
    return [_fit_linear(x[t], y[t], x[v], y[v], sx, sy, num_classes, kwargs.get("lr", 1e-4),
                        kwargs.get("batch_size", 32), kwargs.get("iterations", 1000), kwargs.get("eval_every", 100), s)
            for t, v, s in probes]


def split_probes(y, ks, n_splits):
    return [(t, v, run_seed(i)) for k in ks for i, (t, v) in enumerate(probe_splits(y, k, n_splits, 0))]


def assert_same(batched, ref):
    assert len(batched) == len(ref)
    for got, (want, layer) in zip(batched, ref):
        assert {k: got[k] for k in want} == want  # identical selection and accuracies
        torch.testing.assert_close(got["weight"], layer.weight.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got["bias"], layer.bias.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_size", [32, 8])
def test_batched_probes_match_the_reference_per_probe(batch_size):
    """k in {1, 3, 5, 10} × 3 splits, 15 probes with training sets of 5 to 38 rows: batches
    of different sizes at the same step (padding), small classes, k above a class's size."""
    x, y, sx, sy = pool()
    probes = split_probes(y, (1, 3, 5, 10), 3)
    sizes = {len(t) for t, _, _ in probes}
    assert min(sizes) < batch_size < max(sizes)  # some probes are padded, some cut into batches
    kwargs = dict(FAST, batch_size=batch_size)
    batched = linear_probes(x, y, probes, sx, sy, 5, return_weights=True, **kwargs)
    assert_same(batched, reference(x, y, probes, sx, sy, 5, **kwargs))
    assert len({r["best_iteration"] for r in batched}) > 1  # the selections are not all alike


def test_batched_probes_pick_the_best_and_earliest_checkpoint_like_the_reference():
    """Validation rows whose labels training makes ever more wrong (best checkpoint early, not
    the last), and validation rows right from the start (ties: the first checkpoint)."""
    x, y, sx, sy = pool(seed=1, spread=6.0)
    n = len(y)
    centres = (np.eye(5, x.shape[1]) * 6.0).astype(np.float32)
    xs = np.concatenate([x, x, centres])
    ys = np.concatenate([y, (y + 1) % 5, np.arange(5)])  # rows n..2n-1: shifted labels
    train, val = probe_splits(y, 5, 1, 0)[0]
    probes = [(train, val + n, 3), (train, np.arange(2 * n, 2 * n + 5), 4), (train, val, 5)]
    kwargs = dict(lr=1e-2, iterations=60, eval_every=5)
    batched = linear_probes(xs, ys, probes, sx, sy, 5, return_weights=True, **kwargs)
    assert_same(batched, reference(xs, ys, probes, sx, sy, 5, **kwargs))
    assert batched[0]["best_iteration"] < 60
    # probe 1 validates perfectly from some checkpoint on (the final one too): a tie, the earliest wins
    final = linear_probe(xs[train], ys[train], centres, np.arange(5), sx, sy, 5, seed=4, lr=1e-2, iterations=60,
                         eval_every=60)
    assert final["val_accuracy"] == batched[1]["val_accuracy"] == 1.0 and batched[1]["best_iteration"] < 60


def test_few_shot_probe_equals_one_reference_probe_per_split():
    """``few_shot_probe`` (batched) gives the numbers of the former per-split loop of
    ``linear_probe``: same splits, same per-split seeds, same mean and std."""
    x, y, sx, sy = pool(seed=2)
    ks, n_splits = (2, 5, 10), 3
    out = few_shot_probe(x, y, sx, sy, 5, ks=ks, n_splits=n_splits, seed=0, **FAST)
    for k in ks:
        accs = [linear_probe(x[t], y[t], x[v], y[v], sx, sy, 5, seed=run_seed(i), **FAST)["test_accuracy"]
                for i, (t, v) in enumerate(probe_splits(y, k, n_splits, 0))]
        assert out[f"probe{k}_acc"] == float(np.mean(accs))
        assert out[f"probe{k}_acc_std"] == float(np.std(accs))


def test_batch_stream_is_the_reference_stream_in_any_chunks():
    for n, batch_size in [(5, 32), (40, 32), (64, 32), (23, 4)]:
        stream = _BatchStream(n, batch_size, seed=11)
        chunks = [stream.take(t0, t1) for t0, t1 in [(0, 1), (1, 7), (7, 8), (8, 30), (30, 37)]]
        positions, sizes = np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])
        reference_stream = _batches(n, batch_size, torch.Generator().manual_seed(11))
        for t in range(37):
            want = next(reference_stream).numpy()
            assert sizes[t] == len(want)
            np.testing.assert_array_equal(positions[t, : sizes[t]], want)
            assert not positions[t, sizes[t]:].any()  # padding: position 0


def test_batched_probes_do_not_depend_on_the_chunking(monkeypatch):
    import trainables.evaluation.probe as probe

    x, y, sx, sy = pool(seed=5)
    probes = split_probes(y, (1, 5, 10), 2)
    first = linear_probes(x, y, probes, sx, sy, 5, return_weights=True, **FAST)
    monkeypatch.setattr(probe, "_CHUNK_STEPS", 7)
    monkeypatch.setattr(probe, "_EVAL_FLOATS", 3 * len(probes) * x.shape[1])  # 3 rows per evaluation matmul
    again = linear_probes(x, y, probes, sx, sy, 5, return_weights=True, **FAST)
    for a, b in zip(first, again):
        assert {k: a[k] for k in ("test_accuracy", "val_accuracy", "best_iteration")} == \
            {k: b[k] for k in ("test_accuracy", "val_accuracy", "best_iteration")}
        assert torch.equal(a["weight"], b["weight"]) and torch.equal(a["bias"], b["bias"])


def test_batched_probes_are_deterministic_device_aware_and_leave_the_global_rng():
    x, y, sx, sy = pool(seed=3)
    probes = split_probes(y, (3,), 2)
    state = torch.random.get_rng_state()
    first = linear_probes(x, y, probes, sx, sy, 5, **FAST)
    assert torch.equal(torch.random.get_rng_state(), state)
    as_torch = [torch.as_tensor(a) for a in (x, y)]
    assert linear_probes(*as_torch, probes, torch.as_tensor(sx), torch.as_tensor(sy), 5, device="cpu", **FAST) == first
    assert linear_probes(x, y, [], sx, sy, 5) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_batched_probes_on_cuda_match_cpu():
    x, y, sx, sy = pool(seed=4)
    probes = split_probes(y, (1, 3, 5, 10), 3)
    cpu = linear_probes(x, y, probes, sx, sy, 5, return_weights=True, **FAST)
    gpu = linear_probes(x, y, probes, sx, sy, 5, return_weights=True, device="cuda", **FAST)
    for a, b in zip(cpu, gpu):
        torch.testing.assert_close(a["weight"], b["weight"], rtol=1e-3, atol=1e-4)
        assert abs(a["test_accuracy"] - b["test_accuracy"]) <= 2 / len(sy)


def test_batched_probes_reject_what_the_reference_rejects():
    x, y, sx, sy = pool()
    train, val = probe_splits(y, 3, 1, 0)[0]
    with pytest.raises(ValueError, match="val"):
        linear_probes(x, y, [(train, np.zeros(0, dtype=int), 0)], sx, sy, 5)
    with pytest.raises(ValueError, match="labels"):
        linear_probes(x, y, [(train, val, 0)], sx, sy, 4)  # class 4 is out of range
    with pytest.raises(ValueError, match="test"):
        linear_probes(x, y, [(train, val, 0)], sx[:0], sy[:0], 5)
    with pytest.raises(ValueError):
        linear_probes(x, y, [(train, val, 0)], sx, sy, 5, iterations=0)
