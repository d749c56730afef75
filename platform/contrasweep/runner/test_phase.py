"""The test phase (``evaluation.test: reported``; docs/architecture.md, "Selection and the test
split"): after Tune ends, at the end of a run, a resume or an extension, the test split is
evaluated for the repeats a report shows (each setting's selected configuration and, for a
grid, its sensitivity slices: ``tracking.aggregate.reported``) and for no other; those repeats
and the ``tracking.keep_models`` best configurations of each setting get their MLflow model
first (``tracking.kept``), and the registry points at the selected one's.

Each evaluation is a Ray task with one trial worker's resources (in parallel as far as the
cluster has room; GPU shares pack as trials do) that reads the trial's best folder from its
state folder, or the same weights from the trial's MLflow model where the sweep no longer keeps
them, and the data variant from the object store (``trainables.test_split``). Results reach
``tracking.json`` as they return, then MLflow (``tracking.tested``): a driver killed meanwhile
leaves the sweep ``interrupted``, and ``resume`` (Tune has nothing left to run) evaluates only
what is missing. The phase runs for ``all`` too, where it evaluates nothing and records what is
reported (``contrasweep.folder.cleanup`` keeps those weights), and where the trials tested
themselves because every configuration is reported (``contrasweep.search.base.Searcher.tests_in_trials``).

May import: ``contrasweep.tracking``, ``contrasweep.folder``, ``contrasweep.spec``,
``contrasweep.search`` (whether a report shows slices); Ray;
``trainables`` (inside the task, and the state folder's readers).
"""

from __future__ import annotations

import sys

from contrasweep.folder import budget_record, sweeps
from contrasweep.folder.record import TrackingState
from contrasweep.folder.relocation import here
from contrasweep.search.registry import searcher_of
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import Sweep
from contrasweep.spec.text import counted
from contrasweep.tracking.artifacts import Artifacts
from contrasweep.tracking.kept import keep_models, kept_groups
from contrasweep.tracking.selection import Selection
from contrasweep.tracking.store import get_client
from contrasweep.tracking.tested import Due, TestRecord
from trainables.checkpoints import StateFolder, best_name


def evaluate_task(state_dir: str | None, best_epoch: int | None, files: dict | None, data: dict, use_gpu: bool) -> dict:
    """In a Ray worker: one repeat's ``test/*`` (``trainables.test_split.evaluate_trial``)."""
    from trainables.test_split import evaluate_trial  # torch: in the evaluation task only

    return evaluate_trial(state_dir, best_epoch, files, data, use_gpu)


def after_tune(sweep: Sweep, sweep_dir: sweeps.SweepDir, static: SweepStatic, refs: list):
    """What ``runner.tune.fit`` calls once Tune has ended every trial."""
    return lambda: run_phase(sweep, sweep_dir, static, refs)


def run_phase(sweep: Sweep, sweep_dir: sweeps.SweepDir, static: SweepStatic, refs: list) -> int:
    """Evaluate what is due and bring MLflow up to date; returns how many evaluations ran."""
    state = TrackingState(sweep_dir.path / "tracking.json")
    if not state.data.get("parent_run_id"):
        return 0
    uri = sweep_dir.meta()["tracking_uri"]
    client = get_client(uri)
    record = TestRecord(client, state, sweep.objective.metric, sweep.objective.mode)
    evaluate = not searcher_of(sweep).tests_in_trials(sweep)
    caught_up = record.catch_up()
    chosen, due = record.plan(sweep.varied, slices=searcher_of(sweep).reports_slices, evaluate=evaluate)
    selection = Selection(client, state, sweep_dir.name, static.variants, sweep.objective.metric, sweep.objective.mode)
    keep(record, static, sweep, chosen)
    if not evaluate:  # the registry's version points at a model the keeping may just have logged
        selection.best_to_parent(record.parent_run_id)
        record.finish()
        return 0
    parent = record.parent_run_id
    ended_as = client.get_run(parent).info.status
    if due or caught_up:
        client.update_run(parent, status="RUNNING")
    ran = evaluate_due(record, due, static, refs, uri, len(chosen))
    record.refresh(chosen)
    selection.best_to_parent(parent)
    client.set_terminated(parent, status=ended_as if ended_as in ("FINISHED", "FAILED") else "FINISHED")
    record.finish()
    return ran


def keep(record: TestRecord, static: SweepStatic, sweep: Sweep, chosen: list) -> None:
    """The MLflow models of what a report shows and of the ``tracking.keep_models`` best
    configurations of each setting (``contrasweep.tracking.kept``), over the groups the plan read,
    and of the configurations a budget cut short (an extension with a larger budget may complete
    and select them); the summary says how many were kept and which weights were gone."""
    groups = kept_groups(chosen, record.found, sweep.objective.metric, sweep.objective.mode, static.keep_models)
    cut = budget_record.cut_groups(record.state.path.parent / budget_record.BUDGET_FILE)
    have = {g.group for g in groups}
    groups += [g for g in record.found if g.group in cut and g.group not in have]
    keep_models(Artifacts(record.client, record.state, static), record.state, groups)


def evaluate_due(
    record: TestRecord, due: list[Due], static: SweepStatic, refs: list, uri: str, configurations: int
) -> int:
    """Run the evaluations as Ray tasks, recording each result as it returns."""
    import ray

    if not due:
        return 0
    res = static.resources
    task = ray.remote(evaluate_task).options(num_cpus=res.cpu, num_gpus=res.gpu, max_retries=1)

    print(
        f"[contrasweep] evaluating the test split: {counted(len(due), 'repeat')} of "
        f"{counted(configurations, 'configuration')} (each setting's selected one and its sensitivity slices; "
        "evaluation.test: reported)",
        file=sys.stderr,
        flush=True,
    )
    pending = {}
    for item in due:
        source, files = weights_of(record, item, uri)
        if source is None and files is None:
            print(
                f"[contrasweep] test split not evaluated for {item.name}: its best weights are neither in its state "
                "folder nor in MLflow",
                file=sys.stderr,
                flush=True,
            )
            continue
        ref = task.remote(
            source,
            item.best_epoch,
            ray.put(files) if files is not None else None,
            refs[min(item.variant, len(refs) - 1)],
            res.gpu > 0,
        )
        pending[ref] = item
    done = 0
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            item = pending.pop(ready[0])
            try:
                metrics = ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:  # its group shows "–"; the others go on
                print(
                    f"[contrasweep] test split not evaluated for {item.name}: {str(exc).strip().splitlines()[-1]}",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            record.record(item.run_id, metrics)
            done += 1
            shown = ", ".join(
                f"{k} {v:.4f}" for k, v in metrics.items() if k.startswith("test/") and isinstance(v, float)
            )[:120]
            print(
                f"[contrasweep] tested {item.name} ({done}/{len(due)}): {shown or 'no test metrics'}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    return done


def weights_of(record: TestRecord, item: Due, uri: str) -> tuple[str | None, dict | None]:
    """(the state folder holding the repeat's best folder, None), or (None, its weights as the
    MLflow model keeps them), or (None, None)."""
    folder = here(item.state_dir) if item.state_dir else None
    if folder and item.best_epoch and StateFolder(folder).has(best_name(int(item.best_epoch))):
        return folder, None
    return None, record.weights_files(uri, item.run_id)
