"""Pareto fronts of an SCL-MOO sweep (scl_moo.txt Sec. 2.2) in the plane of its two objectives.

ℓ1 = λ·ℓ̃pos + (1 − λ)·CE (Eq. 4) and ℓ2 = λ·ℓ̃neg + (1 − λ)·CE (Eq. 5) as the method reports
them per split (``val/l1``, ``val/l2``: batch-mean estimates, shifted by 1/τ so that both are
≥ 0; see ``trainables/methods/scl_moo.py``). One point per solver (``moo``: ``ls``, Eq. 6; ``epo``,
Eq. 7) and preference r = [r1, 1 − r1]: the means over a complete repeat group's repeats of the
final ℓ1, ℓ2 and accuracy. Each solver's non-dominated points (minimising ℓ1 and ℓ2) are its
front; ``dashboards.pareto.pareto_front`` (Optuna's sort) decides membership.

EPO aims at the front's intersection with the preference ray r1·ℓ1 = r2·ℓ2 (Eq. 7), i.e. the
points with (ℓ1, ℓ2) ∝ (1/r1, 1/r2) ∝ (r2, r1); the plot draws that ray from the origin for
every r, so one sees how close each solver's point lands to the ray it was asked for.

Read only: the input is ``contrasweep.tracking.aggregate.Group`` objects (``aggregate.groups``), whose
``hp`` holds MLflow params as strings.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from typing import Any

from contrasweep.spec.objective import Objective
from contrasweep.tracking.aggregate import Group, rank
from dashboards.pareto import pareto_front

CSV_COLUMNS = (
    "solver",
    "r1",
    "l1_mean",
    "l1_std",
    "l2_mean",
    "l2_std",
    "accuracy_mean",
    "accuracy_std",
    "n",
    "on_front",
)
SOLVERS = ("ls", "epo")  # trainables/methods/scl_moo.py's `moo` choices, in the paper's order


@dataclass
class MooPoint:
    solver: str
    r1: float
    l1_mean: float
    l1_std: float
    l2_mean: float
    l2_std: float
    accuracy_mean: float
    accuracy_std: float
    n: int  # repeats averaged (the group is complete: all of them)
    on_front: bool = False  # non-dominated among this solver's points
    group: str = ""  # the repeat group chosen for (solver, r1)
    hp: dict = field(default_factory=dict)


def _matches(hp: dict, where: dict) -> bool:
    """hp[k] == where[k] for every k, numerically when both read as numbers ("0.30" == 0.3)."""
    for key, want in where.items():
        have: Any = hp.get(key)  # None (no such hp) fails float() and compares as text
        try:
            if not math.isclose(float(have), float(want)):
                return False
        except (TypeError, ValueError):
            if str(have) != str(want):
                return False
    return True


def moo_points(
    groups,
    l1: str = "val/l1",
    l2: str = "val/l2",
    accuracy: str = "test/accuracy",
    selection: str = "best/val/accuracy",
    selection_mode: str = "max",
    where: dict | None = None,
    setting: str | None = None,
) -> dict[str, list[MooPoint]]:
    """``{solver: [MooPoint, ...] sorted by r1}`` for the solvers present (``ls`` first), with
    ``on_front`` set per solver.

    Only complete groups count (``Group.complete``: a group ASHA stopped or with a failed
    repeat would average a different budget). ``where`` keeps groups whose hyperparameters
    match (e.g. ``{"temperature": 0.3, "lam": 0.3}``). When several groups share a (solver, r1)
    (τ, λ or others varying), the one with the best mean of ``selection`` (``selection_mode``)
    is kept, as ``aggregate.select`` chooses a configuration; a group without that metric
    ranks last, ties go to the group whose key sorts first (``aggregate.rank``). Note that ℓ1
    and ℓ2 depend on λ (Eq. 4–5) and on τ (Eq. 2–3 and the 1/τ shift): points chosen with
    different τ, λ lie on different objective functions, so pass ``where`` to draw the front of
    one (τ, λ).

    A sweep over several data settings must name one (``setting``): fronts across data would
    mix problems.
    """
    if selection_mode not in ("max", "min"):
        raise ValueError(f"selection_mode={selection_mode!r}: allowed 'max' or 'min'")
    kept = [
        g for g in groups if g.complete and _matches(g.hp, where or {}) and (setting is None or g.setting == setting)
    ]
    settings = sorted({g.setting for g in kept})
    if len(settings) > 1:
        raise ValueError(f"groups of {len(settings)} data settings ({', '.join(settings)}); pass setting=")
    sign = Objective(selection, selection_mode).sign

    def score(group) -> float:
        mean = group.stats(selection)["mean"]
        return -math.inf if math.isnan(mean) else sign * mean

    best: dict[tuple[str, float], Group] = {}
    for group in kept:
        missing = [k for k in ("moo", "r1") if k not in group.hp]
        if missing:
            raise ValueError(f"group {group.group!r} has no hp {missing[0]!r}: not an scl_moo sweep")
        key = (str(group.hp["moo"]), float(group.hp["r1"]))
        if key not in best or rank(score(group), group.group) < rank(score(best[key]), best[key].group):
            best[key] = group

    out: dict[str, list[MooPoint]] = {}
    order = sorted({s for s, _ in best}, key=lambda s: (SOLVERS.index(s) if s in SOLVERS else len(SOLVERS), s))
    for solver in order:
        points = []
        for r1 in sorted(r for s, r in best if s == solver):
            group = best[(solver, r1)]
            a, b, acc = group.stats(l1), group.stats(l2), group.stats(accuracy)
            points.append(
                MooPoint(
                    solver,
                    r1,
                    a["mean"],
                    a["std"],
                    b["mean"],
                    b["std"],
                    acc["mean"],
                    acc["std"],
                    len(group.repeats),
                    group=group.group,
                    hp=dict(group.hp),
                )
            )
        # minimise both objectives; a point missing ℓ1 or ℓ2 (NaN) is never on the front
        for i in pareto_front([(p.l1_mean, p.l2_mean) for p in points], ["min", "min"]):
            points[i].on_front = True
        out[solver] = points
    return out


def write_points_csv(points: dict[str, list[MooPoint]], path: str) -> str:
    """The points as CSV (``CSV_COLUMNS``, one row per solver and r1); returns ``path``."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for solver_points in points.values():
            for p in solver_points:
                writer.writerow(
                    [
                        p.solver,
                        p.r1,
                        p.l1_mean,
                        p.l1_std,
                        p.l2_mean,
                        p.l2_std,
                        p.accuracy_mean,
                        p.accuracy_std,
                        p.n,
                        int(p.on_front),
                    ]
                )
    return path


def ray_direction(r1: float) -> tuple[float, float]:
    """Unit direction of the preference ray r1·ℓ1 = r2·ℓ2 (Eq. 7), r2 = 1 − r1: (ℓ1, ℓ2) ∝ (r2, r1),
    i.e. ℓ ∝ 1/r (r1 = 1 gives the ℓ2 axis, ℓ1 = 0; r1 = 0 the ℓ1 axis)."""
    r2 = 1.0 - r1
    norm = math.hypot(r1, r2)
    return r2 / norm, r1 / norm


def plot_fronts(
    points: dict[str, list[MooPoint]],
    path: str,
    title: str = "SCL-MOO fronts",
    l1_label: str = "ℓ1 = λ·ℓpos + (1−λ)·CE  (Eq. 4)",
    l2_label: str = "ℓ2 = λ·ℓneg + (1−λ)·CE  (Eq. 5)",
) -> str:
    """Each solver's points in the (ℓ1, ℓ2) plane with ±1 std bars, its front joined by a line
    (filled markers on the front, hollow off it), and the preference ray of every r1 from the
    origin (Eq. 7); written as a PNG at ``path``. Returns ``path``.

    Drawn on a ``Figure`` with the Agg canvas rather than through pyplot: no display needed,
    and the caller's pyplot backend and open figures are left alone."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    every = [
        p
        for solver_points in points.values()
        for p in solver_points
        if not (math.isnan(p.l1_mean) or math.isnan(p.l2_mean))
    ]
    # the rays start at the origin (the shifted objectives are ≥ 0), so the axes do too
    x_max = 1.1 * max([p.l1_mean + (p.l1_std or 0) for p in every] + [1e-9])
    y_max = 1.1 * max([p.l2_mean + (p.l2_std or 0) for p in every] + [1e-9])
    fig = Figure(figsize=(6.4, 5.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for r1 in sorted({p.r1 for p in every}):
        dx, dy = ray_direction(r1)
        t = min(x_max / dx if dx > 0 else math.inf, y_max / dy if dy > 0 else math.inf)
        ax.plot([0, t * dx], [0, t * dy], color="0.75", linestyle=":", linewidth=1, zorder=1)
        ax.annotate(
            f"r=[{r1:g}, {1 - r1:g}]", (0.97 * t * dx, 0.97 * t * dy), fontsize=7, color="0.45", ha="right", va="top"
        )
    for (solver, solver_points), color in zip(points.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        shown = [p for p in solver_points if not (math.isnan(p.l1_mean) or math.isnan(p.l2_mean))]
        if not shown:
            continue
        ax.errorbar(
            [p.l1_mean for p in shown],
            [p.l2_mean for p in shown],
            xerr=[p.l1_std for p in shown],
            yerr=[p.l2_std for p in shown],
            fmt="none",
            ecolor=color,
            alpha=0.4,
            zorder=2,
        )
        ax.scatter(
            [p.l1_mean for p in shown],
            [p.l2_mean for p in shown],
            s=36,
            zorder=3,
            facecolors=[color if p.on_front else "none" for p in shown],
            edgecolors=color,
        )
        front = sorted((p for p in shown if p.on_front), key=lambda p: p.l1_mean)
        ax.plot(
            [p.l1_mean for p in front],
            [p.l2_mean for p in front],
            color=color,
            zorder=3,
            label=f"{solver.upper()} front ({len(front)}/{len(shown)} non-dominated)",
        )
        for p in shown:
            ax.annotate(
                f"{p.r1:g}", (p.l1_mean, p.l2_mean), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color
            )
    ax.set_xlim(0, x_max)
    ax.set_ylim(0, y_max)
    ax.set_xlabel(l1_label)
    ax.set_ylabel(l2_label)
    ax.set_title(title)
    if every:
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def write_fronts(groups, png_path: str, csv_path: str, **options) -> dict[str, list[MooPoint]]:
    """``moo_points(groups, **options)``, then its CSV and its plot; returns the points."""
    points = moo_points(groups, **options)
    write_points_csv(points, csv_path)
    plot_fronts(points, png_path)
    return points
