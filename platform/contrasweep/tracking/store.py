"""The MLflow store, the leaf every other part of tracking (and the dashboards) imports: the
client, the tag names the project writes, the default store locations, every run a filter
matches (paged: ``search_all``), trial runs by tag, and how a store failure reads in one line.
Imports only MLflow (lazily) and the standard library.
"""

from __future__ import annotations

import os
from pathlib import Path

PARENT_TAG = "mlflow.parentRunId"
KIND_TAG = "contrasweep.kind"  # "sweep", "configuration" or "trial"
SWEEP_RUN_TAG = "contrasweep.sweep_run"  # a trial run's sweep (parent) run, two levels up
CONFIG_KEY_TAG = "contrasweep.config_key"  # a trial run's config (re-attaching a trial Tune lost)
VARIANT_TAG = "contrasweep.variant"  # a trial run's data variant index
OUTCOME_TAG = "contrasweep.outcome"  # a trial run's end: "complete", "stopped" or "failed"
ELIMINATED = "eliminated"  # the outcome of a configuration a race dropped (contrasweep.search.racing; race.json too)
BUDGET_CUT = "budget"  # the outcome of a configuration whose other repeats the budget left unstarted (sweep.budget)
# an eliminated configuration run's round, Holm-adjusted p-value and the round's best configuration run
RACE_ROUND_TAG, RACE_P_VALUE_TAG, RACE_BEST_TAG = (
    "contrasweep.race.round",
    "contrasweep.race.p_value",
    "contrasweep.race.best",
)
GROUP_TAG = "contrasweep.group"  # a trial or configuration run's repeat group (contrasweep.spec.identity)
# a complete trial run's artifacts: its MLflow model (contrasweep.tracking.model_flavor), whose
# checkpoint holds the best weights and meta.json; the plain files of a run without a model
MODEL_PATH = "model"
CHECKPOINT_IN_MODEL = f"{MODEL_PATH}/artifacts/checkpoint"
CHECKPOINT_PATH = "best_checkpoint"


class StoreWriteError(RuntimeError):
    """The MLflow writer process could not apply a queued write (``contrasweep.tracking.writer``):
    its message is already the store's one line (``store_line``)."""


def store_errors() -> tuple[type[BaseException], ...]:
    """What the MLflow store raises when it cannot be written (a read-only or locked database,
    a vanished artifact folder, a server gone)."""
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import SQLAlchemyError

    return (MlflowException, SQLAlchemyError, OSError, StoreWriteError)


# Runs asked of MLflow per page (``search_all``): MLflow's SQL store and server accept up to
# 50,000; a page is one query, so fewer, larger pages cost less. A test sets it below a sweep's
# trial count to read a real sweep across pages.
PAGE_SIZE = 5000


def every_page(search, **kwargs) -> list:
    """What one of MLflow's paged searches (``client.search_runs``, ``search_experiments``,
    ``search_model_versions``) finds, every page: one call returns at most one."""
    found, token = [], None
    while True:
        page = search(max_results=PAGE_SIZE, page_token=token, **kwargs)
        found.extend(page)
        token = page.token
        if not token:
            return found


def search_all(client, experiment_ids: list[str], filter_string: str = "") -> list:
    """Every run ``filter_string`` matches, page by page, newest first.

    One ``search_runs`` call returns at most one page, so a read of a 15,000-trial sweep in one
    call saw its newest 5,000 runs only (issue 69). MLflow's stores sort by start time, then run
    id, and page by offset: a run started during the read moves the later pages by one, so a run
    seen twice is kept once (a repeat counted twice would weigh twice in its mean)."""
    found: dict[str, object] = {}  # run id -> its mlflow Run
    for run in every_page(client.search_runs, experiment_ids=experiment_ids, filter_string=filter_string):
        found.setdefault(run.info.run_id, run)
    return list(found.values())


def search_experiments_all(client) -> list:
    """Every active experiment (one call returns at most 1,000)."""
    return every_page(client.search_experiments)


def trial_runs(client, parent_run_id: str) -> list:
    """Every trial (repeat) run of a sweep (nested under its configuration runs: tagged with it)."""
    exp = client.get_run(parent_run_id).info.experiment_id
    return search_all(client, [exp], f"tags.`{SWEEP_RUN_TAG}` = '{parent_run_id}'")


def default_tracking_uri(workdir: str | os.PathLike | None = None) -> str:
    """An absolute sqlite URI (trials change directory, so a relative one would move)."""
    path = Path(workdir or os.getcwd()).resolve() / "mlflow.db"
    return f"sqlite:///{path}"


def default_artifact_root(workdir: str | os.PathLike | None = None) -> str:
    return (Path(workdir or os.getcwd()).resolve() / "mlartifacts").as_uri()


def artifact_root_for(tracking_uri: str) -> str | None:
    """Artifacts of a sqlite store go next to its file (MLflow's own default is ./mlruns of
    whatever directory the process runs in); a tracking server decides for itself."""
    if tracking_uri.startswith("sqlite:///"):
        return default_artifact_root(Path(tracking_uri[len("sqlite:///") :]).parent)
    return None


def get_client(tracking_uri: str):
    """The project's one way to an MLflow client. Against a tracking server MLflow's client prints
    two lines per run it ends ("View run … at", "View experiment at"), from the writer process
    straight to the terminal, past the console (tens of thousands in a paper's grid; the summary
    links the runs), and asks the server for the run once more to build them: its documented
    ``MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT`` turns both off here, a user's own value kept."""
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    return MlflowClient(tracking_uri=tracking_uri)


def ensure_experiment(client, name: str, artifact_root: str | None) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    return client.create_experiment(name, artifact_location=f"{artifact_root}/{name}" if artifact_root else None)


def error_line(text: str) -> str:
    """The last line of an error's text: the exception and its message (Ray prints the
    remote traceback first)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def store_line(exc: BaseException) -> str:
    """One line for an MLflow store failure (the database's own message, not MLflow's wrapping)."""
    if isinstance(exc, StoreWriteError):
        return str(exc)
    cause = exc
    for _ in range(10):  # the innermost cause: sqlite's or the OS's own words
        inner = cause.__cause__ or cause.__context__
        if inner is None:
            break
        cause = inner
    text = error_line(str(cause)) or type(cause).__name__
    return f"the MLflow store failed ({type(cause).__name__}: {text[:300]})"
