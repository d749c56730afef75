"""The reference few-shot probe (vascl.txt Sec. 4.2.1, footnote 5): ``linear_probe`` trains ONE
linear softmax classifier on frozen representations in a plain PyTorch loop on CPU, kept
readable; ``trainables.evaluation.probe.linear_probes`` trains many at once and must agree with
it (``tests/test_probe_batched.py``). Also the input helpers both share: representations and
class ids as tensors, their checks, and the initial layer a seed gives.

May import: numpy, torch; nothing of ``trainables``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def as_features(x, device: torch.device | str = "cpu") -> torch.Tensor:
    """float32 tensor of representations on ``device``, detached from any graph (the encoder is
    frozen)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(device=device, dtype=torch.float32)
    return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=device)


def as_targets(y, device: torch.device | str = "cpu") -> torch.Tensor:
    if isinstance(y, torch.Tensor):
        return y.detach().to(device=device, dtype=torch.long).ravel()
    return torch.as_tensor(np.asarray(y), dtype=torch.long, device=device).ravel()


def check_set(name: str, x: torch.Tensor, y: torch.Tensor, num_classes: int) -> None:
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(f"{name}: features {tuple(x.shape)} must be [n, d] with n = {len(y)} labels")
    if len(y) == 0:
        # no validation set means no checkpoint selection; no test set means no result
        raise ValueError(f"{name} set is empty")
    if int(y.min()) < 0 or int(y.max()) >= num_classes:
        raise ValueError(f"{name} labels must lie in [0, {num_classes})")


def initial_layer(d: int, num_classes: int, seed: int) -> torch.nn.Linear:
    """``torch.nn.Linear(d, num_classes)`` as PyTorch initialises it after
    ``torch.manual_seed(seed)``, on CPU, leaving the caller's global RNG as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Linear(d, num_classes)


def _accuracy(layer: torch.nn.Linear, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        # counted in integers so that e.g. 1/3 is the float64 1/3, not a float32 mean
        return int((layer(x).argmax(dim=1) == y).sum()) / len(y)


def _batches(n: int, batch_size: int, generator: torch.Generator):
    """Endless mini-batches of indices: each epoch is a fresh shuffle cut into consecutive
    batches, the last one smaller if ``batch_size`` does not divide ``n`` (as a shuffling
    ``DataLoader`` without ``drop_last``; dropping it would lose every sample when
    ``n < batch_size``, e.g. 5 shots of 5 classes)."""
    while True:
        yield from torch.randperm(n, generator=generator).split(batch_size)


def linear_probe(
    train_x,
    train_y,
    val_x,
    val_y,
    test_x,
    test_y,
    num_classes: int,
    lr: float = 1e-4,
    batch_size: int = 32,
    iterations: int = 1000,
    eval_every: int = 100,
    seed: int = 0,
) -> dict[str, float | int]:
    """Train one linear softmax classifier on frozen representations (Sec. 4.2.1).

    ``torch.nn.Linear(d, num_classes)`` with PyTorch's default initialisation, cross-entropy,
    optimised with Adam (the paper only says "fine-tune a linear classification layer"; Adam
    is the optimiser of its App. A), CPU, float32. One iteration is one optimiser step on one
    mini-batch (see ``_batches``). The validation accuracy is measured after every
    ``eval_every`` iterations (and after the last one if ``iterations`` is not a multiple);
    the result is the test accuracy of the checkpoint with the best validation accuracy, the
    earliest one on ties. The test accuracy is measured alongside each validation instead of
    saving and restoring weights: the same number, without copies.

    Deterministic given ``seed``: it seeds both the initialisation (inside
    ``torch.random.fork_rng``, so the caller's global RNG is left as it was) and the
    ``torch.Generator`` that shuffles the batches. The number of torch threads is the
    caller's choice.

    Args:
        train_x, val_x, test_x: ``[n, d]`` representations (numpy or torch).
        train_y, val_y, test_y: ``[n]`` class ids in ``[0, num_classes)``.
        num_classes: output size (classes missing from the training set are still outputs).
        lr, batch_size, iterations, eval_every: the paper's 1e-4, 32, 1000, 100 by default.
        seed: the run seed.

    Returns:
        ``{"test_accuracy", "val_accuracy", "best_iteration"}``: accuracies (fractions) of the
        best-validation checkpoint and the iteration at which it was taken.
    """
    return _fit_linear(
        train_x, train_y, val_x, val_y, test_x, test_y, num_classes, lr, batch_size, iterations, eval_every, seed
    )[0]


def _fit_linear(
    train_x, train_y, val_x, val_y, test_x, test_y, num_classes, lr, batch_size, iterations, eval_every, seed
) -> tuple[dict[str, float | int], torch.nn.Linear]:
    """``linear_probe``'s loop; also returns the final layer (for the tests of ``linear_probes``)."""
    tx, vx, sx = as_features(train_x), as_features(val_x), as_features(test_x)
    ty, vy, sy = as_targets(train_y), as_targets(val_y), as_targets(test_y)
    for name, x, y in (("train", tx, ty), ("val", vx, vy), ("test", sx, sy)):
        check_set(name, x, y, num_classes)
    if iterations < 1 or eval_every < 1 or batch_size < 1:
        raise ValueError("iterations, eval_every and batch_size must all be at least 1")

    layer = initial_layer(tx.shape[1], num_classes, seed)
    optimizer = torch.optim.Adam(layer.parameters(), lr=lr)
    batches = _batches(len(tx), batch_size, torch.Generator().manual_seed(seed))

    best = {"test_accuracy": float("nan"), "val_accuracy": -1.0, "best_iteration": 0}
    for step in range(1, iterations + 1):
        idx = next(batches)
        loss = F.cross_entropy(layer(tx[idx]), ty[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % eval_every == 0 or step == iterations:
            val_acc = _accuracy(layer, vx, vy)
            # strictly greater: on ties the earliest checkpoint wins
            if val_acc > best["val_accuracy"]:
                best = {"test_accuracy": _accuracy(layer, sx, sy), "val_accuracy": val_acc, "best_iteration": step}
    return best, layer
