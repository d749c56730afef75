"""Evaluation of frozen representations (vascl.txt Sec. 4.2.1): clustering accuracy and
K-means scores, the few-shot splits and linear probe, and the STS Spearman correlation, on
toy embeddings small enough to keep the file fast."""

from __future__ import annotations

import inspect
import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.cluster import KMeans

from trainables.evaluation import (
    clustering_accuracy,
    few_shot_probe,
    kmeans_scores,
    linear_probe,
    probe_splits,
    sts_spearman,
)

torch.set_num_threads(1)


def blobs(n_per_class: int, n_classes: int = 3, dim: int = 8, spread: float = 10.0, seed: int = 0):
    """Gaussian blobs (unit variance) centred at ``spread`` times the first basis vectors."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = np.eye(n_classes, dim)[y] * spread + rng.normal(size=(len(y), dim))
    return x, y


# ---------------------------------------------------------------- clustering accuracy

def test_clustering_accuracy_is_one_on_separated_blobs():
    x, y = blobs(30)
    pred = KMeans(n_clusters=3, n_init=1, random_state=0).fit_predict(x)
    assert clustering_accuracy(y, pred) == 1.0


def test_clustering_accuracy_invariant_to_relabelling():
    rng = np.random.default_rng(1)
    y_true = rng.integers(0, 4, size=40)
    y_pred = np.where(rng.random(40) < 0.7, y_true, rng.integers(0, 4, size=40))  # ~30 % noise
    reference = clustering_accuracy(y_true, y_pred)
    assert 0 < reference < 1
    for perm_true, perm_pred in zip(itertools.permutations(range(4)), reversed(list(itertools.permutations(range(4))))):
        assert clustering_accuracy(np.array(perm_true)[y_true], np.array(perm_pred)[y_pred]) == reference
    # arbitrary, non-contiguous, negative ids
    ids_true, ids_pred = np.array([-3, 100, 7, 42]), np.array([9, -1, 1000, 5])
    assert clustering_accuracy(ids_true[y_true], ids_pred[y_pred]) == reference


def test_clustering_accuracy_hand_computed_mismatch():
    # Contingency (cluster -> class counts): cluster 1 -> {0: 2}; cluster 0 -> {1: 1};
    # cluster 2 -> {1: 1, 2: 2}. Best one-to-one map: 1->0 (2), 0->1 (1), 2->2 (2) = 5 of 6.
    # (The only other use of cluster 2, 2->1, gives 1 + 2 + 0 = 3.)
    assert clustering_accuracy([0, 0, 1, 1, 2, 2], [1, 1, 0, 2, 2, 2]) == pytest.approx(5 / 6)


def test_clustering_accuracy_unequal_numbers_of_clusters_and_classes():
    # more clusters than classes: 0->0 (2), 2->1 (2); clusters 1 and 3 stay unmapped: 4 of 6
    assert clustering_accuracy([0, 0, 0, 1, 1, 1], [0, 0, 1, 2, 2, 3]) == pytest.approx(4 / 6)
    # more classes than clusters: 0->0 or 0->1 (2), 1->2 (2): 4 of 6
    assert clustering_accuracy([0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1]) == pytest.approx(4 / 6)


@pytest.mark.parametrize("seed", range(5))
def test_clustering_accuracy_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    y_true, y_pred = rng.integers(0, 4, size=25), rng.integers(0, 4, size=25)
    brute = max(sum(int(m[p] == t) for t, p in zip(y_true, y_pred)) for m in itertools.permutations(range(4)))
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(brute / 25)


def test_clustering_accuracy_rejects_bad_input():
    with pytest.raises(ValueError):
        clustering_accuracy([0, 1], [0])
    with pytest.raises(ValueError):
        clustering_accuracy([], [])


# ---------------------------------------------------------------- K-means scores

def test_kmeans_scores_perfect_on_separated_blobs():
    x, y = blobs(30)
    scores = kmeans_scores(x, y, seeds=range(3))
    assert scores == {"cluster_acc": 1.0, "cluster_acc_std": 0.0, "nmi": pytest.approx(1.0)}


def test_kmeans_scores_deterministic_and_seeded():
    x, y = blobs(20, n_classes=4, spread=1.5, seed=3)  # overlapping: runs differ by seed
    first = kmeans_scores(x, y, seeds=range(4))
    assert kmeans_scores(x, y, seeds=range(4)) == first
    assert 0 < first["cluster_acc"] < 1 and 0 < first["nmi"] < 1
    per_seed = [kmeans_scores(x, y, seeds=[s])["cluster_acc"] for s in range(4)]
    assert first["cluster_acc"] == pytest.approx(np.mean(per_seed))
    assert first["cluster_acc_std"] == pytest.approx(np.std(per_seed))  # population std (ddof=0)


def test_kmeans_scores_options():
    x, y = blobs(20, n_classes=3, spread=2.0, seed=4)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert kmeans_scores(x, y, seeds=[0, 1], normalize=True) == kmeans_scores(unit, y, seeds=[0, 1])
    # K defaults to the number of distinct labels
    assert kmeans_scores(x, y, seeds=[0]) == kmeans_scores(x, y, n_clusters=3, seeds=[0])
    assert kmeans_scores(x, y, n_clusters=6, seeds=[0])["cluster_acc"] < 1.0


def test_kmeans_scores_is_one_seeded_bounded_init_per_run():
    """Each run is exactly one scikit-learn k-means++ init seeded with the run's seed, at most
    KMEANS_MAX_ITER Lloyd iterations: the same partition as a hand-made KMeans(n_init=1)."""
    from sklearn.metrics import normalized_mutual_info_score

    from trainables.evaluation.clustering import KMEANS_MAX_ITER

    x, y = blobs(20, n_classes=4, spread=1.5, seed=5)
    for seed in range(3):
        km = KMeans(n_clusters=4, init="k-means++", n_init=1, max_iter=KMEANS_MAX_ITER, random_state=seed)
        pred = km.fit_predict(np.asarray(x, dtype=np.float64))
        assert km.n_iter_ <= KMEANS_MAX_ITER
        assert kmeans_scores(x, y, seeds=[seed]) == {
            "cluster_acc": clustering_accuracy(y, pred), "cluster_acc_std": 0.0,
            "nmi": normalized_mutual_info_score(y, pred)}


# ---------------------------------------------------------------- few-shot splits

def pool_labels():
    # classes 0-2 have 30 examples each, class 3 has 7, class 4 has 1
    return np.array([0] * 30 + [1] * 30 + [2] * 30 + [3] * 7 + [4] * 1)[np.random.default_rng(0).permutation(98)]


def test_probe_splits_depend_on_labels_k_and_seed_only():
    assert list(inspect.signature(probe_splits).parameters) == ["labels", "k", "n_splits", "seed"]
    labels = pool_labels()
    a, b = probe_splits(labels, 5, seed=0), probe_splits(labels, 5, seed=0)
    assert len(a) == 5
    for (ta, va), (tb, vb) in zip(a, b):
        np.testing.assert_array_equal(ta, tb)
        np.testing.assert_array_equal(va, vb)
    other = probe_splits(labels, 5, seed=1)
    assert any(not np.array_equal(ta, to) for (ta, _), (to, _) in zip(a, other))
    # splits differ from each other, and split i does not depend on how many are drawn
    assert not np.array_equal(a[0][0], a[1][0])
    np.testing.assert_array_equal(probe_splits(labels, 5, n_splits=2, seed=0)[1][0], a[1][0])


@pytest.mark.parametrize("k", [1, 5, 10, 15])
def test_probe_splits_sizes_and_disjointness(k):
    labels = pool_labels()
    for train, val in probe_splits(labels, k, n_splits=3, seed=2):
        assert not set(train) & set(val)
        assert len(set(train)) == len(train) and len(set(val)) == len(val)
        for c in range(3):  # enough data: exactly k per class on each side
            assert (labels[train] == c).sum() == k and (labels[val] == c).sum() == k
        # small classes: n_train = min(k, ceil(n/2)), n_val = min(k, floor(n/2))
        assert (labels[train] == 3).sum() == min(k, 4) and (labels[val] == 3).sum() == min(k, 3)
        assert (labels[train] == 4).sum() == 1 and (labels[val] == 4).sum() == 0


# ---------------------------------------------------------------- linear probe

def probe_data():
    tx, ty = blobs(10, dim=8, spread=6.0, seed=10)
    vx, vy = blobs(10, dim=8, spread=6.0, seed=11)
    sx, sy = blobs(50, dim=8, spread=6.0, seed=12)
    return tx, ty, vx, vy, sx, sy


def test_linear_probe_learns_separable_features_deterministically():
    state = torch.random.get_rng_state()
    first = linear_probe(*probe_data(), num_classes=3, lr=1e-2, iterations=100, eval_every=20, seed=0)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is untouched
    assert first["test_accuracy"] >= 0.95
    assert first["best_iteration"] % 20 == 0
    assert linear_probe(*probe_data(), num_classes=3, lr=1e-2, iterations=100, eval_every=20, seed=0) == first
    # torch inputs give the same result as numpy inputs
    as_torch = [torch.as_tensor(a) for a in probe_data()]
    assert linear_probe(*as_torch, num_classes=3, lr=1e-2, iterations=100, eval_every=20, seed=0) == first


def test_linear_probe_reports_the_best_validation_checkpoint():
    tx, ty, vx, vy, sx, sy = probe_data()
    anti = (vy + 1) % 3  # validation labels that training makes ever more wrong
    kwargs = dict(num_classes=3, lr=1e-2, seed=0)
    result = linear_probe(tx, ty, vx, anti, sx, sy, iterations=50, eval_every=5, **kwargs)
    assert result["best_iteration"] < 50
    # the batch stream does not depend on `iterations`: stopping at the best checkpoint
    # reproduces it, and it is not the final model
    at_best = linear_probe(tx, ty, vx, anti, sx, sy, iterations=result["best_iteration"],
                           eval_every=result["best_iteration"], **kwargs)
    final = linear_probe(tx, ty, vx, anti, sx, sy, iterations=50, eval_every=50, **kwargs)
    assert result == at_best
    assert result["val_accuracy"] > final["val_accuracy"]
    assert result["test_accuracy"] != final["test_accuracy"]


def test_linear_probe_ties_go_to_the_earliest_checkpoint():
    tx, ty, vx, vy, sx, sy = probe_data()
    centres = np.eye(3, 8) * 6.0  # the class means themselves: right from the first checkpoint
    result = linear_probe(tx, ty, centres, np.arange(3), sx, sy, num_classes=3, lr=1e-2,
                          iterations=60, eval_every=20)
    assert result["val_accuracy"] == 1.0 and result["best_iteration"] == 20


def test_linear_probe_rejects_an_empty_validation_set():
    tx, ty, _, _, sx, sy = probe_data()
    with pytest.raises(ValueError, match="val"):
        linear_probe(tx, ty, np.zeros((0, 8)), np.zeros(0, dtype=int), sx, sy, num_classes=3)


# ---------------------------------------------------------------- few-shot probe

def test_few_shot_probe_keys_per_k():
    pool_x, pool_y = blobs(12, dim=8, spread=6.0, seed=20)
    sx, sy = blobs(20, dim=8, spread=6.0, seed=21)
    out = few_shot_probe(pool_x, pool_y, sx, sy, num_classes=3, ks=(1, 3), n_splits=2,
                         lr=1e-2, iterations=20, eval_every=10)
    assert set(out) == {"probe1_acc", "probe1_acc_std", "probe3_acc", "probe3_acc_std"}
    assert all(0.0 <= v <= 1.0 for v in out.values())
    assert out == few_shot_probe(pool_x, pool_y, sx, sy, num_classes=3, ks=(1, 3), n_splits=2,
                                 lr=1e-2, iterations=20, eval_every=10)
    # the device is an argument (CPU here); torch inputs on it give the same numbers
    assert out == few_shot_probe(torch.as_tensor(pool_x), torch.as_tensor(pool_y), sx, sy, num_classes=3, ks=(1, 3),
                                 n_splits=2, lr=1e-2, iterations=20, eval_every=10, device=torch.device("cpu"))


# ---------------------------------------------------------------- STS

def test_sts_spearman_matches_scipy_on_hand_cosines():
    rng = np.random.default_rng(30)
    a, b = rng.normal(size=(12, 5)), rng.normal(size=(12, 5))
    scores = rng.uniform(0, 5, size=12)
    cosines = [float(u @ v) / math.sqrt(float(u @ u) * float(v @ v)) for u, v in zip(a, b)]
    assert sts_spearman(a, b, scores) == pytest.approx(spearmanr(cosines, scores).statistic, abs=1e-12)
    # cosine: the scale of either representation does not matter
    assert sts_spearman(3 * a, 0.5 * b, scores) == pytest.approx(sts_spearman(a, b, scores), abs=1e-12)


def test_sts_spearman_is_one_for_monotone_scores():
    rng = np.random.default_rng(31)
    a, b = rng.normal(size=(20, 6)), rng.normal(size=(20, 6))
    cosines = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert sts_spearman(a, b, 5 * np.exp(3 * cosines)) == pytest.approx(1.0)
    assert sts_spearman(a, b, -cosines) == pytest.approx(-1.0)


def test_sts_spearman_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        sts_spearman(np.zeros((3, 4)), np.zeros((3, 5)), np.zeros(3))


# ---------------------------------------------------------------- RepresentationMethod.evaluate

def test_representation_evaluate_probes_on_the_sessions_device(monkeypatch):
    """The probes get the trial's device (``context.session.device``) and every split's
    embeddings once; the numbers are those of ``few_shot_probe`` on those embeddings."""
    from types import SimpleNamespace

    import trainables.methods.representation as rep

    parts = {"train": blobs(12, dim=8, spread=6.0, seed=40), "validation": blobs(10, dim=8, spread=6.0, seed=41)}
    asked, seen = [], {}
    stub = SimpleNamespace(hp={"eval_kmeans_runs": 2, "probe_splits": 2, "probe_lr": 1e-2, "probe_iterations": 20},
                           embeddings=lambda context, split: asked.append(split) or parts[split])
    original = rep.few_shot_probe
    monkeypatch.setattr(rep, "few_shot_probe", lambda *a, **k: seen.update(k) or original(*a, **k))
    device = torch.device("cpu")
    context = SimpleNamespace(num_labels=3, session=SimpleNamespace(device=device), data={}, cache={})
    metrics = rep.RepresentationMethod.evaluate(stub, context, "validation")
    assert seen["device"] == device and sorted(set(asked)) == ["train", "validation"]
    (px, py), (vx, vy) = parts["train"], parts["validation"]
    assert {k: metrics[k] for k in metrics if k.startswith("probe")} == few_shot_probe(
        px, py, vx, vy, 3, ks=rep.PROBE_KS, n_splits=2, seed=0, lr=1e-2, iterations=20)
