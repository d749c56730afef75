"""The public surface is declared and documented (issue 72): ``contrasweep.__all__`` names the
Python API, ``docs/api.md`` lists every public name and every public member of ``Sweep``, and
each public function or method that takes arguments documents them (Google style: ``Args:``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import contrasweep as cs
from contrasweep import api

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
