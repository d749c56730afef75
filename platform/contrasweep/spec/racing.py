"""``sweep.racing``: spend a configuration's repeats only while they can change the decision
(docs/spec.md, "Racing"; the race itself: ``contrasweep.search.racing``).

``racing: {min_repeats: 3, alpha: 0.05}``: every configuration of a setting first runs
``min_repeats`` of its repeats (training seeds × data seeds × split seeds, the same list for
every configuration); then, round by round, a configuration significantly worse than the
round's best on their matched repeats (a one-sided paired t-test, Holm-corrected over the
round's comparisons, at ``alpha``) leaves the race, and the others run their next repeat.
Absent: every configuration runs every repeat.

May import: ``trainables.params``, ``contrasweep.errors``, ``contrasweep.spec.section``.
"""

from __future__ import annotations

from dataclasses import dataclass

from contrasweep.errors import SpecError
from contrasweep.spec.section import check_keys
from trainables.params import Param

RACING_PARAMS: dict[str, Param] = {
    "min_repeats": Param("int", 3, 2, 100000),  # a paired t-test needs two differences
    "alpha": Param("float", 0.05, 0.0, 0.5, low_open=True),
}


@dataclass(frozen=True)
class Racing:
    min_repeats: int = 3
    alpha: float = 0.05


def parse_racing(section, repeats: int) -> Racing | None:
    """``sweep.racing`` as written → a ``Racing`` (None where absent); ``repeats``: a
    configuration's repeats in one setting (``Sweep.setting_repeats``)."""
    if section is None:
        return None
    check_keys(section, RACING_PARAMS, "sweep.racing")
    racing = Racing(**{k: p.coerce(f"sweep.racing.{k}", section.get(k, p.default)) for k, p in RACING_PARAMS.items()})
    if repeats < 2:
        raise SpecError(
            f"sweep.racing needs at least 2 repeats per configuration, and this sweep runs {repeats}; "
            "allowed: more sweep.seeds (or data.seed / data.split_seed values), or no sweep.racing"
        )
    if racing.min_repeats > repeats:
        raise SpecError(
            f"sweep.racing.min_repeats={racing.min_repeats} is above the {repeats} repeats each configuration "
            f"runs (sweep.seeds × data.seed × data.split_seed); allowed: 2 to {repeats}"
        )
    return racing
