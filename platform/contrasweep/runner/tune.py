"""Launch and resume sweeps on Ray Tune (docs/architecture.md, "Data flow").

Searchers: ``grid`` (the exact grid of the YAML × seeds, the paper's reported setting first,
Tune's default generator), ``optuna`` (TPE; NSGA-II when the spec names several metrics) and
``random`` (Optuna's RandomSampler): ``contrasweep.search.study_search``, whose memory is the Optuna
study next to the sweep; each suggestion runs once per repeat and the study is told the mean.
Scheduler: group ASHA on the first metric with our own ``epoch`` counter as time.

Every driver (``run``, ``resume``, an extension's) builds a fresh Tuner in its own Tune
experiment (``SweepDir.new_experiment``) from the sweep's records: Tune runs trials, and its
saved state is never read back (``Tuner.restore`` is not used: docs/architecture.md, "Resume").
What a resumed driver checks and settles first: ``contrasweep.runner.resume_checks``; the blocks
the launch runs in (Tune's environment, Ctrl-C held or seen): ``contrasweep.runner.driver_context``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from contrasweep import console
from contrasweep.console.progress import Progress
from contrasweep.console.summary import resume_line
from contrasweep.errors import UserError
from contrasweep.folder import driver, sweep_storage, sweeps
from contrasweep.folder.cleanup import reclaim
from contrasweep.folder.record import TrackingState
from contrasweep.runner import recovery, sweep_plan, test_phase
from contrasweep.runner.checks import check_against_encoder, check_services, method_unchanged
from contrasweep.runner.driver_context import ctrl_c_seen, deferred_ctrl_c, scoped_env
from contrasweep.runner.executor import make_trainable, torch_threads_env
from contrasweep.runner.inputs import (
    data_notes,
    load_sweep,
    prepare_data,
    prepare_sts,
    put_data,
    reported_line,
    rows_line,
    sweep_static,
)
from contrasweep.runner.ray_start import alive_machines, init_ray, wants_dashboard
from contrasweep.runner.resume_checks import arrived, open_or_fetch, resumable
from contrasweep.runner.shipping import local_files_of
from contrasweep.runner.size_line import size_lines
from contrasweep.runner.slots import pending_trials, run_slots, start_slots
from contrasweep.search.registry import group_sizes, num_samples, param_space, scheduler, search_alg, total_trials
from contrasweep.search.warm_start import warm_points
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import Sweep
from contrasweep.tracking import ledger, writer
from contrasweep.tracking.describe import method_params
from contrasweep.tracking.provenance import method_fingerprint
from contrasweep.tracking.store import default_tracking_uri, store_errors, store_line
from contrasweep.tracking.tracker import MlflowTracker

# Tune's own periodic save of its experiment state, which no driver reads back: every 15 min
# (each save writes every trial's JSON, O(trials so far)). What a killed driver must not lose is
# the sweep's own records, written as things happen: how each trial ended (tracking.ledger), the
# study, the journals, each trial's state folder and logs (runner.trial_logs).
os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "900")


# Tune's own per-trial logs, named in the run config so that its automatic loggers stay off
# (``fit``): the third of those, TensorBoard's, imported torch into the driver (tensorboardX;
# ~2.5 s of CPU at each start of a sweep here) for event files nothing reads: MLflow holds the
# metrics.


def tune_loggers() -> list:
    """result.json and progress.csv in each trial's folder, as Tune writes them by default, but
    straight into the sweep's folder (``contrasweep.runner.trial_logs``: not copied at every save)."""
    from contrasweep.runner.trial_logs import TrialLogs

    return [TrialLogs()]


def run_config(sweep: Sweep, sweep_dir: sweeps.SweepDir, callbacks: list):
    from ray import tune

    return tune.RunConfig(
        name=sweep_dir.tune_name,
        storage_path=sweep_dir.state_root,
        callbacks=[*tune_loggers(), *callbacks],
        failure_config=tune.FailureConfig(max_failures=sweep.max_failures),
        # The two newest pointers to the trial's state folder (trainables.checkpoints: the
        # weights and optimiser state are written there once; Tune copies kilobytes).
        checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        verbose=1,
    )


def tracker(
    sweep: Sweep,
    sweep_dir: sweeps.SweepDir,
    prepared: list,
    static: SweepStatic,
    tracking_uri: str,
    sizes: dict | None = None,
    total: int | None = None,
) -> MlflowTracker:
    """The sweep's MLflow callback. An extension (``contrasweep.runner.extend``) gives the repeat
    groups' sizes (``sizes``: what ran plus what it adds) and the trials in all (``total``)."""
    params = {
        **method_params(sweep.method),
        "searcher": sweep.searcher,
        "scheduler": sweep.scheduler,
        "metric": ",".join(sweep.metric),
        "mode": ",".join(sweep.mode),
        "seeds": sweep.seeds,
        "data": sweep.data,
        "encoder": sweep.encoder,
        "data.cache_key": ",".join(p.key for p in prepared),
        "data.num_labels": prepared[0].num_labels,
        "data.label_names": ",".join(prepared[0].label_names),
        "data.variants": len(prepared),
    }
    if sweep.warm_start:  # the earlier sweeps whose results seeded the study (search.warm_start)
        params["warm_start"] = ",".join(sweep.warm_start)

    def with_dropped(p) -> dict:  # the source rows dropped and why, label spellings merged or kept apart, and the
        # chance levels, next to the splits' sizes
        return {
            **p.stats,
            **({"dropped": p.dropped} if p.dropped else {}),
            **({"labels": p.labels} if getattr(p, "labels", None) else {}),
            "chance": p.chance,
        }

    if len(prepared) == 1:
        stats = with_dropped(prepared[0])
    else:  # one entry per data variant, named by its axis values
        stats = {v.label: with_dropped(p) for v, p in zip(static.variants, prepared)}
    # the status line's ETA: the plan's cost model (contrasweep plan) scaled by the trials that end;
    # an extension's trials count alike (the model costs a whole grid, not a list of trials)
    units = sweep_plan.trial_units(sweep, prepared) if total is None else [1.0] * total
    total = total if total is not None else total_trials(sweep)
    progress = Progress(total, sweep.objective.metric, units=units, slots=run_slots(sweep))
    return MlflowTracker(
        sweep_dir.path,
        tracking_uri,
        sweep.experiment,
        sweep_dir.name,
        sweep.raw,
        params,
        sweep.objective.metric,
        sweep.objective.mode,
        progress=progress,
        static=static,
        group_sizes=sizes if sizes is not None else group_sizes(sweep),
        # per-split sizes and class / label frequencies (multi-label: head/tail, combinations);
        # what predictors that never read a text score (contrasweep.data.chance)
        texts={"data_stats.json": json.dumps(stats, indent=1, sort_keys=True)},
    )


def start(
    sweep: Sweep, address: str | None, ray_dashboard: bool, ray_bind_all: bool, storage: str | None, folder: Path
) -> tuple[list, list, list[str]]:
    """What ``run``, ``resume`` and an extension (``contrasweep.runner.extend``) do alike once the
    pre-start checks passed: tokenise every data variant (the cache), start or join Ray, check
    the sweep's storage from the nodes Ray has, and put the data into the object store. Returns
    (prepared data, object refs, the local files a cluster's workers get)."""
    prepared = prepare_data(sweep)
    sts = prepare_sts(sweep)
    files = shipped_files(sweep, address)
    init_ray(
        address,
        ship=sweep.ship,
        local_files=files,
        dashboard=wants_dashboard(sweep, ray_dashboard),
        bind_all=ray_bind_all,
        method=sweep.method,
    )
    sweep_storage.check(storage, folder, alive_machines())
    return prepared, put_data(prepared, sts), files


def build_tuner(
    sweep: Sweep,
    sweep_dir: sweeps.SweepDir,
    prepared: list,
    refs: list,
    files: list[str],
    tracking_uri: str,
    space: dict | None = None,
    sizes: dict[str, int] | None = None,
    total: int | None = None,
    queue: list[dict] | None = None,
):
    """The sweep's Tuner and its fixed part (``contrasweep.spec.static``, built here once), for
    ``run`` and for an extension (``contrasweep.runner.extend``: ``space`` and ``queue``, the new
    trials, as ``contrasweep.search.base.Extension`` gives them; ``sizes``, the repeat groups'
    sizes with them; ``total``, the trials in all)."""
    from ray import tune

    static = sweep_static(sweep, sweep_dir, prepared, files)
    searcher, chooser = search_alg(sweep, sweep_dir, queue), scheduler(sweep, sweep_dir, static, sizes)
    searcher.gate = chooser.may_hand_out  # what may start is decided at the hand-out (search.base.held_back)
    tuner = tune.Tuner(
        make_trainable(static, refs),
        param_space=param_space(sweep) if space is None else space,
        # reuse_actors: a finished trial's process (its imports, its CUDA context) runs the next
        # trial instead of a new process per trial (~4 s each on 2 cores; benchmarks/sweep_overhead.py).
        # Not for distributed trials: a reused process whose Train run ASHA stopped keeps that
        # run's worker group, and the next trial waits for CPUs forever (seen with Ray 2.60).
        tune_config=tune.TuneConfig(
            search_alg=searcher, scheduler=chooser, num_samples=num_samples(sweep), reuse_actors=not sweep.distributed
        ),
        run_config=run_config(
            sweep,
            sweep_dir,
            [
                tracker(sweep, sweep_dir, prepared, static, tracking_uri, sizes, total),
                sweep_storage.StorageMirror(sweep.storage, sweep_dir.path),
            ],
        ),
    )
    return tuner, static


def run(
    sweep: Sweep,
    name: str,
    root: Path,
    tracking_uri: str | None,
    address: str | None,
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
    overwrite: bool = False,
):
    """Start a new sweep; returns the Tune ``ResultGrid``. ``ray_dashboard``: start the local
    Ray's dashboard even where no trial needs it (``wants_dashboard``); ``ray_bind_all``: let
    the local Ray listen on every interface, not 127.0.0.1 only (``init_ray``)."""
    tracking_uri = tracking_uri or default_tracking_uri()
    torch_threads_env()
    sweeps.ensure_new(root, name, overwrite)  # before any work
    check_services(sweep, tracking_uri, address)
    writer.prestart(tracking_uri)  # MLflow's writer sets up beside Ray's start-up (tracking.writer)
    check_against_encoder(sweep)
    if sweep.warm_start:
        warm_points(sweep, root)  # a named sweep missing, unlike this one or without a point inside: one line, now
    prepared, refs, files = start(sweep, address, ray_dashboard, ray_bind_all, sweep.storage, root / name)
    if overwrite:
        sweeps.replace(root, name)
    meta = {"tracking_uri": tracking_uri, "storage": sweep.storage, "total": total_trials(sweep)}
    fingerprint = method_fingerprint(sweep.method)  # a user's method: what resume and extend compare
    sweep_dir = sweeps.create(root, name, sweep.raw, {**meta, "method": fingerprint} if fingerprint else meta)
    console.attach_log(sweep_dir.path)
    with driver.Heartbeat(sweep_dir.path):  # names this process as the driver until the sweep ends
        with deferred_ctrl_c() as asked:  # a Ctrl-C before Tune runs: the sweep stops once its Tuner is saved
            tuner, static = _open(sweep, name, sweep_dir, prepared, refs, files, tracking_uri, address)
        if asked():  # nothing has started: resume builds its Tuner from the records, as any resume
            sweep_dir.update_meta(status="interrupted")
            return []
        return fit(tuner, sweep_dir, test_phase.after_tune(sweep, sweep_dir, static, refs), start_slots(sweep))


def _open(
    sweep: Sweep,
    name: str,
    sweep_dir: sweeps.SweepDir,
    prepared: list,
    refs: list,
    files: list[str],
    tracking_uri: str,
    address: str | None = None,
):
    """A new sweep's opening lines (its data, its size: ``size_line``) and its Tuner (saved as
    ``tuner.pkl``), for ``run``."""
    import ray

    sweep_storage.mirror(sweep.storage, sweep_dir.path)
    print(
        f"[contrasweep] sweep {name!r}: method={sweep.method} searcher={sweep.searcher} scheduler={sweep.scheduler} "
        f"seeds={sweep.seeds}; data: {rows_line(prepared)}, {prepared[0].num_labels} classes "
        f"(cache {'hit' if all(p.cache_hit for p in prepared) else 'written'})",
        file=sys.stderr,
        flush=True,
    )
    for note in data_notes(prepared):  # rows dropped and why, label spellings, classes a split lacks
        print(f"[contrasweep] data: {note}", file=sys.stderr, flush=True)
    for line in size_lines(sweep, prepared, {k: float(v) for k, v in ray.cluster_resources().items()}, address):
        print(f"[contrasweep] {line}", file=sys.stderr, flush=True)
    reported = reported_line(sweep)
    if reported:  # a user's grid replaced the paper's: say what the extra first trial is
        print(f"[contrasweep] {reported}", file=sys.stderr, flush=True)
    sweep_dir.update_meta(data_key=",".join(p.key for p in prepared), cache_hit=all(p.cache_hit for p in prepared))
    return build_tuner(sweep, sweep_dir, prepared, refs, files, tracking_uri)


def resume(
    name: str,
    root: Path,
    address: str | None,
    storage: str | None = None,
    ray_dashboard: bool = False,
    ray_bind_all: bool = False,
    allow_changed_method: bool = False,
):
    """Resume an interrupted sweep with a fresh Tuner built from the sweep's own records
    (docs/architecture.md, "Resume"): what ended is never handed out again, unfinished repeats
    go on from their state folders, failed ones are retried, MLflow runs are re-attached by
    configuration key. ``storage``: where to find a sweep this machine has no folder of (its
    driver files are mirrored there). An extension's stage is resumed by
    ``contrasweep.runner.extend.resume_extension``."""
    sweep_dir = open_or_fetch(name, root, storage)
    meta = resumable(sweep_dir)
    sweep = load_sweep(sweep_dir)
    method_unchanged(sweep, sweep_dir, allow_changed_method)
    torch_threads_env()
    check_services(sweep, meta.get("tracking_uri"), address, "the sweep's tracking URI (sweep.json)")
    writer.prestart(meta["tracking_uri"])
    prepared, refs, files = start(sweep, address, ray_dashboard, ray_bind_all, sweep_dir.storage, sweep_dir.path)
    console.attach_log(sweep_dir.path)
    print(resume_line(sweep_dir.path, name), file=sys.stderr, flush=True)  # what is done, what goes on from where
    arrived(sweep_dir)
    with driver.Heartbeat(sweep_dir.path):
        sweep_dir.update_meta(status="running")
        sweep_dir.new_experiment()  # this driver's own Tune experiment (tune-rN): nothing of Tune's is read back
        tuner, static = build_tuner(sweep, sweep_dir, prepared, refs, files, meta["tracking_uri"])
        return fit(tuner, sweep_dir, test_phase.after_tune(sweep, sweep_dir, static, refs), start_slots(sweep))


def fit(tuner, sweep_dir: sweeps.SweepDir, after=None, slots: int | None = None):
    """Run Tune, then ``after`` (the test phase, ``contrasweep.runner.test_phase``) once Tune has
    ended every trial, then record how the sweep ended: ``finished`` only after both. An MLflow
    failure mid-sweep (the tracker stopped Tune for it) is one line: the sweep is interrupted
    and resumable. ``slots``: trials kept pending at once (``pending_trials``)."""
    try:  # its run config names Tune's loggers (run_config): Tune's automatic ones stay off
        with scoped_env({"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1", **pending_trials(slots)}), ctrl_c_seen() as seen:
            results = tuner.fit()
    except BaseException as exc:
        sweep_dir.update_meta(status="interrupted")
        memory = recovery.out_of_memory(exc, sweep_dir.name)
        if memory is not None:
            raise memory from None
        raise
    errors = [r for r in results if r.error is not None]
    store_error = TrackingState(sweep_dir.path / "tracking.json").data.get("store_error")
    status = "interrupted" if store_error or seen() else _status(results, errors)
    if after is not None and status != "interrupted":
        try:
            after()
        except store_errors() as exc:
            sweep_dir.update_meta(status="interrupted")
            raise UserError(
                f"sweep {sweep_dir.name!r} stopped in its test phase: {store_line(exc)}; nothing finished is "
                f"lost; allowed: fix the store, then `contrasweep resume {sweep_dir.name}`"
            ) from None
        except BaseException:
            sweep_dir.update_meta(status="interrupted")
            raise
    ended = ledger.ended(
        sweep_dir.path / "tracking.json"
    )  # the sweep's, not this driver's (Tune's results after a resume)
    sweep_dir.update_meta(status=status, trials=len(ended), errors=sum(s == "FAILED" for s in ended.values()))
    if status == "finished":  # nothing resumes it any more: its resume states go (contrasweep.folder.cleanup)
        reclaim(sweep_dir)
    sweep_storage.mirror(sweep_dir.storage, sweep_dir.path)
    if store_error:
        raise UserError(
            f"sweep {sweep_dir.name!r} stopped: {store_error}; nothing finished is lost; allowed: fix the "
            f"store, then `contrasweep resume {sweep_dir.name}`"
        )
    return results


def shipped_files(sweep: Sweep, address: str | None) -> list[str]:
    """The spec's local files a cluster's workers read (none for a local Ray, or when the
    workers have the project installed)."""
    if not (address or os.environ.get("RAY_ADDRESS")) or sweep.ship != "code":
        return []

    return local_files_of(sweep)


def _status(results, errors: list) -> str:
    """finished | failed (some trial errored: resume retries it) | interrupted (Ctrl-C: Tune
    returned with trials of this driver's experiment not ended)."""
    if results.num_terminated + results.num_errors < len(results):
        return "interrupted"
    return "failed" if errors else "finished"
