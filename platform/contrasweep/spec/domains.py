"""A spec's search domains as typed objects (``search: {lr: {loguniform: [1.0e-5, 1.0e-4]}}``),
parsed and validated once where the spec is read, in the manner of Optuna's typed
distributions (``FloatDistribution(low, high, step, log)``): downstream code asks a domain what
it needs (does it hold a value, which values a check should try, its Optuna distribution, its
largest value) and never walks the spec's ``{kind: [args]}`` dicts. Bounds are inclusive, as
the spec says. A new kind of domain is one class here and one line in ``KINDS``.

May import: ``contrasweep.errors``, ``trainables.params``; Optuna only inside
``distribution()``, which the searcher calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from contrasweep.errors import SpecError
from trainables.params import Param, as_text

# a domain with at most this many values is checked value by value, a larger one at its bounds
CHECKED_VALUES = 1000


@dataclass(frozen=True)
class Range:
    """``[low, high]``: every real number between (``uniform``)."""

    low: float
    high: float
    kind: ClassVar[str] = "uniform"
    form: ClassVar[str] = "[low, high]"  # the arguments the spec gives

    @classmethod
    def parse(cls, where: str, key: str, args: list, param: Param) -> Range:
        if len(args) != cls.form.count(",") + 1:
            raise SpecError(f"{where}={args!r} is not allowed; allowed: {cls.form}")
        low, high = (param.coerce(where, v) for v in args[:2])
        if not low < high:
            raise SpecError(f"{where}={args!r} is not allowed; allowed: low < high")
        domain = cls(low, high, *cls._rest(where, args))
        domain.check(where, key, args, param)
        return domain

    @classmethod
    def _rest(cls, where: str, args: list) -> tuple:
        """The arguments after ``low, high``, coerced (none here)."""
        return ()

    def check(self, where: str, key: str, args: list, param: Param) -> None:
        """What this kind of range asks beyond ``low < high`` (none here)."""

    def args(self) -> list:
        return [self.low, self.high]

    def contains(self, value) -> bool:
        return self.low <= value <= self.high

    def first(self):
        return self.low

    def check_values(self) -> list:
        """The values a method's ``check`` tries: every value of a small discrete domain, else the bounds."""
        return [self.low, self.high]

    def largest(self):
        return self.high

    def distribution(self):
        from optuna.distributions import FloatDistribution

        return FloatDistribution(self.low, self.high)


@dataclass(frozen=True)
class LogRange(Range):
    """``loguniform: [low, high]``, ``0 < low``."""

    kind: ClassVar[str] = "loguniform"

    def check(self, where: str, key: str, args: list, param: Param) -> None:
        if self.low <= 0:
            raise SpecError(f"{where}={args!r} is not allowed; allowed: 0 < low < high")

    def distribution(self):
        from optuna.distributions import FloatDistribution

        return FloatDistribution(self.low, self.high, log=True)


@dataclass(frozen=True)
class SteppedRange(Range):
    """``quniform: [low, high, q]``: low, low + q, ... up to high."""

    step: float = 1.0
    kind: ClassVar[str] = "quniform"
    form: ClassVar[str] = "[low, high, q]"

    @classmethod
    def _rest(cls, where: str, args: list) -> tuple:
        return (Param("float", 1.0, 0.0, None, low_open=True).coerce(where + "[2]", args[2]),)

    def args(self) -> list:
        return [self.low, self.high, self.step]

    def check_values(self) -> list:
        count = int(round((self.high - self.low) / self.step)) + 1
        return [self.low + i * self.step for i in range(count)] if count <= CHECKED_VALUES else [self.low, self.high]

    def distribution(self):
        from optuna.distributions import FloatDistribution

        return FloatDistribution(self.low, self.high, step=self.step)


@dataclass(frozen=True)
class IntRange(Range):
    """``randint: [low, high]``: the integers from low to high, for an integer hyperparameter."""

    kind: ClassVar[str] = "randint"

    def check(self, where: str, key: str, args: list, param: Param) -> None:
        if param.kind != "int":
            raise SpecError(
                f"{where}: {key} is not an integer hyperparameter; allowed: uniform, loguniform, quniform, choice"
            )

    def check_values(self) -> list:
        count = int(self.high) - int(self.low) + 1
        return list(range(int(self.low), int(self.high) + 1)) if count <= CHECKED_VALUES else [self.low, self.high]

    def distribution(self):
        from optuna.distributions import IntDistribution

        return IntDistribution(int(self.low), int(self.high))


@dataclass(frozen=True)
class Choice:
    """``choice: [a, b, ...]`` (or a bare list): one of the options, in the spec's order."""

    options: tuple
    kind: ClassVar[str] = "choice"

    @classmethod
    def parse(cls, where: str, key: str, args: list, param: Param) -> Choice:
        if not args:
            raise SpecError(f"{where} is empty; allowed: a non-empty list of values")
        return cls(tuple(param.coerce(where, v) for v in args))

    def args(self) -> list:
        return list(self.options)

    def contains(self, value) -> bool:
        return value in self.options

    def first(self):
        return self.options[0]

    def check_values(self) -> list:
        return list(self.options)

    def largest(self):
        return max(self.options)

    def distribution(self):
        from optuna.distributions import CategoricalDistribution

        return CategoricalDistribution([as_text(v) for v in self.options])


Domain = Range | LogRange | SteppedRange | IntRange | Choice
KINDS: dict[str, type[Range] | type[Choice]] = {
    cls.kind: cls for cls in (Range, LogRange, SteppedRange, IntRange, Choice)
}


def parse_domain(key: str, domain, param: Param) -> Domain:
    """One search domain of the spec, validated: ``{kind: [args]}``, or a bare list (a choice)."""
    if isinstance(domain, list):  # a bare list is a categorical domain
        domain = {"choice": domain}
    if not isinstance(domain, dict) or len(domain) != 1 or next(iter(domain)) not in KINDS:
        raise SpecError(f"search.{key}={domain!r} is not allowed; allowed: one of {{{', '.join(KINDS)}: [...]}}")
    kind, args = next(iter(domain.items()))
    if not isinstance(args, list):
        raise SpecError(f"search.{key}.{kind}={args!r} is not allowed; allowed: a list")
    return KINDS[kind].parse(f"search.{key}.{kind}", key, args, param)


def as_spec(domain: Domain) -> dict:
    """The domain as the spec writes it (``{kind: [args]}``), for the saved spec and MLflow."""
    return {domain.kind: domain.args()}
