"""The model registry: each setting's best configuration, represented by the MLflow model of
its best repeat (``contrasweep.tracking.model_flavor``), is registered under the sweep's name,
so a user loads it with ``mlflow.pyfunc.load_model("models:/<sweep>@best")`` (or serves it with
``mlflow models serve``) and a report with ``load_registered(uri, "<sweep>")``, without knowing
run ids. A run without a model (sweeps before models were) registers its plain checkpoint files.

"Best repeat": among the selected group's repeats (``contrasweep.tracking.aggregate.select``: best mean
validation metric), the one with the best validation value itself. Test metrics never choose.
Each version carries its setting and data as tags; the alias ``best`` (one setting) or
``best-<setting>`` points at it.
"""

from __future__ import annotations

import json
import re

from contrasweep.tracking.artifacts import logged_weights
from contrasweep.tracking.store import CHECKPOINT_PATH, MODEL_PATH, every_page, get_client
from trainables.errors import UserError

SETTING_TAG = "contrasweep.setting"
DATA_TAG = "contrasweep.data"


def alias_for(setting: str) -> str:
    """MLflow aliases allow letters, digits, ``_`` and ``-``."""
    return "best" if not setting else "best-" + re.sub(r"[^A-Za-z0-9_-]+", "-", setting.replace("=", "")).strip("-")


def register(
    client, name: str, run_id: str, setting: str, data: dict, description: str, tags: dict[str, str] | None = None
) -> str:
    """A new version of model ``name`` from ``run_id``'s best checkpoint, with ``tags`` besides
    its setting and data; returns its version."""
    from mlflow.exceptions import MlflowException

    try:
        client.create_registered_model(
            name, tags={"contrasweep.sweep": name}, description=f"Best configurations of sweep {name!r} (contrasweep)."
        )
    except MlflowException as exc:
        if "RESOURCE_ALREADY_EXISTS" not in str(exc.error_code):
            raise
    folder = MODEL_PATH if logged_weights(client, run_id) != CHECKPOINT_PATH else CHECKPOINT_PATH
    # the folder where the run's artifacts are (mlartifacts/..., mlflow-artifacts:/... behind a
    # server), not ``runs:/``: a tracking server reads the version's MLmodel (the UI's schema)
    # only from a location it serves itself
    source = client.get_run(run_id).info.artifact_uri.rstrip("/") + "/" + folder
    version = client.create_model_version(
        name,
        source=source,
        run_id=run_id,
        description=description,
        tags={SETTING_TAG: setting, DATA_TAG: json.dumps(data, sort_keys=True, default=str), **(tags or {})},
    ).version
    client.set_registered_model_alias(name, alias_for(setting), version)
    return str(version)


def has_checkpoint(client, run_id: str) -> bool:
    return logged_weights(client, run_id) is not None


def registered_versions(client, name: str) -> list:
    """The versions of model ``name``, newest first ([] when it was never registered)."""
    return sorted(
        every_page(client.search_model_versions, filter_string=f"name = '{name}'"), key=lambda v: -int(v.version)
    )


def resolve(client, name: str, version: str | None = None):
    """The ``ModelVersion`` of ``name`` at ``version`` (a number or an alias; by default the
    alias ``best``, else the newest version)."""
    found = registered_versions(client, name)
    if not found:
        raise UserError(f"no registered model {name!r} in {client.tracking_uri}; allowed: the name of a finished sweep")
    aliases = dict(client.get_registered_model(name).aliases)  # alias -> version (search results carry none)
    if version is None:
        version = "best" if "best" in aliases else str(found[0].version)
    number = aliases.get(str(version), str(version))
    chosen = next((v for v in found if str(v.version) == str(number)), None)
    if chosen is None:
        allowed = sorted({str(v.version) for v in found} | set(aliases))
        raise UserError(f"model {name!r} has no version or alias {version!r}; allowed: {', '.join(allowed)}")
    return chosen


def download(tracking_uri: str, model_version, dst_path: str | None = None) -> str:
    """A local folder with the version's checkpoint (its model's ``artifacts/checkpoint``, or the
    plain ``best_checkpoint`` files of an older run): fetched from the run's artifacts (the
    registry client would look the model up under the global registry URI, not ``tracking_uri``)
    into ``dst_path``, else a temporary folder of MLflow's that stays (the caller's to remove)."""
    import mlflow

    folder = logged_weights(get_client(tracking_uri), model_version.run_id) or CHECKPOINT_PATH
    return mlflow.artifacts.download_artifacts(
        run_id=model_version.run_id, artifact_path=folder, tracking_uri=tracking_uri, dst_path=dst_path
    )


def checkpoint_dir(tracking_uri: str, name: str, version: str | None = None) -> str:
    """A local folder holding the checkpoint of ``name`` at ``version`` (see ``resolve``)."""
    return download(tracking_uri, resolve(get_client(tracking_uri), name, version))


def load_registered(tracking_uri: str, name: str, version: str | None = None):
    """The registered method, rebuilt by ``trainables.loop.load_trained`` (eval mode, CPU) from a
    download removed once loaded."""
    import tempfile

    from trainables.loop import load_trained  # torch and transformers: only where a model is loaded

    with tempfile.TemporaryDirectory(prefix="contrasweep-model-") as folder:
        return load_trained(download(tracking_uri, resolve(get_client(tracking_uri), name, version), folder))
