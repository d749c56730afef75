"""What differs between the supported versions of Optuna, Ray and MLflow, checked on the ones
installed (benchmarks/dependency_range.sh runs the Tune-facing tests per Ray version; the fast
loop at Optuna 4.0 and MLflow 3.10 is how pyproject's lower bounds were checked)."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from contrasweep.search.study_search import finished_trial_error


def test_a_write_to_a_finished_study_trial_raises_what_the_searcher_catches(tmp_path):
    """Optuna 4.3 added ``UpdateFinishedTrialError``; 4.0-4.2 raise a plain ``RuntimeError``.
    The searcher's tell catches either (a repeat told by another path a moment ago)."""
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}")
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    study.tell(trial, 1.0)
    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name("s"), trial.number)
    assert issubclass(finished_trial_error(), RuntimeError)
    with pytest.raises(finished_trial_error()):
        storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [2.0])
