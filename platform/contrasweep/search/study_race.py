"""Racing over the repeats of a study's suggestions (``sweep.racing`` with ``optuna`` or
``random``; docs/spec.md, "Racing"): the study searcher (``contrasweep.search.study_search``)
asks this object which repeats a suggestion runs.

A suggestion is a configuration. Unlike a grid's, a study's configurations do not exist up
front, so its race is asynchronous (as ASHA is to successive halving): a suggestion first runs
its first ``min_repeats`` repeats of each setting; when its first r repeats of a setting have
ended (r from ``min_repeats`` up to one less than its repeats there), it is judged once at round
r against every suggestion that has those same r repeats ended: the one-sided paired t-test
that it is worse than each of them (``contrasweep.search.racing.judge_one``: the grid's test),
Bonferroni-corrected over those comparisons. Only the judged suggestion's own decision is
applied (the others were judged at their own rounds), so they are the family: a judgement
eliminates a suggestion in truth as good as the best of its pool with probability at most
``alpha``. The suggestion leaves the race in that setting when its adjusted p-value is at most
``alpha`` (``best`` in its record: the suggestion it was shown worse than, the pool's best mean
wherever that one shows it); otherwise it runs its next repeat. A repeat that group ASHA stopped, or
that failed, takes the suggestion out of the race in that setting, as in a grid's race. The study is
told when every setting of a suggestion is out of the race or has run all its repeats: the mean over
the repeats it ran.

Memory: the study. Each repeat's outcome and value are its trial's user attributes
(``repeat.<i>``, written by the searcher before it judges), and an elimination is the attribute
``race.<setting>`` (round, adjusted p-value, the suggestion it was shown worse than), written before
the next repeat is issued; so a resumed sweep judges again only a round whose decision the kill
cut off, and undoes none. ``race.json`` (``contrasweep.folder.race_record``) is written from the
study after every change, for the tracker (an eliminated configuration's run), the console and
the report, keyed by repeat group as a grid's race is.

Why not the grid's synchronous rounds: a study draws its next suggestion from the ones told, so
a suggestion cannot wait for the suggestions drawn after it.

May import: ``contrasweep.search.racing`` (the test), ``contrasweep.spec`` (a repeat's setting and
id), ``contrasweep.folder`` (the journal, a moved folder).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from contrasweep.folder import race_record
from contrasweep.folder.relocation import here
from contrasweep.search.racing import judge_one, repeat_id
from contrasweep.spec.identity import identify
from contrasweep.spec.trial import SUGGESTION, TRIAL_INDEX

REPEAT_PREFIX = "repeat."  # a study trial's user attribute per repeat (study_search.REPEAT_ATTR)
RACE_PREFIX = "race."  # a study trial's user attribute per setting it left the race in


class StudyRace:
    """``layout``: per repeat index, its (setting, repeat id); ``group_of``: a trial config's
    repeat group; ``sign``: +1 where higher is better; ``path``: ``race.json``; ``fixed``: the
    values Tune's trials carry besides the suggestion's (``OptunaSearch.param_space``)."""

    def __init__(
        self,
        layout: list[tuple[str, str]],
        min_repeats: int,
        alpha: float,
        sign: float,
        group_of: Callable[[dict], str],
        path: str,
        fixed: dict | None = None,
    ):
        self.layout, self.min_repeats, self.alpha, self.sign = layout, min_repeats, alpha, sign
        self.group_of, self.path = group_of, str(path)
        self.fixed = dict(fixed or {})  # Tune's param_space: merged under every suggestion's values
        self.settings: dict[str, list[int]] = {}  # setting -> its repeat indices, in order
        for index, (setting, _) in enumerate(layout):
            self.settings.setdefault(setting, []).append(index)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_journal"}  # race.json: opened again

    def __setstate__(self, state):
        state["path"] = here(state["path"])  # the sweep folder may have moved
        self.__dict__.update(state)

    @classmethod
    def of(cls, sweep, static, group_of, path: str) -> StudyRace:
        layout = []
        for index in range(sweep.repeats):
            identity = identify({SUGGESTION: 0, TRIAL_INDEX: index}, static)
            layout.append((identity.setting, repeat_id(identity)))
        return cls(
            layout,
            sweep.racing.min_repeats,
            sweep.racing.alpha,
            sweep.objective.sign,
            group_of,
            path,
            dict(sweep.fixed),
        )

    # -- what a suggestion runs -----------------------------------------------------------
    def first(self) -> list[int]:
        """The repeats a new suggestion runs first: its first ``min_repeats`` of each setting."""
        return sorted(i for indices in self.settings.values() for i in indices[: self.min_repeats])

    def ended(self, trial, setting: str) -> list[dict]:
        """The recorded repeats of ``setting`` from its first on, while there is no gap."""
        records = recorded(trial)
        out = []
        for index in self.settings[setting]:
            if index not in records:
                break
            out.append(records[index])
        return out

    def left(self, trial, setting: str) -> bool:
        """Out of the race in ``setting``: eliminated, or a repeat there was stopped or failed."""
        if f"{RACE_PREFIX}{setting}" in trial.user_attrs:
            return True
        records = recorded(trial)
        return any(records[i]["outcome"] != "complete" for i in self.settings[setting] if i in records)

    def finished(self, trial) -> bool:
        """Every setting is out of the race or has run all its repeats: the study may be told."""
        records = recorded(trial)
        return all(self.left(trial, s) or all(i in records for i in indices) for s, indices in self.settings.items())

    def due(self, trial, trials: list, issued: set[int]) -> tuple[list[int], dict[str, dict]]:
        """(the repeats ``trial`` may run next that are not ``issued``, the eliminations to
        record first): per setting still racing, its first round's missing repeats, or once a
        round has ended, its judgement and, if it stays, the next repeat."""
        records = recorded(trial)
        out, decisions = [], {}
        for setting, indices in self.settings.items():
            if self.left(trial, setting):
                continue
            first = [i for i in indices[: self.min_repeats] if i not in records and i not in issued]
            if any(i not in records for i in indices[: self.min_repeats]):
                out += first
                continue
            ended = self.ended(trial, setting)
            n = len(ended)
            if n >= len(indices) or indices[n] in issued:
                continue
            verdict = self.judge(trial, trials, setting, n)
            if verdict is not None:
                decisions[setting] = verdict
                continue
            out.append(indices[n])
        return out, decisions

    # -- the test -----------------------------------------------------------------------
    def judge(self, trial, trials: list, setting: str, r: int) -> dict | None:
        """``trial`` at round ``r`` of ``setting`` against every suggestion with the same first
        ``r`` repeats ended: its elimination (round, adjusted p-value, the number of the one it is worse than),
        or None where it stays."""
        pool = {}
        for other in trials:
            values = self.values(other, setting, r)
            if values is not None:
                pool[other.number] = values
        if trial.number not in pool or len(pool) < 2:
            return None
        params = {t.number: t.params for t in trials}
        keys = {number: self.group_key(number, params.get(number, {}), setting) for number in pool}
        p, than = judge_one({keys[n]: v for n, v in pool.items()}, keys[trial.number], self.sign, self.alpha)
        if than is None or p > self.alpha:
            return None
        (than_number,) = [n for n, k in keys.items() if k == than]
        return {"round": r, "p_value": p, "best": than_number}

    def values(self, trial, setting: str, r: int) -> list[float] | None:
        """The selection values of ``trial``'s first ``r`` repeats of ``setting``, where it has them all, complete."""
        records = recorded(trial)
        out = []
        for index in self.settings[setting][:r]:
            record = records.get(index)
            value = None if record is None else record.get("selection")
            if record is None or record["outcome"] != "complete" or value is None or math.isnan(value):
                return None
            out.append(float(value))
        return out

    def group_key(self, number: int, params: dict, setting: str) -> str:
        """The repeat group of suggestion ``number`` in ``setting`` (as the tracker keys it)."""
        return self.group_of({**self.fixed, **params, SUGGESTION: number, TRIAL_INDEX: self.settings[setting][0]})

    # -- race.json ----------------------------------------------------------------------
    def write(self, trials: list, num_samples: int, number: int | None = None) -> None:
        """The journal a grid's race keeps, from the study: each group's repeats and values,
        who left and why, what the race may still run (``needed``) and the trials without racing.
        ``number``: only that suggestion changed (its groups go as journal lines); else all of it."""
        journal = getattr(self, "_journal", None)
        if journal is None or number is None:
            journal = self._journal = race_record.open_journal(self.path)
            journal.data.update(race_record.new_journal())
        data = journal.data
        asked, needed = 0, 0
        params = {t.number: t.params for t in trials}
        for trial in trials:
            if not any(k.startswith(REPEAT_PREFIX) for k in trial.user_attrs) and trial.state.name != "RUNNING":
                continue  # a warm start's point, or a suggestion waiting in the queue
            asked += 1
            records = recorded(trial)
            for setting, indices in self.settings.items():
                if not self.left(trial, setting):
                    needed += sum(1 for i in indices if i not in records)
            if number is not None and trial.number != number:
                continue
            for group, entry, left in self._entries(trial, records, params):
                data["repeats"][group] = entry
                if left is not None:
                    data["out"][group] = left
                if number is not None:
                    journal.save_key("repeats", group)
                    if left is not None:
                        journal.save_key("out", group)
        data["needed"] = needed + max(num_samples - asked, 0) * len(self.layout)
        data["total"] = num_samples * len(self.layout)
        if number is None:
            journal.save()
        else:
            journal.save_key(None, "needed")
            journal.save_key(None, "total")

    def _entries(self, trial, records: dict, params: dict):
        """Per setting of suggestion ``trial``: (its repeat group, its repeats' values and
        outcomes, why it left the race or None)."""
        for setting, indices in self.settings.items():
            group = self.group_key(trial.number, trial.params, setting)
            repeats = {
                self.layout[i][1]: {"value": records[i].get("selection"), "outcome": records[i]["outcome"]}
                for i in indices
                if i in records
            }
            left = trial.user_attrs.get(f"{RACE_PREFIX}{setting}")
            if left is not None:
                best = self.group_key(left["best"], params.get(left["best"], {}), setting)
                left = {"outcome": "eliminated", "round": left["round"], "p_value": left["p_value"], "best": best}
            elif self.left(trial, setting):
                outcome = next(
                    records[i]["outcome"] for i in indices if i in records and records[i]["outcome"] != "complete"
                )
                left = {"outcome": outcome, "round": len(repeats)}
            yield group, repeats, left


def recorded(trial) -> dict[int, dict]:
    """repeat index -> its recorded outcome, for one study trial."""
    return {int(k[len(REPEAT_PREFIX) :]): v for k, v in trial.user_attrs.items() if k.startswith(REPEAT_PREFIX)}
