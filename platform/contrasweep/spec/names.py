"""One display name per hyperparameter (issue 70): what trial lines and MLflow run names
(``contrasweep.spec.identity``), the console's summary, ``contrasweep list`` and the report's
tables call it. A hyperparameter that declares a symbol (``trainables.params.Param.symbol``:
the built-ins' ``τ``, ``λ``, ... in ``trainables.methods.declarations``; a user's method its own)
shows as that symbol, any other by its name as written. MLflow's param keys stay the names
(``hp.temperature``): only what is read changes.

The method's declaration is read through ``trainables.registry.declaration``: torch-free for a
built-in, the user's class (its file imported) for a user's method. A method that no longer
loads (its file moved) shows its names as written.

May import: ``contrasweep.spec.text``, ``contrasweep.errors``; ``trainables.registry``,
``trainables.params`` (the torch-free declarations), ``trainables.user_methods`` (a short name).
"""

from __future__ import annotations

from contrasweep.errors import UserError
from contrasweep.spec.text import hp_text
from trainables.params import LOOP_PARAMS
from trainables.registry import declaration
from trainables.user_methods import short_name


def method_name(method: str) -> str:
    """What lines and tables call a method: a built-in's name, a user's by its class
    (``trainables.user_methods.short_name``); one that is no reference as written."""
    try:
        return short_name(method)
    except UserError:
        return method


def symbols(method: str) -> dict[str, str]:
    """name -> symbol of every hyperparameter of ``method`` (the loop's included) that declares one."""
    try:
        params = {**LOOP_PARAMS, **declaration(method).params}
    except UserError:  # a user's method that no longer loads here: its names as written
        return {}
    return {name: param.symbol for name, param in params.items() if getattr(param, "symbol", "")}


def hp_name(name: str, method: str, known: dict[str, str] | None = None) -> str:
    """``τ`` for LaCon's ``temperature``; a name without a symbol as written. ``known``: the
    method's ``symbols``, where the caller names many."""
    return (symbols(method) if known is None else known).get(name, name)


def hp_values(hp: dict, method: str, keys, sep: str = " ") -> str:
    """``τ=0.1 λ=0.5``: the values of ``keys`` that ``hp`` holds, by their display names."""
    known = symbols(method)
    return sep.join(f"{hp_name(k, method, known)}={hp_text(hp[k])}" for k in keys if k in hp)


def configuration_text(hp: dict, method: str, varied, fixed=()) -> str:
    """A configuration by the values that vary in its sweep (``τ=0.1, λ=0.5``); where none vary
    (one configuration), ``the spec's configuration`` with the values of the spec's ``fixed``
    keys it holds, never every default of the loop."""
    if any(k in hp for k in varied):
        return hp_values(hp, method, varied, ", ")
    values = hp_values(hp, method, fixed, ", ")
    return f"the spec's configuration ({values})" if values else "the spec's configuration (the method's defaults)"


def varied_keys(raw: dict) -> list[str]:
    """The hyperparameters a saved spec (``spec.yaml``) varies between configurations: its grid's
    keys (every block's) and its search domains', the training seed left out."""
    grid = raw.get("grid") or {}
    blocks = grid if isinstance(grid, list) else [grid]
    keys = [k for block in blocks if isinstance(block, dict) for k in block] + list(raw.get("search") or {})
    return [k for k in dict.fromkeys(keys) if k != "seed"]
