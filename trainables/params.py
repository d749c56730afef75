"""Hyperparameter declarations: every number a user can set is validated where it enters
(the spec), with the allowed range in the message (docs/architecture.md, "Rules of the spine").

The loop declares its own (``LOOP_PARAMS``); each method declares its own on its class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trainables.errors import SpecError

__all__ = [
    "LOOP_PARAMS",
    "AmpParam",
    "Param",
    "as_text",
    "epochs_for",
    "hp_value",
    "is_validated",
    "resume_states",
    "steps_in_epoch",
    "steps_per_epoch",
    "total_steps",
    "validated_epochs",
]


@dataclass(frozen=True)
class Param:
    """One hyperparameter's declaration: its kind, default and allowed values.

    Attributes:
        kind: ``"float"``, ``"int"``, ``"bool"``, ``"str"`` or ``"floats"`` (a non-empty list of floats).
        default: The value where the spec sets none; must be allowed.
        low: The range's lower bound; None: unbounded.
        high: The range's upper bound; None: unbounded.
        low_open: ``(low, high]`` instead of ``[low, high]``.
        high_open: ``[low, high)`` instead of ``[low, high]``.
        choices: The only values allowed; None: any in the range.
        help: One line on what it does.
        symbol: What trial lines, run names, the summary, ``list`` and the report call it
            (``τ`` for ``temperature``: ``contrasweep.spec.names``); ``""`` prints the name as written.
    """

    kind: str
    default: Any
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    help: str = ""
    symbol: str = ""

    def allowed(self) -> str:
        """What values are allowed, as an error message says it.

        Returns:
            Text such as ``a number in (0, 1]`` or ``one of 'cls', 'mean'``.
        """
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "floats":
            element = Param("float", 0.0, self.low, self.high, self.low_open, self.high_open).allowed()
            return "a non-empty list of numbers" + element.removeprefix("a number")
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open else "]"
        low = "-inf" if self.low is None else _bound(self.low, self.kind)
        high = "inf" if self.high is None else _bound(self.high, self.kind)
        return f"a{'n integer' if self.kind == 'int' else ' number'} in {lo}{low}, {high}{hi}"

    def coerce(self, name: str, value: Any) -> Any:
        """Return the value converted to this parameter's kind, or raise SpecError.

        Args:
            name: The parameter's name, for the message.
            value: The value as the spec or a searcher gives it (text such as ``"1e-5"`` reads).

        Returns:
            The value as this kind: ``float``, ``int``, ``bool``, ``str`` or ``list[float]``.

        Raises:
            SpecError: The value is not of this kind or not allowed; the message says what is.
        """
        bad = SpecError(f"{name}={value!r} is not allowed; allowed: {self.allowed()}")
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise bad
        if self.kind == "floats":
            return self._coerce_list(name, value, bad)
        if self.kind == "str":
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                raise bad
            return value
        number = _to_number(value)
        if number is None or not math.isfinite(number):
            raise bad
        if self.kind == "int":
            if float(number) != int(number):
                raise bad
            number = int(number)
        else:
            number = float(number)
        if self.choices is not None and number not in self.choices:
            raise bad
        if self.low is not None and (number < self.low or (self.low_open and number == self.low)):
            raise bad
        if self.high is not None and (number > self.high or (self.high_open and number == self.high)):
            raise bad
        return number

    def _coerce_list(self, name: str, value: Any, bad: SpecError) -> list[float]:
        # Optuna's categorical choices must be scalars, so a list-valued choice travels
        # through Tune as its text ("0.0,0.1,0.2") and is read back here.
        if isinstance(value, str):
            value = [v for v in value.strip("[]() ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or not value:
            raise bad
        element = Param("float", 0.0, self.low, self.high, self.low_open, self.high_open)
        try:
            return [element.coerce(name, v.strip() if isinstance(v, str) else v) for v in value]
        except SpecError:
            raise bad from None


def _bound(value: float, kind: str) -> str:
    """A range's bound as the message gives it: an integer parameter's exactly (10**9, not 1e+09)."""
    return str(int(value)) if kind == "int" and float(value).is_integer() else f"{value:g}"


def as_text(value: Any) -> Any:
    """A list-valued hyperparameter as one categorical token (the inverse of ``coerce``)."""
    if isinstance(value, (list, tuple)):
        return ",".join(repr(float(v)) for v in value)
    return value


def _to_number(value: Any) -> float | int | None:
    # PyYAML reads `1e-5` (no decimal point) as a string: coerce it here (docs/architecture.md, "The spec format").
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return None
    return None


class AmpParam(Param):
    """``amp``: a precision name; the boolean it used to be still reads (true -> auto, false -> off)."""

    def coerce(self, name: str, value: Any) -> Any:
        if isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false")):
            value = "auto" if str(value).lower() == "true" else "off"
        return super().coerce(name, value)

    def allowed(self) -> str:
        return super().allowed() + " (or true or false, the old form of 'auto' or 'off')"


# The generic loop's hyperparameters. Defaults follow LaCon Sec. 3.1 (the setup CE and the
# contrastive methods share): AdamW, linear schedule, 6 % warm-up, 10 epochs.
LOOP_PARAMS: dict[str, Param] = {
    "lr": Param("float", 2.0e-5, 0.0, 1.0, low_open=True, help="AdamW learning rate"),
    "batch_size": Param("int", 32, 1, 65536, help="global batch size (split across workers)"),
    "eval_batch_size": Param("int", 128, 1, 65536),
    "epochs": Param("int", 10, 1, 10000, help="passes over the training rows (ignored where max_steps > 0)"),
    "max_steps": Param(
        "int",
        0,
        0,
        10**9,
        help="optimiser steps a trial trains; 0 (default): epochs decides. Above 0 it overrides epochs as "
        "Hugging Face's Trainer does: with steps per epoch = ceil(train rows / batch_size), the trial "
        "trains ceil(max_steps / steps per epoch) epochs, the last one cut after the steps left, so "
        "exactly max_steps steps, and the lr schedule's total steps (warmup_ratio's warm-up "
        "included) are max_steps. The epoch stays the unit of reports, checkpoints and ASHA's rungs "
        "(epochs_for)",
    ),
    "warmup_ratio": Param("float", 0.06, 0.0, 1.0, high_open=True),
    "lr_schedule": Param(
        "str",
        "linear",
        choices=("linear", "constant", "cosine", "method"),
        help="after warm-up: linear decay to 0 (LaCon Sec. 3.1), constant (VaSCL App. A), "
        "half-cosine to 0 (ABALONE App. A), or the one the method's paper uses for "
        "these hyperparameters (Method.lr_schedule)",
    ),
    "weight_decay": Param("float", 0.01, 0.0, 10.0),
    "max_grad_norm": Param("float", 1.0, 0.0, 1.0e6, help="0 disables clipping"),
    "adam_eps": Param("float", 1.0e-8, 0.0, 1.0, low_open=True),
    "seed": Param("int", 0, 0, 2**31 - 1),
    "amp": AmpParam(
        "str",
        "auto",
        choices=("auto", "bf16", "fp16", "off"),
        help="mixed precision on a GPU (trainables/step.py): auto = bf16 where the GPU supports it, "
        "else fp16 with a GradScaler; ignored on CPU. The old true/false read as auto/off",
    ),
    "compile": Param(
        "bool",
        False,
        help="torch.compile the method's training forward and loss; a compilation "
        "failure warns once and training goes on in eager mode",
    ),
    "eval_every": Param(
        "int",
        1,
        1,
        10000,
        help="epochs between validations (and reports): also at each epoch a scheduler may pause "
        "at and the last. Between two, an epoch only trains: a few-shot max_steps budget of "
        "many short epochs is not dominated by its validation split",
    ),
    "checkpoint_every": Param(
        "int",
        5,
        1,
        10000,
        help="epochs between full resume states (weights + optimiser + RNG), written at the "
        "first validated epoch once this many have passed; also at ASHA rungs and the "
        "last epoch. A killed trial redoes at most this many epochs (and eval_every's)",
    ),
    "torch_threads": Param("int", 1, 1, 1024, help="torch intra-op threads per worker"),
    "gradient_checkpointing": Param(
        "bool",
        False,
        help="recompute the encoder's activations in the backward pass (Hugging Face's "
        "gradient_checkpointing, non-reentrant; dropout replays its random state, so "
        "the gradients are the same): measured on CPU, MiniLM, 240 rows of 128 "
        "tokens: peak memory 9.1 -> 2.4 GB, step 23.9 -> 28.3 s. For the papers' "
        "batches of 480-1024 rows on a machine without the memory for them",
    ),
}


def hp_value(config: dict[str, Any], key: str):
    """The loop hyperparameter ``key`` of a trial config (``config["hp"]``), its default where unset."""
    return config["hp"].get(key, LOOP_PARAMS[key].default)


# A trial's training budget (``max_steps``, ``epochs``): pure functions of its hyperparameters and
# its data variant's training rows, which the loop (``trainables.loop``) and the driver (a trial's
# plan, ``contrasweep.spec.trial.TrialPlan.epochs``; group ASHA's rungs; ``plan``) share, so that
# both count the same epochs and steps.


def _loop_hp(hp: dict[str, Any], key: str):
    return hp.get(key, LOOP_PARAMS[key].default)


def steps_per_epoch(train_rows: int, batch_size: int) -> int:
    """Optimiser steps in one pass over ``train_rows`` rows (a short last batch is a step, as
    ``trainables.batches.train_batches`` cuts them)."""
    return math.ceil(int(train_rows) / int(batch_size))


def epochs_for(hp: dict[str, Any], train_rows: int) -> int:
    """The epochs a trial with hyperparameters ``hp`` trains on ``train_rows`` rows when not
    stopped: ``epochs``, or with ``max_steps`` > 0 ceil(max_steps / steps per epoch) (Hugging
    Face's Trainer: ``max_steps`` overrides ``num_train_epochs``)."""
    max_steps = int(_loop_hp(hp, "max_steps") or 0)
    if max_steps <= 0:
        return int(_loop_hp(hp, "epochs"))
    return math.ceil(max_steps / max(1, steps_per_epoch(train_rows, _loop_hp(hp, "batch_size"))))


def total_steps(hp: dict[str, Any], train_rows: int) -> int:
    """The optimiser steps of the whole trial: ``max_steps`` where set, else epochs × steps per epoch."""
    max_steps = int(_loop_hp(hp, "max_steps") or 0)
    if max_steps > 0:
        return max_steps
    return int(_loop_hp(hp, "epochs")) * steps_per_epoch(train_rows, _loop_hp(hp, "batch_size"))


def steps_in_epoch(hp: dict[str, Any], train_rows: int, epoch: int) -> int:
    """The optimiser steps epoch ``epoch`` (from 1) takes: a whole pass, except the last epoch
    of a ``max_steps`` trial, cut after the steps left (0 past the trial's last epoch)."""
    per_epoch = steps_per_epoch(train_rows, _loop_hp(hp, "batch_size"))
    return max(0, min(per_epoch, total_steps(hp, train_rows) - (epoch - 1) * per_epoch))


def is_validated(epoch: int, epochs: int, eval_every: int, pauses=()) -> bool:
    """Whether a trial of ``epochs`` epochs validates and reports ``epoch`` (the loop asks each
    epoch): every ``eval_every``-th, each of the scheduler's pause epochs, the last."""
    return epoch == epochs or epoch % eval_every == 0 or epoch in pauses


def validated_epochs(epochs: int, eval_every: int, pauses=()) -> list[int]:
    """Every epoch ``is_validated`` names, for ``plan`` (built from the multiples, not by asking
    each epoch: a ``max_steps`` budget on few rows may be many epochs)."""
    return sorted(
        {*range(eval_every, epochs + 1, eval_every), *(int(p) for p in pauses if 0 < int(p) <= epochs), epochs}
    )


def resume_states(epochs: int, every: int, pauses: list[int], eval_every: int = 1) -> int:
    """Resume states a trial writes: every ``every`` epochs, at the scheduler's pauses, the last
    (counted, not listed: a ``max_steps`` budget on few rows may be many epochs); with
    ``eval_every`` above 1, at the first validated epoch once ``every`` have passed
    (``trainables.checkpointing.Checkpointer.resume_due``; ``plan`` counts them)."""
    if eval_every > 1:
        written = last = 0
        for epoch in validated_epochs(epochs, eval_every, pauses):
            if epoch == epochs or epoch // every > last // every or epoch in pauses:
                written, last = written + 1, epoch
        return written
    extra = {p for p in pauses if 0 < p <= epochs and p % every != 0}
    return epochs // every + len(extra) + (1 if epochs % every and epochs not in extra else 0)
