"""The MLflow UI, looked at in a real browser: every run of a sweep's hierarchy (sweep →
configuration → trial) shows its readable name and links to its parent and children by name,
and the sweep run's artifact view finds ``report/report.html``; the registered version shows its
MLflow Model's signature.

A real ``mlflow server`` (tests/browser.py) serves the UI; headless Chromium renders its pages.
The session's ``server_sweep`` (tests/conftest.py) is a real tiny sweep that ``contrasweep run``
tracked on that server over HTTP (which also writes the sweep's report to its parent run).

Pages used (MLflow 3.x, hash routes of the React app):
- ``#/experiments/<exp>/runs/<run>``: the run page. Its header (``data-testid="runs-header"``)
  is the run's name; "About this run" has a "Parent run" row and a "Child runs" row
  (``data-testid="key-value-Parent run"`` / ``"key-value-Child runs"``) whose entries are links
  ``#/experiments/<exp>/runs/<id>`` with the run's name as text.
- ``#/experiments/<exp>/runs?workflowType=machine_learning&viewStateShareKey=contrasweep``: the
  runs table (top-level runs, collapsed) on the Model training side with contrasweep's saved
  view; its grid cells carry ``role="gridcell"`` and ``col-id="metrics.`<key>`"``, and only the
  columns in the window are rendered.
- ``#/experiments/<exp>/runs/<run>/artifacts/<path>``: the Artifacts tab with ``<path>``
  selected: the preview pane's header reads ``report/report.html`` (and its size), the tree
  lists the folder ``report`` and under it a node ``report.html``. Headless Chromium never
  finishes the tree's expand animation (the folder stays collapsed on screen, the
  ``report.html`` node is in the DOM under ``display: none``), so the tree is checked for the
  node, not for its visibility; ``.../artifacts`` without a path lists only the folder.
"""

from __future__ import annotations

import pytest
from browser import render, require_chromium, screenshot
from conftest import UI_SWEEP as SWEEP

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]



@pytest.fixture(scope="module")
def chromium():
    return require_chromium()  # skips before a server is started


@pytest.fixture(scope="module")
def server(chromium, server_sweep):
    return server_sweep[0]


@pytest.fixture(scope="module")
def runs(server, server_sweep) -> dict:
    found = server_sweep[1]
    assert found["config_name"] == "ce lr=0.001" and found["trial_name"].startswith("ce lr=0.001 · split=")
    return found


def run_url(server, runs: dict, run_id: str, suffix: str = "") -> str:
    return f"{server.uri}/#/experiments/{runs['experiment_id']}/runs/{run_id}{suffix}"


# page: (its run, its parent run or None, its child run or None), as keys of server_sweep's dict
HIERARCHY = {
    "sweep": ("parent", None, "config"),
    "configuration": ("config", "parent", "trial"),
    "trial": ("trial", "config", None),
}


@pytest.mark.parametrize("page_name", list(HIERARCHY))
def test_run_page_names_the_run_its_parent_and_its_children(server, runs, page_name):
    own, parent, child = HIERARCHY[page_name]
    run_id, name = runs[f"{own}_run_id"], runs[f"{own}_name"]
    related = [k for k in (parent, child) if k]
    page = render(run_url(server, runs, run_id), expect=[run_id, name] + [runs[f"{k}_name"] for k in related])
    context = f"{page_name} run page {page.url}:\n{page.text[:1500]}"

    assert [e.text for e in page.by_testid("key-value-Run ID")] == [f"Run ID {run_id}"], f"the run did not load: {context}"
    assert [e.text for e in page.by_testid("runs-header")] == [name], context
    for key, row in ((parent, "Parent run"), (child, "Child runs")):
        rows = page.by_testid(f"key-value-{row}")
        if key is None:
            assert not rows, f"unexpected {row!r} row: {context}"
            continue
        other_id, other_name = runs[f"{key}_run_id"], runs[f"{key}_name"]
        assert len(rows) == 1 and other_name in rows[0].text, f"{row!r} does not name {other_name!r}: {context}"
        assert page.links_to(f"/runs/{other_id}") == [other_name], f"no link to {other_name!r}: {context}"


def test_artifact_view_finds_the_report(server, runs):
    folder, _, file = runs["report"].rpartition("/")
    page = render(run_url(server, runs, runs["parent_run_id"], f"/artifacts/{runs['report']}"),
                  expect=[runs["report"], runs["parent_name"]])
    context = f"{page.url}:\n{page.text[:1500]}"

    assert [e.text for e in page.by_testid("runs-header")] == [runs["parent_name"]], context
    tree = [e.attrs.get("artifact-name") for e in page.by_testid("artifact-tree-node")]
    assert tree[0] == folder and {file, "main_table.csv", "main_table.md"} <= set(tree), f"artifact tree {tree}: {context}"
    assert runs["report"] in page.text, f"the preview pane does not show {runs['report']}: {context}"


def test_screenshot_of_the_sweep_run_page(server, runs, tmp_path):
    png = screenshot(run_url(server, runs, runs["parent_run_id"]), tmp_path / "sweep-run.png")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    # 1400x1000: about:blank is ~6 kB, a one-line page ~8 kB, the rendered run page ~160 kB
    assert len(data) > 40_000, f"the screenshot looks blank ({len(data)} bytes): {png}"
    print(f"screenshot: {png}")


def test_runs_table_opens_on_the_sweeps_with_their_numbers(server, runs):
    """The address ``contrasweep ui`` and the final summary give: the Model training side, the
    contrasweep view, and the sweep run's row showing its numbers (trials ended, best trial,
    best configuration's validation and test means) without picking a column by hand."""
    from contrasweep.tracking.runs_view import VIEW_NAME, runs_url
    from contrasweep.tracking.store import get_client

    parent = get_client(server.uri).get_run(runs["parent_run_id"]).data.metrics
    shown = {key: parent[key] for key in ("trials/ended", "best_trial/val/accuracy",
                                          "best_config/mean/best/val/accuracy", "best_config/mean/test/accuracy")}
    url = runs_url(server.uri, runs["experiment_id"])
    # ag-grid renders only the columns in sight: a window wide enough for all of the view's
    page = render(url, expect=[runs["parent_name"], VIEW_NAME, *shown], size=(3200, 1000), timeout=60)
    context = f"{page.url}:\n{page.text[:2000]}"

    assert VIEW_NAME in " ".join(e.text for e in page.by_testid("saved-views-trigger")), context
    assert page.links_to("/models") == ["Model registry"], f"not the Model training side: {context}"
    for key, value in shown.items():
        cells = [c for c in page.cells(f"metrics.`{key}`") if c]
        assert len(cells) == 1, f"{key}: cells {cells} (one sweep run expected): {context}"
        assert float(cells[0]) == pytest.approx(value, abs=5e-4), f"{key}: {cells[0]} vs {value}: {context}"
    assert shown["trials/ended"] == 2


def test_registered_version_shows_its_models_signature(server, runs):
    """The sweep's registered version is an MLflow Model whose signature the registry page
    shows: one input (``text``) and the outputs ``label`` + one probability per BBC News class."""
    from contrasweep.tracking.store import get_client

    client = get_client(server.uri)
    version = client.get_model_version_by_alias(SWEEP, "best")
    assert version.run_id == runs["trial_run_id"] or client.get_run(version.run_id).data.tags["mlflow.parentRunId"] \
        == runs["config_run_id"]
    page = render(f"{server.uri}/#/models/{SWEEP}/versions/{version.version}", expect=["Inputs (1)", "Outputs (6)"],
                  timeout=60)
    context = f"{page.url}:\n{page.text[:1500]}"
    assert "Schema" in page.text and "Inputs (1)" in page.text and "Outputs (6)" in page.text, context
    assert "@ best" in page.text, context
