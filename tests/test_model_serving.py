"""The registered model of a finished sweep, served as a user serves any MLflow model: a real
``mlflow models serve -m models:/<sweep>@<alias> --env-manager local`` on 127.0.0.1 (started
here, its process group stopped at the end) answers ``POST /invocations`` with the class
names and probabilities ``mlflow.pyfunc.load_model`` gives for the same rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from browser import _stop_group, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TEXTS = ["the match ended in a late goal", "shares fell after the bank's results", "the new phone has a fast chip"]


def test_mlflow_models_serve_answers_with_the_registered_models_predictions(report_sweeps, tmp_path, monkeypatch):
    """The session's ``ce-small`` sweep (tests/conftest.py): its k = 2 setting's registered version."""
    import mlflow.pyfunc
    import pandas as pd

    uri = report_sweeps[0]
    model_uri = "models:/ce-small@best-k2"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    expected = mlflow.pyfunc.load_model(model_uri).predict(pd.DataFrame({"text": TEXTS}))

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["MLFLOW_TRACKING_URI"] = uri
    # MLflow starts `uvicorn` by name: the virtualenv's scripts, as an activated venv has them
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local",
           "-h", "127.0.0.1", "-p", str(port), "-w", "1"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
                time.sleep(0.5)
        body = json.dumps({"dataframe_split": {"columns": ["text"], "data": [[t] for t in TEXTS]}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        bad = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"dataframe_split": {"columns": ["sentence"], "data": [["x"]]}}).encode())
        with pytest.raises(urllib.error.HTTPError) as refused:  # the signature's check, not a traceback from the model
            urllib.request.urlopen(bad, timeout=60)
        assert refused.value.code == 400 and "text" in refused.value.read().decode()
    finally:
        _stop_group(proc, grace=20)

    rows = answer["predictions"]
    assert [row["label"] for row in rows] == list(expected["label"])
    for row, (_, want) in zip(rows, expected.iterrows()):
        probs = {k: v for k, v in row.items() if k.startswith("prob_")}
        assert sorted(probs) == sorted(c for c in expected.columns if c.startswith("prob_")) and len(probs) == 5
        assert all(abs(probs[k] - want[k]) < 1e-6 for k in probs)
    print(f"\n[serve] POST /invocations -> {rows[0]}")
