"""The public surface is declared and documented (issue 72): ``contrasweep.__all__`` names the
Python API, ``docs/api.md`` lists every public name and every public member of ``Sweep``, and
each public function or method that takes arguments documents them (Google style: ``Args:``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import contrasweep as cs
from contrasweep import api
from trainables import losses
from trainables.base import Method
from trainables.global_batch import global_batch
from trainables.params import Param

DOC = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()


def _public_members(cls: type) -> list[str]:
    return sorted(n for n in vars(cls) if not n.startswith("_"))


def test_the_package_exports_the_api_and_docs_list_every_name():
    assert set(cs.__all__) == set(api.__all__) | {"__version__"}
    for name in api.__all__:
        assert getattr(cs, name) is getattr(api, name)
        assert re.search(rf"`{name}[`(]", DOC), f"docs/api.md does not list {name}"
    for member in _public_members(cs.Sweep):
        assert re.search(rf"`{member}[`(]", DOC), f"docs/api.md does not list Sweep.{member}"


def test_public_functions_document_their_arguments_and_results():
    missing = []
    functions = [getattr(api, n) for n in api.__all__ if inspect.isfunction(getattr(api, n))]
    methods = [getattr(cs.Sweep, n) for n in _public_members(cs.Sweep) if inspect.isfunction(getattr(cs.Sweep, n))]
    for func in functions + methods:
        doc = inspect.getdoc(func) or ""
        params = [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]
        if not doc:
            missing.append(f"{func.__qualname__}: no docstring")
        elif params and "Args:" not in doc:
            missing.append(f"{func.__qualname__}: no Args section")
        elif func in functions and "Returns:" not in doc:
            missing.append(f"{func.__qualname__}: no Returns section")
    assert missing == []


def _contract_members() -> list[str]:
    """``Method``'s public members a user's method may call or override, ``__init__`` included."""
    return ["__init__", *(n for n in _public_members(Method) if callable(getattr(Method, n)))]


def test_the_method_contract_is_documented_like_the_api():
    """What a user's method subclasses and reuses (docs/methods-own.md, "The contract"):
    ``Method``'s members, ``Param``, ``trainables.losses.__all__`` and ``global_batch``."""
    missing = []
    class_doc = inspect.getdoc(Method) or ""
    for attribute in (
        "name",
        "params",
        "label_kind",
        "metric_names",
        "sts_metric_names",
        "step_metrics",
        "serving_output",
    ):
        if not re.search(rf"^\s*{attribute}:", class_doc, re.M):
            missing.append(f"Method: no Attributes entry for {attribute}")
    members = [getattr(Method, n) for n in _contract_members()]
    functions = [getattr(losses, n) for n in losses.__all__] + [global_batch]
    for func in members + [Param.allowed, Param.coerce] + functions:
        doc = inspect.getdoc(func) or ""
        params = [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]
        if not doc:
            missing.append(f"{func.__qualname__}: no docstring")
        elif params and "Args:" not in doc:
            missing.append(f"{func.__qualname__}: no Args section")
        elif func in functions and "Returns:" not in doc:
            missing.append(f"{func.__qualname__}: no Returns section")
    assert missing == []
    contract = DOC[DOC.index("## A method of your own: the contract") :]
    for name in ["Method", "Param", *_contract_members(), *losses.__all__, "global_batch"]:
        assert re.search(rf"`{name}[`(]", contract), f"docs/api.md does not list {name} in the contract"
