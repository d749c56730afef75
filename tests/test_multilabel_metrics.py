"""trainables.evaluation.multilabel: micro/macro-F1, Hamming loss, head/tail F1 against
hand-computed values; clustering scores with label combinations as classes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainables.evaluation.multilabel import combination_clustering, multilabel_metrics, threshold_predictions

# Toy case: 4 documents, 3 labels (a, b, c). d3 has no gold label, d2 no predicted label.
Y_TRUE = np.array([
    [1, 0, 1],  # d0
    [0, 1, 0],  # d1
    [1, 1, 0],  # d2
    [0, 0, 0],  # d3
])
Y_PRED = np.array([
    [1, 0, 1],  # d0: exact
    [0, 1, 1],  # d1: extra c
    [0, 0, 0],  # d2: nothing predicted
    [0, 0, 1],  # d3: c predicted for a document without labels
])
NAMES = ["a", "b", "c"]
# Per label (TP, FP, FN) and F1 = 2TP / (2TP + FP + FN):
#   a: gold d0 d2, predicted d0       -> (1, 0, 1) -> 2/3
#   b: gold d1 d2, predicted d1       -> (1, 0, 1) -> 2/3
#   c: gold d0,    predicted d0 d1 d3 -> (1, 2, 0) -> 2/4 = 1/2
F1 = {"a": 2 / 3, "b": 2 / 3, "c": 1 / 2}
# micro: TP 3, FP 2, FN 2 -> 6 / (6 + 2 + 2) = 3/5
MICRO = 3 / 5
# macro: (2/3 + 2/3 + 1/2) / 3 = (4/6 + 4/6 + 3/6) / 3 = 11/18
MACRO = 11 / 18
# Hamming: wrong cells d0 0, d1 1, d2 2, d3 1 -> 4 of 4*3 = 12 cells -> 1/3
HAMMING = 1 / 3


def test_micro_macro_hamming_against_hand_values():
    m = multilabel_metrics(Y_TRUE, Y_PRED, label_names=NAMES)
    assert m["micro_f1"] == pytest.approx(MICRO)
    assert m["macro_f1"] == pytest.approx(MACRO)
    assert m["hamming_loss"] == pytest.approx(HAMMING)
    assert m["per_label_f1"] == pytest.approx(F1)
    assert "head_macro_f1" not in m  # no head given or derivable
    assert list(multilabel_metrics(Y_TRUE, Y_PRED)["per_label_f1"]) == ["0", "1", "2"]


def test_head_and_tail_macro_f1():
    # head {a}: 2/3; tail {b, c}: (2/3 + 1/2) / 2 = 7/12
    for head in (["a"], [0]):
        m = multilabel_metrics(Y_TRUE, Y_PRED, label_names=NAMES, head_labels=head)
        assert m["head_labels"] == ["a"] and m["tail_labels"] == ["b", "c"]
        assert m["head_macro_f1"] == pytest.approx(2 / 3)
        assert m["tail_macro_f1"] == pytest.approx(7 / 12)
    # from training counts: b 5, c 5, a 1 (11): b alone 5/11 < 1/2, b + c 10/11 -> head {b, c}
    m = multilabel_metrics(Y_TRUE, Y_PRED, label_names=NAMES, train_counts={"a": 1, "b": 5, "c": 5})
    assert m["head_labels"] == ["b", "c"]
    assert m["head_macro_f1"] == pytest.approx(7 / 12) and m["tail_macro_f1"] == pytest.approx(2 / 3)
    # every label in the head: the tail is empty -> NaN
    m = multilabel_metrics(Y_TRUE, Y_PRED, head_labels=[0, 1, 2])
    assert math.isnan(m["tail_macro_f1"])
    with pytest.raises(ValueError, match="not a label name"):
        multilabel_metrics(Y_TRUE, Y_PRED, label_names=NAMES, head_labels=["z"])


@pytest.mark.filterwarnings("error")  # zero_division=0 is explicit: no UndefinedMetricWarning
def test_documents_without_labels_or_predictions():
    empty = np.zeros((3, 2), dtype=int)
    m = multilabel_metrics(empty, empty)
    assert m["micro_f1"] == 0.0 and m["macro_f1"] == 0.0 and m["hamming_loss"] == 0.0
    # one empty gold row, one empty predicted row, label 1 never occurs nor is predicted
    y_true = np.array([[1, 0], [0, 0], [1, 0]])
    y_pred = np.array([[1, 0], [0, 0], [0, 0]])
    m = multilabel_metrics(y_true, y_pred)
    # label 0: TP 1, FN 1 -> 2/3; label 1: no TP/FP/FN -> 0 by zero_division
    assert m["per_label_f1"] == pytest.approx({"0": 2 / 3, "1": 0.0})
    assert m["micro_f1"] == pytest.approx(2 / 3) and m["macro_f1"] == pytest.approx(1 / 3)
    assert m["hamming_loss"] == pytest.approx(1 / 6)


def test_threshold_predictions():
    scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.3, 0.4]])
    out = threshold_predictions(scores)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, [[1, 1, 0], [0, 0, 0]])  # >= threshold; a row may be empty
    np.testing.assert_array_equal(threshold_predictions(np.array([[-1.0, 2.0]]), threshold=0.0), [[0, 1]])
    m = multilabel_metrics(np.array([[0, 0, 1], [0, 1, 0]]), out)
    assert m["hamming_loss"] == pytest.approx(4 / 6)


def _clusters(spec, dim=8, spread=0.01, seed=0):
    """spec: list of (label vector, n points); each combination gets its own far-apart centre."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for k, (labels, n) in enumerate(spec):
        centre = np.zeros(dim)
        centre[k % dim] = 10.0 * (1 + k // dim)
        xs.append(centre + spread * rng.standard_normal((n, dim)))
        ys.append(np.tile(labels, (n, 1)))
    return np.vstack(xs), np.vstack(ys)


SPEC = [([1, 0, 0], 40), ([0, 1, 0], 30), ([1, 1, 0], 20), ([0, 0, 1], 5), ([0, 1, 1], 3)]


def test_combination_clustering_well_separated():
    x, y = _clusters(SPEC)
    out = combination_clustering(x, y)
    # 5 combinations, ceil(0.5 * 5) = 3 most frequent kept: 40 + 30 + 20 of 98 points
    assert out["n_combinations"] == 5 and out["n_kept_combinations"] == 3
    assert out["n_points"] == 90 and out["kept_point_fraction"] == pytest.approx(90 / 98)
    assert out["silhouette"] > 0.95 and out["davies_bouldin"] < 0.05 and out["reason"] is None
    # the same points with shuffled classes: no structure
    shuffled = combination_clustering(x, np.random.default_rng(1).permutation(y))
    assert shuffled["silhouette"] < 0.1 and shuffled["davies_bouldin"] > 1.0
    # subsampling is seeded
    a = combination_clustering(x, y, max_points=30, seed=3)
    assert a["n_points"] == 30 and a == combination_clustering(x, y, max_points=30, seed=3)
    assert combination_clustering(x, y, normalize=True)["silhouette"] > 0.9
    # all combinations kept (keep_fraction=1): the tail clusters are separated too
    assert combination_clustering(x, y, keep_fraction=1.0)["n_points"] == 98


def test_combination_clustering_degenerate_cases_give_nan():
    x, y = _clusters([([1, 0], 10)])
    out = combination_clustering(x, y)
    assert math.isnan(out["silhouette"]) and math.isnan(out["davies_bouldin"])
    assert out["n_combinations"] == 1 and "at least 2" in out["reason"]
    x, y = _clusters(SPEC)
    out = combination_clustering(x, y, keep_fraction=0.2)  # ceil(0.2 * 5) = 1 combination
    assert out["n_kept_combinations"] == 1 and math.isnan(out["silhouette"]) and out["reason"]
    # two points, two classes: the silhouette needs fewer classes than points
    out = combination_clustering(np.eye(2), np.array([[1, 0], [0, 1]]), keep_fraction=1.0)
    assert math.isnan(out["silhouette"]) and "fewer classes than points" in out["reason"]
    # documents without labels form a class unless excluded
    x, y = _clusters([([0, 0], 10), ([1, 0], 10), ([0, 1], 4)])
    assert combination_clustering(x, y, keep_fraction=1.0)["n_combinations"] == 3
    assert combination_clustering(x, y, keep_fraction=1.0, include_empty=False)["n_combinations"] == 2
