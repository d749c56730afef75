"""What differs between the Optuna releases pyproject accepts (``optuna>=4.0,!=5.1.0``), for the
study searcher (``contrasweep.search.study_search``): the error of a write to a finished trial,
and whether a sampler can be saved for resume.

May import: Optuna, ``contrasweep.errors`` and the standard library.
"""

from __future__ import annotations

import pickle

from contrasweep.errors import UserError


def finished_trial_error() -> type[Exception]:
    """What Optuna's storages raise on a write to a finished trial: ``UpdateFinishedTrialError``
    from Optuna 4.3 on (a ``RuntimeError``), a plain ``RuntimeError`` before it."""
    import optuna.exceptions

    return getattr(optuna.exceptions, "UpdateFinishedTrialError", RuntimeError)


def savable(sampler):
    """``sampler`` if it pickles: the searcher saves it beside the study, so that a resumed sweep
    draws what an uninterrupted one would. Optuna 5.1.0's genetic samplers (NSGA-II, NSGA-III)
    hold a ``threading.Lock`` and do not pickle; pyproject excludes that release, and an
    environment that has it anyway gets one line before any trial starts."""
    import optuna

    try:
        pickle.dumps(sampler)
    except (TypeError, pickle.PicklingError, AttributeError) as error:
        raise UserError(
            f"optuna {optuna.__version__}'s {type(sampler).__name__} cannot be saved for resume ({error}); "
            "install another Optuna release (pip install 'optuna>=4.0,!=5.1.0')"
        ) from None
    return sampler
