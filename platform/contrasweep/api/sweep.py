"""``load`` and ``Sweep``: one sweep read back for analysis (``contrasweep.load``): its status, spec and
settings, its trials and configurations as pandas DataFrames (``contrasweep.api.frames``), the
per-epoch history of a metric, its registered best model and encoder, its report, and a paired
comparison with other sweeps. It reads MLflow and the sweep's folder only (no Ray, no GPU), and
every trial the sweep's runs hold, however many drivers (``resume``, ``extend``) ran them.

May import: pandas, mlflow, ``contrasweep.errors``, ``contrasweep.spec`` (a sweep name's rule),
``contrasweep.folder``, ``contrasweep.tracking``,
``contrasweep.api.frames``, ``dashboards`` (the sweep's record, the report, the comparison).
"""

from __future__ import annotations

import html
import tempfile
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from contrasweep.api import frames
from contrasweep.errors import UserError
from contrasweep.folder import sweeps
from contrasweep.folder.record import read as read_record
from contrasweep.spec.load import _name
from contrasweep.tracking.credentials import check_uri
from contrasweep.tracking.model_flavor import SENTENCE_TRANSFORMER
from contrasweep.tracking.models import alias_for, resolve
from contrasweep.tracking.store import MODEL_PATH, default_tracking_uri, get_client, trial_runs
from dashboards.source import SweepRecord
from dashboards.source import load as load_record

if TYPE_CHECKING:
    from mlflow.pyfunc import PyFuncModel

# an MLflow sweep run's status as a sweep folder says it (a sweep read from the store alone)
RUN_STATUS = {"RUNNING": "running", "FINISHED": "finished", "FAILED": "failed", "KILLED": "interrupted"}


class Sweep:
    """A sweep to read (made by ``contrasweep.load``; ``run``, ``resume`` and ``extend`` return one).

    Tables are read once and kept; ``refresh()`` reads them again (a sweep still running).

    Attributes:
        name: The sweep's name.
        tracking_uri: The MLflow store its runs are in.
        folder: Its folder on this machine; None for a sweep read from the store alone.
    """

    def __init__(self, name: str, tracking_uri: str, folder: Path | None = None, run_id: str | None = None) -> None:
        self.name = name
        self.tracking_uri = tracking_uri
        self.folder = folder
        self._run_id = run_id

    @cached_property
    def _record(self) -> SweepRecord:
        """What ``contrasweep report`` reads: the sweep run, spec, repeat groups, verdicts, race and budget cut."""
        return load_record(self.tracking_uri, self.name, self._run_id)

    @property
    def run_id(self) -> str:
        """The sweep's (parent) MLflow run."""
        return str(self._record.parent.info.run_id)

    @property
    def status(self) -> str:
        """``running``, ``finished``, ``interrupted`` (``resume`` continues it), ``failed`` or
        ``damaged``: its folder's, else its sweep run's."""
        if self.folder is not None:
            return sweeps.SweepDir(self.folder).status()
        return RUN_STATUS.get(self._record.parent.info.status, "?")

    @property
    def spec(self) -> dict[str, Any]:
        """The spec it ran (its ``spec.yaml``, overrides applied)."""
        return self._record.spec

    @property
    def method(self) -> str:
        return self._record.method

    @property
    def metric(self) -> str:
        """The selection metric (``sweep.metric``'s first), e.g. ``val/accuracy``."""
        return self._record.metric

    @property
    def settings(self) -> list[str]:
        """Its settings (values of the data's setting axes, e.g. ``k=10``), in the order they first ran;
        ``[""]`` for a sweep of one setting."""
        return list(dict.fromkeys(g.setting for g in self._record.groups)) or [""]

    def refresh(self) -> Sweep:
        """Forget what was read, so the next table reads MLflow again; returns the sweep."""
        for key in ("_record", "_trials"):
            self.__dict__.pop(key, None)
        return self

    @cached_property
    def _trials(self) -> pd.DataFrame:
        return frames.trial_rows(trial_runs(get_client(self.tracking_uri), self.run_id))

    def trials(self) -> pd.DataFrame:
        """One row per trial (an MLflow trial run), oldest first.

        Returns:
            ``run_id``, ``trial_id``, ``name``, ``group`` (its repeat group), ``config``,
            ``setting``, ``variant`` (data variant), ``data_seed``, ``split_seed``, ``seed``
            (training), ``status`` (MLflow's), ``outcome`` (``complete``, ``stopped`` by ASHA,
            ``failed``), ``best_epoch``, ``last_epoch``, ``start_time``, ``end_time``,
            ``duration_s``, each ``hp.*`` and ``data.*`` value, and every final metric by its
            MLflow name (``best/val/accuracy``, ``test/accuracy``, ``cost/train_s``, ...).
        """
        return self._trials.copy()

    def configurations(self) -> pd.DataFrame:
        """One row per configuration in each setting (a repeat group), in the order they started.

        Returns:
            ``group``, ``config``, ``setting``, each ``hp.*`` value, ``repeats_expected``,
            ``repeats``, ``repeats_complete``, ``repeats_stopped``, ``repeats_failed``,
            ``complete``, ``selected``, ``learned``, ``learned_p``, ``raced_out``,
            ``race_round``, ``race_p``, ``budget_cut``, and ``mean/<m>``, ``std/<m>``, ``n/<m>``
            of every final metric ``m`` over its repeats (docs/api.md, "Sweep").
        """
        return frames.configuration_rows(self._record)

    def selected(self) -> pd.DataFrame:
        """Each setting's selected configuration (``configurations()``'s rows with ``selected``):
        the best mean of ``best/<metric>`` over a complete repeat group; test metrics never choose."""
        found = self.configurations()
        return found[found["selected"]].reset_index(drop=True) if len(found) else found

    def history(self, metric: str, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """The per-epoch values of a metric, one MLflow request per trial.

        Args:
            metric: An MLflow metric name (``val/accuracy``, ``train/loss``, ...).
            run_ids: Only these trials (``trials()``' ``run_id``); default every trial.

        Returns:
            One row per (trial, epoch): ``run_id``, ``group``, ``setting``, ``seed``, ``variant``,
            ``metric``, ``step`` (the epoch), ``value``, ``timestamp``.

        Raises:
            UserError: a run id that is not one of the sweep's trials.
        """
        chosen = self.trials()
        if run_ids is not None:
            wanted = set(run_ids)
            unknown = wanted - set(chosen["run_id"])
            if unknown:
                raise UserError(
                    f"run_ids {sorted(unknown)} are not trials of sweep {self.name!r}; allowed: "
                    "values of its trials()' run_id column"
                )
            chosen = chosen[chosen["run_id"].isin(wanted)]
        client = get_client(self.tracking_uri)
        found = {run_id: client.get_metric_history(run_id, metric) for run_id in chosen["run_id"]}
        return frames.history_rows(chosen, metric, found)

    def _version(self, setting: str | None, version: str | None) -> Any:
        """The registered version of ``setting``'s best model (``contrasweep.tracking.models``)."""
        if version is None:
            settings = self.settings
            if setting is None and len(settings) > 1:
                raise UserError(
                    f"sweep {self.name!r} has {len(settings)} settings, each with its best model; allowed: "
                    "setting=" + " | ".join(repr(s) for s in settings)
                )
            version = alias_for(setting if setting is not None else settings[0])
        return resolve(get_client(self.tracking_uri), self.name, version)

    def best_model(self, setting: str | None = None, version: str | None = None) -> PyFuncModel:
        """The registered MLflow model of a setting's best configuration (its best repeat's weights),
        loaded as a pyfunc: ``.predict(pandas.DataFrame({"text": [...]}))``.

        Args:
            setting: Which setting's model, for a sweep of several (``settings``).
            version: A registered version number or alias instead (``best``, ``best-k10``).

        Raises:
            UserError: no model is registered under the sweep's name (a sweep not finished), or
                the sweep has several settings and none was named.
        """
        import mlflow.artifacts
        import mlflow.pyfunc

        chosen = self._version(setting, version)
        with tempfile.TemporaryDirectory(prefix="contrasweep-model-") as folder:  # loaded into memory, then removed
            path = mlflow.artifacts.download_artifacts(
                run_id=chosen.run_id, artifact_path=MODEL_PATH, tracking_uri=self.tracking_uri, dst_path=folder
            )
            return mlflow.pyfunc.load_model(path)

    def encoder(self, setting: str | None = None, version: str | None = None, dst: str | Path | None = None) -> Path:
        """The sentence-transformers folder of a representation method's best model (SimCSE,
        VaSCL): ``SentenceTransformer(str(sweep.encoder())).encode([...])``.

        Args:
            setting: As for ``best_model``.
            version: As for ``best_model``.
            dst: Where to put it; default a new temporary folder (the caller's to remove).

        Raises:
            UserError: the sweep's model has no such folder (a classifier), or as ``best_model``.
        """
        import mlflow.artifacts

        chosen = self._version(setting, version)
        where = str(dst) if dst is not None else tempfile.mkdtemp(prefix=f"contrasweep-{self.name}-encoder-")
        try:
            path = mlflow.artifacts.download_artifacts(
                run_id=chosen.run_id,
                artifact_path=f"{MODEL_PATH}/artifacts/{SENTENCE_TRANSFORMER}",
                tracking_uri=self.tracking_uri,
                dst_path=where,
            )
        except Exception as exc:  # noqa: BLE001 - MLflow raises OSError or MlflowException by store
            raise UserError(
                f"sweep {self.name!r}'s model (method {self.method}) has no sentence-transformers folder "
                f"({type(exc).__name__}); allowed: a sweep of a representation method (simcse, vascl)"
            ) from None
        return Path(path)

    def report(
        self,
        out: str | Path | None = None,
        compare: Iterable[Sweep | str] = (),
        baseline: str | None = None,
        tsne: bool = True,
    ) -> Path:
        """Write the report ``contrasweep report`` writes (HTML, CSV, figures; logged to the sweep
        run as ``report/`` where the user may) and return the HTML file's path.

        Args:
            out: Its folder; default ``<sweep folder>/report`` (``report-<name>`` without one).
            compare: Other sweeps (or their names, in the same store) for ``--compare``.
            baseline: The sweep the others are compared with (``--baseline``).
            tsne: Draw the t-SNE figure (``--no-tsne``: False).
        """
        from dashboards.report import build  # scipy, matplotlib: only where a report is built

        others = [self._other(o) for o in compare]
        if out is None:
            out = self.folder / "report" if self.folder is not None else Path(f"report-{self.name}")
        ids = {s.name: s.run_id for s in [self, *others]}
        built = build(
            self.tracking_uri,
            self.name,
            out,
            compare=tuple(s.name for s in others),
            baseline=baseline,
            tsne=tsne,
            run_ids=ids,
        )
        return Path(built.html_path)

    def compare(self, *others: Sweep | str, baseline: str | None = None) -> pd.DataFrame:
        """The report's main table as a frame: each sweep's selected configuration per setting,
        compared with the baseline sweep over matched repeats (``report --compare``).

        Args:
            others: Sweeps (or names of sweeps in the same store) to set beside this one.
            baseline: The sweep the others are compared with; default the first ``ce`` sweep, else this one.

        Returns:
            One row per (sweep, setting): ``sweep``, ``method``, ``column`` (dataset and setting),
            ``metric``, ``mean``, ``std``, ``n``, ``p_value`` (two-sided Wilcoxon over matched
            repeats; NaN under 2 of them), ``matched``, ``left_out``, ``difference`` (this − baseline), ``ci_low``,
            ``ci_high`` (paired t-interval at 1 − ``evaluation.alpha``), ``min_p`` (the smallest
            p that many repeats can give), ``decidable``, ``baseline``, ``did_not_learn``,
            ``chance``, ``hp``. The baseline's own rows hold None in the comparison's columns.
        """
        from dashboards import tables
        from dashboards.report import pick_baseline

        records = [self._record, *(self._other(o)._record for o in others)]
        base, _ = pick_baseline(records, baseline)
        found = pd.DataFrame(tables.main_table(records, base).records)
        empty = [c for c in ("p_value", *tables.NO_COMPARISON) if c in found.columns]  # the baseline's own row: ""
        return found.astype({c: object for c in empty}).replace({c: {"": None} for c in empty})

    def _other(self, other: Sweep | str) -> Sweep:
        if isinstance(other, Sweep):
            return other
        return load(other, self.folder.parent if self.folder is not None else None, self.tracking_uri)

    def __repr__(self) -> str:
        return f"Sweep({self.name!r}, tracking_uri={self.tracking_uri!r})"

    def _repr_html_(self) -> str:
        """A notebook's display: the sweep's status and each setting's selected configuration."""
        shown = self.selected()
        keep = [c for c in shown.columns if c in ("setting",) or c.startswith("hp.") and _varies(self, c)]
        keep += [c for c in (f"mean/best/{self.metric}", f"std/best/{self.metric}") if c in shown.columns]
        test = "mean/test/" + self.metric.split("/", 1)[-1]
        keep += [c for c in (test, "std" + test[4:], "learned") if c in shown.columns]
        head = f"<p><b>{html.escape(self.name)}</b>: {html.escape(self.method)}, {html.escape(self.status)}, "
        head += f"{len(self._trials)} trials, selected by {html.escape(self.metric)}</p>"
        return head + shown[keep].to_html(index=False)


def load(name: str, root: str | Path | None = None, tracking_uri: str | None = None) -> Sweep:
    """Sweep ``name``, to read its trials, configurations, models and report.

    Args:
        name: The sweep's name, as ``contrasweep list`` shows it.
        root: The sweeps folder (``--root``; default ``$CONTRASWEEP_HOME`` or ``./sweeps``).
        tracking_uri: The MLflow store it was tracked in; default: the one its folder recorded,
            else ``sqlite:///<cwd>/mlflow.db``. A sweep whose folder is not on this machine is
            found in that store by its name.

    Returns:
        The sweep. Nothing is read until a table or property asks for it.

    Raises:
        UserError: ``name`` is not a sweep name, the URI carries a password, or no sweep of
            that name is in the folder or the store (raised by the first read).
    """
    _name(name)  # a name, never a path (no reading outside the root)
    check_uri(tracking_uri)
    base = sweeps.sweeps_root(None if root is None else str(root))
    folder = sweeps.SweepDir(base / name)
    meta = folder.meta()
    uri = tracking_uri or meta.get("tracking_uri") or default_tracking_uri()
    return Sweep(name, uri, folder.path if meta else None, run_ids(base, [name], uri).get(name))


def run_ids(root: Path, names: list[str], uri: str) -> dict[str, str]:
    """Each named sweep's run, as its folder's record names it (tracked in ``uri``): read by id;
    a sweep without a folder here is found by its tags."""
    found = {}
    for name in names:
        _name(name)
        folder = sweeps.SweepDir(root / name)
        if folder.meta().get("tracking_uri") == uri:
            run_id = read_record(folder.path / "tracking.json").get("parent_run_id")
            if run_id:
                found[name] = run_id
    return found


def _varies(sweep: Sweep, column: str) -> bool:
    """Whether hyperparameter ``column`` (``hp.<name>``) is one the sweep varied."""
    return column[3:] in sweep._record.varied
