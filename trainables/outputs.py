"""The columns a trial's served model returns, by the method's ``serving_output`` kind
(docs/architecture.md, "Use the best model"): the names and types the MLflow model's signature
declares (``contrasweep.tracking.model_flavor.signature``, built in the driver) and
``trainables.inference.Predictor.predict`` fills (in the model's process).

Kept apart from ``trainables.inference`` so that the driver, which writes the signature of
every model it logs, never imports torch for it.

May import: the standard library only."""

from __future__ import annotations


def class_columns(prefix: str, names: list[str]) -> list[str]:
    return [f"{prefix}{name}" for name in names]


def output_columns(kind: str, names: list[str]) -> dict[str, str]:
    """Column -> type of what ``Predictor.predict`` returns for ``kind`` (the model's
    signature): ``string``, ``double``, ``list<string>``, ``list<float>``."""
    if kind == "embedding":
        return {"embedding": "list<float>"}
    if kind == "multilabel":
        return {
            "labels": "list<string>",
            "threshold": "double",
            **dict.fromkeys(class_columns("score_", names), "double"),
        }
    prefix = "prob_" if kind == "probabilities" else "score_"
    return {"label": "string", **dict.fromkeys(class_columns(prefix, names), "double")}
