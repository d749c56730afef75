"""The environment of a process that will start a local Ray, which Ray reads once, at its
import: set here before the process imports Ray (the CLI, the suite's conftest; ``init_ray``
when Ray is not imported yet). Light on purpose: the CLI imports it before any command's module.

May import: nothing of the project.
"""

from __future__ import annotations

import os

# Ray's switch for a one-machine cluster (the mode Ray uses on macOS and Windows), named in its
# own messages; 0: the node's address is 127.0.0.1, and GCS, raylet, workers, agents and the
# dashboard listen there only
LOOPBACK_ENV_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def local_ray_environment(bind_all: bool = False) -> None:
    """The environment of a process that will start a local Ray, set before that process
    imports Ray: Ray reads both variables once, at its import, and the processes it starts
    inherit them.

    * ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` unless ``bind_all``: the loopback address (with
      the node's network address they listened on every interface, and
      ``_node_ip_address="127.0.0.1"`` is turned back into that address by Ray).
    * ``RAY_AUTH_MODE=token`` unless the user set a mode: token authentication, which Ray 2.60
      turns on by itself for a new local cluster and Ray 2.56 does not; a mode set after the
      import leaves the driver without it while GCS and raylet require it.
    """
    if not bind_all:
        os.environ[LOOPBACK_ENV_VAR] = "0"
    os.environ.setdefault("RAY_AUTH_MODE", "token")
