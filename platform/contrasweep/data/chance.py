"""Chance levels: what a model that learned nothing scores on each reported metric of a data
variant's validation and test splits (issue 55). A sweep whose configurations land there has
learned nothing, however its selection ranks them; the tracker tests each configuration against
these levels (``contrasweep.tracking.verdict``) and reports draw them.

Predictors that never read a text, fitted on the train split's labels only:

* single-label: ``majority`` (one class for every text: the split's own largest, ties the first
  label; the best any model that collapsed onto one class can score there, whichever class it
  picked: a few-shot train split's classes tie, so its "most frequent" says nothing) and
  ``stratified`` (a class drawn from the train split's class shares, as scikit-learn's
  ``DummyClassifier(strategy="stratified")``);
* multi-label: ``all_negative`` (no label for any text) and ``prior`` (each label drawn on its
  own with its train frequency).

Each is scored in closed form from the split's label counts, never sampled: the metrics of the
*expected* confusion matrix (``n_i·p_j`` texts of class ``i`` predicted ``j``; per label
``n·q`` true positives), so the levels are exact and repeatable. For accuracy, Hamming loss and
micro counts these are the expected scores; for F1 and MCC they are the scores of the expected
counts (the expectation of a ratio differs from it by O(1/n)). The representation metrics
(``cluster_acc``, ``nmi``, ``probe<k>_acc``) get the levels of the same predictors read as a
clustering or a probe (one cluster for all: the majority share; NMI 0). A random-initialised
encoder's scores are not computed here (they need the encoder: not cheap on the driver).

``chance_levels`` reads what ``prepare`` records for each split (``PreparedData.stats``:
``per_class`` counts, or the multi-label ``label_counts``/``num_docs``/``head_labels``).

May import: numpy, ``trainables.metrics`` (numpy only).
"""

from __future__ import annotations

import numpy as np

from trainables.metrics import confusion_metrics

SPLITS = ("validation", "test")
PREFIX = {"validation": "val", "test": "test"}  # a split's metric prefix (val/accuracy)
LOWER_IS_BETTER = frozenset({"hamming_loss"})


def chance_levels(stats: dict) -> dict[str, dict[str, dict[str, float]]]:
    """``{split: {predictor: {metric: value}}}`` for the validation and test splits of one data
    variant's ``stats`` (``{}`` where they hold no label counts)."""
    train = stats.get("train") or {}
    if "per_class" in train:
        score = _single_label
    elif "label_counts" in train:
        score = _multi_label
    else:
        return {}
    return {split: score(train, stats[split]) for split in SPLITS if isinstance(stats.get(split), dict)}


def levels(chance: dict) -> dict[str, float]:
    """Each metric's chance level, keyed as trials report it (``val/accuracy``): the best score
    any of the predictors reaches (the lowest for a metric where lower is better)."""
    out = {}
    for split, predictors in chance.items():
        for name in dict.fromkeys(m for scores in predictors.values() for m in scores):
            values = [scores[name] for scores in predictors.values() if name in scores]
            out[f"{PREFIX[split]}/{name}"] = min(values) if name in LOWER_IS_BETTER else max(values)
    return out


def level_of(found: dict[str, float], metric: str) -> float | None:
    """The chance level of ``metric`` as a sweep names it (``val/accuracy``, ``best/val/accuracy``,
    ``val/probe5_acc``: every probe reads ``probe_acc``), from ``levels``' mapping; None for a
    metric no predictor scores (a loss, seconds)."""
    key = metric.removeprefix("best/")
    split, _, name = key.partition("/")
    if name.startswith("probe") and name.endswith("_acc"):
        key = f"{split}/probe_acc"
    return found.get(key)


def noise(metric: str, level: float, rows: int, num_labels: int = 1) -> float:
    """The standard deviation of ``metric`` (``val/accuracy``) around its chance ``level`` for a
    predictor that never reads a text, over ``rows`` evaluated examples: what one evaluation on a
    split that small may score above the level by luck. A share of texts scored right (accuracy,
    the F1 family, cluster and probe accuracy): the binomial sqrt(p(1 - p) / n) at p = the level;
    a correlation-like score centred on 0 (MCC, NMI, STS Spearman): 1 / sqrt(n), the null
    standard deviation of a correlation; the Hamming loss: binomial over the n × L decisions.
    For the F1 family this is an approximation (F1 is not a plain share)."""
    name = metric.rsplit("/", 1)[-1]
    n = max(int(rows), 1)
    if name in ("mcc", "nmi", "sts_spearman"):
        return 1.0 / np.sqrt(n)
    if name == "hamming_loss":
        n *= max(int(num_labels), 1)
    p = min(max(float(level), 1.0 / n), 1.0 - 1.0 / n) if n > 1 else 0.5
    return float(np.sqrt(p * (1.0 - p) / n))


def _single_label(train: dict, split: dict) -> dict[str, dict[str, float]]:
    prior = np.asarray(list(train["per_class"].values()), dtype=np.float64)
    counts = np.asarray([split["per_class"].get(name, 0) for name in train["per_class"]], dtype=np.float64)
    if prior.sum() == 0 or counts.sum() == 0:
        return {}
    prior = prior / prior.sum()
    majority = np.zeros((len(prior), len(prior)))
    majority[:, int(np.argmax(counts))] = counts  # every text predicted as the split's largest class
    out = {"majority": confusion_metrics(majority), "stratified": confusion_metrics(np.outer(counts, prior))}
    share = float(counts.max() / counts.sum())  # one cluster for all: its best match is the largest class
    out["majority"].update(cluster_acc=share, nmi=0.0)
    for name in ("majority", "stratified"):
        out[name]["probe_acc"] = out[name]["accuracy"]  # read for every probe<k>_acc (``representation``)
    return out


def _multi_label(train: dict, split: dict) -> dict[str, dict[str, float]]:
    names = list(train["label_counts"])
    docs = float(split.get("num_docs") or split.get("n") or 0)
    if not docs or not train.get("num_docs"):
        return {}
    positives = np.asarray([split["label_counts"].get(n, 0) for n in names], dtype=np.float64)
    frequency = np.asarray([train["label_counts"][n] for n in names], dtype=np.float64) / float(train["num_docs"])
    head = np.asarray([n in set(train.get("head_labels", ())) for n in names])
    return {
        "all_negative": _label_scores(np.zeros_like(positives), np.zeros_like(positives), positives, docs, head),
        "prior": _label_scores(
            positives * frequency, (docs - positives) * frequency, positives * (1 - frequency), docs, head
        ),
    }


def _label_scores(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, docs: float, head: np.ndarray) -> dict[str, float]:
    """Per-label expected counts → the metrics of ``trainables.evaluation.multilabel`` (F1 0
    where a label is neither true nor predicted, as its ``zero_division=0``)."""
    denominator = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
    micro = 2 * tp.sum() + fp.sum() + fn.sum()
    out = {
        "micro_f1": float(2 * tp.sum() / micro) if micro else 0.0,
        "macro_f1": float(f1.mean()) if f1.size else 0.0,
        "hamming_loss": float((fp.sum() + fn.sum()) / (docs * len(tp))) if len(tp) else 0.0,
    }
    if head.any():
        out["head_macro_f1"] = float(f1[head].mean())
    if (~head).any():
        out["tail_macro_f1"] = float(f1[~head].mean())
    return out
