"""The MoCo queue and momentum update of ABALONE (abalone_multilabel.txt Sec. 3.2, App. A, App. B)."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

from trainables.losses.multilabel_contrastive import msc_loss
from trainables.methods.momentum_queue import EmbeddingQueue, momentum_copy, momentum_update

torch.set_num_threads(1)


def _batch(start: int, n: int, d: int = 3, n_labels: int = 4):
    """Rows whose first coordinate is their global index, labels = one-hot of index mod L."""
    z = torch.arange(start, start + n, dtype=torch.float32)[:, None].repeat(1, d)
    y = nn.functional.one_hot(torch.arange(start, start + n) % n_labels, n_labels)
    return z, y


def _ids(q: EmbeddingQueue) -> list[int]:
    return [int(v) for v in q.embeddings[:, 0]]


def test_fifo_order_and_capacity():
    q = EmbeddingQueue(dim=3, num_labels=4, size=5)
    assert len(q) == 0 and q.embeddings.shape == (0, 3) and q.labels.shape == (0, 4)
    q.enqueue(*_batch(0, 3))
    assert _ids(q) == [0, 1, 2] and len(q) == 3 and not q.is_full
    q.enqueue(*_batch(3, 4))                      # 7 seen, oldest two dropped
    assert _ids(q) == [2, 3, 4, 5, 6] and len(q) == 5 and q.is_full
    q.enqueue(*_batch(7, 1))
    assert _ids(q) == [3, 4, 5, 6, 7] and len(q) == 5
    # labels stay aligned with their embeddings, as float 0/1
    assert q.labels.dtype == torch.float32
    assert q.labels.argmax(1).tolist() == [i % 4 for i in _ids(q)]


def test_batch_larger_than_queue_keeps_its_last_k():
    q = EmbeddingQueue(dim=3, num_labels=4, size=5)
    q.enqueue(*_batch(0, 2))
    q.enqueue(*_batch(2, 8))
    assert _ids(q) == [5, 6, 7, 8, 9] and len(q) == 5
    q.enqueue(*_batch(10, 2))
    assert _ids(q) == [7, 8, 9, 10, 11]
    q.enqueue(*_batch(12, 5))                     # exactly K
    assert _ids(q) == [12, 13, 14, 15, 16]
    q.enqueue(*_batch(17, 0))                     # empty batch: nothing changes
    assert _ids(q) == [12, 13, 14, 15, 16]


def test_enqueue_stores_detached_copies_in_the_queue_dtype():
    q = EmbeddingQueue(dim=2, num_labels=2, size=4).double()
    z = torch.randn(2, 2, requires_grad=True)
    y = torch.tensor([[True, False], [True, True]])
    q.enqueue(z, y)
    assert not q.embeddings.requires_grad and q.embeddings.dtype == torch.float64
    assert q.labels.tolist() == [[1.0, 0.0], [1.0, 1.0]]
    before = q.embeddings.clone()
    with torch.no_grad():
        z.add_(10.0)                               # the caller's tensor changes, the queue does not
    assert torch.equal(q.embeddings, before)


def test_state_dict_round_trip_and_size_check():
    q = EmbeddingQueue(dim=3, num_labels=4, size=5)
    q.enqueue(*_batch(0, 7))                      # wrapped: the write pointer is not at 0
    buf = io.BytesIO()
    torch.save(q.state_dict(), buf)
    buf.seek(0)
    r = EmbeddingQueue(dim=3, num_labels=4, size=5)
    r.load_state_dict(torch.load(buf))
    assert len(r) == len(q) and torch.equal(r.embeddings, q.embeddings) and torch.equal(r.labels, q.labels)
    q.enqueue(*_batch(7, 2)), r.enqueue(*_batch(7, 2))
    assert _ids(r) == _ids(q) == [4, 5, 6, 7, 8]
    with pytest.raises(RuntimeError):
        EmbeddingQueue(dim=3, num_labels=4, size=6).load_state_dict(q.state_dict())
    r.reset()
    assert len(r) == 0 and r.embeddings.shape == (0, 3)


def test_bad_shapes():
    q = EmbeddingQueue(dim=3, num_labels=4, size=5)
    with pytest.raises(ValueError, match="allowed"):
        q.enqueue(torch.zeros(2, 2), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="allowed"):
        q.enqueue(torch.zeros(2, 3), torch.zeros(3, 4))


def test_training_step_order_never_puts_the_batch_in_its_own_queue():
    """App. B order: q = g(x); k = g_k(x).detach(); L(q, Queue, C); step; momentum; enqueue(k).
    At loss time the queue holds exactly the keys of the previous batches (so no instance is its
    own positive through its key, and no batch pair is counted twice), and the loss is MSC
    against that queue."""
    torch.manual_seed(0)
    n_labels, d = 3, 4
    enc = nn.Linear(5, d).double()
    key_enc = momentum_copy(enc)
    protos = nn.Parameter(torch.randn(n_labels, d, dtype=torch.float64))
    opt = torch.optim.SGD(list(enc.parameters()) + [protos], lr=0.1)
    queue = EmbeddingQueue(d, n_labels, size=6, dtype=torch.float64)
    seen_keys, seen_labels = [], []
    for step in range(4):
        x = torch.randn(4, 5, dtype=torch.float64)
        y = (torch.rand(4, n_labels) < 0.5).double()
        q = enc(x)
        with torch.no_grad():
            k = key_enc(x)
        # the queue holds the previous batches' keys only, oldest first, at most K of them
        prev_k = torch.cat(seen_keys)[-6:] if seen_keys else torch.zeros(0, d, dtype=torch.float64)
        prev_y = torch.cat(seen_labels)[-6:] if seen_labels else torch.zeros(0, n_labels, dtype=torch.float64)
        torch.testing.assert_close(queue.embeddings, prev_k)
        torch.testing.assert_close(queue.labels, prev_y)
        assert not any(torch.allclose(k[i], row) for i in range(len(k)) for row in queue.embeddings)
        loss = msc_loss(q, y, 0.1, 0.1, protos, queue.embeddings, queue.labels)
        want = msc_loss(q.detach(), y, 0.1, 0.1, protos.detach(), prev_k if len(prev_k) else None,
                        prev_y if len(prev_y) else None)
        assert loss.item() == pytest.approx(want.item(), rel=1e-12)
        opt.zero_grad()
        loss.backward()
        opt.step()
        momentum_update(key_enc, enc, 0.999)
        queue.enqueue(k, y)
        seen_keys.append(k), seen_labels.append(y)
    assert len(queue) == 6


def test_momentum_update_matches_ema_and_copies_buffers():
    torch.manual_seed(1)
    src = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    tgt = momentum_copy(src)
    assert all(not p.requires_grad for p in tgt.parameters())
    assert all(p.requires_grad for p in src.parameters())
    with torch.no_grad():                          # move the source away from the copy
        for p in src.parameters():
            p.add_(torch.randn_like(p))
    src(torch.randn(8, 3))                         # changes the BatchNorm running statistics
    old = {n: p.clone() for n, p in tgt.named_parameters()}
    m = 0.9
    momentum_update(tgt, src, m)
    for n, p in tgt.named_parameters():
        theta = dict(src.named_parameters())[n]
        for a, b, c in zip(p.flatten().tolist(), old[n].flatten().tolist(), theta.detach().flatten().tolist()):
            assert a == pytest.approx(m * b + (1 - m) * c, rel=1e-6, abs=1e-7)
    for n, b in tgt.named_buffers():
        assert torch.equal(b, dict(src.named_buffers())[n])
    assert all(p.grad is None for p in tgt.parameters())
    # m = 0 copies the source, m = 1 keeps the target
    momentum_update(tgt, src, 0.0)
    assert all(torch.equal(a, b) for a, b in zip(tgt.parameters(), src.parameters()))
    frozen = [p.clone() for p in tgt.parameters()]
    with torch.no_grad():
        src[0].weight.add_(1.0)
    momentum_update(tgt, src, 1.0)
    assert all(torch.equal(a, b) for a, b in zip(tgt.parameters(), frozen))


def test_momentum_update_default_and_errors():
    a, b = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        a.weight.fill_(1.0), b.weight.fill_(0.0)
    momentum_update(a, b)                          # m = 0.999 (App. A)
    assert a.weight[0, 0].item() == pytest.approx(0.999)
    with pytest.raises(ValueError, match="allowed"):
        momentum_update(a, b, 1.5)
    with pytest.raises(ValueError, match="allowed"):
        momentum_update(a, nn.Linear(2, 2), 0.9)
    assert not math.isnan(a.weight.sum().item())
