"""Who the driver is to an MLflow tracking server, and where that stays (issue 73).

A sweep's credentials come from where MLflow's client reads them and nowhere else:
``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD`` (or ``~/.mlflow/credentials``,
which MLflow reads when they are unset), or ``MLFLOW_TRACKING_TOKEN``. The driver and its
MLflow writer process inherit them; nothing the sweep writes holds them: ``check_uri`` refuses a
tracking URI whose userinfo carries a password (it would be written to ``sweep.json`` and shown
in the summary), and ``withheld`` keeps them out of the environment a local Ray starts with (its
raylet and every trial worker inherit the driver's environment; trials never write MLflow).

May import: ``contrasweep.errors`` and the standard library.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from contrasweep.errors import UserError

USERNAME, PASSWORD, TOKEN = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"
CREDENTIALS = (USERNAME, PASSWORD, TOKEN)
CREDENTIALS_FILE = "~/.mlflow/credentials"


def check_uri(uri: str | None, flag: str = "--tracking-uri") -> None:
    """A one-line ``UserError`` for a tracking URI with ``user:password@`` in it (a user name
    alone is refused too for a server: MLflow's client would send no password with it)."""
    if not uri or "://" not in uri:
        return
    try:
        parts = urlsplit(uri)
        user, password = parts.username, parts.password
    except ValueError:
        return  # not a URL the userinfo of which could be read: MLflow says what is wrong with it
    if parts.scheme in ("http", "https") and (user or password):
        raise UserError(
            f"{flag} holds a user name or password (…@{parts.hostname}); allowed: the server's address "
            f"alone, e.g. {parts.scheme}://{parts.netloc.rpartition('@')[2]}, with the credentials in "
            f"{USERNAME} and {PASSWORD} (or {TOKEN}, or {CREDENTIALS_FILE}): they are never written "
            "into the sweep's files"
        )
    if password:
        hint = (
            "PGPASSWORD or ~/.pgpass, which the PostgreSQL driver reads"
            if parts.scheme.startswith("postgres")
            else f"a tracking server (http://...) and {USERNAME} and {PASSWORD}"
        )
        raise UserError(
            f"{flag} holds a password ({parts.scheme}://{user or ''}:…@{parts.hostname}); allowed: the "
            f"URI without it and the password in {hint}: the URI is written into the sweep's files"
        )


def who() -> str:
    """The identity the driver's MLflow client presents, in words (never the secret)."""
    user = os.environ.get(USERNAME)
    if user and os.environ.get(PASSWORD):
        return f"user {user!r}"
    if os.environ.get(TOKEN):
        return f"the token in {TOKEN}"
    if user:
        return f"user {user!r} without {PASSWORD}"
    if _file():
        return f"the user in {CREDENTIALS_FILE}"
    return "no credentials"


def given() -> bool:
    """Whether the driver presents credentials: MLflow's variables, or its credentials file
    (which MLflow reads when they are unset)."""
    return bool(os.environ.get(PASSWORD) or os.environ.get(TOKEN) or _file())


def _file() -> bool:
    return not os.environ.get(USERNAME) and Path(CREDENTIALS_FILE).expanduser().is_file()


@contextlib.contextmanager
def withheld() -> Iterator[None]:
    """The credentials out of ``os.environ`` for the block (a local Ray's start: its processes
    copy the environment then), back afterwards for the driver and its writer."""
    saved = {key: os.environ.pop(key) for key in CREDENTIALS if key in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)
