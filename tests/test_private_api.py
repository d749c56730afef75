"""No private API of Ray, Optuna, MLflow, datasets or transformers (issue 71).

An AST scan of every ``.py`` file under ``platform/``, ``trainables/`` and ``dashboards/`` lists
each *touch* of another library's private API, keyed ``"path:what"`` (stable across edits that
move lines):

(a) ``X._name`` (one leading underscore, not a dunder) where ``X`` is not ``self``/``cls`` and
    ``_name`` is not one the project defines (below): ``key = "path:_name"``. Inside a class
    with a base imported from a watched library, ``super()._name`` and ``self._name`` /
    ``cls._name`` where that class never defines ``_name`` itself (a method, a class attribute
    or an assignment to ``self._name``) count too: they reach the library's internals. So do
    ``getattr``/``hasattr``/``setattr``/``delattr`` with a constant ``"_name"`` on another object.
(b) an import of a module with a ``_``-prefixed component from a watched library, or of a
    ``_``-prefixed name from one: ``key = "path:import optuna.storages._cached_storage"``.
(c) a class whose base was imported from such a module or is such a name:
    ``key = "path:class Name(_Base)"``.
(d) a call of ``unittest.mock``'s ``patch``/``patch.object``/``patch.dict`` in the scanned code:
    patching a library's module globals (``key = "path:patch"``).

Allow rule for the project's own private names: first every ``_name`` the scanned code defines
as an attribute is collected (a method or class attribute in one of its class bodies, or an
assignment ``self._name = ...`` / ``cls._name = ...``), and ``X._name`` with such a name is not
flagged: ``stream._partial`` on the console's own ``_Filtered`` is the project's. A ``_name``
defined at a module's top level is allowed only as ``module._name`` where ``module`` was bound
by an import of a module not watched (so ``dd[s]._fingerprint`` stays flagged though
``multilabel/prepare.py`` has a function ``_fingerprint``). Any store ``X._name = ...`` on
another object is flagged whatever the name. The cost: a library private that shares an
attribute name the project defines goes unseen by rule (a); the import and subclass rules
(b, c) still see how a class with it was reached.

``EXCEPTIONS`` maps each touch still there to one sentence why; the test fails on a touch not
listed, on an entry that no longer occurs (stale) and on a why that is empty or says TODO.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("platform", "trainables", "dashboards")
WATCHED = ("ray", "optuna", "mlflow", "datasets", "transformers")
PATCHES = {"patch", "object", "dict", "multiple"}

_WARM = ("Ray 2.60 actor-cache internals (_ObjectCache, the controller's actor manager): warm_actors.py keeps a"
         " finished trial's actor for the next trial and a booting one for its trial (issue 54: a new worker every"
         " 4-5 s otherwise); Tune has no public hook for either, and on another Ray it does nothing (keep_warm)")
EXCEPTIONS: dict[str, str] = {
    "platform/contrasweep/search/warm_actors.py:_actor_cache": _WARM,
    "platform/contrasweep/search/warm_actors.py:_actor_manager": _WARM,
    "platform/contrasweep/search/warm_actors.py:_cached_objects": _WARM,
    "platform/contrasweep/search/warm_actors.py:_max_num_objects": _WARM,
    "platform/contrasweep/search/warm_actors.py:_num_cached_objects": _WARM,
    "platform/contrasweep/search/warm_actors.py:_started_actors": _WARM,
    "platform/contrasweep/search/warm_actors.py:_tune_controller": _WARM,
    "platform/contrasweep/search/warm_actors.py:class WarmActors(_ObjectCache)": _WARM,
    "platform/contrasweep/search/warm_actors.py:import ray.tune.utils.object_cache._ObjectCache": _WARM,
    "trainables/checkpoints.py:_core":
        "numpy 2's home of multiarray (np.core is its deprecated alias); numpy is outside issue 71's libraries and torch.load's weights_only allow-list needs the object itself",
    "trainables/checkpoints.py:_reconstruct":
        "numpy's array-unpickling global, which torch.load(weights_only=True) must be allowed by object; numpy has no public alias for it",
    "trainables/loop.py:_DropoutNd":
        "torch's common base of its dropout modules (torch is outside issue 71's libraries); the trainables own this check",
    "trainables/methods/supcl_seq.py:_DropoutNd":
        "torch's common base of its dropout modules (torch is outside issue 71's libraries); the trainables own this check",
}


# -- the scanner ----------------------------------------------------------------------------
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _watched(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in WATCHED


def defined_names(trees) -> set[str]:
    """Every ``_name`` the scanned code defines as an attribute (the allow rule of the module
    docstring): a method or class attribute of one of its classes, or ``self._name = ...``. Names
    a module defines at its top level count as well, but only for ``module._name`` where
    ``module`` is a name the file imported (``module_names``)."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(item.name)
                    elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
    return {n for n in names if _private(n)}


def module_names(trees) -> set[str]:
    """Every ``_name`` a scanned module defines at its top level (a def, a class, an assignment)."""
    names: set[str] = set()
    for tree in trees:
        for item in tree.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in names if _private(n)}


class _Scan(ast.NodeVisitor):
    def __init__(self, path: str, own: set[str], modules: set[str] = frozenset()):
        self.path, self.own, self.modules = path, own, modules
        self.local_imports: set[str] = set()  # names bound by an import of a module not watched
        self.found: set[str] = set()
        self.imported: dict[str, tuple[str, bool]] = {}  # local name -> (module.name, private?)
        self.classes: list[tuple[bool, set[str]]] = []  # (has a watched base, names it defines)
        self.mock_names: set[str] = set()

    def touch(self, what: str) -> None:
        self.found.add(f"{self.path}:{what}")

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _watched(alias.name):
                self.local_imports.add(alias.asname or alias.name.split(".")[0])
            if alias.name.split(".")[0] == "unittest" or alias.name == "mock":
                self.mock_names.add((alias.asname or alias.name).split(".")[0])
            if _watched(alias.name):
                private = any(_private(p) for p in alias.name.split("."))
                if private:
                    self.touch(f"import {alias.name}")
                self.imported[alias.asname or alias.name.split(".")[0]] = (alias.name, private)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module in ("unittest", "unittest.mock", "mock"):
            for alias in node.names:
                self.mock_names.add(alias.asname or alias.name)
        if not _watched(module):
            self.local_imports.update(alias.asname or alias.name for alias in node.names)
            return
        private_module = any(_private(p) for p in module.split("."))
        if private_module:
            self.touch(f"import {module}")
        for alias in node.names:
            private = private_module or _private(alias.name)
            if _private(alias.name) and not private_module:
                self.touch(f"import {module}.{alias.name}")
            self.imported[alias.asname or alias.name] = (f"{module}.{alias.name}", private)

    # classes
    def _base(self, base: ast.expr) -> tuple[bool, bool, str]:
        """(watched, private, text) of a base class expression."""
        text = ast.unparse(base)
        head = text.split(".")[0]
        if head in self.imported:
            module, private = self.imported[head]
            return True, private or any(_private(p) for p in text.split(".")[1:]), text
        return False, False, text

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        watched = False
        for base in node.bases:
            is_watched, private, text = self._base(base)
            watched = watched or is_watched
            if private:
                self.touch(f"class {node.name}({text})")
        own = set()
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                own.update(t.id for t in targets if isinstance(t, ast.Name))
            if isinstance(item, ast.FunctionDef):
                for stmt in ast.walk(item):  # attributes its own methods set (not += on the base's)
                    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        own.update(t.attr for t in targets if isinstance(t, ast.Attribute)
                                   and isinstance(t.value, ast.Name) and t.value.id == "self")
        self.classes.append((watched, own))
        self.generic_visit(node)
        self.classes.pop()

    # attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        if _private(name):
            value = node.value
            in_watched = bool(self.classes) and self.classes[-1][0]
            own_here = self.classes[-1][1] if self.classes else set()
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                if in_watched and name not in own_here:
                    self.touch(name)
            elif (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                  and value.func.id == "super"):
                if in_watched:
                    self.touch(name)
            elif isinstance(node.ctx, ast.Store) or not (
                    name in self.own or (isinstance(value, ast.Name) and value.id in self.local_imports
                                         and name in self.modules)):
                self.touch(name)  # a store on another's object is theirs, whoever defines the name
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        parts = ast.unparse(func).split(".")
        if parts[0] in self.mock_names and (parts[-1] in PATCHES or parts[-1] == "mock") and "patch" in parts:
            self.touch("patch")
        if (isinstance(func, ast.Name) and func.id in ("getattr", "hasattr", "setattr", "delattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and _private(node.args[1].value)
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
                and node.args[1].value not in self.own):
            self.touch(node.args[1].value)
        self.generic_visit(node)


def scan_source(source: str, path: str = "<source>", own: set[str] = frozenset(),
                modules: set[str] = frozenset()) -> set[str]:
    """The touches in one module's ``source`` (``own``, ``modules``: the project's private names)."""
    scan = _Scan(path, set(own), set(modules))
    scan.visit(ast.parse(source))
    return scan.found


def scan_project(root: Path = ROOT) -> set[str]:
    files = sorted(p for d in SCANNED for p in (root / d).rglob("*.py") if ".venv" not in p.parts)
    trees = {p: ast.parse(p.read_text(), str(p)) for p in files}
    own, modules = defined_names(trees.values()), module_names(trees.values())
    found: set[str] = set()
    for path, tree in trees.items():
        scan = _Scan(path.relative_to(root).as_posix(), own, modules)
        scan.visit(tree)
        found |= scan.found
    return found


# -- the tests ------------------------------------------------------------------------------
def problems(found: set[str], exceptions: dict[str, str]) -> list[str]:
    """What the test fails on: touches not listed, entries no longer found, entries without a why."""
    out = [f"new (use a public API, or list it in EXCEPTIONS with why): {k}" for k in sorted(found - exceptions.keys())]
    out += [f"stale (no longer occurs; remove it): {k}" for k in sorted(exceptions.keys() - found)]
    out += [f"no why: {k}" for k, why in sorted(exceptions.items()) if not why.strip() or "todo" in why.lower()]
    return out


def test_no_new_private_touch_and_no_stale_or_why_less_exception():
    found = problems(scan_project(), EXCEPTIONS)
    assert not found, "private API of Ray/Optuna/MLflow/datasets:\n" + "\n".join(found)


def test_the_check_fails_on_new_stale_and_why_less_entries():
    assert problems({"a.py:_x"}, {"a.py:_x": "a reason"}) == []
    assert problems({"a.py:_x", "b.py:_y"}, {"a.py:_x": "a reason"}) == [
        "new (use a public API, or list it in EXCEPTIONS with why): b.py:_y"]
    assert problems(set(), {"a.py:_x": "a reason"}) == ["stale (no longer occurs; remove it): a.py:_x"]
    assert problems({"a.py:_x", "b.py:_y"}, {"a.py:_x": " ", "b.py:_y": "TODO later"}) == [
        "no why: a.py:_x", "no why: b.py:_y"]


def test_scanner_finds_each_kind():
    source = '''
import ray._private.worker
from optuna.storages._cached_storage import _CachedStorage
from optuna.storages import RDBStorage, _CachedStorage as C2
from unittest import mock

class Mine(_CachedStorage):
    def __init__(self):
        self._ours = 1
    def read(self):
        super()._read_trials_from_remote_storage(1)
        return self._studies, self._ours

class Public(RDBStorage):
    def go(self):
        return super()._private_call()

def f(client, module):
    client._tracking_client.store
    with mock.patch.object(module, "uuid", None):
        pass
    return client._partial
'''
    found = scan_source(source, "m.py", own={"_partial"})
    assert found == {
        "m.py:import ray._private.worker",
        "m.py:import optuna.storages._cached_storage",
        "m.py:import optuna.storages._CachedStorage",
        "m.py:class Mine(_CachedStorage)",
        "m.py:_read_trials_from_remote_storage",
        "m.py:_studies",
        "m.py:_private_call",
        "m.py:_tracking_client",
        "m.py:patch",
    }


def test_scanner_leaves_the_projects_own_alone():
    source = '''
class _Filtered:
    def __init__(self):
        self._partial = ""
def g(stream):
    return stream._partial, stream.__class__, self_like._name, helpers._tool, ds._tool
def _tool():
    pass
'''
    trees = [ast.parse("import helpers\n" + source)]
    found = scan_source("import helpers\n" + source, "m.py", own=defined_names(trees), modules=module_names(trees))
    assert found == {"m.py:_name", "m.py:_tool"}  # ds._tool: a module's function is no attribute of ds
