"""examples/notebook.ipynb and ``cs.run``/``cs.resume`` in a real Jupyter kernel (nbclient,
ipykernel; issue 72). The notebook runs on the tiny BERT with the spec the session's CLI sweep ran
(``server_sweep``, tests/conftest.py) plus a second learning rate, and its DataFrames must hold that
sweep's numbers for the configuration both ran. An interrupt of the kernel during ``cs.run`` stops
the sweep as Ctrl-C does; ``cs.resume`` then finishes it with one MLflow run per repeat, and the
kernel's signal handlers are as they were. The drivers attach to the session's Ray (``address``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import contrasweep as cs
from conftest import UI_SWEEP, write_spec
from contrasweep.tracking.store import get_client, trial_runs

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "notebook.ipynb"
PROBE = "import json\nprint('RESULT ' + json.dumps(%s, default=str))"


def _output(cell) -> dict:
    """The JSON a probe cell printed."""
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    line = next(line for line in text.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _parameters(**values) -> str:
    return "\n".join(f"{k} = {v!r}" for k, v in values.items())


def test_the_notebook_runs_a_sweep_whose_numbers_are_the_clis(server_sweep, tiny_model_dir, tmp_path, ray_address,
                                                             monkeypatch):
    server, found = server_sweep
    cli = cs.load(UI_SWEEP, root=found["local"].parent / "sweeps")
    spec = write_spec(tmp_path / "spec.yaml", tiny_model_dir, data={"k": 2, "seed": [0, 1]}, grid={"lr": [1.0e-3]},
                      fixed={"epochs": 1}, sweep={"seeds": [0], "scheduler": "none"})  # server_sweep's spec
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("CONTRASWEEP_CACHE", str(tmp_path / "cache"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    params.source = _parameters(SPEC=str(spec), OVERRIDES={"grid.lr": [1.0e-3, 1.0e-4]}, NAME="nb", ROOT="sweeps",
                                TRACKING_URI=uri, ADDRESS=ray_address)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE % (
        '{"status": sweep.status, "trials": trials.to_dict("records"), "configs": configs.to_dict("records"), '
        '"x": list(ax.lines[0].get_xdata()), "y": list(ax.lines[0].get_ydata()), '
        '"labels": predictions["label"].tolist(), "plan": plan.data["trials"]}')))
    NotebookClient(nb, timeout=110, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    got = _output(nb.cells[-1])

    assert got["status"] == "finished" and got["plan"] == 4 and len(got["trials"]) == 4
    runs = trial_runs(get_client(uri), cs.load("nb", root=tmp_path / "sweeps").run_id)
    assert {t["run_id"] for t in got["trials"]} == {r.info.run_id for r in runs}
    configs = sorted(got["configs"], key=lambda c: c["hp.lr"])
    assert got["x"] == [c["hp.lr"] for c in configs] == [1.0e-4, 1.0e-3]  # the curve is the frame's
    assert got["y"] == [c["mean/best/val/accuracy"] for c in configs]
    assert len(got["labels"]) == 2 and all(isinstance(label, str) for label in got["labels"])

    # the configuration both ran: the same numbers as `contrasweep run` gave (server_sweep)
    (theirs,) = cli.configurations().to_dict("records")
    mine = configs[1]
    for key in ("mean/best/val/accuracy", "std/best/val/accuracy", "mean/test/accuracy", "mean/train/loss"):
        assert mine[key] == pytest.approx(theirs[key], abs=1e-6), key
    keys = ["data_seed", "split_seed", "seed"]
    cli_trials = cli.trials().set_index(keys)
    for trial in (t for t in got["trials"] if t["hp.lr"] == 1.0e-3):
        twin = cli_trials.loc[tuple(trial[k] for k in keys)]
        assert trial["test/accuracy"] == pytest.approx(twin["test/accuracy"], abs=1e-6)


def test_an_interrupted_cell_stops_the_sweep_and_resume_finishes_it(tiny_model_dir, tmp_path, ray_address,
                                                                   monkeypatch):
    spec = write_spec(tmp_path / "spec.yaml", tiny_model_dir, data={"k": 2, "seed": [0, 1]}, grid={"lr": [1.0e-3]},
                      fixed={"epochs": 1}, sweep={"seeds": [0], "scheduler": "none", "max_concurrent": 1})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("CONTRASWEEP_CACHE", str(tmp_path / "cache"))
    args = f"root='sweeps', address={ray_address!r}, report=False"
    cells = [nbformat.v4.new_code_cell(c) for c in (
        "import signal, contrasweep as cs\nbefore = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))",
        f"sweep = cs.run({str(spec)!r}, name='cut', tracking_uri={uri!r}, {args})\nprint('STATUS', sweep.status)",
        PROBE % "{'handlers': (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before}",
        f"done = cs.resume('cut', {args})\n" + PROBE % "{'status': done.status, 'repeats': "
        "done.configurations()['repeats'].tolist(), 'trials': len(done.trials())}",
    )]
    nb = nbformat.v4.new_notebook(cells=cells)
    folder = tmp_path / "sweeps" / "cut"

    async def interrupted() -> None:
        client = NotebookClient(nb, timeout=110, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
        async with client.async_setup_kernel():
            await client.async_execute_cell(cells[0], 0)
            running = asyncio.ensure_future(client.async_execute_cell(cells[1], 1))
            for _ in range(900):  # until the first trial has reported an epoch
                if any(p.stat().st_size for p in folder.glob("tune/run_trial_*/result.json")):
                    break
                await asyncio.sleep(0.1)
            await client.km.interrupt_kernel()
            await running
            for index in (2, 3):
                await client.async_execute_cell(cells[index], index)

    asyncio.run(interrupted())
    text = "".join(o.get("text", "") for o in cells[1].outputs if o.get("output_type") == "stream")
    assert "STATUS interrupted" in text, text[-2000:]
    assert _output(cells[2]) == {"handlers": True}  # the kernel's own handlers, as before the call
    assert _output(cells[3]) == {"status": "finished", "repeats": [2], "trials": 2}
    runs = trial_runs(get_client(uri), cs.load("cut", root=tmp_path / "sweeps").run_id)
    assert len(runs) == 2 and len({r.data.tags["contrasweep.config_key"] for r in runs}) == 2  # one run per repeat
    assert all(r.info.status == "FINISHED" for r in runs)
