"""One optimiser step of the generic loop (``trainables/loop.py``): the forward pass and the
method's loss under the trial's precision, backward, gradient clipping, AdamW, the schedule.

The loop builds one ``TrainStep`` per trial and calls it once per batch::

    step = TrainStep(method, model, optimizer, scheduler, device=device,
                     amp=hp("amp"), compile=hp("compile"), max_grad_norm=hp("max_grad_norm"))
    out = step(batch)          # the method's output dict ("loss", "loss/<part>", ...), detached

Precision (the loop parameter ``amp: auto | bf16 | fp16 | off``, resolved once into ``mode``):

* ``bf16``: the forward pass runs under ``torch.autocast(dtype=torch.bfloat16)`` and **no**
  GradScaler: bfloat16 has float32's 8-bit exponent (the same range, ~1e-38 to ~3e38), so small
  gradients do not underflow and there is nothing to scale; it only gives up mantissa bits.
* ``fp16``: autocast to float16 *with* a ``torch.amp.GradScaler``: float16's 5-bit exponent
  flushes gradients below ~6e-8 to zero, so the loss is multiplied by a large, adaptive factor
  before backward and the gradients are unscaled before clipping and the optimiser step (a step
  whose gradients overflowed is skipped and the factor lowered).
* ``auto`` (the default): on a CUDA device bf16 where the GPU supports it natively (Ampere and
  newer), else fp16.
* ``off``: float32.

On a CPU every value resolves to ``off``: mixed precision is ignored there. CPU autocast exists
(bfloat16 only), but most CPUs have no native bfloat16 arithmetic, so it is emulated and slower
than float32; the GradScaler's fp16 recipe is a GPU one; and the CPU runs of this project (tests,
debugging, small sweeps) use float32 as the reference, so a spec with ``amp: auto`` trains
exactly as before on a laptop and the same spec gets mixed precision on a GPU.

``scaler`` is always a ``GradScaler``, disabled unless ``mode == "fp16"`` (a disabled scaler's
calls are no-ops, its ``state_dict()`` is ``{}``); the loop checkpoints its state.

``compile=True`` wraps ``model`` with ``torch.compile`` (the forward pass and the method's loss;
backward is compiled with it by AOTAutograd). Compilation happens lazily, at the first call and
again whenever a new input shape needs a recompile, so every compiled call is guarded: if it
raises, ``TrainStep`` warns once (one line: what failed, and that eager mode is used), restores
the RNG state the failed attempt may have consumed, redoes that step eagerly and stays eager
for the rest of the trial. ``torch._dynamo``'s global configuration is never changed.

No per-step host synchronisation: nothing here reads a tensor's value on the host (no
``.item()``, no ``float(tensor)``); the loop accumulates the returned losses on the device.
(An enabled fp16 GradScaler itself reads its overflow flag once per ``scaler.step`` unless the
optimiser is a fused one, ``AdamW(fused=True)``; bf16 and fp32 have no such read.)
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from trainables.errors import ContractError
from trainables.params import LOOP_PARAMS

MODES = ("bf16", "fp16", "off")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_amp(amp: Any, device: torch.device | str) -> str:
    """The precision ``amp`` means on ``device``: ``"bf16"``, ``"fp16"`` or ``"off"``.

    ``amp`` is the loop parameter's value (old booleans included: true -> auto, false -> off;
    anything else raises the spec's one-line ``SpecError``)."""
    amp = LOOP_PARAMS["amp"].coerce("amp", amp)
    if torch.device(device).type != "cuda":
        return "off"  # mixed precision is ignored on CPU (module docstring)
    if amp == "auto":
        return "bf16" if _native_bf16() else "fp16"
    return amp


def _native_bf16() -> bool:
    try:  # emulated bf16 (pre-Ampere GPUs) is slower than fp16: auto picks fp16 there
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # torch < 2.5: no including_emulation argument
        return bool(torch.cuda.is_bf16_supported())


class TrainStep:
    """One optimiser step of the generic loop; ``__call__(batch)`` returns the model's outputs.

    ``method`` is the ``trainables.base.Method`` (its parameters are clipped), ``model`` what the
    loop trains and calls: the method itself or its DDP wrapper."""

    mode: str
    scaler: torch.amp.GradScaler

    def __init__(
        self,
        method: nn.Module,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler,
        *,
        device: torch.device | str,
        amp: Any = "auto",
        compile: Any = False,
        max_grad_norm: float = 1.0,
    ):
        self.method, self.model, self.optimizer, self.scheduler = method, model, optimizer, scheduler
        self.device = torch.device(device)
        self.mode = resolve_amp(amp, self.device)
        self.max_grad_norm = float(max_grad_norm)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.mode == "fp16")
        self._dtype = _DTYPES.get(self.mode)
        self._compiled = None
        if LOOP_PARAMS["compile"].coerce("compile", compile):
            try:
                self._compiled = torch.compile(model)
            except Exception as exc:  # noqa: BLE001 - any failure of compilation means eager
                self._fall_back(exc)

    @property
    def compiled(self) -> bool:
        """Whether steps still run through ``torch.compile`` (False after a fallback)."""
        return self._compiled is not None

    def __call__(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if self._compiled is not None:
            rng = _rng_state(self.device)
            try:
                out = self._forward_backward(self._compiled, batch)
            except (torch.OutOfMemoryError, ContractError):
                raise  # not a compilation failure: eager would fail as well
            except Exception as exc:  # noqa: BLE001 - compilation errors surface lazily, of many types
                self._fall_back(exc)
                _set_rng_state(self.device, rng)
                out = self._forward_backward(self.model, batch)
        else:
            out = self._forward_backward(self.model, batch)
        if self.max_grad_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.method.parameters(), self.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.scheduler is not None:
            self.scheduler.step()
        return {k: v.detach() if torch.is_tensor(v) else v for k, v in out.items()}

    def _forward_backward(self, forward, batch):
        autocast = torch.autocast(self.device.type, dtype=self._dtype) if self._dtype is not None else nullcontext()
        with autocast:
            out = forward(batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(training_loss(out)).backward()
        return out

    def _fall_back(self, exc: BaseException) -> None:
        self._compiled = None
        warnings.warn(
            f"compile=true: torch.compile failed ({_one_line(exc)}); training continues in eager mode",
            RuntimeWarning,
            stacklevel=3,
        )


def training_loss(out) -> torch.Tensor:
    """The ``loss`` of ``training_step``'s output, or a ``ContractError`` in the contract's words
    (``trainables.contract``; what ``contrasweep check-method`` prints): a dict with a scalar
    ``loss`` tensor that has a gradient. Reads no tensor's value (no host sync)."""
    if not isinstance(out, dict) or "loss" not in out:
        raise ContractError(
            f"training_step returned {type(out).__name__}{' without loss' if isinstance(out, dict) else ''}; "
            "allowed: a dict with a 'loss' tensor"
        )
    loss = out["loss"]
    if not torch.is_tensor(loss) or loss.numel() != 1:
        raise ContractError(
            f"loss is {type(loss).__name__} of shape {tuple(getattr(loss, 'shape', ()))}; allowed: a scalar tensor"
        )
    if not loss.requires_grad:
        raise ContractError("loss has no gradient (computed without autograd, or detached)")
    return loss


def _one_line(exc: BaseException) -> str:
    """``Outer <- Root: first line of the root cause`` (dynamo wraps a backend's error: its own
    first line is only "backend='inductor' raised:")."""
    root, seen = exc, {id(exc)}
    while (inner := getattr(root, "inner_exception", None) or root.__cause__) is not None and id(inner) not in seen:
        root = inner
        seen.add(id(root))
    lines = [line.strip() for line in str(root).splitlines() if line.strip()]
    kind = type(exc).__name__ if root is exc else f"{type(exc).__name__} <- {type(root).__name__}"
    return f"{kind}: {lines[0][:240]}" if lines else kind


def _rng_state(device: torch.device):
    cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None  # host-side seed/offset: no sync
    return torch.get_rng_state(), cuda


def _set_rng_state(device: torch.device, state) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda, device)
