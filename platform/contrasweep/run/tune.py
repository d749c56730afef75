"""Launch and resume sweeps on Ray Tune (docs/architecture.md, "Data flow").

Searchers: ``grid`` (the exact grid of the YAML × seeds, the paper's reported setting first,
Tune's default generator), ``optuna`` (TPE; NSGA-II when the spec names several metrics) and
``random`` (Optuna's RandomSampler): ``contrasweep.search.study_search``, whose memory is the Optuna
study next to the sweep (``Tuner.restore`` does not reliably bring back a searcher's history,
ray#30861); each suggestion runs once per repeat and the study is told the mean. Scheduler:
group ASHA on the first metric with our own ``epoch`` counter as time (Tune's
``training_iteration`` restarts at 0 after a restore); both schedulers end trials the sweep's
record says finished and save new trials before they start (``group_asha.MovableFIFO``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from contrasweep import console
from contrasweep.console.progress import Progress  # also the name sweeps made before 0.3 pickled it under
from contrasweep.errors import UserError
from contrasweep.folder import driver, relocation, sweep_storage, sweeps
from contrasweep.run import preflight, recovery
from contrasweep.run.executor import make_trainable, torch_threads_env
from contrasweep.run.preflight import free_port
from contrasweep.run.shipping import worker_env
from contrasweep.spec.axes import expand
from contrasweep.spec.identity import group_sizes
from contrasweep.spec.load import validate
from contrasweep.spec.sweep import Sweep, reported_point
from contrasweep.tracking.store import default_tracking_uri
from contrasweep.tracking.tracker import MlflowTracker
from trainables.storage import display

# Persist Tune's experiment state often: a SIGKILLed driver then loses at most a few seconds.
os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
# The schedulers also force a save whenever a trial is added or named (group_asha.MovableFIFO.settle):
# Tune would warn about "excessive" saves in driver.log at each.
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")


def init_ray(address: str | None, num_cpus: int | None = None, ship: str = "code", local_files=(),
             dashboard: bool = True, bind_all: bool = False) -> None:
    """A local Ray sized to this machine, or the cluster at ``address`` / ``RAY_ADDRESS``, to
    which the job ships the project's code and the spec's local files (``ship: code``), or on
    whose nodes the installed contrasweep must be the driver's version (``ship: installed``;
    ``contrasweep.run.shipping``).

    ``dashboard`` (local Ray only; bound to 127.0.0.1): Train V2 frees the CPUs of a Train run
    that ASHA stopped through the State API, which needs it (docs/architecture.md, "Facts about
    the stack"), so a sweep of distributed trials always has it (``wants_dashboard``). Sweeps
    of one-worker trials never start a Train run and leave it off unless asked: its processes
    took about 2 % of a core here, which a 2-thread trial on 2 cores pays about twice
    (benchmarks/sweep_overhead.py).

    A local Ray listens on 127.0.0.1 only (``loopback_only``) unless ``bind_all``
    (``--ray-bind-all``); token authentication stays on either way (Ray's default for a new
    local cluster).
    """
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        from contrasweep.run import shipping

        env = shipping.runtime_env(ship, local_files)  # a one-line error before connecting, when too large
        ray.init(address=address, runtime_env=env, log_to_driver=True)
        if ship == "installed":
            from contrasweep import __version__

            shipping.check_worker_versions(__version__)
        return
    options: dict = {"include_dashboard": False}
    if not bind_all:
        loopback_only()
    env = worker_env()
    if dashboard:
        # Ray Train frees a stopped run's CPUs through the State API, which finds its server by
        # auto-detection: next to another local Ray it meets "multiple active Ray instances" and
        # asks the newest one, so a stopped distributed trial kept its CPUs and the next waited
        # forever. Every process of this instance (raylet, workers, Train's cleaner) inherits the
        # driver's environment: name this instance's own dashboard there.
        port = free_port()
        os.environ["RAY_API_SERVER_ADDRESS"] = env["RAY_API_SERVER_ADDRESS"] = f"http://127.0.0.1:{port}"
        options = {"include_dashboard": True, "dashboard_host": "127.0.0.1", "dashboard_port": port}
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), log_to_driver=True,
             runtime_env={"env_vars": env}, **options)


def loopback_only() -> None:
    """Ray's switch for a one-machine cluster (the mode Ray uses on macOS and Windows): the
    node's address becomes 127.0.0.1, and GCS, raylet, workers, agents and the dashboard then
    listen there only (with the node's network address they listened on every interface, and
    ``_node_ip_address="127.0.0.1"`` is turned back into that address by Ray). Ray reads the
    environment variable once at import, so this process's copy of the constant is set too;
    the processes Ray starts inherit the variable."""
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def wants_dashboard(sweep: Sweep, asked: bool) -> bool:
    """The local Ray's dashboard: always for distributed trials (Train V2 needs the State
    API), otherwise when the user asks for it (``--ray-dashboard``)."""
    return asked or sweep.distributed


def check_services(sweep: Sweep, tracking_uri: str | None, address: str | None,
                   uri_flag: str = "--tracking-uri") -> None:
    """Before the data are prepared and before Ray starts (one line each): the tracking
    server and the Ray address answer, and one trial fits the local machine."""
    preflight.services(tracking_uri, address, uri_flag)
    check_resources(sweep, local=not (address or os.environ.get("RAY_ADDRESS")))


def check_resources(sweep: Sweep, local: bool) -> None:
    """Fail fast, with the numbers, when one trial cannot fit the local Ray (otherwise Ray
    Train waits for workers that can never start). Called before Ray starts: the local Ray
    ``init_ray`` starts gets this machine's CPUs and GPUs (a running one: what it has)."""
    import ray

    if not local:
        return  # a cluster may autoscale: let Ray decide
    res = sweep.resources
    need_cpu = res["workers"] * res["cpu"] + (0.01 if sweep.distributed else 0.0)
    need_gpu = res["workers"] * res["gpu"]
    if ray.is_initialized():
        have = ray.cluster_resources()
    else:  # torch counts the GPUs, and is imported only when the sweep asks for one
        have = {"CPU": float(os.cpu_count() or 1), "GPU": _local_gpus() if need_gpu > 0 else 0.0}
    if need_cpu > have.get("CPU", 0) + 1e-9 or need_gpu > have.get("GPU", 0) + 1e-9:
        gpus = f" and {have.get('GPU', 0):g} GPU" if need_gpu > 0 else ""
        raise UserError(
            f"sweep.resources needs {need_cpu:g} CPU and {need_gpu:g} GPU per trial "
            f"(workers={res['workers']} x cpu={res['cpu']:g}, gpu={res['gpu']:g}"
            f"{' + 0.01 CPU for the trial itself' if sweep.distributed else ''}) but the local Ray has "
            f"{have.get('CPU', 0):g} CPU{gpus}; allowed: workers x cpu within those"
        )


def _local_gpus() -> float:
    import torch

    return float(torch.cuda.device_count())


def check_against_encoder(sweep: Sweep) -> None:
    """Hyperparameters that depend on the encoder (e.g. LaCon's heads must divide its width)
    are checked on the driver, before any trial starts: one line, not a failed sweep. Methods
    whose declaration has no such check (``checks_encoder``) import neither transformers nor
    torch here: a sweep's driver starts without them (about 3 s here)."""
    from trainables.registry import declaration, get_method

    if not getattr(declaration(sweep.method), "checks_encoder", True):  # a plugin class: check it
        return
    from transformers import AutoConfig

    from trainables.encoder_names import resolve_model_path

    try:
        hidden = int(AutoConfig.from_pretrained(resolve_model_path(sweep.encoder["name"])).hidden_size)
    except (OSError, AttributeError, ValueError):
        return  # unreadable config: load_encoder reports it with its own message
    method = get_method(sweep.method)
    for config, where in candidate_configs(sweep):
        try:
            method.check(config, hidden)
        except UserError as error:
            raise UserError(f"{where}{error}") from None


# a search domain with at most this many values is checked value by value, a larger one at its bounds
CHECKED_VALUES = 1000


def candidate_configs(sweep: Sweep) -> list[tuple[dict, str]]:
    """(configuration, where it comes from) for every value the sweep may train with that a
    method's ``check`` can judge: the grid's configurations; for a searcher the fixed and
    reported values, then each searched key's values (a choice's options, every integer of a
    ``randint`` or ``quniform`` range, a continuous domain's bounds) with the others at base."""
    if sweep.searcher == "grid":
        return [(config, "") for config in sweep.grid_configs()]
    # a searched key not reported starts at its first value, never at the method's default
    # (which the searcher may never suggest)
    first = {key: domain_values(domain)[0] for key, domain in sweep.search.items()}
    point = reported_point(sweep)  # evaluated first; unreported keys at their default when in the domain
    base = {**sweep.fixed, **first, **(point or {})}
    where = f"the reported point ({', '.join(f'{k}={v}' for k, v in point.items())}) is evaluated first: " if point else ""
    out = [(base, where)]
    for key, domain in sweep.search.items():
        kind, args = next(iter(domain.items()))
        for value in domain_values(domain):
            out.append(({**base, key: value}, f"search.{key}={{{kind}: {args}}} includes {key}={value}: "))
    return out


def domain_values(domain: dict) -> list:
    kind, args = next(iter(domain.items()))
    if kind == "choice":
        return list(args)
    if kind in ("randint", "quniform"):
        low, high = args[0], args[1]
        step = args[2] if kind == "quniform" else 1
        count = int(round((high - low) / step)) + 1
        if count <= CHECKED_VALUES:
            values = [low + i * step for i in range(count)]
            return [int(v) for v in values] if kind == "randint" else values
    return [args[0], args[1]]


def prepare_data(sweep: Sweep) -> list:
    """Tokenise every data variant once into the content-hashed cache (no Ray needed: bad
    data fails before any process starts or any sweep folder is made). One ``PreparedData``
    per variant, in ``sweep.variants`` order."""
    from contrasweep.data import DataConfig, prepare
    from contrasweep.data.multilabel.prepare import MultiLabelConfig, is_multilabel, prepare_multilabel

    out = []
    for variant in sweep.variants or expand(sweep.data, is_multilabel(sweep.data)):
        if is_multilabel(sweep.data):
            out.append(prepare_multilabel(MultiLabelConfig.from_dict(variant.data), sweep.encoder["name"],
                                          sweep.encoder["max_length"]))
        else:
            out.append(prepare(DataConfig.from_dict(variant.data), tokenizer=sweep.encoder["name"],
                               max_length=sweep.encoder["max_length"]))
    return out


def _rows(prepared: list) -> str:
    first = " / ".join(f"{split} {prepared[0].stats[split]['n']}" for split in ("train", "validation", "test"))
    return first + (f" rows in the first of {len(prepared)} data variants" if len(prepared) > 1 else " rows")


def prepare_sts(sweep: Sweep) -> dict | None:
    """STS pairs of ``evaluation.sts``, tokenised once on the driver (None without one)."""
    from contrasweep.data.sts import prepare_sts as tokenise_pairs

    source = sweep.evaluation.get("sts")
    return tokenise_pairs(source, sweep.encoder["name"], sweep.encoder["max_length"]) if source else None


def put_data(prepared: list, sts: dict | None = None) -> list:
    """One copy of each variant's tokenised splits (and the STS pairs) in the object store,
    shared by every trial of that variant."""
    import ray

    from contrasweep.data import load_splits

    refs = []
    for one in prepared:
        payload = {"tables": load_splits(one.path), "num_labels": one.num_labels, "label_names": one.label_names}
        if sts is not None:
            payload["sts"] = sts
        refs.append(ray.put(payload))
    return refs


def static_config(sweep: Sweep, sweep_dir: sweeps.SweepDir, prepared: list, shipped: list[str] = ()) -> dict[str, Any]:
    """What every trial shares; ``paths``: where a worker reads each shipped local file."""
    from contrasweep.run.shipping import worker_path

    variants = sweep.variants or expand(sweep.data)
    return {
        "paths": {value: worker_path(value) for value in shipped},
        "method": sweep.method,
        "encoder": {"name": sweep.encoder["name"], "pooling": sweep.encoder["pooling"]},
        "metric": sweep.metric[0],
        "mode": sweep.mode[0],
        "num_labels": prepared[0].num_labels,
        "variants": [
            {"index": v.index, "label": v.label, "data": v.data, "setting": v.setting, "repeat": v.repeat,
             "num_labels": p.num_labels, "cache_key": p.key, "sizes": {s: v["n"] for s, v in p.stats.items() if isinstance(v, dict) and "n" in v}}
            for v, p in zip(variants, prepared)
        ],
        "varied": sweep.varied,
        "seeds": sweep.seeds,
        "resources": sweep.resources,
        "distributed": sweep.distributed,
        "train_storage": sweep_dir.train_location,
        "trial_storage": sweep_dir.tune_location,  # where Tune keeps each trial's folder
        "checkpoint_at": pause_epochs(sweep),
    }


def pause_epochs(sweep: Sweep) -> list[int]:
    """Epochs at which group ASHA may pause a trial (its rungs): the loop writes a full resume
    state there, so that a paused trial continues exactly where it stopped."""
    if sweep.scheduler == "none":
        return []
    from contrasweep.search.group_asha import rungs

    top = max_epochs(sweep)
    return rungs(top, min(sweep.asha["grace_period"], top), sweep.asha["reduction_factor"])


def max_epochs(sweep: Sweep) -> int:
    from trainables.params import LOOP_PARAMS

    candidates = [sweep.fixed.get("epochs"), sweep.reported.get("epochs"), *sweep.grid.get("epochs", [])]
    domain = sweep.search.get("epochs", {})
    for args in domain.values():
        candidates.extend(args[:2] if "choice" not in domain else args)
    values = [int(c) for c in candidates if c is not None]
    return max(values) if values else LOOP_PARAMS["epochs"].default


def param_space(sweep: Sweep) -> dict:
    """Tune's param_space: the grid's trials, or for a searcher the fixed values (its
    suggestions are merged over them, ``contrasweep.search.study_search``)."""
    from ray import tune

    if sweep.searcher == "grid":
        return {"hp": tune.grid_search(sweep.grid_trials())}
    return dict(sweep.fixed)


def search_alg(sweep: Sweep, sweep_dir: sweeps.SweepDir):
    """The grid on Tune's generator, or Optuna (TPE, NSGA-II, random) over the sweep's study
    with its repeats (``contrasweep.search.study_search``)."""
    from ray.tune.search.basic_variant import BasicVariantGenerator

    from contrasweep.search import study_search

    limit = live_limit(sweep, group_sizes(sweep))
    if sweep.searcher == "grid":
        return BasicVariantGenerator(max_concurrent=limit)
    return study_search.build(sweep, sweep_dir, limit)


def scheduler(sweep: Sweep, sweep_dir: sweeps.SweepDir):
    """FIFO, or ASHA over repeat groups (``contrasweep.search.group_asha``: a configuration's repeats
    continue or stop together, on their mean at each rung)."""
    from contrasweep.search.group_asha import GroupASHA, MovableFIFO
    from contrasweep.spec.identity import GroupKey, group_static

    record = sweep_dir.path / "tracking.json"  # what finished (contrasweep.tracking.ledger)
    if sweep.scheduler == "none":
        return MovableFIFO(record)
    return GroupASHA(
        metric=sweep.metric[0],
        mode=sweep.mode[0],
        max_t=max_epochs(sweep),
        grace_period=min(sweep.asha["grace_period"], max_epochs(sweep)),
        reduction_factor=sweep.asha["reduction_factor"],
        group_of=GroupKey(group_static(sweep)),
        group_sizes=group_sizes(sweep),
        max_running=sweep.max_concurrent,
        state_path=sweep_dir.path / "group_asha.json",
        tracking_file=record,
    )


def live_limit(sweep: Sweep, sizes: dict[str, int] | int) -> int:
    """How many trials the searcher may keep live (running or paused): with group ASHA a whole
    repeat group must be live to pass a rung; RUNNING trials stay within sweep.max_concurrent
    (``GroupASHA.choose_trial_to_run``)."""
    if sweep.scheduler == "none":
        return sweep.max_concurrent
    largest = max(sizes.values()) if isinstance(sizes, dict) else sizes
    return max(sweep.max_concurrent, largest)


def total_trials(sweep: Sweep) -> int:
    return len(sweep.grid_trials()) if sweep.searcher == "grid" else num_samples(sweep)


def num_samples(sweep: Sweep) -> int:
    return 1 if sweep.searcher == "grid" else sweep.num_samples * sweep.repeats


# Tune's own per-trial logs, named in the run config so that its automatic loggers stay off
# (``_fit``): the third of those, TensorBoard's, imported torch into the driver (tensorboardX;
# ~2.5 s of CPU at each start of a sweep here) for event files nothing reads: MLflow holds the
# metrics. A sweep's meta says it was made so; sweeps made before resume with Tune's defaults.
TUNE_LOGGERS = "csv,json"


def tune_loggers() -> list:
    """result.json and progress.csv in each trial's folder, as Tune writes them by default."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    return [CSVLoggerCallback(), JsonLoggerCallback()]


def run_config(sweep: Sweep, sweep_dir: sweeps.SweepDir, callbacks: list):
    from ray import tune

    return tune.RunConfig(
        name="tune",
        storage_path=sweep_dir.state_root,
        callbacks=[*tune_loggers(), *callbacks],
        failure_config=tune.FailureConfig(max_failures=sweep.max_failures),
        # The two newest pointers to the trial's state folder (trainables.checkpoints: the
        # weights and optimiser state are written there once; Tune copies kilobytes).
        checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
        verbose=1,
    )


def tracker(sweep: Sweep, sweep_dir: sweeps.SweepDir, prepared: list, static: dict, tracking_uri: str) -> MlflowTracker:
    params = {
        "method": sweep.method, "searcher": sweep.searcher, "scheduler": sweep.scheduler,
        "metric": ",".join(sweep.metric), "mode": ",".join(sweep.mode), "seeds": sweep.seeds,
        "data": sweep.data, "encoder": sweep.encoder, "data.cache_key": ",".join(p.key for p in prepared),
        "data.num_labels": prepared[0].num_labels, "data.label_names": ",".join(prepared[0].label_names),
        "data.variants": len(prepared),
    }
    if len(prepared) == 1:
        stats = prepared[0].stats
    else:  # one entry per data variant, named by its axis values
        stats = {v["label"]: p.stats for v, p in zip(static["variants"], prepared)}
    total = total_trials(sweep)
    return MlflowTracker(
        sweep_dir.path, tracking_uri, sweep.experiment, sweep_dir.name, sweep.raw, params,
        sweep.metric[0], sweep.mode[0], progress=Progress(total, sweep.metric[0]),
        static={"seeds": sweep.seeds, "resources": sweep.resources, "method": sweep.method,
                "variants": static["variants"], "varied": static["varied"], "group_sizes": group_sizes(sweep),
                "trial_storage": static["trial_storage"]},
        # per-split sizes and class / label frequencies (multi-label: head/tail, combinations)
        texts={"data_stats.json": json.dumps(stats, indent=1, sort_keys=True)},
    )


def run(sweep: Sweep, name: str, root: Path, tracking_uri: str | None, address: str | None,
        ray_dashboard: bool = False, ray_bind_all: bool = False, overwrite: bool = False):
    """Start a new sweep; returns the Tune ``ResultGrid``. ``ray_dashboard``: start the local
    Ray's dashboard even where no trial needs it (``wants_dashboard``); ``ray_bind_all``: let
    the local Ray listen on every interface, not 127.0.0.1 only (``init_ray``)."""
    from ray import tune

    tracking_uri = tracking_uri or default_tracking_uri()
    torch_threads_env()
    sweeps.ensure_new(root, name, overwrite)  # before any work
    check_services(sweep, tracking_uri, address)
    check_against_encoder(sweep)
    prepared = prepare_data(sweep)
    sts = prepare_sts(sweep)
    files = shipped_files(sweep, address)
    init_ray(address, ship=sweep.ship, local_files=files, dashboard=wants_dashboard(sweep, ray_dashboard),
             bind_all=ray_bind_all)
    sweep_storage.check(sweep.storage, root / name, alive_machines())
    if overwrite:
        sweeps.replace(root, name)
    sweep_dir = sweeps.create(root, name, sweep.raw, {"tracking_uri": tracking_uri, "storage": sweep.storage,
                                                      "total": total_trials(sweep), "tune_loggers": TUNE_LOGGERS})
    console.attach_log(sweep_dir.path)
    with driver.Heartbeat(sweep_dir.path):  # names this process as the driver until the sweep ends
        sweep_storage.mirror(sweep.storage, sweep_dir.path)
        print(f"[contrasweep] sweep {name!r}: method={sweep.method} searcher={sweep.searcher} scheduler={sweep.scheduler} "
              f"seeds={sweep.seeds}; data: {_rows(prepared)}, {prepared[0].num_labels} classes "
              f"(cache {'hit' if all(p.cache_hit for p in prepared) else 'written'})", file=sys.stderr, flush=True)
        refs = put_data(prepared, sts)
        sweep_dir.update_meta(data_key=",".join(p.key for p in prepared), cache_hit=all(p.cache_hit for p in prepared))
        static = static_config(sweep, sweep_dir, prepared, files)
        tuner = tune.Tuner(
            make_trainable(static, refs),
            param_space=param_space(sweep),
            # reuse_actors: a finished trial's process (its imports, its CUDA context) runs the next
            # trial instead of a new process per trial (~4 s each on 2 cores; benchmarks/sweep_overhead.py).
            # Not for distributed trials: a reused process whose Train run ASHA stopped keeps that
            # run's worker group, and the next trial waits for CPUs forever (seen with Ray 2.60).
            tune_config=tune.TuneConfig(search_alg=search_alg(sweep, sweep_dir), scheduler=scheduler(sweep, sweep_dir),
                                        num_samples=num_samples(sweep), reuse_actors=not sweep.distributed),
            run_config=run_config(sweep, sweep_dir, [tracker(sweep, sweep_dir, prepared, static, tracking_uri),
                                                     sweep_storage.StorageMirror(sweep.storage, sweep_dir.path)]),
        )
        return _fit(tuner, sweep_dir)


def resume(name: str, root: Path, address: str | None, storage: str | None = None, ray_dashboard: bool = False,
           ray_bind_all: bool = False):
    """Resume an interrupted sweep: unfinished and errored trials continue from their latest
    checkpoint, finished trials are not rerun, MLflow runs are re-attached. ``storage``: where
    to find a sweep this machine has no folder of (its driver files are mirrored there)."""
    from ray import tune

    sweep_dir = open_or_fetch(name, root, storage)
    meta = sweep_dir.meta()
    if meta.get("status") == "finished":
        raise UserError(f"sweep {name!r} has already finished; allowed: resume an unfinished sweep (see `contrasweep list`)")
    alive, who = sweep_dir.driver()
    if alive == "alive":
        raise UserError(f"sweep {name!r} is still running ({who}); allowed: resume it once that process has ended")
    spec = sweep_dir.spec()  # missing or damaged: one line before anything starts
    torn = recovery.set_aside_torn_state(sweep_dir.tune_location)
    if torn:
        print(f"[contrasweep] Tune's saved state the kill cut short, set aside ({recovery.TORN_SUFFIX}): "
              f"{', '.join(torn)}", flush=True)
    if not tune.Tuner.can_restore(sweep_dir.tune_location):
        raise UserError(f"sweep {name!r} has no saved Tune state in {display(sweep_dir.tune_location)}; allowed: start it again "
                        "with `contrasweep run`")
    sweep = validate(spec)
    check_services(sweep, meta.get("tracking_uri"), address, "the sweep's tracking URI (sweep.json)")
    torch_threads_env()
    prepared = prepare_data(sweep)
    sts = prepare_sts(sweep)
    files = shipped_files(sweep, address)
    init_ray(address, ship=sweep.ship, local_files=files, dashboard=wants_dashboard(sweep, ray_dashboard),
             bind_all=ray_bind_all)
    sweep_storage.check(sweep_dir.storage, sweep_dir.path, alive_machines())
    refs = put_data(prepared, sts)
    static = static_config(sweep, sweep_dir, prepared, files)
    console.attach_log(sweep_dir.path)
    recovery.settle(sweep_dir)  # a dead driver's RUNNING runs: closed here, reopened by the tracker
    earlier = relocation.arrived(sweep_dir.path, meta.get("folder"), meta.get("earlier_folders", []))
    if earlier is not None:  # Tune's pickles name the folders it ran in
        sweep_dir.update_meta(folder=str(sweep_dir.path), earlier_folders=earlier)
    with driver.Heartbeat(sweep_dir.path):
        sweep_dir.update_meta(status="running")
        tuner = tune.Tuner.restore(
            sweep_dir.tune_location, trainable=make_trainable(static, refs), resume_unfinished=True, resume_errored=True
        )
        # The MlflowTracker comes back from tuner.pkl and re-reads tracking.json in setup().
        return _fit(tuner, sweep_dir)


def _fit(tuner, sweep_dir: sweeps.SweepDir):
    """Run Tune, then record how the sweep ended. An MLflow failure mid-sweep (the tracker
    stopped Tune for it) is one line: the sweep is interrupted and resumable."""
    from contrasweep.tracking.record import TrackingState

    own_loggers = sweep_dir.meta().get("tune_loggers") == TUNE_LOGGERS  # in its pickled run config
    try:
        with scoped_env({"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"} if own_loggers else {}):
            results = tuner.fit()
    except BaseException:
        sweep_dir.update_meta(status="interrupted")
        raise
    errors = [r for r in results if r.error is not None]
    store_error = TrackingState(sweep_dir.path / "tracking.json").data.get("store_error")
    status = "interrupted" if store_error else _status(sweep_dir, errors)
    sweep_dir.update_meta(status=status, trials=len(results), errors=len(errors))
    if status == "finished":  # nothing resumes it any more: its resume states go (contrasweep.folder.cleanup)
        from contrasweep.folder.cleanup import reclaim

        reclaim(sweep_dir)
    sweep_storage.mirror(sweep_dir.storage, sweep_dir.path)
    if store_error:
        raise UserError(f"sweep {sweep_dir.name!r} stopped: {store_error}; nothing finished is lost; allowed: fix the "
                        f"store, then `contrasweep resume {sweep_dir.name}`")
    return results


@contextlib.contextmanager
def scoped_env(values: dict[str, str]):
    """These environment variables for the duration of the block, then as they were (a test
    process runs many sweeps, made at different versions)."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def open_or_fetch(name: str, root: Path, storage: str | None) -> sweeps.SweepDir:
    """The sweep's folder here, or fetched from ``storage`` when this machine has none."""
    if storage and not (root / name / "sweep.json").exists() and not sweep_storage.fetch(storage, root / name):
        raise UserError(f"no sweep named {name!r} in {root} or in {display(storage)}; allowed: the --storage the sweep "
                        "was started with")
    sweep_dir = sweeps.open_existing(root, name)
    if storage and sweep_dir.storage != storage:
        raise UserError(f"sweep {name!r} keeps its state in {display(sweep_dir.storage or str(sweep_dir.path))}, not "
                        f"{display(storage)}; allowed: --storage {sweep_dir.storage or '(none)'}")
    return sweep_dir


def shipped_files(sweep: Sweep, address: str | None) -> list[str]:
    """The spec's local files a cluster's workers read (none for a local Ray, or when the
    workers have the project installed)."""
    if not (address or os.environ.get("RAY_ADDRESS")) or sweep.ship != "code":
        return []
    from contrasweep.run.shipping import local_files_of

    return local_files_of(sweep)


def alive_machines() -> int:
    """How many machines the alive Ray nodes run on (nodes started on one machine, as in a
    test's two-node cluster, share its file system)."""
    import ray

    return len({node["NodeManagerAddress"] for node in ray.nodes() if node.get("Alive")})


def _status(sweep_dir: sweeps.SweepDir, errors: list) -> str:
    """finished | failed (some trial errored: resume retries it) | interrupted (Ctrl-C: Tune
    saved its state and returned with trials still pending)."""
    from ray.tune import ExperimentAnalysis

    trials = ExperimentAnalysis(sweep_dir.tune_location).trials
    if any(t.status not in ("TERMINATED", "ERROR") for t in trials):
        return "interrupted"
    return "failed" if errors else "finished"
