"""The local Ray contrasweep starts listens on 127.0.0.1 only: every listening TCP socket of
the driver and of the processes it started (GCS, raylet, workers, dashboard agent, runtime env
agent) is on a loopback address, and token authentication is on, with Ray 2.56 (which does not
turn it on by itself) as with 2.60 (``contrasweep.runner.ray_env``). Sockets are read from
/proc (Linux), the suite's machine."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads sockets from Linux's /proc")


def _address(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(hex_ip, 16)))
    words = [struct.pack("<I", int(hex_ip[i:i + 8], 16)) for i in range(0, 32, 8)]
    return socket.inet_ntop(socket.AF_INET6, b"".join(words))


def listening() -> dict[str, tuple[str, int]]:
    """socket inode -> (address, port) of every TCP socket in LISTEN state."""
    out = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                ip, port = fields[1].split(":")
                out[fields[9]] = (_address(ip), int(port, 16))
    return out


def descendants(root: int) -> dict[int, str]:
    """pid -> command name of ``root`` and every process below it."""
    parent, name = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name[int(entry.name)] = stat[stat.index("(") + 1 : stat.rindex(")")]
            parent[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found, frontier = {root}, [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier and pid not in found]
        found.update(frontier)
    return {pid: name.get(pid, "?") for pid in found}


def sockets_of(pids: dict[int, str]) -> list[tuple[str, str, int]]:
    """(process name, address, port) of each listening socket those processes hold."""
    listeners, out = listening(), []
    for pid, name in pids.items():
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            inode = target[len("socket:["):-1] if target.startswith("socket:[") else None
            if inode in listeners:
                out.append((name, *listeners[inode]))
    return out


@pytest.mark.slow
def test_the_local_ray_listens_on_loopback_only(ray_session):
    import ray
    from ray._raylet import AuthenticationMode, get_authentication_mode

    ray.get([ray.remote(lambda: os.getpid()).remote() for _ in range(2)])  # worker processes with their servers
    found = sockets_of(descendants(os.getpid()))
    names = {name for name, _, _ in found}
    assert "gcs_server" in names and "raylet" in names, found  # the listing sees Ray's services
    public = [(name, ip, port) for name, ip, port in found
              if not ipaddress.ip_address(ip.removeprefix("::ffff:")).is_loopback]
    assert public == [], public
    assert get_authentication_mode() == AuthenticationMode.TOKEN
    assert ray.util.get_node_ip_address() == "127.0.0.1"


def bare_env() -> dict[str, str]:
    """This process's environment less what the suite's conftest set for its own Ray
    (``local_ray_environment``) and any Ray address: a fresh user's shell."""
    dropped = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_AUTH_MODE", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")
    return {k: v for k, v in os.environ.items() if k not in dropped}


@pytest.mark.slow
def test_init_ray_sets_loopback_and_token_mode_itself_before_rays_import(tmp_path):
    """A process that has not imported Ray yet (a library user's script) gets both from
    ``init_ray``: Ray 2.56 does not turn token mode on by itself, and reads both at import."""
    import subprocess
    import sys

    code = ("import os\nfrom contrasweep.runner.ray_start import init_ray\ninit_ray(None, num_cpus=1, dashboard=False)\n"
            "import ray\nfrom ray._raylet import AuthenticationMode, get_authentication_mode\n"
            "print('MODE', get_authentication_mode() == AuthenticationMode.TOKEN, ray.util.get_node_ip_address(),"
            " os.environ['RAY_AUTH_MODE'])\nray.shutdown()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=bare_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "MODE True 127.0.0.1 token" in proc.stdout, proc.stdout


def test_ray_imported_first_is_one_line_not_a_ray_on_every_interface(tmp_path):
    """Ray imported before its one-machine mode was set reads it no more: ``init_ray`` says so
    in one line and starts nothing, instead of a local Ray on every interface."""
    import subprocess
    import sys

    code = ("import ray\nfrom contrasweep.errors import UserError\nfrom contrasweep.runner.ray_start import init_ray\n"
            "try:\n    init_ray(None, num_cpus=1, dashboard=False)\nexcept UserError as exc:\n"
            "    print('ERROR', exc, ray.is_initialized())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=bare_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip()
    assert line.startswith("ERROR Ray was imported before") and line.endswith("False"), line
    assert "\n" not in line and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in line, line


def test_a_users_auth_mode_wins_and_bind_all_leaves_the_interfaces(monkeypatch):
    from contrasweep.runner.ray_env import LOOPBACK_ENV_VAR, local_ray_environment

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv(LOOPBACK_ENV_VAR, raising=False)
    local_ray_environment(bind_all=True)
    assert os.environ["RAY_AUTH_MODE"] == "disabled" and LOOPBACK_ENV_VAR not in os.environ
    monkeypatch.delenv("RAY_AUTH_MODE")
    local_ray_environment()
    assert os.environ["RAY_AUTH_MODE"] == "token" and os.environ[LOOPBACK_ENV_VAR] == "0"
