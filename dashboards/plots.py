"""The report's figures (matplotlib on a bare ``Figure`` with the Agg canvas: no display, and
the caller's pyplot state is left alone). Each function writes one PNG and returns its path.

* ``curves``: a metric against a data axis (LaCon Fig. 2: k; Fig. 3: ρ; Fig. 6: classes) or
  a hyperparameter (Fig. 5: τ, λ, heads), mean ± std error bars, one line per series;
* ``front``: a two-metric scatter of configuration means with the non-dominated ones joined;
* ``embedding``: a 2-D map of instance embeddings coloured by class, label embeddings as stars;
* ``bars``: horizontal bars per name, one colour per series (hyperparameter importance per setting).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Series:
    label: str
    x: list  # numbers, or strings for a categorical axis
    mean: list[float]
    std: list[float]


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
    fig = _figure()
    ax = fig.add_subplot()
    every_x = [x for s in series for x in s.x]
    numeric = _numeric(every_x)
    categories = list(dict.fromkeys(str(x) for x in every_x))  # first-seen order
    for s in series:
        order = sorted(range(len(s.x)), key=lambda i: float(s.x[i]) if numeric else categories.index(str(s.x[i])))
        xs = [float(s.x[i]) if numeric else categories.index(str(s.x[i])) for i in order]
        ax.errorbar(xs, [s.mean[i] for i in order], yerr=[s.std[i] for i in order], marker="o", capsize=3, label=s.label)
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


def front(points: list[tuple[float, float]], on_front: list[bool], names: list[str], xlabel: str, ylabel: str,
          title: str, path: str) -> str:
    fig = _figure()
    ax = fig.add_subplot()
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
