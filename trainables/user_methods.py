"""A method named by its import path (docs/methods-own.md): ``package.module:Class``, a module
importable from the working directory or the Python path, or ``path/to/file.py:Class``, one
self-contained file (a spec's relative path is read from the spec's folder,
``contrasweep.spec.paths``). The loop builds it as it builds a built-in method
(``trainables.registry.get_method``); the spec checks it before Ray starts (``check_class``).

Where a trial process finds it: a file by its path when the path exists there (this machine),
else the module of the file's name, which a cluster's job ships as a ``py_modules`` entry
(``contrasweep.runner.shipping``) and an MLflow model carries in its ``code_paths``; a module by
its import path (the working directory is on every local worker's ``sys.path``, as Ray puts it
there; on a cluster the job ships the module's top-level package unless it is installed).

May import: ``trainables.errors``, ``trainables.params``; ``trainables.base`` (torch) inside
``check_class``, where a user's class is checked.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from trainables.errors import SpecError
from trainables.params import LOOP_PARAMS, Param

FORMS = "a built-in name, package.module:Class or path/to/file.py:Class"
LABEL_KINDS = ("single", "multi")
SERVING_OUTPUTS = ("probabilities", "similarities", "multilabel", "embedding")  # trainables.inference.OUTPUTS


_FROM_FILE: dict[str, Path] = {}  # module name -> the method file this process loaded it from


def is_reference(method: str) -> bool:
    """``module:Class`` or ``file.py:Class`` (a built-in name has no colon)."""
    return ":" in method


def parts(method: str) -> tuple[str, str]:
    """(module or file, class name) of a reference, or a one-line ``SpecError``."""
    where, _, attr = method.rpartition(":")
    if not where or not attr.isidentifier():
        raise SpecError(f"method {method!r} is not a method reference; allowed: {FORMS}")
    return where, attr


def is_file(where: str) -> bool:
    return where.endswith(".py")


def short_name(method: str) -> str:
    """What run names show: a built-in's name, a reference's class name."""
    return parts(method)[1] if is_reference(method) else method


def load_class(method: str):
    """The class a reference names (imported, not yet checked: ``check_class``)."""
    where, attr = parts(method)
    module = _from_file(where) if is_file(where) else _import(where)
    if not hasattr(module, attr):
        names = sorted(n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_"))
        raise SpecError(
            f"method {method!r}: module {module.__name__!r} has no {attr!r}; allowed: a class it defines "
            f"({', '.join(names[:8]) or 'it defines none'})"
        )
    return getattr(module, attr)


def source_file(method: str) -> Path:
    """The file a reference's class was loaded from (what a run's hash covers)."""
    where, _ = parts(method)
    if is_file(where) and Path(where).is_file():
        return Path(where).resolve()
    file = sys.modules[load_class(method).__module__].__file__
    assert file is not None
    return Path(file).resolve()


def shipped_sources(method: str) -> list[str]:
    """What another machine needs of a user's method (a cluster's ``py_modules``, an MLflow
    model's ``code_paths``): its file, or the folder (or file) of its module's top-level
    package; nothing for a built-in, or a package installed in site-packages (every machine
    must then have it installed)."""
    if not is_reference(method):
        return []
    where, _ = parts(method)
    if is_file(where):
        return [str(Path(os.path.expanduser(where)).resolve())]
    found = importlib.util.find_spec(where.split(".")[0])  # the spec's check imported it: it is on sys.path
    if found is None or not (found.submodule_search_locations or found.origin):
        return []
    location = found.submodule_search_locations[0] if found.submodule_search_locations else found.origin
    assert location is not None  # one of them is set (checked above)
    path = Path(location).resolve()
    return [] if {"site-packages", "dist-packages"} & set(path.parts) else [str(path)]


def _short(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 240 else text[:237] + "..."


def _from_file(where: str):
    path = Path(os.path.expanduser(where))
    name = path.stem
    if not path.is_file():  # a trial process on another node, or an MLflow model: the shipped module of that name
        try:
            return importlib.import_module(name)
        except ImportError:
            raise SpecError(
                f"method file {where!r} does not exist; allowed: a .py file (relative to the spec's "
                "folder, or absolute) that defines the method's class"
            ) from None
    if not name.isidentifier():
        raise SpecError(
            f"method file {where!r}: {name!r} is not a Python module name; allowed: a file name of "
            "letters, digits and '_' (not starting with a digit)"
        )
    loaded = sys.modules.get(name)
    if loaded is not None and name not in _FROM_FILE:  # a module of that name that is not a method file
        if Path(getattr(loaded, "__file__", "") or "").resolve() == path.resolve():
            return loaded
        raise SpecError(
            f"method file {where!r}: the module name {name!r} is already taken by "
            f"{getattr(loaded, '__file__', None) or 'a built-in module'}; allowed: rename the file"
        )
    if loaded is not None and _FROM_FILE[name] == path.resolve():
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)  # new, or another file of that name: (re)loaded
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        assert spec.loader is not None
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - whatever the user's module raises is one line
        sys.modules.pop(name, None)
        raise SpecError(
            f"method file {where!r} does not import ({_short(exc)}); allowed: a module Python imports"
        ) from None
    _FROM_FILE[name] = path.resolve()
    return module


def _import(where: str):
    cwd = os.getcwd()
    if cwd not in sys.path:  # "from the working directory", as `python -m` reads it (last: nothing shadowed)
        sys.path.append(cwd)
    try:
        return importlib.import_module(where)
    except BaseException as exc:  # noqa: BLE001 - an ImportError, or whatever the module raises
        raise SpecError(
            f"method module {where!r} does not import ({_short(exc)}); allowed: a module importable "
            "from the working directory or the Python path (PYTHONPATH)"
        ) from None


def check_class(method: str, cls, builtin: dict[str, str]) -> None:
    """Raise a one-line ``SpecError`` for each way a user's class cannot be a method: not a
    ``trainables.base.Method``, a ``params`` entry that is not a ``Param`` or whose default is
    none or outside its range, a name the loop's own parameters take, a symbol that is not one
    short word or that two hyperparameters would show as, an unknown ``label_kind``
    or ``serving_output``, no metric names, or a ``name`` that is a built-in method's."""
    from trainables.base import Method  # torch: a user's method imports it anyway

    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise SpecError(
            f"method {method!r} is not a trainables.base.Method subclass ({type(cls).__name__} "
            f"{getattr(cls, '__name__', cls)!r}); allowed: class X(trainables.base.Method)"
        )
    params = cls.params
    if not isinstance(params, dict):
        raise SpecError(
            f"method {method!r}: params is {type(params).__name__}; allowed: a dict of name -> trainables.params.Param"
        )
    for name, param in params.items():
        if not isinstance(param, Param):
            raise SpecError(
                f"method {method!r}: params[{name!r}] is {param!r}; allowed: a trainables.params.Param "
                "with a default, e.g. Param('float', 0.1, 0.0, 10.0)"
            )
        if name in LOOP_PARAMS:
            raise SpecError(
                f"method {method!r}: params[{name!r}] is one of the loop's own parameters; allowed: "
                f"another name (the loop's: {', '.join(sorted(LOOP_PARAMS))})"
            )
        if param.default is None:
            raise SpecError(
                f"method {method!r}: params[{name!r}] has no default; allowed: a default in its "
                f"range ({param.allowed()})"
            )
        try:
            param.coerce(name, param.default)
        except SpecError as exc:
            raise SpecError(
                f"method {method!r}: the default of params[{name!r}] is outside its range ({exc})"
            ) from None
        if not isinstance(param.symbol, str) or any(c.isspace() or c in "=,·" for c in param.symbol):
            raise SpecError(
                f"method {method!r}: params[{name!r}] has symbol={param.symbol!r}; allowed: a short name "
                "without spaces, '=', ',' or '·' (e.g. 'τ'), or none (its name is shown)"
            )
    shown = [p.symbol or n for n, p in params.items()] + list(LOOP_PARAMS)
    twice = next((s for s in shown if shown.count(s) > 1), None)
    if twice is not None:
        raise SpecError(
            f"method {method!r}: two hyperparameters would show as {twice!r} (a symbol is another's symbol "
            "or name); allowed: a symbol of its own for each"
        )
    if cls.label_kind not in LABEL_KINDS:
        raise SpecError(
            f"method {method!r}: label_kind={cls.label_kind!r}; allowed: 'single' (class ids) or "
            "'multi' (multi-hot, data.task: multilabel)"
        )
    if cls.serving_output not in SERVING_OUTPUTS:
        raise SpecError(
            f"method {method!r}: serving_output={cls.serving_output!r}; allowed: {', '.join(SERVING_OUTPUTS)}"
        )
    names = cls.metric_names
    if not names or isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise SpecError(
            f"method {method!r}: metric_names={names!r}; allowed: a non-empty tuple of metric names "
            "that evaluate() reports"
        )
    own = builtin.get(cls.name or "")
    if own is not None and own != f"{cls.__module__}:{cls.__qualname__}":
        raise SpecError(
            f"method {method!r} declares name={cls.name!r}, the built-in method's; allowed: a name of "
            f"its own (not {', '.join(sorted(builtin))}), or no name"
        )
