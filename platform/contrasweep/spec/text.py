"""How numbers and counts read in every line a user sees (run names, console lines, the
summary, ``list``, report tables): hyperparameters to 4 significant digits, metrics to 4
decimals with ``±`` only where 2 or more repeats give a spread, counted nouns in the right
number, and the article a word takes.

May import: nothing of the project.
"""

from __future__ import annotations

import math


def hp_text(value) -> str:
    """A hyperparameter's value: 4 significant digits for a number, also one read back from
    MLflow as text (``"0.0002693883019285409"`` → ``0.0002694``); lists in brackets."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hp_text(v) for v in value) + "]"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str) and any(c in value for c in ".eE") and _number(value):
        return f"{float(value):.4g}"
    return str(value)


def mean_std(mean: float, std: float, n: int) -> str:
    """``0.7500 ± 0.3536`` over 2 or more repeats; ``0.7500`` for one (no spread to show);
    ``–`` for none."""
    if not n or math.isnan(mean):
        return "–"
    return f"{mean:.4f} ± {std:.4f}" if n >= 2 else f"{mean:.4f}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 repeat``, ``2 repeats``, ``1 configuration``."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def a(word: str) -> str:
    """``a grid``, ``an optuna``: the article a word takes (by its first letter)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
