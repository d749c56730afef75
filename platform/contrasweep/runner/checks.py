"""What a sweep checks before Ray starts and before any data are prepared, one line each: the
tracking server and the Ray address answer, one trial fits the local machine, and every value
the searcher may give suits the encoder (docs/architecture.md, "The method interface": ``check``).

``resume`` and ``extend`` also check that a user's method is the code the sweep started with
(``method_unchanged``). ``run``, ``resume`` and ``extend`` train a user's method for one step
and one prediction on a toy task on the driver before Ray starts (``method_runs``).

May import: ``contrasweep.runner.preflight``, ``contrasweep.search.registry``, ``contrasweep.errors``,
``contrasweep.spec`` (the ``Sweep``), ``contrasweep.folder`` (``sweep.json``), ``contrasweep.tracking``
(a method's fingerprint), ``trainables`` (the methods' torch-free declarations and encoder names;
transformers only for a plugin method's check; torch, ``trainables.contract``, only for a user's
method in ``method_runs``).
"""

from __future__ import annotations

import os
import shlex
import sys
import time

from contrasweep.errors import UserError
from contrasweep.folder.sweeps import SweepDir
from contrasweep.runner import preflight
from contrasweep.search.registry import candidate_configs
from contrasweep.spec.sweep import Sweep
from contrasweep.tracking.provenance import method_fingerprint
from trainables.encoder_names import config_width, resolve_model_path
from trainables.registry import declaration, get_method
from trainables.user_methods import is_reference


def check_services(
    sweep: Sweep, tracking_uri: str | None, address: str | None, uri_flag: str = "--tracking-uri"
) -> None:
    """Before the data are prepared and before Ray starts (one line each): the tracking
    server and the Ray address answer, the server lets the driver write the sweep's
    experiment, and one trial fits the local machine."""
    preflight.services(tracking_uri, address, uri_flag, experiment=sweep.experiment)
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
    """Hyperparameters a method cannot take (e.g. LaCon's heads must divide the encoder's width)
    are checked on the driver for every value the searcher may give, before any trial starts:
    one line, not a failed sweep. A declared method's check is torch-free
    (``trainables.methods.declarations``) and the width comes from the model's config.json, so
    the driver imports neither transformers nor torch for it (they took about 4 s here); a
    plugin method's class is imported and given the width ``AutoConfig`` reads."""
    declared = declaration(sweep.method)
    check, reads_width = getattr(declared, "check", None), getattr(declared, "reads_width", None)
    if reads_width is None:  # a plugin class: its own check, with the width
        check, reads_width = get_method(sweep.method).check, True
    if check is None:
        return
    hidden: int | None = 0
    if reads_width:
        hidden = config_width(sweep.encoder["name"]) or _auto_config_width(sweep.encoder["name"])
        if hidden is None:
            return  # unreadable config: load_encoder reports it with its own message
    for config, where in candidate_configs(sweep):
        try:
            check(config, hidden)
        except UserError as error:
            raise UserError(f"{where}{error}") from None


def _auto_config_width(name: str) -> int | None:
    from transformers import AutoConfig

    try:
        return int(AutoConfig.from_pretrained(resolve_model_path(name)).hidden_size)
    except (OSError, AttributeError, ValueError):
        return None


def method_unchanged(sweep: Sweep, sweep_dir: SweepDir, allow: bool) -> None:
    """A user's method whose file changed since the sweep last ran (``sweep.json``'s ``method``,
    its sha256, or the last change it accepted) is one line, unless ``allow``
    (``--allow-changed-method``): then the change is kept in ``sweep.json`` (``method_changes``)
    and the runs made from now on carry both hashes (``tracking.provenance.method_tags``)."""
    meta = sweep_dir.meta()
    started = meta.get("method")
    if not started:  # a built-in method, or a sweep from before methods were fingerprinted
        return
    accepted = (meta.get("method_changes") or [started])[-1]  # the code it last ran with
    now = method_fingerprint(sweep.method)
    if now.get("sha256") == accepted.get("sha256"):
        return
    change = f"{now['file']}: sha256 {accepted.get('sha256', '?')[:12]} when it last ran, {now['sha256'][:12]} now"
    if not allow:
        raise UserError(
            f"method {sweep.method!r} of sweep {sweep_dir.name!r} changed since the sweep last ran ({change}); "
            "allowed: restore the file, or --allow-changed-method to go on with the new code (its runs "
            "then record both hashes)"
        )
    changes = [*meta.get("method_changes", []), {**now, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}]
    sweep_dir.update_meta(method_changes=changes)
    print(
        f"[contrasweep] method changed since the sweep last ran ({change}): going on with the new code "
        "(--allow-changed-method); its runs record both hashes",
        file=sys.stderr,
        flush=True,
    )


def method_runs(method: str) -> None:
    """A user's method (``path/file.py:Class``, ``module:Class``) trains one step and predicts
    once on the toy batch on a tiny random BERT (``trainables.contract.check_before_sweep``:
    about 3 s, mostly importing torch and transformers, which the driver imports only here): a
    failure is the contract's one line, as ``contrasweep check-method`` words it, before Ray
    starts and before anything is written. Built-in methods are not checked here: their tests
    run every check (tests/test_user_methods.py). Defaults the toy model cannot take (the
    contract's ``SpecError``, e.g. heads that do not divide its 48 wide encoder) skip the check,
    with a line."""
    if not is_reference(method):
        return
    import transformers

    from trainables.contract import check_before_sweep
    from trainables.errors import SpecError

    verbosity, bars = transformers.logging.get_verbosity(), transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()  # the tiny model's load: no warnings, no bars
    transformers.utils.logging.disable_progress_bar()
    try:
        failed = check_before_sweep(method)
    except SpecError as error:
        print(
            f"[contrasweep] method not checked before the sweep ({error}); check it with: contrasweep check-method "
            f"{shlex.quote(method)} --set KEY=VALUE",
            file=sys.stderr,
            flush=True,
        )
        return
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()
    if failed is not None:
        raise UserError(
            f"method {method!r} fails its {failed.name} check: {failed.detail} (checked on a tiny random "
            f"BERT before the sweep starts; every check: contrasweep check-method {shlex.quote(method)})"
        )
