"""GPU trials without a GPU: what Tune is asked for (a GPU share for an in-process trial, a
whole GPU per DDP rank), which path a trial takes, and the device a session picks."""

from __future__ import annotations

import pytest
import torch
from test_spec import base

from contrasweep.errors import UserError
from contrasweep.runner.executor import trial_resources
from contrasweep.spec.load import apply_override, validate
from contrasweep.spec.static import SweepStatic
from trainables.sessions import TuneSession


def sweep_with(resources: str):
    raw = base()
    apply_override(raw, f"sweep.resources={resources}")
    return validate(raw)


@pytest.mark.parametrize("resources, distributed, asked", [
    ("{cpu: 1, gpu: 0.25}", False, {"CPU": 1.0, "GPU": 0.25}),  # four trials share one GPU
    ("{cpu: 2, gpu: 1}", False, {"CPU": 2.0, "GPU": 1.0}),      # one GPU, no worker group
    ("{cpu: 1}", False, {"CPU": 1.0}),
    ("{cpu: 1, gpu: 1, workers: 2}", True, {"CPU": 0.01}),      # TorchTrainer only for several workers
])
def test_one_worker_trains_in_the_trial_process_with_its_gpu_share(resources, distributed, asked):
    sweep = sweep_with(resources)
    assert sweep.distributed is distributed
    static = SweepStatic.of(sweep)
    assert trial_resources(static) == asked


def test_a_gpu_fraction_with_several_workers_is_refused():
    with pytest.raises(UserError, match=r"sweep.resources.gpu=0.5 with workers=2: DDP ranks need a whole GPU each"):
        sweep_with("{cpu: 1, gpu: 0.5, workers: 2}")


def test_the_session_uses_the_gpu_it_was_given_or_the_cpu(tmp_path):
    session = TuneSession(str(tmp_path / "state"), use_gpu=True)
    assert session.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert TuneSession(str(tmp_path / "state"), use_gpu=False).device.type == "cpu"
    assert session.state_dir == str(tmp_path / "state") and session.prune
