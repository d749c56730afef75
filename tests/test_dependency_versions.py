"""What differs between the supported versions of Optuna, Ray and MLflow, checked on the ones
installed (benchmarks/dependency_range.sh runs the Tune-facing tests per Ray version; the fast
loop at Optuna 4.0 and MLflow 3.10 is how pyproject's lower bounds were checked)."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from contrasweep.errors import UserError
from contrasweep.search.optuna_versions import finished_trial_error, savable


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


@pytest.mark.parametrize("sampler", [
    lambda: optuna.samplers.TPESampler(seed=0), lambda: optuna.samplers.RandomSampler(seed=0),
    lambda: optuna.samplers.NSGAIISampler(seed=0)], ids=["tpe", "random", "nsga2"])
def test_every_sampler_the_searchers_build_pickles_on_the_installed_optuna(sampler):
    """The searcher saves its sampler beside the study (a resumed sweep draws what an
    uninterrupted one would); Optuna 5.1.0's NSGA-II holds a lock and does not pickle, which
    pyproject excludes. A release that breaks this again fails here, not in a sweep."""
    import pickle

    built = sampler()
    assert savable(built) is built
    again = pickle.loads(pickle.dumps(built))
    assert type(again) is type(built)


def test_a_sampler_that_cannot_be_saved_is_one_line_naming_the_release_to_install():
    import threading

    class Locked(optuna.samplers.RandomSampler):
        def __init__(self):
            super().__init__(seed=0)
            self.lock = threading.Lock()

    with pytest.raises(UserError, match=r"Locked cannot be saved for resume .*optuna>=4.0,!=5.1.0") as raised:
        savable(Locked())
    assert "\n" not in str(raised.value)
