"""Where the modules of contrasweep 0.1's flat layout went (docs/architecture.md, "Modules by
concern"), so that what a sweep pickled before the move still loads: Tune's ``tuner.pkl`` and
its searcher, scheduler and callback states name classes and functions by module
(``contrasweep.group_asha.GroupASHA``, ``contrasweep.tracking.MlflowTracker``), and
``contrasweep resume`` of such a sweep unpickles them. An old module name imports as a small
module whose attributes are looked up in the new homes, in order; nothing else uses it.
Imports only the standard library.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

HOMES: dict[str, tuple[str, ...]] = {
    "contrasweep.axes": ("contrasweep.spec.axes",),
    "contrasweep.identity": ("contrasweep.spec.identity",),
    "contrasweep.spec": ("contrasweep.spec.load", "contrasweep.spec.sweep", "contrasweep.spec.trial"),
    "contrasweep.sweeps": ("contrasweep.folder.sweeps",),
    "contrasweep.driver": ("contrasweep.folder.driver",),
    "contrasweep.relocation": ("contrasweep.folder.relocation",),
    "contrasweep.sweep_storage": ("contrasweep.folder.sweep_storage",),
    "contrasweep.cleanup": ("contrasweep.folder.cleanup",),
    "contrasweep.tracking": ("contrasweep.tracking.tracker", "contrasweep.tracking.store", "contrasweep.folder.record"),
    "contrasweep.aggregate": ("contrasweep.tracking.aggregate",),
    "contrasweep.describe": ("contrasweep.tracking.describe",),
    "contrasweep.models": ("contrasweep.tracking.models",),
    "contrasweep.runs_view": ("contrasweep.tracking.runs_view",),
    "contrasweep.reattach": ("contrasweep.tracking.reattach",),
    "contrasweep.ledger": ("contrasweep.tracking.ledger",),
    "contrasweep.study_search": ("contrasweep.search.study_search",),
    "contrasweep.study_storage": ("contrasweep.search.study_storage",),
    "contrasweep.group_asha": ("contrasweep.search.group_asha",),
    "contrasweep.repeat": ("contrasweep.search.repeat",),
    "contrasweep.tune": ("contrasweep.run.tune", "contrasweep.run.shipping"),
    "contrasweep.executor": ("contrasweep.run.executor", "contrasweep.spec.trial"),
    "contrasweep.shipping": ("contrasweep.run.shipping",),
    "contrasweep.preflight": ("contrasweep.run.preflight",),
    "contrasweep.recovery": ("contrasweep.run.recovery",),
    "contrasweep.progress": ("contrasweep.console.progress",),
    "contrasweep.summary": ("contrasweep.console.summary",),
}


def attribute(old: str, name: str):
    """``name`` of the old module ``old``, from the first of its new homes that has it."""
    for home in HOMES.get(old, ()):
        module = importlib.import_module(home)
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {old!r} has no attribute {name!r}")


class _OldName(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: answers only for an old module name no file holds any more."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in HOMES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        return types.ModuleType(spec.name, f"moved: see {', '.join(HOMES[spec.name])}")

    def exec_module(self, module):
        module.__getattr__ = lambda name, old=module.__name__: attribute(old, name)


def install() -> None:
    if not any(isinstance(finder, _OldName) for finder in sys.meta_path):
        sys.meta_path.append(_OldName())
