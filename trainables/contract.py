"""The contract between a method and the loop, checked on a tiny random BERT (48 wide: LaCon's
6 heads divide it) and a toy task of a few rows, before a sweep spends hours on it
(``contrasweep check-method``, docs/methods-own.md). Each check is a small object in
``CHECKS``; each passes or fails with its reason, and a check that raises fails with the error.

Training values: the method's defaults with the loop's own, except ``lr`` 1e-3 (a random
encoder moves visibly in two steps), ``warmup_ratio`` 0 (warm-up starts at lr 0), ``batch_size``
24 (VaSCL's 16 neighbours need more rows than that in a batch) and 1-2 ``epochs``; ``--set``
overrides any of them.

May import: torch, numpy (its generator's state), ``trainables`` (the registry, the loop, its
sessions, batches and params, ``trainables.toy``).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainables.batches import to_device, train_batches
from trainables.errors import ContractError, SpecError
from trainables.loop import build_method, seed_everything, train
from trainables.params import LOOP_PARAMS
from trainables.registry import get_method
from trainables.sessions import LocalSession
from trainables.step import training_loss
from trainables.toy import build_tiny_bert, multilabel_tables, toy_tables

CHECK_HP = {"lr": 1.0e-3, "warmup_ratio": 0.0, "batch_size": 24, "epochs": 1, "eval_batch_size": 32, "seed": 0}
TOLERANCE = 1.0e-4  # resumed against straight: the same numbers up to float summation order


@dataclass
class Result:
    name: str
    passed: bool
    detail: str


@dataclass
class Toy:
    """What every check trains with: the method's name, its class, the loop's config and the data."""

    method: str
    cls: Any
    config: dict[str, Any]
    data: dict[str, Any]
    folder: Path

    def config_with(self, **hp) -> dict[str, Any]:
        return {**self.config, "hp": {**self.config["hp"], **hp}}

    def build(self, seed: int = 0):
        seed_everything(seed)
        return build_method(self.config_with(seed=seed), self.data["num_labels"])

    def batch(self) -> dict[str, torch.Tensor]:
        hp = self.config["hp"]
        return to_device(
            next(train_batches(self.data["tables"]["train"], hp["batch_size"], hp["seed"], 1, 0, 1)),
            torch.device("cpu"),
        )

    def session(self, name: str, resume_from: str | None = None) -> LocalSession:
        return LocalSession(str(self.folder / name), resume_from=resume_from)


def check_training_step(toy: Toy) -> str:
    method = toy.build()
    method.train()
    loss = training_loss(method.training_step(toy.batch()))
    if not torch.isfinite(loss.detach()):
        raise AssertionError(f"loss is {float(loss.detach())}; allowed: a finite number")
    loss.backward()
    tensors = list(method.encoder.parameters())
    reached = sum(1 for p in tensors if p.grad is not None and float(p.grad.abs().sum()) > 0)
    if not reached:
        raise AssertionError("no gradient reaches the encoder: the loss does not depend on method.encode(batch)")
    return f"loss {float(loss.detach()):.4g}; the gradient reaches {reached} of {len(tensors)} encoder tensors"


def check_predict(toy: Toy) -> str:
    """``predict``'s scores; a representation method (``serving_output: embedding``, judged by
    ``evaluate`` alone) gives its ``representation`` ``[B, d]`` instead."""
    method = toy.build()
    method.eval()
    batch = toy.batch()
    embedding = toy.cls.serving_output == "embedding"
    with torch.no_grad():
        scores = method.representation(batch) if embedding else method.predict(batch)
    want = (len(batch["labels"]), scores.shape[-1] if embedding and torch.is_tensor(scores) else toy.data["num_labels"])
    if embedding and torch.is_tensor(scores) and scores.ndim == 2:
        if not torch.isfinite(scores).all():
            raise AssertionError("representation gave non-finite embeddings")
        return f"embeddings {list(scores.shape)} (serving_output: embedding)"
    if not torch.is_tensor(scores) or tuple(scores.shape) != want:
        raise AssertionError(
            f"predict gave {tuple(getattr(scores, 'shape', ())) or type(scores).__name__}; allowed: "
            f"scores [B, num_labels] = {list(want)}"
        )
    if not torch.isfinite(scores).all():
        raise AssertionError("predict gave non-finite scores")
    return f"scores {list(want)}"


def check_evaluate(toy: Toy) -> str:
    session = toy.session("evaluate")
    train(toy.config, toy.data, session)
    report = session.reports[-1]
    missing = [n for n in toy.cls.metric_names if f"val/{n}" not in report]
    if missing:
        raise AssertionError(f"evaluate() did not report {', '.join(missing)} of metric_names")
    bad = [n for n in toy.cls.metric_names if not math.isfinite(float(report[f"val/{n}"]))]
    if bad:
        raise AssertionError(f"evaluate() reported non-finite {', '.join(bad)}")
    return ", ".join(f"{n} {float(report[f'val/{n}']):.3g}" for n in toy.cls.metric_names[:4])


def check_lowers_loss(toy: Toy) -> str:
    method = toy.build()
    method.train()
    batch = toy.batch()
    hp = toy.config["hp"]
    optimizer = torch.optim.AdamW(method.param_groups(hp["lr"], 0.0), lr=hp["lr"])

    def loss(step: bool) -> float:
        torch.manual_seed(1)  # the same dropout masks each time: only the weights differ
        value = training_loss(method.training_step(batch))
        if step:
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
        return float(value.detach())

    # what the steps change besides the trained weights (a MoCo queue, a momentum encoder) is put
    # back before the last loss: it compares the same batch against the same state
    state = {
        k: v.detach().clone()
        for k, v in method.state_dict(keep_vars=True).items()
        if not (isinstance(v, torch.nn.Parameter) and v.requires_grad)
    }
    before = loss(step=True)
    loss(step=True)
    method.load_state_dict(state, strict=False)
    after = loss(step=False)
    if not after < before:
        raise AssertionError(
            f"the loss went {before:.4g} -> {after:.4g} after two steps on one batch at lr "
            f"{hp['lr']:g}: the loss does not decrease along its gradient"
        )
    return f"{before:.4g} -> {after:.4g}"


class StopAfter(LocalSession):
    """A session that stops the loop after its first report, as a killed trial would."""

    class Stopped(Exception):
        pass

    def report(self, metrics, checkpoint_dir):
        super().report(metrics, checkpoint_dir)
        raise self.Stopped


def check_resume(toy: Toy) -> str:
    config = toy.config_with(epochs=2, checkpoint_every=1)
    first = StopAfter(str(toy.folder / "resume-a"))
    try:
        train(config, toy.data, first)
    except StopAfter.Stopped:
        pass
    if not first.checkpoints:
        raise AssertionError("no resume state after the first epoch")
    resumed, straight = toy.session("resume-b", resume_from=first.checkpoints[-1]), toy.session("resume-c")
    train(config, toy.data, resumed)
    train(config, toy.data, straight)
    keys = ["train/loss", *(f"val/{n}" for n in toy.cls.metric_names)]
    a, b = straight.reports[-1], resumed.reports[-1]
    off = [
        f"{k} {b.get(k)} against {a.get(k)}"
        for k in keys
        if k in a and not (k in b and abs(float(a[k]) - float(b[k])) <= TOLERANCE * max(1.0, abs(float(a[k]))))
    ]
    if off:
        raise AssertionError(
            f"one epoch, a resume and one more epoch differ from two epochs straight: {'; '.join(off[:3])} "
            "(state not restored: a buffer outside the state_dict, an un-seeded random draw?)"
        )
    return f"epoch 2 equals two epochs straight ({', '.join(keys[:3])}, within {TOLERANCE:g})"


def check_seeded(toy: Toy) -> str:
    losses = []
    for _ in range(2):
        method = toy.build(seed=0)
        method.train()
        losses.append(float(training_loss(method.training_step(toy.batch())).detach()))
    if losses[0] != losses[1]:
        raise AssertionError(
            f"seed 0 gave losses {losses[0]!r} and {losses[1]!r}: something random is not seeded "
            "(use torch's generators, which the loop seeds)"
        )
    return f"loss {losses[0]:.6g} twice"


# (name, what it checks, the check): the table's rows, in order
CHECKS: list[tuple[str, str, Callable[[Toy], str]]] = [
    ("training_step", "a finite scalar loss whose gradient reaches the encoder", check_training_step),
    ("predict", "scores [B, num_labels] (a representation method: embeddings [B, d])", check_predict),
    ("evaluate", "every name in metric_names, after one epoch of the loop", check_evaluate),
    ("lowers the loss", "two optimiser steps on one batch lower its loss", check_lowers_loss),
    ("resume", "one epoch, save, load, one more = two epochs straight", check_resume),
    ("seeded", "the same seed gives the same loss twice", check_seeded),
]


def hp_for(cls, overrides: dict[str, Any]) -> dict[str, Any]:
    """The check's training values with ``overrides`` (``--set KEY=VALUE``), each validated."""
    params = {**LOOP_PARAMS, **cls.params}
    hp = dict(CHECK_HP)
    for key, value in overrides.items():
        if key not in params:
            raise SpecError(f"--set {key}: unknown hyperparameter; allowed: {', '.join(sorted(params))}")
        hp[key] = params[key].coerce(key, value)
    cls.check({**{k: p.default for k, p in params.items()}, **hp}, 48)
    return hp


# the rows that train with training_step: once its own row fails, theirs fail with its reason
# (what they would say instead follows from it: a KeyError, a diverged loop, a loss of nan -> nan)
TRAINS = ("evaluate", "lowers the loss", "resume", "seeded")

# the checks a sweep runs on the driver before Ray starts, for a user's method (seconds: one
# training_step and one predict on the toy batch; ``check_before_sweep``)
CHEAP = ("training_step", "predict")


def check_method(
    method: str, overrides: dict[str, Any] | None = None, only: tuple[str, ...] | None = None
) -> list[Result]:
    """Every check of ``CHECKS`` on ``method`` (a built-in name or a user's reference), or those
    named in ``only``; a method that cannot be imported or declared is a ``SpecError`` (one
    line, before any check). A failure's detail is the check's own words: an ``AssertionError``
    or ``ContractError`` (what the loop raises for the same fault) as it is, any other
    exception with its type."""
    cls = get_method(method)
    hp = hp_for(cls, overrides or {})
    results = []
    with tempfile.TemporaryDirectory(prefix="contrasweep-check-") as tmp:
        folder = Path(tmp)
        model_dir = build_tiny_bert(folder / "tiny-bert", hidden_size=48)
        data = (multilabel_tables if cls.label_kind == "multi" else toy_tables)(str(model_dir))
        config = {
            "method": method,
            "encoder": {"name": str(model_dir), "pooling": "mean"},
            "hp": hp,
            "metric": f"val/{cls.metric_names[0]}",
            "mode": "max",
            "num_labels": data["num_labels"],
        }
        toy = Toy(method, cls, config, data, folder)
        for name, _, check in CHECKS:
            if only is not None and name not in only:
                continue
            try:
                results.append(Result(name, True, check(toy)))
            except Exception as exc:  # noqa: BLE001 - whatever the method raises is that check's failure
                text = " ".join(str(exc).split()) or type(exc).__name__
                detail = text if isinstance(exc, (AssertionError, ContractError)) else f"{type(exc).__name__}: {text}"
                results.append(Result(name, False, detail[:300]))
    first = next((r for r in results if r.name == "training_step" and not r.passed), None)
    return [Result(r.name, False, first.detail) if first and not r.passed and r.name in TRAINS else r for r in results]


def check_before_sweep(method: str) -> Result | None:
    """The first failure of the ``CHEAP`` checks on a user's ``method`` at its defaults (what
    ``contrasweep check-method METHOD`` prints in its first rows), or None when they pass.
    ``run``, ``resume`` and ``extend`` call it on the driver before Ray starts
    (``contrasweep.runner.checks.method_runs``); a built-in method is never checked here, its
    tests run every check (tests/test_user_methods.py). Restores the random generators'
    state it seeds (Python's, NumPy's, torch's CPU one): the driver draws as it would without it."""
    import random

    import numpy as np

    state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            results = check_method(method, only=CHEAP)
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
    return next((r for r in results if not r.passed), None)
