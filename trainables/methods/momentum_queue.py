"""The MoCo-style memory of ABALONE (abalone_multilabel.txt Sec. 3.2, App. A, App. B): a FIFO
queue Q of the K most recent momentum-encoder embeddings with their label vectors, and the
momentum (EMA) update of the key encoder. Used by the multi-label losses in
trainables/losses/multilabel_contrastive.py (``queue_z``/``queue_y`` of L_BQueue, L_BQProto,
L_MSC).

Training step, in the order of App. B's pseudo-code (Algorithm 1, "for x in loader"):

1. forward the query encoder:            q = g_θ(x)                      (projection head included)
2. forward the momentum encoder:         k = g_θk(x).detach()            (no gradient, e.g. no_grad)
3. loss against the queue and backward:  L(q, Queue, C, τ).backward()    → ``queue.embeddings``,
                                                                            ``queue.labels``
4. optimiser step:                       update(θ), update(C)            (C: the label prototypes)
5. momentum update:                      θ_k ← m·θ_k + (1 − m)·θ         → ``momentum_update``
6. enqueue the keys (oldest dropped):    enqueue(Queue, k); dequeue(Queue) → ``queue.enqueue(k, y)``

The keys k of the current batch are NOT used by the loss of that batch (the loss sees q, the
queue and C only): k enters the queue at step 6, after the loss. The current batch must never
be in the queue when its own loss is computed — enqueueing before the loss would count each
instance's own momentum embedding (≈ z_i itself: there is no data augmentation, App. A) and
every batch pair twice as positives. Store the labels with the keys: P(j, i) in Eq. 3 needs
the labels of every member of H = I ∪ Q. App. A: K = 512, m = 0.999 (as in He et al. 2020),
projection size d = 256. Under DDP, MoCo gathers the keys (and here the labels) of all ranks
before enqueueing so every rank holds the same queue; the integrating method decides that.

The queue is an ``nn.Module`` whose state lives in buffers: ``.to(device)`` moves it, and
``state_dict``/``load_state_dict`` checkpoint it (shapes are checked by ``load_state_dict``).
It has no parameters. Keep it (and the momentum encoder) out of the optimiser and out of the
module that DDP wraps; ``momentum_update`` also copies buffers, so do not make the queue a
submodule of the encoders being averaged.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class EmbeddingQueue(nn.Module):
    """FIFO of the last ``size`` (K) embeddings ``[d]`` and label vectors ``[L]``, a ring buffer.

    ``enqueue(z, y)`` stores detached copies (cast to the queue's dtype and device); once more
    than K items have been seen the oldest are dropped, and a batch larger than K keeps its last
    K rows. ``embeddings``/``labels`` return the filled part, oldest first (insertion order), so
    the order is fixed whatever the ring pointer. ``len(queue)`` is the number of items held
    (0 … K), so an empty queue is falsy: test ``queue is not None``, not ``if queue``. Labels
    are stored as float 0/1 in the embeddings' dtype, ready for the losses. An empty queue gives
    ``[0, d]``/``[0, L]`` tensors, which the losses accept (same result as no queue).
    """

    _z: torch.Tensor
    _y: torch.Tensor
    _ptr: torch.Tensor
    _count: torch.Tensor

    def __init__(
        self,
        dim: int,
        num_labels: int,
        size: int = 512,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ):
        super().__init__()
        if size < 1 or dim < 1 or num_labels < 1:
            raise ValueError(f"size={size}, dim={dim}, num_labels={num_labels}; allowed: all ≥ 1")
        self.size = size
        self.register_buffer("_z", torch.zeros(size, dim, dtype=dtype, device=device))
        self.register_buffer("_y", torch.zeros(size, num_labels, dtype=dtype, device=device))
        self.register_buffer("_ptr", torch.zeros((), dtype=torch.long, device=device))  # next write slot
        self.register_buffer("_count", torch.zeros((), dtype=torch.long, device=device))  # items held

    def __len__(self) -> int:
        return int(self._count)

    @property
    def is_full(self) -> bool:
        return len(self) == self.size

    @property
    def embeddings(self) -> torch.Tensor:
        """``[len(self), d]``, oldest first (a view or a fresh tensor: do not write into it)."""
        return self._ordered(self._z)

    @property
    def labels(self) -> torch.Tensor:
        """``[len(self), L]``, aligned with ``embeddings``."""
        return self._ordered(self._y)

    def _ordered(self, buf: torch.Tensor) -> torch.Tensor:
        n, ptr = len(self), int(self._ptr)
        if n < self.size:
            return buf[:n]  # not yet wrapped: slots 0 … n−1 in insertion order
        return torch.cat([buf[ptr:], buf[:ptr]])  # full: the oldest item sits at the write pointer

    @torch.no_grad()
    def enqueue(self, z: torch.Tensor, y: torch.Tensor) -> None:
        """Append a batch ``z`` ``[n, d]`` with labels ``y`` ``[n, L]`` (float or bool)."""
        if (
            z.dim() != 2
            or y.dim() != 2
            or z.shape[0] != y.shape[0]
            or z.shape[1] != self._z.shape[1]
            or y.shape[1] != self._y.shape[1]
        ):
            raise ValueError(
                f"z {tuple(z.shape)}, y {tuple(y.shape)}; allowed: [n, {self._z.shape[1]}] and [n, {self._y.shape[1]}]"
            )
        z = z.detach().to(self._z.device, self._z.dtype)
        y = y.detach().to(self._y.device, self._y.dtype)
        n = z.shape[0]
        if n == 0:
            return
        if n >= self.size:  # only the last K rows survive; they fill the buffer in order
            self._z.copy_(z[-self.size :])
            self._y.copy_(y[-self.size :])
            self._ptr.zero_()
            self._count.fill_(self.size)
            return
        idx = (self._ptr + torch.arange(n, device=self._z.device)) % self.size
        self._z[idx] = z
        self._y[idx] = y
        self._ptr.copy_((self._ptr + n) % self.size)
        self._count.copy_(torch.clamp(self._count + n, max=self.size))

    @torch.no_grad()
    def reset(self) -> None:
        """Empty the queue (the buffers keep their shape, device and dtype)."""
        self._z.zero_()
        self._y.zero_()
        self._ptr.zero_()
        self._count.zero_()

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self._z.shape[1]}, num_labels={self._y.shape[1]}, held={len(self)}"


def momentum_copy(source: nn.Module) -> nn.Module:
    """A momentum (key) encoder for ``source``: a deep copy whose parameters need no gradient.

    θ_k starts equal to θ (MoCo, He et al. 2020); only ``momentum_update`` changes it afterwards.
    """
    target = copy.deepcopy(source)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def momentum_update(target: nn.Module, source: nn.Module, m: float = 0.999) -> None:
    """θ_k ← m·θ_k + (1 − m)·θ for every parameter of ``target`` (App. B; m = 0.999, App. A).

    Parameters are matched by name and must have the same shapes; buffers (e.g. normalisation
    statistics, position ids) are copied from ``source`` as they are. Runs under no_grad, in
    place, and should follow the optimiser step (App. B step 5). m = 1 freezes the target,
    m = 0 copies the source.
    """
    if not 0.0 <= m <= 1.0:
        raise ValueError(f"m={m}; allowed: 0 ≤ m ≤ 1")
    src_params = dict(source.named_parameters())
    tgt_params = dict(target.named_parameters())
    if src_params.keys() != tgt_params.keys():
        missing = sorted(src_params.keys() ^ tgt_params.keys())
        raise ValueError(f"target and source parameters differ ({missing[:5]}); allowed: the same architecture")
    for name, p_k in tgt_params.items():
        p_k.mul_(m).add_(src_params[name].detach().to(p_k.dtype), alpha=1.0 - m)
    src_bufs = dict(source.named_buffers())
    for name, b_k in target.named_buffers():
        if name in src_bufs:
            b_k.copy_(src_bufs[name])
