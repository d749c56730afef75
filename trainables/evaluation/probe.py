"""Few-shot linear probe of frozen sentence representations (vascl.txt Sec. 4.2.1,
"Intent Classification", footnote 5, Table 3).

The protocol: freeze the encoder and train a linear softmax layer with cross-entropy. The
training and validation sets are merged into one pool, from which K training and K
validation samples per class are drawn; learning rate 1e-4, batch size 32, 1000 iterations,
validation every 100 iterations, test accuracy of the checkpoint with the best validation
accuracy; mean and standard deviation over 5 splits that are fixed for all models.

The representations are computed once by the caller; every split and every K reuses them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
import torch.nn.functional as F


def probe_splits(labels, k: int, n_splits: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """The fixed few-shot splits of the merged train+validation pool (footnote 5).

    For every split and every class, the class's pool indices are shuffled and the first
    ``n_train`` become training samples, the next ``n_val`` validation samples (so the two
    are disjoint and drawn without replacement).

    Small classes (defined here, tested): a class with ``n`` pool examples gets
    ``n_train = min(k, ceil(n / 2))`` and ``n_val = min(k, floor(n / 2))``. With ``n ≥ 2k``
    that is exactly k and k; below that the class is split about evenly with the odd example
    going to training, so a class with a single example is trained on and not validated.

    Determinism: the splits depend only on ``labels`` (values and order), ``k`` and ``seed``,
    never on representations, so every model is probed on the same splits. Split ``i`` is
    drawn from its own generator (``SeedSequence(seed, spawn_key=(i,))``), so the first splits
    are the same whatever ``n_splits`` is.

    Args:
        labels: ``[N]`` class ids of the pool, in a fixed (e.g. dataset) order.
        k: samples per class on each side.
        n_splits: number of splits.
        seed: the split seed.

    Returns:
        ``n_splits`` pairs ``(train_indices, val_indices)`` of sorted int64 indices into
        ``labels``.
    """
    y = np.asarray(labels).ravel()
    if k < 1 or n_splits < 1:
        raise ValueError(f"k={k} and n_splits={n_splits} must both be at least 1")
    # class order is the sorted class ids, so the draw does not depend on which class comes first
    members = [np.flatnonzero(y == c) for c in np.unique(y)]
    splits = []
    for i in range(n_splits):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))
        train, val = [], []
        for idx in members:
            n = len(idx)
            n_val = min(k, n // 2)
            n_train = min(k, n - n // 2)
            perm = rng.permutation(idx)
            train.append(perm[:n_train])
            val.append(perm[n_train:n_train + n_val])
        splits.append((np.sort(np.concatenate(train)).astype(np.int64),
                       np.sort(np.concatenate(val)).astype(np.int64)))
    return splits


def _features(x) -> torch.Tensor:
    """float32 CPU tensor of representations, detached from any graph (the encoder is frozen)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(device="cpu", dtype=torch.float32)
    return torch.as_tensor(np.asarray(x), dtype=torch.float32)


def _targets(y) -> torch.Tensor:
    if isinstance(y, torch.Tensor):
        return y.detach().to(device="cpu", dtype=torch.long).ravel()
    return torch.as_tensor(np.asarray(y), dtype=torch.long).ravel()


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


def linear_probe(train_x, train_y, val_x, val_y, test_x, test_y, num_classes: int,
                 lr: float = 1e-4, batch_size: int = 32, iterations: int = 1000,
                 eval_every: int = 100, seed: int = 0) -> dict[str, float | int]:
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
    tx, vx, sx = _features(train_x), _features(val_x), _features(test_x)
    ty, vy, sy = _targets(train_y), _targets(val_y), _targets(test_y)
    for name, x, y in (("train", tx, ty), ("val", vx, vy), ("test", sx, sy)):
        if x.ndim != 2 or len(x) != len(y):
            raise ValueError(f"{name}: features {tuple(x.shape)} must be [n, d] with n = {len(y)} labels")
        if len(y) == 0:
            # no validation set means no checkpoint selection; no test set means no result
            raise ValueError(f"{name} set is empty")
        if int(y.min()) < 0 or int(y.max()) >= num_classes:
            raise ValueError(f"{name} labels must lie in [0, {num_classes})")
    if iterations < 1 or eval_every < 1 or batch_size < 1:
        raise ValueError("iterations, eval_every and batch_size must all be at least 1")

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = torch.nn.Linear(tx.shape[1], num_classes)
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
                best = {"test_accuracy": _accuracy(layer, sx, sy), "val_accuracy": val_acc,
                        "best_iteration": step}
    return best


def few_shot_probe(pool_x, pool_y, test_x, test_y, num_classes: int,
                   ks: Iterable[int] = (5, 10, 20), n_splits: int = 5, seed: int = 0,
                   **probe_kwargs) -> dict[str, float]:
    """The K-shot intent classification evaluation of Table 3 for every K in ``ks``.

    For each K: the ``n_splits`` fixed splits of the pool (``probe_splits(pool_y, K,
    n_splits, seed)``), one ``linear_probe`` per split, mean and standard deviation of the
    test accuracies. The probe of split ``i`` is seeded from ``(seed, i)``, so its
    initialisation and batch order are fixed too and differ between splits; pass any other
    ``linear_probe`` argument (``lr``, ``iterations``, ...) through ``probe_kwargs``.

    Args:
        pool_x: ``[N, d]`` representations of the merged training and validation sets.
        pool_y: ``[N]`` their class ids.
        test_x, test_y: the test set.
        num_classes: number of classes.
        ks: shots per class.
        n_splits: splits per K (the paper: 5).
        seed: the split seed.

    Returns:
        ``{f"probe{k}_acc": mean test accuracy, f"probe{k}_acc_std": population standard
        deviation (ddof=0, as for clustering)}`` for every k; fractions, not percentages.
    """
    pool_x, test_x = _features(pool_x), _features(test_x)
    pool_y, test_y = _targets(pool_y), _targets(test_y)
    out = {}
    for k in ks:
        accs = []
        for i, (train, val) in enumerate(probe_splits(pool_y.numpy(), k, n_splits, seed)):
            run_seed = int(np.random.SeedSequence(seed, spawn_key=(i,)).generate_state(1)[0])
            result = linear_probe(pool_x[train], pool_y[train], pool_x[val], pool_y[val], test_x, test_y,
                                  num_classes, seed=run_seed, **probe_kwargs)
            accs.append(result["test_accuracy"])
        out[f"probe{k}_acc"] = float(np.mean(accs))
        out[f"probe{k}_acc_std"] = float(np.std(accs))
    return out
