"""The loop's optimiser step (trainables/step.py): precision resolution, the amp/compile
parameters, bit-identity with a hand-written fp32 step, and the compile fallback. CPU only, no Ray."""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from transformers import get_linear_schedule_with_warmup

from contrasweep.errors import SpecError
from trainables.batches import to_device, train_batches
from trainables.loop import build_method
from trainables.params import LOOP_PARAMS
from trainables.step import TrainStep, resolve_amp

from helpers import toy_tables

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
AMP_VALUES = ("auto", "bf16", "fp16", "off", True, False, "true", "false")


# --- amp: the parameter and its resolution -------------------------------------------------

@pytest.mark.parametrize("value", AMP_VALUES)
def test_every_amp_value_is_off_on_cpu(value):
    assert resolve_amp(value, CPU) == "off"
    assert resolve_amp(value, "cpu") == "off"


@pytest.mark.parametrize("bf16", [True, False])
def test_amp_resolution_on_a_cuda_device(monkeypatch, bf16):
    calls = []

    def is_bf16_supported(*args, **kwargs):
        calls.append(kwargs)
        return bf16

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    auto = "bf16" if bf16 else "fp16"
    expected = {"auto": auto, "bf16": "bf16", "fp16": "fp16", "off": "off",
                True: auto, False: "off", "true": auto, "false": "off"}
    for value, mode in expected.items():
        assert resolve_amp(value, torch.device("cuda")) == mode, value
        assert resolve_amp(value, torch.device("cuda", 0)) == mode, value
    # auto asks for native bf16 support: emulated bf16 is slower than fp16
    assert calls and all(kw == {"including_emulation": False} for kw in calls)


def test_amp_parameter_reads_old_booleans_and_rejects_others_in_one_line():
    amp = LOOP_PARAMS["amp"]
    assert amp.default == "auto"
    for old, new in ((True, "auto"), (False, "off"), ("true", "auto"), ("False", "off")):
        assert amp.coerce("amp", old) == new
    for name in ("auto", "bf16", "fp16", "off"):
        assert amp.coerce("amp", name) == name
    for bad in ("maybe", "fp32", 1, None, "BF16"):
        with pytest.raises(SpecError) as err:
            amp.coerce("amp", bad)
        message = str(err.value)
        assert "\n" not in message and f"amp={bad!r}" in message
        assert "'auto', 'bf16', 'fp16', 'off'" in message
    with pytest.raises(SpecError, match="'auto', 'bf16', 'fp16', 'off'"):
        resolve_amp("half", CPU)


def test_compile_parameter():
    compile_ = LOOP_PARAMS["compile"]
    assert compile_.default is False
    assert compile_.coerce("compile", "true") is True and compile_.coerce("compile", False) is False
    with pytest.raises(SpecError, match="true or false"):
        compile_.coerce("compile", "sometimes")


# --- the step: the same numbers as a hand-written fp32 step --------------------------------

def _setup(model_dir, method="ce"):
    hp = {"temperature": 0.3, "lam": 0.5} if method == "ce_scl" else {}
    torch.manual_seed(0)
    built = build_method({"method": method, "encoder": {"name": model_dir}, "hp": hp}, 2)
    data = toy_tables(model_dir)
    batches = [to_device(b, CPU) for b in train_batches(data["tables"]["train"], 8, 0, 1, 0, 1)]
    return built, batches


def _optimiser(method):
    optimizer = torch.optim.AdamW(method.param_groups(1e-3, 0.01), lr=1e-3, eps=1e-8)
    return optimizer, get_linear_schedule_with_warmup(optimizer, 2, 10)


def _hand_written(method, batches, max_grad_norm):
    optimizer, scheduler = _optimiser(method)
    torch.manual_seed(1)  # dropout
    losses = []
    for batch in batches:
        out = method(batch)
        optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(method.parameters(), max_grad_norm)
        optimizer.step()
        scheduler.step()
        losses.append(out["loss"].detach())
    return losses


def _with_train_step(method, batches, max_grad_norm, **kwargs):
    optimizer, scheduler = _optimiser(method)
    step = TrainStep(method, method, optimizer, scheduler, device=CPU, max_grad_norm=max_grad_norm, **kwargs)
    torch.manual_seed(1)
    outs = [step(batch) for batch in batches]
    return step, outs, scheduler


def _assert_identical(a, b):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("method_name, max_grad_norm", [("ce", 1.0), ("ce", 0.0), ("ce_scl", 1.0)])
def test_train_step_is_bit_identical_to_a_hand_written_fp32_step(tiny_model_dir, method_name, max_grad_norm):
    method, batches = _setup(tiny_model_dir, method_name)
    method.train()
    hand, ours = method, copy.deepcopy(method)
    losses = _hand_written(hand, batches, max_grad_norm)
    step, outs, scheduler = _with_train_step(ours, batches, max_grad_norm)  # amp="auto": off on CPU

    assert step.mode == "off" and not step.scaler.is_enabled() and step.scaler.state_dict() == {}
    assert not step.compiled
    _assert_identical(hand, ours)
    assert scheduler.last_epoch == len(batches)
    for out, loss in zip(outs, losses):
        assert torch.equal(out["loss"], loss)
        assert all(not v.requires_grad for v in out.values() if torch.is_tensor(v))
    assert set(outs[0]) >= {"loss", "loss/ce"}
    # what changed is the trainable parameters: the step really trained
    assert not torch.equal(hand.classifier.weight, _setup(tiny_model_dir, method_name)[0].classifier.weight)


# --- compile ---------------------------------------------------------------------------------

def _raising_compile(model, *args, **kwargs):
    def compiled(*a, **k):
        raise RuntimeError("inductor: no C++ compiler\n(long traceback)")
    return compiled


def _failing_backend(gm, example_inputs):
    raise RuntimeError("backend exploded")


def _construct_time_failure(model, *args, **kwargs):
    raise RuntimeError("torch.compile is not supported on this Python")


@pytest.mark.parametrize("fake_compile", [
    _raising_compile,  # the compiled callable raises at its first call
    functools.partial(torch.compile, backend=_failing_backend),  # a real lazy failure inside dynamo
    _construct_time_failure,  # torch.compile itself raises
], ids=["first-call", "dynamo-backend", "construction"])
def test_compile_failure_warns_once_and_trains_on_eagerly(tiny_model_dir, monkeypatch, fake_compile):
    method, batches = _setup(tiny_model_dir)
    method.train()
    eager, compiled = method, copy.deepcopy(method)
    _, eager_outs, _ = _with_train_step(eager, batches, 1.0)
    config = torch._dynamo.config.get_config_copy()

    monkeypatch.setattr(torch, "compile", fake_compile)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step, outs, _ = _with_train_step(compiled, batches, 1.0, compile=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "torch.compile failed" in messages[0] and "eager" in messages[0] and "\n" not in messages[0]
    assert "RuntimeError" in messages[0]
    assert not step.compiled and len(outs) == len(batches)
    _assert_identical(eager, compiled)  # the failed step was redone eagerly, with the same dropout
    assert all(torch.equal(a["loss"], b["loss"]) for a, b in zip(outs, eager_outs))
    assert torch._dynamo.config.get_config_copy() == config


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_compile_really_compiles_on_cpu(tiny_model_dir):
    """Inductor on CPU (needs a C++ compiler): ~35 s cold for the tiny BERT on 2 cores, a few
    seconds with inductor's on-disk cache. Dropout off so eager and compiled can be compared."""
    method, batches = _setup(tiny_model_dir)
    method.eval()
    eager, compiled = method, copy.deepcopy(method)
    _with_train_step(eager, batches[:3], 1.0)
    config = torch._dynamo.config.get_config_copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step, outs, _ = _with_train_step(compiled, batches[:3], 1.0, compile=True)
    assert step.compiled, [str(w.message) for w in caught]
    assert not [w for w in caught if "torch.compile failed" in str(w.message)]
    for p, q in zip(eager.parameters(), compiled.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    assert torch._dynamo.config.get_config_copy() == config


# --- the benchmark stays free of the orchestration stack -----------------------------------

def test_step_benchmark_imports_neither_ray_nor_mlflow():
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import step_throughput; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'mlflow', 'contrasweep')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
