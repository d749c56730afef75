"""Ray for a sweep: a local Ray sized to this machine (on 127.0.0.1 unless asked otherwise), or
the cluster at ``--address`` / ``$RAY_ADDRESS`` with the project's code shipped or its installed
version checked (docs/architecture.md, "Storage and clusters", "Facts about the stack").

May import: ``contrasweep.errors``, ``contrasweep.runner.shipping``, ``contrasweep.runner.preflight``,
``contrasweep.runner.stop_signal``, ``contrasweep.runner.ray_env``, ``contrasweep.tracking.credentials``; Ray.
"""

from __future__ import annotations

import os
import sys

from contrasweep import __version__
from contrasweep.errors import UserError
from contrasweep.runner import shipping
from contrasweep.runner.preflight import free_port
from contrasweep.runner.ray_env import LOOPBACK_ENV_VAR, local_ray_environment
from contrasweep.runner.shipping import worker_env
from contrasweep.runner.stop_signal import take_sigterm
from contrasweep.tracking import credentials


def init_ray(
    address: str | None,
    num_cpus: int | None = None,
    ship: str = "code",
    local_files=(),
    dashboard: bool = True,
    bind_all: bool = False,
    method: str = "",
) -> None:
    """A local Ray sized to this machine, or the cluster at ``address`` / ``RAY_ADDRESS``, to
    which the job ships the project's code and the spec's local files (``ship: code``), or on
    whose nodes the installed contrasweep must be the driver's version (``ship: installed``;
    ``contrasweep.runner.shipping``); ``method``: the spec's, shipped there when it is a user's.

    ``dashboard`` (local Ray only; bound to 127.0.0.1): Train V2 frees the CPUs of a Train run
    that ASHA stopped through the State API, which needs it (docs/architecture.md, "Facts about
    the stack"), so a sweep of distributed trials always has it (``wants_dashboard``). Sweeps
    of one-worker trials never start a Train run and leave it off unless asked: its processes
    took about 2 % of a core here, which a 2-thread trial on 2 cores pays about twice
    (benchmarks/sweep_overhead.py).

    A local Ray listens on 127.0.0.1 only unless ``bind_all`` (``--ray-bind-all``), and token
    authentication stays on either way (``local_ray_environment``, which a process that imports
    Ray before this call runs first: the CLI, the suite's conftest).
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if not address and "ray" not in sys.modules:
        local_ray_environment(bind_all)
    import ray

    if ray.is_initialized():
        return
    if address:
        env = shipping.runtime_env(
            ship, local_files, method=method
        )  # a one-line error before connecting, when too large
        ray.init(address=address, runtime_env=env, log_to_driver=True)
        take_sigterm()  # Ray's core worker installed its own (stop_signal)
        if ship == "installed":
            shipping.check_worker_versions(__version__)
        return
    options: dict = {"include_dashboard": False}
    if not bind_all and ray.util.get_node_ip_address() != "127.0.0.1":
        raise UserError(
            f"Ray was imported before its one-machine mode was set, so the local Ray would listen on every "
            f"interface: call contrasweep.runner.ray_env.local_ray_environment() before importing ray, "
            f"or set {LOOPBACK_ENV_VAR}=0 and RAY_AUTH_MODE=token"
        )
    env = worker_env()
    # one machine, no cloud: no node can be preempted, and Ray Train's PreemptionWatcher (an
    # actor process per Train run, about 3 s of CPU to start here) would watch for nothing
    env.setdefault("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", os.environ.get("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0"))
    if dashboard:
        # Ray Train frees a stopped run's CPUs through the State API, which finds its server by
        # auto-detection: next to another local Ray it meets "multiple active Ray instances" and
        # asks the newest one, so a stopped distributed trial kept its CPUs and the next waited
        # forever. Every process of this instance (raylet, workers, Train's cleaner) inherits the
        # driver's environment: name this instance's own dashboard there.
        port = free_port()
        os.environ["RAY_API_SERVER_ADDRESS"] = env["RAY_API_SERVER_ADDRESS"] = f"http://127.0.0.1:{port}"
        options = {"include_dashboard": True, "dashboard_host": "127.0.0.1", "dashboard_port": port}
    with credentials.withheld():  # the raylet and every worker copy the environment: trials never write MLflow
        ray.init(
            address="local",
            num_cpus=num_cpus or os.cpu_count(),
            log_to_driver=True,
            runtime_env={"env_vars": env},
            **options,
        )
    take_sigterm()


def wants_dashboard(sweep, asked: bool) -> bool:
    """The local Ray's dashboard: always for distributed trials (Train V2 needs the State
    API), otherwise when the user asks for it (``--ray-dashboard``)."""
    return asked or sweep.distributed


def alive_machines() -> int:
    """How many machines the alive Ray nodes run on (nodes started on one machine, as in a
    test's two-node cluster, share its file system)."""
    import ray

    return len({node["NodeManagerAddress"] for node in ray.nodes() if node.get("Alive")})


def boot_capacity() -> int:
    """How many worker processes the Ray this driver joined starts at once: each node's raylet
    starts at most as many at a time as it has CPUs (``worker_maximum_startup_concurrency``);
    for this machine's node its cores, for another its logical CPUs (its cores unless its
    ``ray start`` said otherwise)."""
    import ray

    here, cores, total = ray.get_runtime_context().get_node_id(), os.cpu_count() or 1, 0
    for node in ray.nodes():
        if node.get("Alive"):
            cpus = int(node.get("Resources", {}).get("CPU", 0))
            total += min(cpus, cores) if node.get("NodeID") == here else cpus
    return max(1, total)
