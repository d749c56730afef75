"""Every MLflow read sees every run (issue 69): ``contrasweep.tracking.store.search_all`` pages
through a real sqlite store with MLflow's page tokens; a run started between two pages is kept
once; the report finds a sweep run that its 5,001 trials push past MLflow's first page (on 90ffea8
``trial_runs`` returned the newest 5,000 and ``report`` said ``no sweep … in MLflow``)."""

from __future__ import annotations

import pytest
from contrasweep.tracking import store
from contrasweep.tracking.models import registered_versions
# only names 90ffea8 had: the slow test runs there too, and fails on what it reads
from contrasweep.tracking.store import KIND_TAG, PARENT_TAG, SWEEP_RUN_TAG, get_client, trial_runs


def _store(tmp_path):
    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("paging", artifact_location=(tmp_path / "artifacts").as_uri())
    return client, experiment


def _sweep(client, experiment, trials: int) -> tuple[str, list[str]]:
    """A sweep run, then ``trials`` trial runs tagged with it (oldest first)."""
    parent = client.create_run(experiment, tags={"contrasweep.sweep": "s", KIND_TAG: "sweep"}).info.run_id
    tags = {"contrasweep.sweep": "s", KIND_TAG: "trial", SWEEP_RUN_TAG: parent, PARENT_TAG: parent}  # nested, as every trial run
    made = [client.create_run(experiment, tags=tags).info.run_id for _ in range(trials)]
    return parent, made


def test_small_pages_read_every_run_once(tmp_path, monkeypatch):
    from contrasweep.tracking.store import search_all, search_experiments_all

    client, experiment = _store(tmp_path)
    parent, made = _sweep(client, experiment, 7)
    monkeypatch.setattr(store, "PAGE_SIZE", 3)
    found = trial_runs(client, parent)
    assert sorted(r.info.run_id for r in found) == sorted(made)  # 3 pages: 3 + 3 + 1
    assert len(search_all(client, [experiment], "tags.`contrasweep.sweep` = 's'")) == 8
    assert search_all(client, [experiment], "tags.`contrasweep.sweep` = 'none'") == []
    for name in ("a", "b", "c", "d"):
        client.create_experiment(name, artifact_location=(tmp_path / name).as_uri())
    assert {e.name for e in search_experiments_all(client)} >= {"paging", "a", "b", "c", "d"}  # 2 pages and more
    client.create_registered_model("m")
    for _ in range(4):
        client.create_model_version("m", source=(tmp_path / "model").as_uri())
    assert [int(v.version) for v in registered_versions(client, "m")] == [4, 3, 2, 1]  # pages of 3


def test_a_run_started_between_two_pages_is_read_once(tmp_path, monkeypatch):
    """MLflow's SQL store pages by offset, newest first: a run made after the first page moves the
    rest by one, so the second page starts with the first page's last run again."""
    client, experiment = _store(tmp_path)
    parent, made = _sweep(client, experiment, 5)
    monkeypatch.setattr(store, "PAGE_SIZE", 2)
    search = client.search_runs
    late = []

    def search_then_start_one(*args, **kwargs):
        page = search(*args, **kwargs)
        if not late:  # a trial that starts while the driver reads
            late.append(client.create_run(experiment, tags={SWEEP_RUN_TAG: parent}).info.run_id)
        return page

    monkeypatch.setattr(client, "search_runs", search_then_start_one)
    ids = [r.info.run_id for r in trial_runs(client, parent)]
    assert len(ids) == len(set(ids)) == 5 and set(ids) == set(made), ids


@pytest.mark.slow
def test_a_sweep_of_more_than_one_page_at_the_default_size(tmp_path):
    """5,001 trial runs (about 30 s): the oldest run, the sweep run itself, is on no first page."""
    from dashboards.source import find_parent

    client, experiment = _store(tmp_path)
    parent, made = _sweep(client, experiment, 5001)  # one more than the default PAGE_SIZE (and than 90ffea8 read)
    found = trial_runs(client, parent)
    assert len(found) == len({r.info.run_id for r in found}) == len(made) == 5001
    assert made[0] in {r.info.run_id for r in found}  # the oldest trial
    assert find_parent(client, "s").info.run_id == parent
