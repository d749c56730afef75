"""The report's figures (matplotlib on a bare ``Figure`` with the Agg canvas: no display, and
the caller's pyplot state is left alone). Each function writes one PNG and returns its path.

* ``curves``: a metric against a data axis (LaCon Fig. 2: k; Fig. 3: ρ; Fig. 6: classes) or
  a hyperparameter (Fig. 5: τ, λ, heads), mean ± std error bars cut at a bounded metric's
  range, one line per series, and a dashed line at the chance level (``chance_series``);
  ``write_data``: the numbers it draws, as CSV;
* ``front``: a two-metric scatter of configuration means with the non-dominated ones joined
  (and each axis's chance level);
* ``embedding``: a 2-D map of instance embeddings coloured by class, label embeddings as stars;
* ``bars``: horizontal bars per name, one colour per series (hyperparameter importance per setting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Series:
    label: str
    x: list  # numbers, or strings for a categorical axis
    mean: list[float]
    std: list[float]
    n: list[int] = field(default_factory=list)  # repeats behind each point (the figure's CSV)
    chance: bool = False  # a chance level (contrasweep.data.chance): drawn dashed, without error bars


CHANCE = "chance level"


def chance_series(points: list[tuple[object, float | None]], label: str = CHANCE) -> list[Series]:
    """The chance level at each x where there is one (none: no series)."""
    known = list(dict((x, y) for x, y in points if y is not None).items())
    if not known:
        return []
    return [Series(label, [x for x, _ in known], [y for _, y in known], [0.0] * len(known), chance=True)]


# the range of a bounded metric (its last path part), where its error bars stop
BOUNDS = {
    "accuracy": (0.0, 1.0),
    "macro_f1": (0.0, 1.0),
    "micro_f1": (0.0, 1.0),
    "f1": (0.0, 1.0),
    "precision": (0.0, 1.0),
    "recall": (0.0, 1.0),
    "nmi": (0.0, 1.0),
    "mcc": (-1.0, 1.0),
    "sts_spearman": (-1.0, 1.0),
}


def bounds(metric: str) -> tuple[float, float] | None:
    """``(low, high)`` of a bounded metric such as ``test/accuracy`` or ``best/val/mcc``; None
    for one without bounds (a loss, seconds)."""
    return BOUNDS.get(metric.rsplit("/", 1)[-1])


def error_bars(series: Series, metric: str) -> list[list[float]]:
    """Below and above each mean: the sample std, cut at the metric's range (an accuracy's bar
    never runs below 0 or above 1)."""
    low, high = bounds(metric) or (-math.inf, math.inf)
    return [
        [min(s, m - low) for m, s in zip(series.mean, series.std)],
        [min(s, high - m) for m, s in zip(series.mean, series.std)],
    ]


def write_data(series: list[Series], metric: str, path: str) -> str:
    """The numbers a figure draws, as CSV next to its PNG: series, x, metric, mean, std, the
    error bar's ends, n."""
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(["series", "x", "metric", "mean", "std", "bar_low", "bar_high", "n"])
        for s in series:
            below, above = error_bars(s, metric)
            for i, x in enumerate(s.x):
                out.writerow(
                    [
                        s.label,
                        x,
                        metric,
                        s.mean[i],
                        s.std[i],
                        s.mean[i] - below[i],
                        s.mean[i] + above[i],
                        s.n[i] if i < len(s.n) else "",
                    ]
                )
    return path


def _figure(size=(6.4, 4.4)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def _numeric(values) -> bool:
    try:
        [float(v) for v in values]
    except (TypeError, ValueError):
        return False
    return True


def curves(series: list[Series], xlabel: str, ylabel: str, title: str, path: str, log_x: bool = False) -> str:
    """``ylabel`` is the metric drawn: its error bars stop at its range (``bounds``)."""
    fig = _figure()
    ax = fig.add_subplot()
    every_x = [x for s in series for x in s.x]
    numeric = _numeric(every_x)
    categories = list(dict.fromkeys(str(x) for x in every_x))  # first-seen order
    for s in series:
        order = sorted(range(len(s.x)), key=lambda i: float(s.x[i]) if numeric else categories.index(str(s.x[i])))
        xs = [float(s.x[i]) if numeric else categories.index(str(s.x[i])) for i in order]
        if s.chance:
            ax.plot(
                xs,
                [s.mean[i] for i in order],
                ls="--",
                color="0.45",
                marker="_" if len(xs) > 1 else None,
                label=s.label,
            )
            if len(xs) == 1:  # one level for the whole figure: across it
                ax.axhline(s.mean[0], ls="--", color="0.45")
            continue
        below, above = error_bars(s, ylabel)
        ax.errorbar(
            xs,
            [s.mean[i] for i in order],
            yerr=[[below[i] for i in order], [above[i] for i in order]],
            marker="o",
            capsize=3,
            label=s.label,
        )
    if not numeric:
        ax.set_xticks(range(len(categories)), categories)
    elif log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if len(series) > 1 or series and series[0].label:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def front(
    points: list[tuple[float, float]],
    on_front: list[bool],
    names: list[str],
    xlabel: str,
    ylabel: str,
    title: str,
    path: str,
    chance: tuple[float | None, float | None] = (None, None),
) -> str:
    """``chance``: the chance level of each axis's metric, drawn as a dashed line where known."""
    fig = _figure()
    ax = fig.add_subplot()
    for level, line in zip(chance, (ax.axvline, ax.axhline)):
        if level is not None:
            line(level, ls="--", color="0.45", label=CHANCE)
    ax.scatter([p[0] for p in points], [p[1] for p in points], c=["C3" if f else "C7" for f in on_front], zorder=3)
    best = sorted((p for p, f in zip(points, on_front) if f))
    ax.plot([p[0] for p in best], [p[1] for p in best], color="C3", lw=1, label="Pareto front")
    for (x, y), name, f in zip(points, names, on_front):
        if f:
            ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def embedding(coords, classes, class_names: list[str], label_coords, title: str, path: str) -> str:
    fig = _figure((6.4, 5.6))
    ax = fig.add_subplot()
    for c, name in enumerate(class_names):
        mask = classes == c
        if mask.any():
            ax.scatter(coords[mask, 0], coords[mask, 1], s=10, alpha=0.7, color=f"C{c % 10}", label=name)
        if label_coords is not None and c < len(label_coords):
            ax.scatter(*label_coords[c], marker="*", s=260, color=f"C{c % 10}", edgecolors="black", zorder=4)
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=7, markerscale=1.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def bars(series: dict[str, dict[str, float]], xlabel: str, title: str, path: str) -> str:
    """``series``: label → name → value; names in the first series' order, top to bottom."""
    import numpy as np

    names = list(dict.fromkeys(n for values in series.values() for n in values))
    fig = _figure((6.4, 1.2 + 0.45 * len(names) * max(1, len(series)) ** 0.5))
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(series))
    rows = np.arange(len(names))
    for i, (label, values) in enumerate(series.items()):
        ax.barh(rows + i * height, [values.get(n, 0.0) for n in names], height, label=label or None)
    ax.set_yticks(rows + height * (len(series) - 1) / 2, names)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    if len(series) > 1:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
