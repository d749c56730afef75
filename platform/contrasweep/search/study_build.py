"""The study searcher of an ``optuna`` or ``random`` sweep as a driver builds it anew from the
sweep's folder (``build``, called by ``contrasweep.search.optuna_search``): the sampler the
stage's last driver saved, the repeats the sweep's record calls unfinished, the paper's point,
the warm points and the race (``contrasweep.search.study_search.StudySearcher``).

May import: ``contrasweep.search.study_search``, ``contrasweep.search.study_race``,
``contrasweep.search.optuna_versions``, ``contrasweep.spec``, ``contrasweep.folder.race_record``,
``contrasweep.tracking.ledger`` (what is unfinished), ``trainables.params``.
"""

from __future__ import annotations

import pickle

from contrasweep.folder import race_record
from contrasweep.search.optuna_versions import savable
from contrasweep.search.study_race import StudyRace
from contrasweep.search.study_search import StudySearcher, distributions
from contrasweep.spec.identity import GroupKey
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import reported_point
from contrasweep.spec.trial import SUGGESTION, TRIAL_INDEX
from trainables.params import LOOP_PARAMS, as_text


def build(sweep, sweep_dir, max_concurrent: int, sampler, warm: list[dict] | None = None) -> StudySearcher:
    """The searcher of an ``optuna`` or ``random`` sweep (``contrasweep.search.optuna_search``):
    the sampler the stage's last driver saved, else ``sampler``; the repeats the record calls
    unfinished first."""
    from contrasweep.tracking import ledger

    path = sweep_dir.path / f"sampler-{sweep_dir.stage}.pkl"
    sampler = pickle.loads(path.read_bytes()) if path.exists() else savable(sampler)
    first = [
        (c[SUGGESTION], c[TRIAL_INDEX])
        for c in ledger.unfinished(sweep_dir.path / "tracking.json")
        if SUGGESTION in c and TRIAL_INDEX in c
    ]
    reported = reported_point(sweep)
    static = SweepStatic.of(sweep)
    return StudySearcher(
        distributions(sweep.domains),
        sweep.metric,
        sweep.mode,
        sampler,
        study_name=sweep_dir.name,
        storage_url=sweep_dir.optuna_uri,
        repeats=sweep.repeats,
        num_samples=sweep.num_samples,
        max_concurrent=max_concurrent,
        reported={k: as_text(v) for k, v in reported.items()} if reported else None,
        epochs=int(sweep.fixed.get("epochs", LOOP_PARAMS["epochs"].default)),
        max_steps=int(sweep.fixed.get("max_steps", LOOP_PARAMS["max_steps"].default)),
        warm=warm,
        race=StudyRace.of(sweep, static, GroupKey(static), str(sweep_dir.path / race_record.RACE_FILE))
        if sweep.racing
        else None,
        first=first,
        sampler_path=str(path),
    )
