"""Classification metrics (scikit-learn): accuracy, macro-F1, Matthews correlation and, for
two classes, binary F1 of class 1 — the metrics LaCon Sec. 3.1 reports (ACC, Macro-F1, M' corr)."""

from __future__ import annotations

import math
import re

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, num_labels: int) -> dict[str, float]:
    labels = list(range(num_labels))
    out = {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)),
        "mcc": float(matthews_corrcoef(y_true, y_pred)) if len(y_true) else 0.0,
    }
    if num_labels == 2:
        out["f1"] = float(f1_score(y_true, y_pred, pos_label=1, average="binary", zero_division=0))
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
