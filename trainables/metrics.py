"""Classification metrics from one confusion matrix (numpy): accuracy, macro-F1, Matthews
correlation and, for two classes, binary F1 of class 1 — the metrics LaCon Sec. 3.1 reports
(ACC, Macro-F1, M' corr).

Computed here rather than with scikit-learn, which every trial process would otherwise import
for these three numbers (about 2.7 s of the trial's 6.7 s of imports on this machine, issue 39):
the definitions are scikit-learn's, and ``tests/test_encoder_metrics.py`` checks them against
``sklearn.metrics`` on random inputs in float64. scikit-learn stays where a method needs it
(clustering, probes, multi-label scores), imported there.
"""

from __future__ import annotations

import math
import re

import numpy as np


def confusion(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int) -> np.ndarray:
    """``C[i, j]``: how many examples of true class ``i`` were predicted ``j`` (int64)."""
    t = np.asarray(y_true, dtype=np.int64).reshape(-1)
    p = np.asarray(y_pred, dtype=np.int64).reshape(-1)
    return np.bincount(t * num_labels + p, minlength=num_labels * num_labels).reshape(num_labels, num_labels)


def _f1_per_class(c: np.ndarray) -> np.ndarray:
    """F1 of each class, 2·TP / (2·TP + FP + FN), 0 where a class is neither true nor predicted
    (scikit-learn's ``zero_division=0``)."""
    tp = np.diag(c).astype(np.float64)
    denominator = c.sum(0) + c.sum(1)  # (TP + FP) + (TP + FN)
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)


def _mcc(c: np.ndarray) -> float:
    """Matthews correlation of a K-class confusion matrix (Gorodkin 2004, as scikit-learn):
    (c·s − t·p) / sqrt((s² − p·p)(s² − t·t)), 0 where either factor is 0."""
    c = c.astype(np.float64)
    t, p, correct, s = c.sum(1), c.sum(0), np.trace(c), c.sum()
    denominator = (s * s - p @ p) * (s * s - t @ t)
    return 0.0 if denominator == 0 else float((correct * s - t @ p) / math.sqrt(denominator))


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int) -> dict[str, float]:
    return confusion_metrics(confusion(y_true, y_pred, num_labels))


def confusion_metrics(c: np.ndarray) -> dict[str, float]:
    """The metrics of one ``[K, K]`` confusion matrix; its counts may be expected counts (floats:
    the chance levels of ``contrasweep.data.chance``)."""
    num_labels = c.shape[0]
    total = c.sum()
    f1 = _f1_per_class(c)
    out = {
        "accuracy": float(np.trace(c) / total) if total else math.nan,
        "macro_f1": float(f1.mean()) if num_labels else 0.0,
        "mcc": _mcc(c) if total else 0.0,
    }
    if num_labels == 2:
        out["f1"] = float(f1[1])
    return out


def metric_keys(names: list[str]) -> list[str]:
    """Label names usable in a metric key (MLflow: letters, digits, ``_ - .``), unique."""
    out = []
    for j, name in enumerate(names):
        key = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or str(j)
        out.append(key if key not in out else f"{j}_{key}")
    return out


def finite_metrics(metrics: dict) -> dict[str, float]:
    """Only the finite values, as floats (Tune and MLflow take no NaN: a degenerate score is left out)."""
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}
