"""A lazy registry of methods by name (Ray Tune style): importing the registry imports no
method module; ``get_method`` imports the one asked for. A new method = one module in
``trainables/methods/`` + one line here + its declaration (``trainables.methods.declarations``).
A user's method is named by its import path instead (``mylab.losses:Class``, ``./file.py:Class``:
``trainables.user_methods``), imported and checked when first asked for.

May import: ``trainables.errors``, ``trainables.methods.declarations`` (torch-free),
``trainables.user_methods``."""

from __future__ import annotations

import importlib

from trainables import user_methods
from trainables.errors import SpecError
from trainables.methods.declarations import DECLARATIONS

_METHODS: dict[str, str] = {
    "abalone": "trainables.methods.abalone:MultiLabelContrastive",
    "ce": "trainables.methods.ce:CrossEntropy",
    "ce_scl": "trainables.methods.ce_scl:CrossEntropySCL",
    "lacon": "trainables.methods.lacon:LaCon",
    "scl_moo": "trainables.methods.scl_moo:SCLMOO",
    "simcse": "trainables.methods.simcse:SimCSE",
    "supcl_seq": "trainables.methods.supcl_seq:SupCLSeq",
    "vascl": "trainables.methods.vascl:VaSCL",
}


_CHECKED: set[str] = set()  # user references checked in this process


def register(name: str, target: str) -> None:
    """Register ``"package.module:Class"`` under ``name`` (plugins outside this repo)."""
    _METHODS[name] = target


def method_names() -> list[str]:
    return sorted(_METHODS)


def declaration(name: str):
    """What the spec checks of a method (its params, label kind and metric names), without
    importing its module where ``trainables.methods.declarations`` declares it (no torch)."""
    if name in DECLARATIONS and _METHODS.get(name, "").startswith("trainables."):
        return DECLARATIONS[name]
    return get_method(name)


def get_method(name: str):
    """The class of a built-in (or registered) name, or of a user's reference, checked
    (``trainables.user_methods.check_class``) the first time it is asked for."""
    if name not in _METHODS and user_methods.is_reference(name):
        cls = user_methods.load_class(name)
        if name not in _CHECKED:
            user_methods.check_class(name, cls, _METHODS)
            _CHECKED.add(name)
        return cls
    if name not in _METHODS:
        raise SpecError(
            f"method {name!r} is not a built-in method; allowed: {', '.join(method_names())}, or your own "
            "as package.module:Class or path/to/file.py:Class (docs/methods-own.md)"
        )
    module_name, _, attr = _METHODS[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)
