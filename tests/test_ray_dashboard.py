"""The local Ray's dashboard: on for sweeps of distributed trials (Train V2 frees a stopped
run's CPUs through the State API, which it serves), off for one-worker sweeps unless asked
(``--ray-dashboard``): its processes cost a 2-core machine's trials CPU time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contrasweep.cli import build_parser
from contrasweep.runner.ray_start import wants_dashboard
from contrasweep.spec.load import validate

ROOT = Path(__file__).resolve().parents[1]


def sweep(workers: int):
    return validate({"method": "ce", "data": {"source": "bbc_news"}, "grid": {"lr": [1.0e-5]},
                     "sweep": {"resources": {"cpu": 1, "workers": workers}}})


def test_only_distributed_sweeps_need_the_dashboard():
    assert wants_dashboard(sweep(2), asked=False)
    assert not wants_dashboard(sweep(1), asked=False)
    assert wants_dashboard(sweep(1), asked=True)
    assert build_parser().parse_args(["run", "s.yaml", "--ray-dashboard"]).ray_dashboard
    assert not build_parser().parse_args(["resume", "x"]).ray_dashboard
    assert build_parser().parse_args(["resume", "x", "--ray-dashboard"]).ray_dashboard


@pytest.mark.slow
def test_init_ray_starts_the_dashboard_only_when_told(tmp_path):
    """A local Ray of its own in a subprocess (the suite's Ray is left alone): its dashboard
    URL is empty without the dashboard, and on 127.0.0.1 with it."""
    script = (
        "import ray\n"
        "from contrasweep.runner.ray_start import init_ray\n"
        "for on in (False, True):\n"
        "    init_ray(None, num_cpus=1, dashboard=on)\n"
        "    print('url', repr(ray._private.worker._global_node.webui_url), flush=True)\n"
        "    ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "platform"), str(ROOT)])
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=180)
    urls = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("url ")]
    assert out.returncode == 0 and len(urls) == 2, out.stderr[-3000:]
    assert urls[0] == "''"
    assert urls[1].startswith("'127.0.0.1:"), urls
