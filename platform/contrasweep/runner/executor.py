"""The trial executor (docs/architecture.md, "Data flow"): what one Tune trial runs.

* one worker (CPU, or a GPU or a fraction of one): the generic loop runs in the trial process
  itself (~1 s start-up; Tune sets ``CUDA_VISIBLE_DEVICES`` for the trial's GPU share);
* ``workers > 1``: the same loop runs on the ranks of a Ray Train ``TorchTrainer``
  (DDP; gloo on CPU, nccl on GPU) that the trial builds and fits (Train V2: a TorchTrainer is
  not handed to ``tune.Tuner``). The trial itself asks for almost no CPU so it does not starve
  its own workers; a ``TuneReportCallback`` forwards rank 0's per-epoch reports to Tune, so
  ASHA sees the epochs of a Train run.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import ray
from ray import tune

from contrasweep.spec.identity import key_of
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.trial import plan_of
from trainables.checkpoints import STATE_DIR
from trainables.phase_progress import set_trial
from trainables.storage import join


def run_trial(config: dict[str, Any], data: list, static: SweepStatic) -> None:
    """The Tune function trainable. ``data`` is ``[ObjectRef, ...]``, one per data variant:
    wrapped in a list so that ``tune.with_parameters`` hands over the references, not a copy
    per trial."""
    from trainables.loop import train  # here, not at the top: the driver imports this module,
    from trainables.sessions import TuneSession

    set_trial(tune.get_context().get_trial_id())  # its progress lines name it (contrasweep.console.progress)
    plan = plan_of(config, static)
    variant, hp = plan.variant, dict(plan.hp)
    encoder = {"name": static.encoder, "pooling": static.pooling}
    # files the job shipped (contrasweep.runner.shipping): read where the worker has them
    paths = static.paths
    if encoder["name"] in paths:  # the driver's name stays in "origin", for load_trained on the driver
        encoder["origin"], encoder["name"] = encoder["name"], paths[encoder["name"]]
    if isinstance(hp.get("init_from"), str):
        hp["init_from"] = paths.get(hp["init_from"], hp["init_from"])
    # the loop's own config (trainables.loop): plain values, as Ray Train hands them to each rank
    loop_config = {
        "method": static.method,
        "encoder": encoder,
        "hp": hp,
        "metric": static.metric,
        "mode": static.mode,
        "num_labels": static.variants[variant].num_labels,
        # evaluation.test: reported = the sweep evaluates the test split after selection (runner.test_phase)
        "evaluate_test": static.tests_in_trials,
    }
    if static.checkpoint_at:
        loop_config["checkpoint_at"] = list(static.checkpoint_at)
    if not static.distributed:
        train(
            loop_config,
            ray.get(data[variant]),
            TuneSession(state_dir(static, config), use_gpu=static.resources.gpu > 0),
        )
        return
    run_distributed(loop_config, data[variant], static, key_of(config), state_dir(static, config))


def state_dir(static: SweepStatic, config: dict) -> str:
    """The repeat's state folder (``trainables.checkpoints``): ``trials/<configuration key>/state``
    on the sweep's storage, named by what the repeat is (``identity.key_of`` of its config), not
    by Tune's trial: a later driver's fresh Tuner runs an unfinished repeat under a new trial id,
    and its loop goes on from this folder's newest resume state (``TuneSession.resume_newest``)."""
    assert static.trial_storage is not None  # a sweep's static part has its folder's (SweepStatic.of)
    return join(static.trial_storage, key_of(config), STATE_DIR)


def train_worker(loop_config: dict[str, Any], data_ref=None, state_dir: str = "") -> None:
    """One Ray Train rank: resolve the shared data and run the same generic loop. Ray Train
    hands every rank ``loop_config`` (``train_loop_config``) as it is; the data's reference and
    the state folder come bound to the function (``run_distributed``)."""
    from trainables.loop import train
    from trainables.sessions import TrainSession

    train(loop_config, ray.get(data_ref), TrainSession(state_dir))


def run_distributed(loop_config: dict, data_ref, static: SweepStatic, key: str, state_dir: str) -> None:
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    res = static.resources
    trainer = TorchTrainer(
        functools.partial(train_worker, data_ref=data_ref, state_dir=state_dir),
        train_loop_config=loop_config,
        scaling_config=ScalingConfig(
            num_workers=res.workers,
            use_gpu=res.gpu > 0,
            resources_per_worker={"CPU": res.cpu, **({"GPU": res.gpu} if res.gpu > 0 else {})},
        ),
        run_config=RunConfig(
            # A stable name, the repeat's configuration key: a restarted repeat (a later driver's
            # trial) resumes its Train run from its checkpoints.
            name=f"train-{key}",
            storage_path=static.train_storage,
            # Tune owns retries (sweep.max_failures); a finite controller limit keeps a trial
            # that cannot get resources from retrying forever (docs/architecture.md, "Facts about the stack").
            # (ignores: mypy reads ray.train's v1 FailureConfig and callbacks; v2's are the ones run here)
            failure_config=FailureConfig(max_failures=0, controller_failure_limit=3),  # type: ignore[call-arg]
            # pointers to the trial's state folder (trainables.checkpoints): kilobytes each
            checkpoint_config=CheckpointConfig(num_to_keep=2),
            callbacks=[TuneReportCallback()],  # type: ignore[list-item]
        ),
    )
    trainer.fit()


def trial_resources(static: SweepStatic) -> dict[str, float]:
    """What Tune reserves for the trial process: almost nothing when it only drives a Train
    worker group; otherwise the worker's CPUs and its GPU share (``gpu: 0.25``: four trials
    on one GPU)."""
    res = static.resources
    if static.distributed:
        return {"CPU": 0.01}
    return {"CPU": res.cpu, **({"GPU": res.gpu} if res.gpu > 0 else {})}


def make_trainable(static: SweepStatic, data_refs: list):
    fn = tune.with_parameters(run_trial, data=list(data_refs), static=static)
    return tune.with_resources(fn, trial_resources(static))


def torch_threads_env() -> None:
    """Keep BLAS/OpenMP pools from oversubscribing the cores Ray gave the trial."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
