"""The lines a finished (or stopped) ``run`` / ``resume`` ends with: how the sweep ended, its
trials' outcomes, each setting's best configuration (the selection rule of
``contrasweep.tracking.aggregate``: best mean validation value over complete repeat groups) with its
validation and test metric and a link to its MLflow run, a selection that did not learn (its
verdict, ``contrasweep.tracking.verdict``), the failures, the sweep folder and its disk use, and
the commands to run next. What the sweep keeps (its MLflow models, its folder's disk use):
``contrasweep.console.footprint``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from contrasweep.console.footprint import disk_use, human, model_errors, model_lines
from contrasweep.console.limits import budget_lines, not_run, nothing_selected, race_lines, sweep_meta
from contrasweep.folder.record import read as read_record
from contrasweep.search.registry import group_sizes, reported_names, searcher_of
from contrasweep.spec import names
from contrasweep.spec.budget import trial_slots
from contrasweep.spec.identity import identify, run_name
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.text import a, counted, mean_std
from contrasweep.tracking.aggregate import Group, groups, ran_every_epoch, select, selection_key
from contrasweep.tracking.runs_view import base_url, run_url, runs_url
from contrasweep.tracking.store import error_line
from contrasweep.tracking.verdict import Verdict, not_learned_text

LOCAL_UI = "http://127.0.0.1:5000"  # where `contrasweep ui` serves a local store (contrasweep.tracking.runs_view)


def best_groups(results, sweep, metric: str, mode: str) -> dict:
    """setting -> the best configuration's ``Group`` of Tune results (complete groups only)."""
    static, sizes = SweepStatic.of(sweep), group_sizes(sweep)
    found: dict[str, Group] = {}
    for result in results:
        if result.error is not None or not result.metrics or not result.config:
            continue
        ident = identify(result.config, static)
        group = found.setdefault(
            ident.group,
            Group(
                group=ident.group,
                setting=ident.setting,
                config=ident.config,
                hp={k: v for k, v in ident.hp.items() if k != "seed"},
                size=sizes if isinstance(sizes, int) else sizes.get(ident.group, 1),
            ),
        )
        every = ran_every_epoch(result.metrics.get("epoch", 0), ident.hp, result.metrics.get("train/steps"))
        group.add("complete" if every else "stopped", {"metrics": result.metrics})
    return select(list(found.values()), metric, mode)


def recorded_best(folder: Path, metric: str, mode: str) -> dict:
    """setting -> the best configuration's ``Group``, read from MLflow: an extended sweep's
    (``contrasweep extend``) Tune results hold only its newest trials."""
    state = read_record(folder / "tracking.json")
    uri = sweep_meta(folder)["tracking_uri"]
    return select(groups(uri, state["parent_run_id"]), metric, mode)


def best_lines(
    results, sweep, metric: str, mode: str, links: dict[str, str] | None = None, best: dict | None = None
) -> list[str]:
    """One line per setting: the best configuration's values, its validation metric (the
    selection key) and test metric as mean ± std over its repeats, then its MLflow link.
    ``best``: the groups to show (default: the best of ``results``)."""

    test = "test/" + metric.removeprefix("val/") if metric.startswith("val/") else None
    lines = []
    best = best_groups(results, sweep, metric, mode) if best is None else best
    for setting, group in best.items():
        where = f" [{setting}]" if setting else ""
        val = group.stats(selection_key(metric))
        text = (
            f"[contrasweep] best configuration{where}: {configuration_text(group.hp, sweep)}: "
            f"{metric} {mean_std(**val)}"
        )
        if test:  # not evaluated (yet): "–", never a number
            text += f", {test} {mean_std(**group.stats(test))}"
        lines.append(text + f" ({counted(val['n'], 'repeat')})")
        if links and group.group in links:
            local = links[group.group].startswith(LOCAL_UI)
            lines.append(
                f"[contrasweep]   its MLflow run: {links[group.group]}"
                + (" (served by `contrasweep ui`)" if local else "")
            )
    return lines


def configuration_text(hp: dict, sweep) -> str:
    """A configuration of ``sweep`` as ``list`` names it too (``contrasweep.spec.names``: the
    varied values by their display names, or the spec's configuration)."""
    return names.configuration_text(hp, sweep.method, sweep.varied, (sweep.raw or {}).get("fixed") or {})


def test_lines(folder: Path, sweep) -> list[str]:
    """How many test passes the sweep ran (``evaluation.test``; contrasweep.runner.test_phase)."""
    try:
        state = read_record(folder / "tracking.json")
    except (OSError, ValueError):
        return []
    if searcher_of(sweep).tests_in_trials(sweep):
        complete = sum(1 for e in state.get("trials", {}).values() if e.get("outcome") == "complete")
        why = (
            "evaluation.test: all"
            if sweep.test_split == "all"
            else f"{a(sweep.searcher)} sweep's report shows every configuration, so evaluation.test: reported "
            "tests them all"
        )
        return [
            f"[contrasweep] test split: each complete trial evaluated it once, at its best epoch "
            f"({counted(complete, 'trial')}; {why})"
        ]
    tests = state.get("tests") or {}
    evaluated, shown, pruned = (
        int(tests.get("evaluated", 0)),
        len(tests.get("reported", [])),
        int(tests.get("pruned", 0)),
    )
    lines = [
        f"[contrasweep] test split: {evaluated} evaluation{'' if evaluated == 1 else 's'} after selection, for the "
        f"{shown} repeat{'' if shown == 1 else 's'} a report shows (each setting's selected configuration"
        f"{' and its sensitivity slices' if searcher_of(sweep).reports_slices else ''}; evaluation.test: reported)"
    ]
    if pruned:
        lines.append(
            f"[contrasweep] test split: not evaluated for {counted(pruned, 'repeat')} a report shows, whose weights "
            f"went while the sweep ran (each setting keeps its {max(1, int(sweep.keep_models))} best configurations' "
            "and the reported point's; tracking.keep_models): the report draws them on validation"
        )
    return lines


def run_links(folder: Path) -> dict[str, str]:
    """repeat group -> the MLflow UI address of its configuration run (``contrasweep ui``'s
    address for a local store, the server's own for a tracking server); key ``""``: the
    experiment's runs table (``contrasweep.tracking.runs_view``)."""
    try:
        state = read_record(folder / "tracking.json")
        uri = json.loads((folder / "sweep.json").read_text()).get("tracking_uri", "")
    except (OSError, ValueError):
        return {}
    base, experiment = base_url(uri), state.get("experiment_id")
    if experiment is None:
        return {}
    links = {group: run_url(base, experiment, run_id) for group, run_id in state.get("configs", {}).items()}
    return {"": runs_url(base, experiment), **links}


def ended_before(results, folder: Path | None) -> list[str]:
    """The outcomes of the trials of this Tune experiment that ended FINISHED and are not among
    ``results``: the stage's earlier drivers' (each driver's fresh Tuner holds only its own
    trials); the record (``tracking.json``) holds them."""
    if folder is None:
        return []
    try:
        trials = read_record(folder / "tracking.json").get("trials", {})
    except (OSError, ValueError):
        return []
    extensions = len(sweep_meta(folder).get("extensions", []))
    stage = f"tune-ext{extensions}" if extensions else "tune"
    held = {tune_trial_id(r) for r in results}
    return [
        e.get("outcome", "")
        for tid, e in trials.items()
        if e.get("status") == "FINISHED" and stage_of(e.get("tune", "tune")) == stage and tid not in held
    ]


def stage_of(experiment: str) -> str:
    """The sweep's stage a Tune experiment ran (``tune-ext2-r1`` -> ``tune-ext2``: a resume's
    driver runs the stage in an experiment of its own, ``SweepDir.new_experiment``)."""
    return re.sub(r"-r\d+$", "", experiment)


def tune_trial_id(result) -> str | None:
    """A Tune result's trial id: reported with its metrics, or in its folder's name
    (``run_trial_<id>_…``, Tune's: the id is ``<8 hex>_<number>``), for a trial that never reported."""
    tid = (result.metrics or {}).get("trial_id")
    if tid:
        return tid
    name = str(getattr(result, "path", "") or "").rstrip("/").rsplit("/", 1)[-1]
    parts = name.split("_")
    return "_".join(parts[2:4]) if name.startswith("run_trial_") and len(parts) >= 4 else None


def resume_line(folder: Path, name: str) -> str:
    """The line a ``resume`` opens with: the trials that ended (and how) of the sweep's total,
    those that go on from their last resume state (the epoch each had reached), and those
    not started yet (``tracking.json``, ``sweep.json``)."""
    try:
        trials = read_record(folder / "tracking.json").get("trials", {})
    except (OSError, ValueError):
        trials = {}
    ended = [e for e in trials.values() if "status" in e]
    outcomes = [e.get("outcome") for e in ended]
    total = sweep_meta(folder).get("total") or len(trials)
    going = [e for e in trials.values() if "status" not in e]
    shown = "; ".join(f"{e.get('name', '?')} had reached epoch {e.get('last_epoch', 0)}" for e in going[:3])
    more = f"; {len(going) - 3} more" if len(going) > 3 else ""
    waiting = max(0, int(total) - len(trials)) if str(total).isdigit() else 0
    return (
        f"[contrasweep] resuming sweep {name!r}: {len(ended)}/{total} trials ended ({outcomes.count('complete')} "
        f"complete, {outcomes.count('stopped')} stopped early, {outcomes.count('failed')} failed); "
        f"{len(going)} go on from their last saved state{f' ({shown}{more})' if going else ''}; "
        f"{waiting} not started yet"
    )


def _scheduler_stops(folder: Path | None) -> int:
    """Trials the scheduler (ASHA) ended before their last epoch (``tracking.json``: FINISHED,
    outcome ``stopped``)."""
    if folder is None:  # no folder: no record (as the TypeError of ``None / str`` below made it)
        return 0
    try:
        trials = read_record(folder / "tracking.json").get("trials", {})
    except (OSError, ValueError, TypeError):
        return 0
    return sum(1 for e in trials.values() if e.get("status") == "FINISHED" and e.get("outcome") == "stopped")


def summary_lines(results, metric: str, mode: str, name: str, status: str, sweep, root) -> tuple[list[str], int]:
    """The summary's lines, and how many trials failed."""
    failed = [r for r in results if r.error is not None]
    static = SweepStatic.of(sweep) if sweep is not None else None
    # a trial stopped before it ever ran (its group stopped while it waited) has no config
    complete = sum(
        1
        for r in results
        if r.error is None
        and r.metrics
        and r.config
        and static is not None
        and ran_every_epoch(r.metrics.get("epoch", 0), identify(r.config, static).hp, r.metrics.get("train/steps"))
    )
    folder = Path(root) / name if root is not None else None
    unrun = not_run(results, folder)
    earlier = ended_before(results, folder)  # the stage's trials that earlier drivers ended
    complete += earlier.count("complete")
    total = len(results) + len(earlier)
    stopped = total - len(failed) - complete - unrun
    extensions = len(sweep_meta(folder).get("extensions", [])) if folder else 0
    where = f" (its extension {extensions}, contrasweep extend)" if extensions else ""
    counts = f"{complete} complete, {stopped} stopped early"
    if (
        status == "interrupted"
    ):  # a trial the interruption cut is "interrupted"; the scheduler's stops are "stopped early"
        early = min(stopped, _scheduler_stops(folder))
        counts = f"{complete} complete, {early} stopped early, {stopped - early} interrupted"
    ran = total - unrun  # the budget's unrun trials: its own line (budget_lines)
    lines = [
        f"[contrasweep] sweep {name!r} {status}: {ran} trial{'' if ran == 1 else 's'}{where}: "
        f"{counts}, {len(failed)} failed"
    ]
    named = SweepStatic.of(sweep, reported=reported_names(sweep)) if sweep is not None else None
    lines += [failed_line(result, named) for result in failed]  # which trial, why, where its traceback is
    links = run_links(folder) if folder is not None else {}
    if sweep is not None:  # an ended sweep's best from MLflow: its test numbers came after Tune's results
        recorded = folder is not None and status in ("finished", "failed") and (folder / "tracking.json").exists()
        best = (
            recorded_best(folder, metric, mode)
            if recorded and folder is not None  # (recorded: there is a folder)
            else best_groups(results, sweep, metric, mode)
        )
        lines += best_lines(results, sweep, metric, mode, links, best)
        lines += chance_lines(folder, best, metric, mode)  # a selection that did not learn says so
        lines += test_lines(folder, sweep) if recorded and folder is not None else []
    if folder is not None and sweep is not None and sweep.racing:
        lines += race_lines(folder, sweep.racing)
    if folder is not None and sweep is not None and sweep.budget:
        unit = trial_slots(sweep.resources["cpu"], sweep.resources["gpu"], 1)[1]
        lines += budget_lines(folder, sweep.budget, unit, selected=bool(best))
        if not best:  # nothing completed: say so, and what would complete one configuration
            sizes = group_sizes(sweep)
            lines += nothing_selected(
                folder, sweep.budget, unit, sizes if isinstance(sizes, int) else max(sizes.values())
            )
    if folder is not None and sweep is not None and status in ("finished", "failed"):
        lines += model_lines(folder, sweep.keep_models)
    errors = model_errors(folder) if folder is not None else []
    if errors:
        lines.append(
            f"[contrasweep] no MLflow model could be built for {len(errors)} "
            f"trial{'' if len(errors) == 1 else 's'} ({errors[0]}); their best weights are logged as files "
            "(best_checkpoint/)"
        )
    if folder is not None:
        lines.append(f"[contrasweep] folder: {folder} ({human(disk_use(folder))} on disk; log: driver.log)")
    local = not links or links.get("", "").startswith(
        LOCAL_UI
    )  # a local store: nothing serves it until `contrasweep ui`
    if "" in links:
        lines.append(
            f"[contrasweep] MLflow runs table: {links['']}" + (" (served once `contrasweep ui` runs)" if local else "")
        )
    if status == "interrupted":
        lines.append(f"[contrasweep] continue with: contrasweep resume {name}")
    else:
        lines.append(
            f"[contrasweep] next: contrasweep report {name}  ·  contrasweep ui"
            + (f"  (serves MLflow on {LOCAL_UI})" if local else "")
        )
    return lines, len(failed)


def failed_line(result, static: SweepStatic | None) -> str:
    """``[contrasweep] failed: <trial>: <error> (traceback: <file>)``: the trial named as its
    other lines and its MLflow run name it (``run_name``; its Tune id where its configuration is
    unknown), the error's last line (e.g. a divergence and its step, a method's broken
    contract; the exception's class without its module's path), and the error file Tune wrote in
    the trial's folder (``error.txt``: every failure of the trial, each with its traceback)."""
    trial = (result.metrics or {}).get("trial_id") or result.path.rstrip("/").rsplit("/", 1)[-1]
    if static is not None and result.config:
        trial = run_name(identify(result.config, static), static)
    kind = getattr(getattr(result, "filesystem", None), "type_name", "local")
    where = str(Path(result.path) / "error.txt") if kind == "local" else f"{kind}://{result.path.rstrip('/')}/error.txt"
    error = re.sub(
        r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\.(?=[A-Za-z_]\w*: )", "", error_line(result.error)
    )  # no module path
    return f"[contrasweep] failed: {trial}: {error} (traceback: {where})"


# what a setting whose selected configuration did not learn may try (issue 55)
MORE_TRAINING = "give it more optimiser steps (fixed.max_steps or more epochs) or a larger lr"
MORE_REPEATS = "give it more repeats (sweep.seeds, or data.seed's values)"


def verdicts(folder: Path | None) -> dict[str, dict]:
    """repeat group -> its verdict as the record keeps it (none for a sweep recorded before verdicts)."""
    if folder is None:
        return {}
    try:
        return read_record(Path(folder) / "tracking.json").get("verdicts", {})
    except (OSError, ValueError):
        return {}


def chance_lines(folder: Path | None, best: dict, metric: str, mode: str = "max") -> list[str]:
    """One line per setting whose selected configuration (``best``: setting -> ``Group``) did not
    learn: its value against its data's chance level, the test, the optimiser steps its repeats
    took, and what would give it more. A mean that clears what the evaluation split scores by
    luck while its repeats' test does not reach ``evaluation.alpha`` (two repeats: df = 1) is
    "not shown to learn": more repeats would show it, not more training."""
    found, lines = verdicts(folder), []
    sign = 1 if mode == "max" else -1
    for setting, group in best.items():
        judged = found.get(group.group)
        if judged is None or judged["learned"]:
            continue
        where = f" [{setting}]" if setting else ""
        verdict = Verdict.of(judged)
        said = not_learned_text(verdict, selection_key(metric))
        if (
            judged.get("margin") is not None and sign * (verdict.mean - verdict.level) > verdict.margin
        ):  # older records: none
            lines.append(
                f"[contrasweep] not shown to learn{where}: the selected configuration's {said}: its mean "
                f"clears what the evaluation split scores by luck ({verdict.margin:.3f}), but its repeats do not "
                f"show it at evaluation.alpha (its registered model says it did not learn); {MORE_REPEATS}"
            )
            continue
        lines.append(
            f"[contrasweep] did not learn{where}: the selected configuration's {said}: it predicts no "
            f"better than a model that never read a text (its registered model says so); {MORE_TRAINING}"
        )
    return lines
