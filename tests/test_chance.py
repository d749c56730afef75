"""Chance levels (``contrasweep.data.chance``) recomputed by hand and with scikit-learn's
dummy predictors on tiny label sets, and the verdict on a configuration
(``contrasweep.tracking.verdict``) against them (issue 55)."""

import math

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier
from sklearn.metrics import accuracy_score, f1_score, hamming_loss, matthews_corrcoef

from contrasweep.data.chance import chance_levels, level_of, levels

NAMES = ["a", "b", "c"]


def _stats(splits: dict[str, list[int]]) -> dict:
    return {s: {"n": len(y), "per_class": {n: y.count(i) for i, n in enumerate(NAMES)}} for s, y in splits.items()}


def test_single_label_levels_are_the_dummy_predictors_scores():
    train, val = [0] * 5 + [1] * 3 + [2] * 2, [0, 0, 1, 1, 1, 2, 2, 2]
    chance = chance_levels(_stats({"train": train, "validation": val, "test": [2, 2, 0]}))
    # majority: every text is the split's own largest class (b: ties go to the first), the best a
    # model collapsed onto one class scores there; scored as scikit-learn scores it
    guess = DummyClassifier(strategy="most_frequent").fit(np.zeros((8, 1)), val).predict(np.zeros((8, 1)))
    majority = chance["validation"]["majority"]
    assert set(guess) == {1} and majority["accuracy"] == pytest.approx(accuracy_score(val, guess)) == pytest.approx(3 / 8)
    assert majority["macro_f1"] == pytest.approx(f1_score(val, guess, average="macro", zero_division=0))
    assert majority["mcc"] == pytest.approx(matthews_corrcoef(val, guess)) == 0.0
    assert majority["cluster_acc"] == pytest.approx(3 / 8) and majority["nmi"] == 0.0  # one cluster: the largest class
    # stratified, by hand: expected accuracy sum_i q_i p_i; class i's F1 from TP = n_i p_i,
    # FP = (n - n_i) p_i, FN = n_i (1 - p_i); independent of the text: MCC 0
    p, n = np.array([0.5, 0.3, 0.2]), np.array([2.0, 3.0, 3.0])
    stratified = chance["validation"]["stratified"]
    assert stratified["accuracy"] == pytest.approx(float((n * p).sum() / 8))
    f1 = 2 * n * p / (2 * n * p + (8 - n) * p + n * (1 - p))
    assert stratified["macro_f1"] == pytest.approx(float(f1.mean()))
    assert stratified["mcc"] == pytest.approx(0.0, abs=1e-12)
    # the level: the best of them, per metric, keyed as a trial reports it
    found = levels(chance)
    assert found["val/accuracy"] == pytest.approx(max(3 / 8, float((n * p).sum() / 8)))
    assert found["test/accuracy"] == pytest.approx(max(2 / 3, (0.5 + 2 * 0.2) / 3))
    assert level_of(found, "best/val/accuracy") == found["val/accuracy"]
    assert level_of(found, "val/probe5_acc") == found["val/accuracy"]
    assert level_of(found, "cost/train_s") is None


def test_two_classes_have_the_binary_f1_and_an_empty_record_has_none():
    from contrasweep.data.chance import noise

    chance = chance_levels({"train": {"per_class": {"neg": 3, "pos": 1}}, "validation": {"per_class": {"neg": 1, "pos": 3}}})
    assert chance["validation"]["majority"]["f1"] == pytest.approx(6 / 7)  # always class 1, its largest: 3 of 4
    assert chance["validation"]["stratified"]["f1"] == pytest.approx(2 * 0.75 / (2 * 0.75 + 0.25 + 2.25))
    assert chance_levels({"train": {"n": 3}}) == {}
    # what one evaluation of n rows scores by luck around the level: a share's binomial sd, a
    # correlation's 1/sqrt(n), the Hamming loss over n x L decisions
    assert noise("val/accuracy", 0.23, 500) == pytest.approx(math.sqrt(0.23 * 0.77 / 500))
    assert noise("best/val/mcc", 0.0, 400) == pytest.approx(0.05)
    assert noise("val/hamming_loss", 0.1, 100, num_labels=4) == pytest.approx(math.sqrt(0.09 / 400))


def test_multi_label_levels_all_negative_and_prior():
    y = np.array([[1, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 1]])
    train = {"num_docs": 4, "label_counts": {"a": 3, "b": 1, "c": 1}, "head_labels": ["a"]}
    val = {"n": 4, "num_docs": 4, "label_counts": {n: int(c) for n, c in zip(NAMES, y.sum(0))}}
    chance = chance_levels({"train": train, "validation": val})["validation"]
    none = chance["all_negative"]
    assert none["hamming_loss"] == pytest.approx(hamming_loss(y, np.zeros_like(y)))
    assert none["micro_f1"] == none["macro_f1"] == 0.0
    q, pos = np.array([0.75, 0.25, 0.25]), y.sum(0).astype(float)
    tp, fp, fn = pos * q, (4 - pos) * q, pos * (1 - q)
    prior = chance["prior"]
    assert prior["hamming_loss"] == pytest.approx(float((fp + fn).sum() / 12))
    assert prior["micro_f1"] == pytest.approx(float(2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum())))
    f1 = 2 * tp / (2 * tp + fp + fn)
    assert prior["head_macro_f1"] == pytest.approx(f1[0]) and prior["tail_macro_f1"] == pytest.approx(f1[1:].mean())
    found = levels({"validation": chance})
    assert found["val/hamming_loss"] == pytest.approx(min(none["hamming_loss"], prior["hamming_loss"]))  # lower is better
    assert not math.isnan(found["val/macro_f1"])


def test_a_configuration_learned_only_where_its_repeats_beat_their_own_chance_levels():
    """One-sided one-sample t-test of value − level over the repeats, recomputed by hand."""
    from contrasweep.tracking.verdict import judge, judge_repeats, not_learned_text

    # issue 55's BBC News N = 20 run: 0.2330 ± 0.0075 over 4 repeats against 0.230: chance
    values = [0.225, 0.240, 0.228, 0.239]
    verdict = judge(values, [0.23] * 4, "max", alpha=0.05, steps=20)
    d = np.asarray(values) - 0.23
    t = d.mean() / (d.std(ddof=1) / math.sqrt(4))
    from scipy import stats

    assert verdict.p_value == pytest.approx(float(stats.t.sf(t, df=3))) and verdict.p_value > 0.05
    assert not verdict.learned and verdict.level == pytest.approx(0.23) and verdict.n == 4
    assert not_learned_text(verdict, "best/val/accuracy") == (
        f"best/val/accuracy {np.mean(values):.4f} against chance 0.2300 (p={verdict.p_value:.2g} over 4 repeats; "
        "20 optimiser steps)")
    # each repeat against its own sample's level: a few-shot setting's splits differ
    learned = judge([0.62, 0.71, 0.66], [0.40, 0.45, 0.42], "max")
    assert learned.learned and learned.p_value < 0.05 and learned.level == pytest.approx(np.mean([0.40, 0.45, 0.42]))
    # lower is better: a Hamming loss below its level learned
    assert judge([0.10, 0.12, 0.11], [0.2, 0.2, 0.2], "min").learned
    # no spread to test: one repeat, or equal margins, are above the level or not; no p-value
    one = judge([0.31], [0.30], "max")
    assert one.learned and math.isnan(one.p_value) and one.text() == "1 repeat"
    assert not judge([0.3, 0.3], [0.3, 0.3], "max").learned
    assert judge([0.5], [None], "max") is None  # a metric with no chance level: no verdict
    assert type(one).of(one.record()) == one  # as tracking.json keeps it (no NaN in JSON)
    # repeats that all sit on one class differ by almost nothing: the t-test alone would call this
    # learning (CE at N = 20, measured: 0.2365 ± 0.0019 against 0.230, p = 0.003), but the mean is
    # within what one evaluation of 500 validation rows scores by luck (z(0.95) x 0.0188)
    from types import SimpleNamespace

    variant = SimpleNamespace(chance={"val/accuracy": 0.23}, sizes={"validation": 500}, num_labels=5)
    collapsed = [{"best/val/accuracy": v, "train/steps": 20, "epoch": 10} for v in (0.236, 0.238, 0.234, 0.238)]
    found = judge_repeats(collapsed, [variant] * 4, "best/val/accuracy", "max", 0.05)
    assert found.p_value < 0.05 and not found.learned and found.steps == 20
    # the best of 10 epochs: a union bound, z(1 - 0.05 / 10)
    assert found.margin == pytest.approx(stats.norm.ppf(1 - 0.005) * math.sqrt(0.23 * 0.77 / 500))
    # validated every 5 epochs (eval_every): the best of the 2 validations it reports, not of 10 epochs
    sparse = judge_repeats([{**m, "evaluations": 2} for m in collapsed], [variant] * 4, "best/val/accuracy", "max", 0.05)
    assert sparse.margin == pytest.approx(stats.norm.ppf(1 - 0.025) * math.sqrt(0.23 * 0.77 / 500))
    # tweet sentiment, k = 10 (measured): 0.539 ± 0.039 over 6 repeats, best of 10 epochs on 30
    # validation rows, against 1/3; its test accuracy was under the test split's majority share
    small = SimpleNamespace(chance={"val/accuracy": 1 / 3}, sizes={"validation": 30}, num_labels=3)
    tweets = [{"best/val/accuracy": v, "epoch": 10} for v in (0.5, 0.5667, 0.5333, 0.6, 0.5, 0.5333)]
    lucky = judge_repeats(tweets, [small] * 6, "best/val/accuracy", "max", 0.05)
    assert lucky.p_value < 1e-4 and not lucky.learned and lucky.margin == pytest.approx(2.5758 * math.sqrt(2 / 9 / 30), rel=1e-4)
    assert judge_repeats([{"val/accuracy": v} for v in (0.5, 0.5667)], [small] * 2, "val/accuracy", "max", 0.05).margin == \
        pytest.approx(stats.norm.ppf(0.95) * math.sqrt(2 / 9 / 30))  # one evaluation each: no union bound
    assert found.text() == f"within {found.margin:.3f} of it, the evaluation split's noise; p={found.p_value:.2g} over 4 repeats"
    learning = [{"best/val/accuracy": v} for v in (0.62, 0.71, 0.66)]
    assert judge_repeats(learning, [variant] * 3, "best/val/accuracy", "max", 0.05).learned
    old = SimpleNamespace(sizes={"validation": 500}, num_labels=5)  # a tuner.pkl from before chance levels
    assert judge_repeats(learning, [old] * 3, "best/val/accuracy", "max", 0.05) is None
