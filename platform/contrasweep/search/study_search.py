"""The searcher of ``optuna`` and ``random`` sweeps: Optuna's ask/tell over the sweep's study,
with repeats (docs/architecture.md, "Resume").

One *suggestion* is one trial of the Optuna study in ``<sweep>/optuna.db``. It runs as
``repeats`` Tune trials (training seeds fastest, then data variants: ``__trial_index__``, read
by ``contrasweep.runner.executor``), each carrying the suggestion's number (``__suggestion__``). When
every repeat has ended the study is told once: COMPLETE with the mean over the repeats of what
the selection ranks them by (each metric's ``aggregate.selection_key``: a validation metric's
best epoch's value, not its last epoch's; ``told``), PRUNED when group ASHA stopped a repeat (an
intermediate value, that mean as reached, goes first for a single objective), FAIL when a repeat
failed for good. A repeat recorded by a driver before issue 69 without that value is told its
last epoch's. ``resume`` retries a failed
repeat (MLflow gets its result), but the study keeps FAIL: Optuna cannot reopen a finished trial.

Why not Ray's ``OptunaSearch`` under ``Repeater`` and ``ConcurrencyLimiter``: their memory is
the copy Tune pickles into its experiment state every few seconds. A driver killed after a
trial ended but before that copy was written restored a searcher that did not know the trial
had ended: finished suggestions were replayed, results were told twice to trials the study had
already finished (``UpdateFinishedTrialError``), and suggestions made after the copy were drawn
again. Here the study is the memory, written as things happen: each repeat's outcome and values
are user attributes of its study trial (``repeat.<i>``) the moment Tune reports it, and a tell
checks the stored state first, so it happens exactly once whatever was replayed. Every driver
builds this object anew (``runner.tune``: Tune's copy is never read back): ``_reconcile`` issues
the repeats of open suggestions that have not ended, first those the sweep's record calls
unfinished (``first``: their end may be in the study and not in the record, a kill between the
two), and tells a suggestion whose repeats had all ended before the kill. The sampler (its
random state) is saved beside the study after each ask (``sampler_path``, one file per stage of
the sweep: an extension reseeds it), so a resumed driver draws on where the last one stopped.
The budget is counted in the study: suggestions made before a kill are kept, never drawn again.

With ``sweep.racing`` a suggestion runs only the repeats its race asks for
(``contrasweep.search.study_race``), and is told once it has left the race or run them all.

The searcher as a driver builds it from the sweep's folder: ``contrasweep.search.study_build``;
what the study is told of a repeat: ``contrasweep.search.study_tell``.

May import: Optuna, Ray Tune's ``Searcher``, ``contrasweep.spec`` (the config keys a
trial reads, the objectives), ``contrasweep.folder`` (a moved folder), ``contrasweep.search.study_storage``,
``contrasweep.search.optuna_versions``, ``contrasweep.search.warm_start`` (warm points as trials),
``contrasweep.search.study_race``, ``contrasweep.search.base`` (the hand-out gate),
``contrasweep.folder.record`` (a whole write), ``contrasweep.tracking.aggregate`` (what a repeat
is judged by).
"""

from __future__ import annotations

import logging
import math
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from ray.tune.search import Searcher

from contrasweep.folder.record import write_whole
from contrasweep.folder.relocation import here_uri
from contrasweep.search.base import held_back
from contrasweep.search.optuna_versions import finished_trial_error
from contrasweep.search.study_race import RACE_PREFIX, REPEAT_PREFIX, StudyRace, recorded
from contrasweep.search.study_tell import nanmean, number_or_none, told
from contrasweep.search.warm_start import WARM_ATTR, warm_trials
from contrasweep.spec.objective import objectives
from contrasweep.spec.trial import SUGGESTION, TRIAL_INDEX
from contrasweep.tracking.aggregate import ran_every_epoch, selection_key

if TYPE_CHECKING:
    from optuna import Study

    from contrasweep.search.study_storage import SoleWriterStorage

logger = logging.getLogger(__name__)

REPEAT_ATTR = REPEAT_PREFIX + "{}"  # a study trial's user attribute: one repeat's outcome and values


def distributions(domains: dict) -> dict:
    """The spec's search domains (``contrasweep.spec.domains``) as Optuna distributions."""
    return {key: domain.distribution() for key, domain in domains.items()}


class StudySearcher(Searcher):
    """Suggestions from an Optuna study, each run ``repeats`` times and told once.

    ``metrics``/``modes``: one or several (NSGA-II); ``num_samples``: suggestions in all;
    ``max_concurrent``: Tune trials live at once; ``reported``: the paper's point, asked first
    (enqueued once, when the study is new); ``epochs``, ``max_steps``: the budget of a trial that
    does not search them (a repeat that ended below its budget was stopped by the scheduler; a
    ``max_steps`` budget is judged by the ``train/steps`` the repeat reported); ``first``: the
    (suggestion, repeat) pairs the sweep's record calls unfinished; ``sampler_path``: where the
    sampler is saved after each ask (None: nowhere)."""

    def __init__(
        self,
        space: dict,
        metrics: list[str],
        modes: list[str],
        sampler,
        study_name: str,
        storage_url: str,
        repeats: int,
        num_samples: int,
        max_concurrent: int,
        reported: dict | None = None,
        epochs: int = 1,
        warm: list[dict] | None = None,
        race: StudyRace | None = None,
        max_steps: int = 0,
        first=(),
        sampler_path: str | None = None,
    ):
        # Ray's Searcher takes a list of metrics and modes for several objectives (as its OptunaSearch does)
        super().__init__(
            metric=metrics if len(metrics) > 1 else metrics[0],  # type: ignore[arg-type]  # (above)
            mode=modes if len(modes) > 1 else modes[0],  # type: ignore[arg-type]  # (above)
        )
        self.space, self.metrics, self.modes, self.sampler = space, list(metrics), list(modes), sampler
        self.study_name, self.storage_url = study_name, storage_url
        self.repeats, self.num_samples, self.max_concurrent = repeats, num_samples, max_concurrent
        self.reported, self.epochs, self.max_steps = reported, epochs, max_steps
        self.warm = list(warm or [])  # earlier sweeps' points (search.warm_start), added once to a new study
        self.race = race  # sweep.racing (contrasweep.search.study_race): which repeats a suggestion runs
        self.live: dict[str, tuple[int, int]] = {}  # Tune trial id -> (suggestion number, repeat)
        self.gate = None  # the scheduler's may_hand_out (search.base.held_back)
        self.forgotten: set[str] = set()  # handed out, never to run (``forget``)
        self.first = [tuple(pair) for pair in first]
        self.sampler_path = sampler_path
        self._study: Study | None = None
        self._storage: SoleWriterStorage | None = None
        self._queue: list[tuple[int, int]] | None = None  # repeats to issue; None: not reconciled yet
        self._ids: dict[int, int] = {}  # suggestion number -> the storage's trial id (never changes)
        self._params: dict[int, dict] = {}  # suggestion number -> its hyperparameters (never change)
        self._asked: int | None = None  # suggestions made so far: counted once, then at each ask

    # -- pickling: Tune keeps this object in tuner.pkl (no driver reads it back) --
    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(
            _study=None, _storage=None, _queue=None, _ids={}, _params={}, _asked=None
        )  # re-read after a restore
        return state

    def __setstate__(self, state):
        state["storage_url"] = here_uri(state["storage_url"])  # the sweep folder may have moved
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        """Tune's periodic copy (never read back: the study and ``sampler_path`` are the memory)."""
        with open(checkpoint_path, "wb") as fh:
            pickle.dump({"live": self.live}, fh)

    def _save_sampler(self) -> None:
        if self.sampler_path:
            write_whole(Path(self.sampler_path), pickle.dumps(self.sampler))

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return True  # the metrics and the space are the spec's

    # -- the study ---------------------------------------------------------------------
    @property
    def study(self):
        if self._study is None:
            self._open()
        return self._study

    @property
    def storage(self):
        """The study's storage (Optuna's storage API: per-trial reads and writes by id)."""
        if self._storage is None:
            self._open()
        return self._storage

    def _open(self) -> None:
        import optuna

        from contrasweep.search.study_storage import SoleWriterStorage, StudyStorage  # Optuna: once, where it opens

        directions = cast(  # an objective's direction is one of Optuna's two words
            "list[Literal['minimize', 'maximize']]", [o.direction for o in objectives(self.metrics, self.modes)]
        )
        self._storage = SoleWriterStorage(StudyStorage(self.storage_url))  # this driver alone writes it
        self._study = optuna.create_study(
            study_name=self.study_name,
            storage=self._storage,
            sampler=self.sampler,
            directions=directions,
            load_if_exists=True,
        )

    def trial_id(self, number: int) -> int:
        """The storage's id of suggestion ``number`` (fixed once the trial exists: looked up once)."""
        if number not in self._ids:
            storage = self.storage
            self._ids[number] = storage.get_trial_id_from_study_id_trial_number(
                storage.get_study_id_from_name(self.study_name), number
            )
        return self._ids[number]

    def params(self, number: int) -> dict:
        """Suggestion ``number``'s hyperparameters: kept from its ``ask``, else read once."""
        if number not in self._params:
            self._params[number] = self.frozen(number).params
        return self._params[number]

    def frozen(self, number: int):
        """The stored state of suggestion ``number`` (optuna.db as this driver wrote it:
        ``study_storage.SoleWriterStorage``; read from SQL again after a restore)."""
        return self.storage.get_trial(self.trial_id(number))

    def _reconcile(self) -> None:
        """What a new driver issues first: the repeats of open suggestions that have not ended
        (those the record calls unfinished first, ended in the study or not); a suggestion whose
        repeats all ended is told."""
        from optuna.trial import TrialState

        trials = self.study.get_trials(deepcopy=False)
        if not trials:  # a new study: earlier sweeps' points as finished trials, then the paper's point first
            if self.warm:
                self.study.add_trials(warm_trials(self.space, self.warm))
            if self.reported:
                self.study.enqueue_trial(self.reported)
            trials = self.study.get_trials(deepcopy=False)
        held = set(self.live.values())
        numbers = {t.number for t in trials}
        self._queue = [pair for pair in self.first if pair[0] in numbers and pair not in held]
        held |= set(self._queue)
        for trial in trials:
            if trial.state != TrialState.RUNNING:
                continue
            if self.race is not None:  # a race's due repeats (a round the kill cut off is judged now)
                self._queue += [(trial.number, r) for r in self._race_due(trial, trials, held)]
                continue
            done = recorded(trial)
            if len(done) >= self.repeats:
                self._tell(trial.number)
                continue
            self._queue += [
                (trial.number, r) for r in range(self.repeats) if r not in done and (trial.number, r) not in held
            ]
        if self.race is not None:
            self._race_written()
        if self._queue:
            logger.info(
                "resuming %d repeats of %d open suggestions", len(self._queue), len({n for n, _ in self._queue})
            )

    def asked(self) -> int:
        """Suggestions made so far (an enqueued point counts once it is asked; warm points never):
        counted in the study once per driver, then one more at each ``ask`` (a count of every
        study trial per suggestion made a sweep's searcher cost grow with the square of its trials)."""
        from optuna.trial import TrialState

        if self._asked is None:
            self._asked = sum(
                t.state != TrialState.WAITING and WARM_ATTR not in t.user_attrs
                for t in self.study.get_trials(deepcopy=False)
            )
        return self._asked

    # -- Searcher API ------------------------------------------------------------------
    def suggest(self, trial_id: str) -> dict | str | None:  # type: ignore[override]  # Ray's FINISHED is a str
        if self._queue is None:
            self._reconcile()
        if held_back(self):
            return None
        if not self._queue:
            if self.asked() >= self.num_samples:
                # a race's next rounds come from the repeats still running
                return None if self.race is not None and self.live else Searcher.FINISHED
            trial = self.study.ask(self.space)
            assert self._asked is not None  # counted above (asked), before this ask
            self._asked += 1
            self._params[trial.number] = dict(trial.params)
            self._save_sampler()  # its random state after this ask: where a resumed driver goes on
            self._queue = [(trial.number, r) for r in (self.race.first() if self.race else range(self.repeats))]
        number, repeat = self._queue.pop(0)
        self.live[trial_id] = (number, repeat)
        return {**self.params(number), SUGGESTION: number, TRIAL_INDEX: repeat}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # stopping early is the scheduler's (group ASHA), not Optuna's pruners

    def forget(self, trial_id: str) -> None:
        """A repeat handed out that will never run (the budget ended the sweep first): out of
        ``live``, nothing told to the study; Tune's end of it is not a result."""
        self.live.pop(trial_id, None)
        self.forgotten.add(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self.forgotten:
            return
        if trial_id not in self.live:
            logger.warning("trial %s is not a repeat of any suggestion; its result is not told", trial_id)
            return
        number, repeat = self.live.pop(trial_id)
        frozen = self.frozen(number)
        key = REPEAT_ATTR.format(repeat)
        if frozen.state.is_finished():
            return  # told already
        if key in frozen.user_attrs:  # recorded: a replay after a restore, the driver killed before or after its tell
            if self._queue is None:
                self._reconcile()  # tells a suggestion whose repeats had all ended (judges a race's round)
            return
        record = self._record(result, error, frozen.params)
        self.storage.set_trial_user_attr(self.trial_id(number), key, record)
        if self.race is not None:
            if self._queue is None:  # the first word after a restore: reconciling judges this repeat's round too
                self._reconcile()
                return
            trials = self.study.get_trials(deepcopy=False)
            held = set(self.live.values()) | set(self._queue or [])
            due = self._race_due(self.frozen(number), trials, held)
            self._queue = [(number, r) for r in due] + list(self._queue or [])  # a race's next round first
            self._race_written(number)
            return
        records = {**recorded(frozen), repeat: record}  # the repeats recorded before and this one
        if len(records) >= self.repeats:
            self._tell(number, list(records.values()))

    def _race_due(self, trial, trials: list, held: set) -> list[int]:
        """The repeats of ``trial`` a race runs next (``contrasweep.search.study_race``): its
        eliminations are recorded first and the study is told once it is finished (the
        caller then writes ``race.json``: ``_race_written``)."""
        assert self.race is not None  # called for a racing sweep only
        due, decisions = self.race.due(trial, trials, {r for n, r in held if n == trial.number})
        for setting, left in decisions.items():
            self.storage.set_trial_user_attr(self.trial_id(trial.number), f"{RACE_PREFIX}{setting}", left)
            logger.info("racing: suggestion %d eliminated in setting %r (%s)", trial.number, setting, left)
        frozen = self.frozen(trial.number) if decisions else trial
        if not due and self.race.finished(frozen):
            self._tell(trial.number)
        return due

    def _race_written(self, number: int | None = None) -> None:
        """``race.json`` from the study as it is now (its eliminations, tells and records);
        ``number``: only that suggestion changed."""
        assert self.race is not None  # called for a racing sweep only
        self.race.write(self.study.get_trials(deepcopy=False), self.num_samples, number)

    def _record(self, result: dict | None, error: bool, params: dict) -> dict:
        """One repeat's outcome (complete | stopped | failed), epoch and metric values. A
        repeat stopped while paused at a rung ends without a result."""
        result = result or {}
        epoch = int(result.get("epoch", 0))
        budget = {
            "epochs": params.get("epochs", self.epochs),
            "max_steps": params.get("max_steps", getattr(self, "max_steps", 0)),
        }  # a study pickled before: 0
        complete = bool(result) and ran_every_epoch(epoch, budget, result.get("train/steps"))
        outcome = "failed" if error else ("complete" if complete else "stopped")
        values = [number_or_none(result.get(m)) for m in self.metrics]
        # what the selection (and a race, and the study) judges a repeat by: its best validation value
        selections = [number_or_none(result.get(selection_key(m), result.get(m))) for m in self.metrics]
        record = {"outcome": outcome, "epoch": epoch, "values": values, "selection": selections[0]}
        if len(self.metrics) > 1:
            record["selections"] = selections  # every metric's (several objectives: NSGA-II)
        return record

    def _tell(self, number: int, records: list[dict] | None = None) -> None:
        """Tell the study once: COMPLETE with the mean over repeats, PRUNED, or FAIL.
        ``records``: every repeat's, where the caller has just read and written them."""
        from optuna.trial import TrialState

        UpdateFinishedTrialError = finished_trial_error()

        if records is None:
            frozen = self.frozen(number)
            if frozen.state.is_finished():
                return
            records = list(recorded(frozen).values())
        outcomes = {r["outcome"] for r in records}
        means = [nanmean([told(r, i) for r in records]) for i in range(len(self.metrics))]
        try:
            if "failed" in outcomes or ("stopped" not in outcomes and any(math.isnan(m) for m in means)):
                self.study.tell(number, state=TrialState.FAIL)
            elif "stopped" in outcomes:
                if len(self.metrics) == 1 and not math.isnan(means[0]):
                    step = max(r["epoch"] for r in records)
                    self.storage.set_trial_intermediate_value(self.trial_id(number), step, means[0])
                self.study.tell(number, state=TrialState.PRUNED)
            else:
                self.study.tell(number, means if len(means) > 1 else means[0])
        except UpdateFinishedTrialError:  # told by another path a moment ago
            pass
