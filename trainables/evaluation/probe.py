"""Few-shot linear probe of frozen sentence representations (vascl.txt Sec. 4.2.1,
"Intent Classification", footnote 5, Table 3).

The protocol: freeze the encoder and train a linear softmax layer with cross-entropy. The
training and validation sets are merged into one pool, from which K training and K
validation samples per class are drawn; learning rate 1e-4, batch size 32, 1000 iterations,
validation every 100 iterations, test accuracy of the checkpoint with the best validation
accuracy; mean and standard deviation over 5 splits that are fixed for all models.

The representations are computed once by the caller; every split and every K reuses them.

Two implementations of the same probe: ``linear_probe`` trains one classifier in a plain PyTorch
loop on CPU (the reference, kept readable), ``linear_probes`` trains many at once as one batched
computation on any device (what ``few_shot_probe`` uses: all splits × all K of Table 3 in one
loop of ``iterations`` steps). ``tests/test_probe_batched.py`` checks that they agree. This
module holds the protocol (the splits, ``few_shot_probe``) and the batched ``linear_probes``;
``linear_probe`` and the input helpers both use are in
``trainables.evaluation.probe_reference``.

May import: numpy, torch, ``trainables.evaluation.probe_reference``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trainables.evaluation.probe_reference import as_features, as_targets, check_set, initial_layer


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
            val.append(perm[n_train : n_train + n_val])
        splits.append((np.sort(np.concatenate(train)).astype(np.int64), np.sort(np.concatenate(val)).astype(np.int64)))
    return splits


class _BatchStream:
    """``probe_reference._batches(n, batch_size, Generator(seed))`` laid out for a batched loop:
    ``take(t0, t1)`` gives the positions ``[t1 - t0, min(batch_size, n)]`` (padded with 0) and
    sizes ``[t1 - t0]`` of the mini-batches of steps ``t0 .. t1 - 1``. The same ``torch.randperm`` calls on the same
    generator, so the same stream; only the shuffles of the epochs the steps touch are kept, so
    the memory does not grow with the number of iterations. Ranges must be consecutive."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.batch_size = n, batch_size
        self.per_epoch = -(-n // batch_size)  # batches per shuffle
        self.generator = torch.Generator().manual_seed(seed)
        self.first = 0  # the epoch self.perms[0] shuffles
        self.perms = np.zeros((0, n), dtype=np.int64)

    def take(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        epoch, chunk = np.divmod(np.arange(t0, t1), self.per_epoch)
        drop = int(epoch[0]) - self.first
        self.perms, self.first = self.perms[drop:], int(epoch[0])
        new = int(epoch[-1]) - self.first + 1 - len(self.perms)
        if new > 0:
            self.perms = np.concatenate(
                [self.perms, np.stack([torch.randperm(self.n, generator=self.generator).numpy() for _ in range(new)])]
            )
        flat = self.perms.reshape(-1)
        start = (epoch - self.first) * self.n + chunk * self.batch_size
        sizes = np.minimum(self.batch_size, self.n - chunk * self.batch_size)
        cols = np.arange(min(self.batch_size, self.n))
        inside = cols < sizes[:, None]
        positions = np.where(inside, flat[np.where(inside, start[:, None] + cols, 0)], 0)
        return positions, sizes


_CHUNK_STEPS = 500  # mini-batch indices prepared (and sent to the device) this many steps at a time
_EVAL_FLOATS = 1 << 24  # at most this many gathered features per batched evaluation matmul (64 MiB)


def linear_probes(
    x,
    y,
    probes: Sequence[tuple],
    test_x,
    test_y,
    num_classes: int,
    lr: float = 1e-4,
    batch_size: int = 32,
    iterations: int = 1000,
    eval_every: int = 100,
    device: torch.device | str | None = None,
    return_weights: bool = False,
) -> list[dict]:
    """Many independent ``linear_probe`` runs trained at once as one batched computation.

    Probe ``p = (train, val, seed)`` is ``linear_probe(x[train], y[train], x[val], y[val],
    test_x, test_y, num_classes, lr, batch_size, iterations, eval_every, seed)``; all P probes
    share the representations ``x`` and the test set. Each probe is a slice of stacked
    parameters ``W [P, C, d]``, ``b [P, C]``, and every step is one batched matmul over all of them:

    * initialisation: slice ``p`` is copied from ``torch.nn.Linear(d, C)`` created after
      ``torch.manual_seed(seed_p)`` on CPU, exactly the reference's layer;
    * mini-batches: probe ``p``'s stream is the reference's (its own ``torch.Generator(seed_p)``,
      one ``randperm`` per epoch of its training set, cut into ``batch_size`` pieces),
      precomputed. Probes with different training-set sizes (different K) have batches of
      different sizes at the same step (e.g. 20, or 32 then 8); batches are padded to
      ``min(batch_size, max n)`` rows and the padding masked out of the loss, so it gets a zero
      gradient (``masked_fill``; padded rows point at a real row, so nothing is NaN);
    * loss: the SUM over probes of each probe's mean cross-entropy over its real rows. Probe
      ``p``'s loss term depends only on ``W[p], b[p]``, so the gradient of the sum with respect
      to slice ``p`` is exactly the gradient of its own mean loss (a mean over probes would
      divide every gradient by P, which Adam's ``eps`` would not ignore);
    * optimiser: ONE ``torch.optim.Adam(lr)`` over ``W`` and ``b``. Adam's moments and update
      are elementwise (the step count is shared, and every probe steps at every iteration), so
      this is P independent Adams with the reference's settings;
    * checkpoints: after every ``eval_every`` steps (and the last) the correct-prediction
      counts of every probe on its own validation rows and on the test set are recorded on the
      device; the result is the test accuracy of the checkpoint with the most validation hits,
      the earliest on ties (the reference's strict ``>``), with the same integer/length
      accuracies.

    Differences from the reference: none in the arithmetic, but a batched matmul (and the
    padded reduction in the weight gradient) may sum in a different order than the reference's
    unbatched one, so weights agree to float32 rounding, not always to the bit; an accuracy
    can only differ when a prediction sits within rounding of a logit tie. Measured on CPU
    (d = 384, 4 classes, K ∈ {5, 10, 20} × 5 splits, 1,000 steps): the K = 5 and K = 20 probes
    came out bit-identical, the K = 10 ones (batches of 32 then 8 rows) within 2.3e-8 of the
    reference's weights, all 15 selections and accuracies identical. On a GPU the matmuls and
    Adam's (foreach) kernels are the GPU's, TF32 if the caller enabled it: expect agreement
    to float32 (or TF32) tolerance, not identity. The memory is bounded: the mini-batch indices
    are prepared ``_CHUNK_STEPS`` steps at a time and the evaluation matmuls gather at most
    ``_EVAL_FLOATS`` features at once.

    Args:
        x: ``[N, d]`` representations that the probes' train and validation indices point into.
        y: ``[N]`` class ids.
        probes: ``(train_indices, val_indices, seed)`` per probe (non-empty index arrays).
        test_x, test_y: the shared test set.
        num_classes, lr, batch_size, iterations, eval_every: as ``linear_probe``.
        device: where to train; default: ``x``'s device if it is a tensor, else CPU.
        return_weights: also return each probe's final ``weight`` [C, d] and ``bias`` [C] (CPU).

    Returns:
        One ``linear_probe`` result dict per probe, in order.
    """
    if device is None:
        device = x.device if isinstance(x, torch.Tensor) else "cpu"
    device = torch.device(device)
    if iterations < 1 or eval_every < 1 or batch_size < 1:
        raise ValueError("iterations, eval_every and batch_size must all be at least 1")
    x, y = as_features(x, device), as_targets(y, device)
    sx, sy = as_features(test_x, device), as_targets(test_y, device)
    if x.ndim != 2 or len(x) != len(y):
        raise ValueError(f"features {tuple(x.shape)} must be [n, d] with n = {len(y)} labels")
    check_set("test", sx, sy, num_classes)
    if not probes:
        return []
    trains = [np.asarray(t, dtype=np.int64).ravel() for t, _, _ in probes]
    vals = [np.asarray(v, dtype=np.int64).ravel() for _, v, _ in probes]
    seeds = [int(s) for _, _, s in probes]
    labels = y.cpu().numpy()
    for name, sets in (("train", trains), ("val", vals)):
        for rows in sets:
            if len(rows) == 0:
                raise ValueError(f"{name} set is empty")  # as linear_probe: no selection / nothing to learn
            if rows.min() < 0 or rows.max() >= len(labels):
                raise ValueError(f"{name} indices must lie in [0, {len(labels)})")
            if labels[rows].min() < 0 or labels[rows].max() >= num_classes:
                raise ValueError(f"{name} labels must lie in [0, {num_classes})")

    n_probes, d = len(probes), x.shape[1]
    # initial weights: the reference's nn.Linear per seed (splits share seeds across K)
    layers = {s: initial_layer(d, num_classes, s) for s in dict.fromkeys(seeds)}
    weight = torch.stack([layers[s].weight.detach() for s in seeds]).to(device).requires_grad_()  # [P, C, d]
    bias = torch.stack([layers[s].bias.detach() for s in seeds]).to(device).requires_grad_()  # [P, C]

    streams = [_BatchStream(len(t), batch_size, seed) for t, seed in zip(trains, seeds)]
    width = min(batch_size, max(len(t) for t in trains))  # batches are padded to this many rows

    def schedule(t0: int, t1: int):
        """Steps t0..t1-1 of every probe: pool rows [T, P, B], padding mask [T, P, B], sizes [T, P]."""
        rows = np.zeros((t1 - t0, n_probes, width), dtype=np.int64)
        sizes = np.zeros((t1 - t0, n_probes), dtype=np.int64)
        for p, (train, stream) in enumerate(zip(trains, streams)):
            positions, sizes[:, p] = stream.take(t0, t1)
            rows[:, p, : positions.shape[1]] = train[positions]  # padding points at a real row
        padding = np.arange(width) >= sizes[..., None]
        return (
            torch.from_numpy(rows).to(device),
            torch.from_numpy(padding).to(device),
            torch.from_numpy(sizes).to(device=device, dtype=torch.float32),
        )

    # every probe's validation rows, padded [P, V]; the test set is shared by all probes
    v_width = max(len(v) for v in vals)
    val_rows = torch.from_numpy(np.stack([np.pad(v, (0, v_width - len(v))) for v in vals])).to(device)
    val_real = torch.from_numpy(np.arange(v_width) < np.array([len(v) for v in vals])[:, None]).to(device)
    rows_per_matmul = max(1, _EVAL_FLOATS // (n_probes * d))

    def logits_of(features: torch.Tensor) -> torch.Tensor:  # [P, n, d] -> [P, n, C]
        return torch.baddbmm(bias.unsqueeze(1), features, weight.transpose(1, 2))

    def val_hits() -> torch.Tensor:
        total = torch.zeros(n_probes, dtype=torch.long, device=device)
        for start in range(0, v_width, rows_per_matmul):
            idx = val_rows[:, start : start + rows_per_matmul]  # [P, v]
            features = x.index_select(0, idx.reshape(-1)).view(*idx.shape, d)  # (index_select: ~2x x[idx] on CPU)
            correct = logits_of(features).argmax(dim=2) == y.index_select(0, idx.reshape(-1)).view(idx.shape)
            total += (correct & val_real[:, start : start + rows_per_matmul]).sum(dim=1)
        return total

    def test_hits() -> torch.Tensor:
        total = torch.zeros(n_probes, dtype=torch.long, device=device)
        for start in range(0, len(sx), rows_per_matmul):
            part = sx[start : start + rows_per_matmul]
            predicted = logits_of(part.expand(n_probes, -1, -1)).argmax(dim=2)  # [P, n]
            total += (predicted == sy[start : start + len(part)]).sum(dim=1)
        return total

    optimizer = torch.optim.Adam([weight, bias], lr=lr)
    checkpoints, val_history, test_history = [], [], []
    for step in range(1, iterations + 1):
        if (step - 1) % _CHUNK_STEPS == 0:
            rows_t, padding_t, sizes_t = schedule(step - 1, min(step - 1 + _CHUNK_STEPS, iterations))
        i = (step - 1) % _CHUNK_STEPS
        idx = rows_t[i].reshape(-1)  # [P·B]
        logits = logits_of(x.index_select(0, idx).view(n_probes, width, d))  # [P, B, C]
        ce = F.cross_entropy(logits.reshape(-1, num_classes), y.index_select(0, idx), reduction="none")
        # Σ_p mean_p: each probe's gradient is that of its own mean loss (see the docstring)
        loss = (ce.view(n_probes, width).masked_fill(padding_t[i], 0.0).sum(dim=1) / sizes_t[i]).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % eval_every == 0 or step == iterations:
            with torch.no_grad():
                checkpoints.append(step)
                val_history.append(val_hits())
                test_history.append(test_hits())

    val_counts = torch.stack(val_history).cpu().numpy()  # [E, P]
    test_counts = torch.stack(test_history).cpu().numpy()
    best = val_counts.argmax(axis=0)  # the first maximum: earliest on ties
    results = []
    for p in range(n_probes):
        e = int(best[p])
        # integer counts over lengths: the reference's float64 accuracies
        result: dict[str, Any] = {
            "test_accuracy": int(test_counts[e, p]) / len(sy),
            "val_accuracy": int(val_counts[e, p]) / len(vals[p]),
            "best_iteration": checkpoints[e],
        }
        if return_weights:
            result["weight"], result["bias"] = weight[p].detach().cpu(), bias[p].detach().cpu()
        results.append(result)
    return results


def few_shot_probe(
    pool_x,
    pool_y,
    test_x,
    test_y,
    num_classes: int,
    ks: Iterable[int] = (5, 10, 20),
    n_splits: int = 5,
    seed: int = 0,
    device: torch.device | str | None = None,
    **probe_kwargs,
) -> dict[str, float]:
    """The K-shot intent classification evaluation of Table 3 for every K in ``ks``.

    For each K: the ``n_splits`` fixed splits of the pool (``probe_splits(pool_y, K,
    n_splits, seed)``), one linear probe per split, mean and standard deviation of the
    test accuracies. The probe of split ``i`` is seeded from ``(seed, i)``, so its
    initialisation and batch order are fixed too and differ between splits; pass any other
    ``linear_probe`` argument (``lr``, ``iterations``, ...) through ``probe_kwargs``.

    All ``len(ks) × n_splits`` probes are trained together by ``linear_probes`` (one batched
    loop of ``iterations`` steps on ``device``); each gives what ``linear_probe`` gives for its
    split and seed (up to float32 rounding, see ``linear_probes``).

    Args:
        pool_x: ``[N, d]`` representations of the merged training and validation sets.
        pool_y: ``[N]`` their class ids.
        test_x, test_y: the test set.
        num_classes: number of classes.
        ks: shots per class.
        n_splits: splits per K (the paper: 5).
        seed: the split seed.
        device: where the probes train; default: ``pool_x``'s device if it is a tensor, else CPU.

    Returns:
        ``{f"probe{k}_acc": mean test accuracy, f"probe{k}_acc_std": population standard
        deviation (ddof=0, as for clustering)}`` for every k; fractions, not percentages.
    """
    if device is None:
        device = pool_x.device if isinstance(pool_x, torch.Tensor) else "cpu"
    labels = as_targets(pool_y).numpy()
    ks = list(ks)
    probes, owner = [], []
    for k in ks:
        for i, (train, val) in enumerate(probe_splits(labels, k, n_splits, seed)):
            run_seed = int(np.random.SeedSequence(seed, spawn_key=(i,)).generate_state(1)[0])
            probes.append((train, val, run_seed))
            owner.append(k)
    results = linear_probes(pool_x, pool_y, probes, test_x, test_y, num_classes, device=device, **probe_kwargs)
    out = {}
    for k in ks:
        accs = [r["test_accuracy"] for r, o in zip(results, owner) if o == k]
        out[f"probe{k}_acc"] = float(np.mean(accs))
        out[f"probe{k}_acc_std"] = float(np.std(accs))
    return out
