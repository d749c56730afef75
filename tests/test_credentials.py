"""Where the driver's MLflow credentials may come from and where they may not go
(``contrasweep.tracking.credentials``, issue 73): a URI with a password is refused in one line
that does not repeat it; who the driver is, in words that never hold the secret; a block that
starts a local Ray without them."""

from __future__ import annotations

import os

import pytest

from contrasweep.errors import UserError
from contrasweep.tracking import credentials

SECRET = "s3cr3t-pw-7f2a"


@pytest.mark.parametrize("uri, says", [
    (f"http://alice:{SECRET}@mlflow.internal:5000", "holds a user name or password (…@mlflow.internal)"),
    ("https://alice@mlflow.internal", "holds a user name or password"),
    (f"postgresql://mlflow:{SECRET}@db:5432/mlflow", "PGPASSWORD or ~/.pgpass"),
    (f"mysql://root:{SECRET}@db/mlflow", "a tracking server (http://...) and MLFLOW_TRACKING_USERNAME"),
])
def test_a_uri_with_credentials_is_refused_in_one_line_without_them(uri, says):
    with pytest.raises(UserError) as refused:
        credentials.check_uri(uri)
    line = str(refused.value)
    assert says in line and SECRET not in line and "\n" not in line, line
    assert "--tracking-uri" in line


@pytest.mark.parametrize("uri", [None, "", "http://mlflow.internal:5000", "https://mlflow.internal",
                                 "sqlite:////tmp/mlflow.db", "postgresql://mlflow@db:5432/mlflow", "file:///tmp/mlruns"])
def test_a_uri_without_a_password_passes(uri):
    credentials.check_uri(uri)


def test_who_names_the_user_and_never_the_secret(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for key in credentials.CREDENTIALS:
        monkeypatch.delenv(key, raising=False)
    assert credentials.who() == "no credentials" and not credentials.given()
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(f"[mlflow]\nmlflow_tracking_username = bob\n"
                                                      f"mlflow_tracking_password = {SECRET}\n")
    assert credentials.who() == "the user in ~/.mlflow/credentials" and credentials.given()
    monkeypatch.setenv(credentials.USERNAME, "alice")
    assert credentials.who() == "user 'alice' without MLFLOW_TRACKING_PASSWORD" and not credentials.given()
    monkeypatch.setenv(credentials.PASSWORD, SECRET)
    assert credentials.who() == "user 'alice'" and credentials.given()
    monkeypatch.delenv(credentials.USERNAME)
    monkeypatch.delenv(credentials.PASSWORD)
    monkeypatch.setenv(credentials.TOKEN, SECRET)
    assert credentials.who() == "the token in MLFLOW_TRACKING_TOKEN" and SECRET not in credentials.who()


def test_withheld_keeps_them_out_of_the_block_and_puts_them_back_after_an_error(monkeypatch):
    monkeypatch.setenv(credentials.USERNAME, "alice")
    monkeypatch.setenv(credentials.PASSWORD, SECRET)
    monkeypatch.delenv(credentials.TOKEN, raising=False)
    with pytest.raises(RuntimeError), credentials.withheld():
        assert not any(key in os.environ for key in credentials.CREDENTIALS)
        raise RuntimeError("Ray did not start")
    assert os.environ[credentials.USERNAME] == "alice" and os.environ[credentials.PASSWORD] == SECRET
    assert credentials.TOKEN not in os.environ
