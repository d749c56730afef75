"""Services a sweep needs, checked before Ray starts or any folder is made: the MLflow
tracking server and the Ray cluster address must answer within seconds (an unreachable one
used to cost minutes of retries and then a traceback), and a local port must be free. One
line each, a ``UserError``."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from contrasweep.errors import UserError

TIMEOUT_S = 5.0


def tracking_server(uri: str | None, flag: str = "--tracking-uri") -> None:
    """An http(s) tracking URI must answer MLflow's ``/health`` (any HTTP answer will do: a
    server that asks for credentials is up); file and database URIs are not probed."""
    if not uri or urlsplit(uri).scheme not in ("http", "https"):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=TIMEOUT_S):
            return
    except urllib.error.HTTPError:
        return  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"{flag} {uri} did not answer within {TIMEOUT_S:g} s ({reason}); allowed: the address of a "
                        "running MLflow server (contrasweep ui, platform/cluster/mlflow-server.yaml) or a sqlite:/// URI") from None


def ray_address(address: str | None, flag: str = "--address") -> None:
    """A ``host:port`` (or ``ray://host:port``) address must accept a TCP connection; ``auto``
    and ``local`` are Ray's own lookups and are left to it."""
    if not address or address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise UserError(f"{flag} {address!r} is not an address; allowed: HOST:PORT of the Ray head (e.g. 10.0.0.1:6379), "
                        "ray://HOST:10001 or auto")
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT_S):
            return
    except OSError as exc:
        raise UserError(f"{flag} {address} did not answer within {TIMEOUT_S:g} s ({exc.strerror or exc}); allowed: the "
                        "address of a running Ray head (`ray start --head` prints it) or no --address for a local Ray") from None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (a local Ray's dashboard, a suggestion below)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_port(port: int, flag: str = "--port", host: str = "127.0.0.1") -> None:
    """A port this machine can serve on ``host`` (the MLflow UI used to print its URL and
    then fail to bind a busy one)."""
    if not 1 <= port <= 65535:
        raise UserError(f"{flag} {port} is not allowed; allowed: a TCP port in [1, 65535]")
    try:
        family, *_, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError):
        raise UserError(f"--host {host!r} is not an address of this machine; allowed: 127.0.0.1 (the default), "
                        "0.0.0.0, or one of this machine's addresses") from None
    with socket.socket(family) as sock:
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UserError(f"{flag} {port} is in use on {host}; allowed: a free port, e.g. {flag} {free_port()}") from None
            raise UserError(f"--host {host} cannot be served here ({exc.strerror}); allowed: 127.0.0.1 (the default), "
                            "0.0.0.0, or one of this machine's addresses") from None


def is_loopback(host: str) -> bool:
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
    except (socket.gaierror, UnicodeError, ValueError):
        return False


def services(tracking_uri: str | None, address: str | None, uri_flag: str = "--tracking-uri") -> None:
    """The tracking server and the Ray address (``address`` or ``$RAY_ADDRESS``) answer; run
    by the CLI before Ray is imported (an error in well under a second) and by the sweep again."""
    tracking_server(tracking_uri, uri_flag)
    given = address or os.environ.get("RAY_ADDRESS")
    ray_address(given, "--address" if address else "$RAY_ADDRESS")
