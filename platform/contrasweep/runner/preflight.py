"""Services a sweep needs, checked before Ray starts or any folder is made: the MLflow
tracking server and the Ray cluster address must answer within seconds (an unreachable one
used to cost minutes of retries and then a traceback), the server must take the driver's
credentials and let it write the sweep's experiment (``tracking_access``), and a local port
must be free. One line each, a ``UserError``.

May import: ``contrasweep.errors``, ``contrasweep.tracking.credentials``; MLflow's REST helper
(``tracking_access`` only)."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from contrasweep.errors import UserError
from contrasweep.tracking import credentials

TIMEOUT_S = 5.0


def tracking_server(uri: str | None, flag: str = "--tracking-uri") -> None:
    """An http(s) tracking URI must answer MLflow's ``/health`` (any HTTP answer will do: a
    server that asks for credentials is up); file and database URIs are not probed. A URI with
    a password in it is refused first (``credentials.check_uri``)."""
    credentials.check_uri(uri, flag)
    if not uri or urlsplit(uri).scheme not in ("http", "https"):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=TIMEOUT_S):
            return
    except urllib.error.HTTPError:
        return  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(
            f"{flag} {uri} did not answer within {TIMEOUT_S:g} s ({reason}); allowed: the address of a "
            "running MLflow server (contrasweep ui, platform/cluster/mlflow-server.yaml) or a sqlite:/// URI"
        ) from None


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
        raise UserError(
            f"{flag} {address!r} is not an address; allowed: HOST:PORT of the Ray head (e.g. 10.0.0.1:6379), "
            "ray://HOST:10001 or auto"
        )
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT_S):
            return
    except OSError as exc:
        raise UserError(
            f"{flag} {address} did not answer within {TIMEOUT_S:g} s ({exc.strerror or exc}); allowed: the "
            "address of a running Ray head (`ray start --head` prints it) or no --address for a local Ray"
        ) from None


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
        raise UserError(
            f"--host {host!r} is not an address of this machine; allowed: 127.0.0.1 (the default), "
            "0.0.0.0, or one of this machine's addresses"
        ) from None
    with socket.socket(family) as sock:
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UserError(
                    f"{flag} {port} is in use on {host}; allowed: a free port, e.g. {flag} {free_port()}"
                ) from None
            raise UserError(
                f"--host {host} cannot be served here ({exc.strerror}); allowed: 127.0.0.1 (the default), "
                "0.0.0.0, or one of this machine's addresses"
            ) from None


def is_loopback(host: str) -> bool:
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
    except (socket.gaierror, UnicodeError, ValueError):
        return False


def services(
    tracking_uri: str | None, address: str | None, uri_flag: str = "--tracking-uri", experiment: str | None = None
) -> None:
    """The tracking server and the Ray address (``address`` or ``$RAY_ADDRESS``) answer, and
    the server lets the driver write ``experiment`` (``tracking_access``); run by the CLI before
    Ray is imported (an error in about a second) and by the sweep again."""
    tracking_server(tracking_uri, uri_flag)
    if experiment is not None:
        tracking_access(tracking_uri, experiment, uri_flag)
    given = address or os.environ.get("RAY_ADDRESS")
    ray_address(given, "--address" if address else "$RAY_ADDRESS")


# the experiment tag the access check writes: a write that needs EDIT, as every run of the sweep does
DRIVER_TAG = "contrasweep.last_driver"
_REST = "/api/2.0/mlflow/experiments/"


def tracking_access(uri: str | None, experiment: str, flag: str = "--tracking-uri") -> None:
    """An http(s) tracking server takes the driver's credentials and lets it write
    ``experiment``, checked with MLflow's own request helper (its credentials file, TLS and
    token settings) and no retries: the experiment is read by name, made when it does not exist
    (as the tracker would make it a moment later), and tagged with who drove it last, a write
    that needs the EDIT permission each of the sweep's runs needs. Wrong or missing
    credentials, READ only, no right to create: one ``UserError`` each, naming what to set or
    ask for, before any trial or folder. A server without authentication passes every step."""
    if not uri or urlsplit(uri).scheme not in ("http", "https"):
        return
    from mlflow.exceptions import MlflowException
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    creds, who = get_default_host_creds(uri), credentials.who()
    where = f"MLflow experiment {experiment!r} on {uri}"

    def ask(endpoint: str, method: str, what: str, **kwargs):
        try:
            answer = http_request(creds, _REST + endpoint, method, max_retries=0, timeout=TIMEOUT_S, **kwargs)
        except MlflowException as exc:
            raise UserError(
                f"{flag} {uri} did not answer {what} ({' '.join(str(exc).split())[:200]}); allowed: the "
                "address of a running MLflow server"
            ) from None
        if answer.status_code == 401:
            if credentials.given():
                raise UserError(
                    f"{flag} {uri} refused {who} (HTTP 401: a wrong password or no such user); allowed: "
                    f"{credentials.USERNAME} and {credentials.PASSWORD} of a user the server's admin made "
                    f"(or {credentials.TOKEN})"
                ) from None
            raise UserError(
                f"{flag} {uri} asks who you are (HTTP 401) and {credentials.PASSWORD} is not set; allowed: "
                f"{credentials.USERNAME} and {credentials.PASSWORD} in the driver's environment (or "
                f"{credentials.TOKEN}, or {credentials.CREDENTIALS_FILE})"
            ) from None
        return answer

    found = ask("get-by-name", "GET", f"reading {where}", params={"experiment_name": experiment})
    if found.status_code == 403:
        raise UserError(
            f"{who} may not read {where} (HTTP 403); allowed: an experiment you have EDIT on "
            "(tracking.experiment), or its owner grants you EDIT (platform/cluster/README.md)"
        )
    if found.status_code == 404:  # RESOURCE_DOES_NOT_EXIST: the sweep makes it
        made = ask("create", "POST", f"making {where}", json={"name": experiment})
        if made.status_code == 403:
            raise UserError(
                f"{who} may not create {where} (HTTP 403); allowed: an experiment you have EDIT on "
                "(tracking.experiment), or the server's admin lets you create one"
            )
        _ok(made, flag, uri, "create")
        experiment_id = made.json()["experiment_id"]
    else:
        _ok(found, flag, uri, "get-by-name")
        experiment_id = found.json()["experiment"]["experiment_id"]
    tagged = ask(
        "set-experiment-tag",
        "POST",
        f"writing {where}",
        json={"experiment_id": experiment_id, "key": DRIVER_TAG, "value": _driver()},
    )
    if tagged.status_code == 403:
        raise UserError(
            f"{who} has no EDIT permission on {where} (HTTP 403: READ shows runs, a sweep writes them); "
            "allowed: a user with EDIT on it (its owner or the admin grants it: platform/cluster/README.md) "
            "or another tracking.experiment"
        )
    _ok(tagged, flag, uri, "set-experiment-tag")


def _ok(answer, flag: str, uri: str, endpoint: str) -> None:
    if answer.status_code != 200:
        raise UserError(
            f"{flag} {uri} answered HTTP {answer.status_code} to MLflow's {endpoint} "
            f"({' '.join(answer.text.split())[:200]}); allowed: the address of an MLflow tracking server"
        )


def _driver() -> str:
    import getpass

    user = os.environ.get(credentials.USERNAME)
    try:
        local = getpass.getuser()
    except (KeyError, OSError):
        local = "?"
    return f"{user or local} on {socket.gethostname()}"
