"""Test helpers (not a test module): a real ``mlflow server`` on 127.0.0.1, and headless
Chromium that loads a page of its UI and returns what the page shows once the single-page app
has fetched its data.

Chromium runs with ``--dump-dom --virtual-time-budget``: virtual time stands still while a
network fetch is pending, so the DOM is dumped after the app's REST calls have answered and it
has rendered, without a DevTools client. A page is loaded again (with a larger budget) until
every expected string is in its text or the timeout passes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

# This machine's network is closed: without these flags Chromium stalls on its own requests.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


# -- MLflow tracking server ---------------------------------------------------------------

@dataclass(frozen=True)
class MlflowServer:
    uri: str  # http://127.0.0.1:<port>, both the tracking URI and the UI
    artifacts: Path  # where the server's artifacts land
    log: Path  # the server's stdout and stderr
    pid: int = 0  # its process group (a test SIGKILLs it: ``os.killpg``)


@contextmanager
def mlflow_server(directory: Path, *, proxy_artifacts: bool = False, timeout: float = 120,
                  admin_password: str | None = None, port: int | None = None) -> Iterator[MlflowServer]:
    """``mlflow server`` on a free port with a sqlite store in ``directory``; yields once it
    answers ``/health`` and stops its whole process group afterwards.

    ``proxy_artifacts``: clients upload artifacts through the server (``--artifacts-destination``,
    run artifact URIs ``mlflow-artifacts:/``); otherwise they write to ``--default-artifact-root``
    themselves (same machine). ``admin_password``: MLflow's basic-auth app (``--app-name
    basic-auth``), its users in ``directory / "basic_auth.db"``, every user READ on every
    experiment unless granted more (as ``platform/cluster/mlflow-server.yaml``), the admin
    ``admin`` with this password. ``port``: that port (a server started again on the same store
    after a test killed it), else a free one."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    artifacts = directory / "artifacts"
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
           "--artifacts-destination" if proxy_artifacts else "--default-artifact-root", str(artifacts),
           "--workers", "1"]
    log = directory / "mlflow-server.log"
    if log.exists():  # a server started again on this store: the earlier one's log kept
        log.rename(log.with_name(f"mlflow-server.{time.time_ns()}.log"))
    uri = f"http://127.0.0.1:{port}"
    # No job runner: its huey consumers (GenAI jobs, unused here) add seconds to start and stop.
    env = {key: value for key, value in os.environ.items() if not key.startswith("MLFLOW_TRACKING_")}
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    if admin_password is not None:
        config = directory / "basic_auth.ini"
        config.write_text(f"[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///{directory / 'basic_auth.db'}\n"
                          "admin_username = admin\nauthorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
        cmd += ["--app-name", "basic-auth"]
        env.update(MLFLOW_AUTH_CONFIG_PATH=str(config), MLFLOW_AUTH_ADMIN_PASSWORD=admin_password,
                   MLFLOW_FLASK_SERVER_SECRET_KEY=os.urandom(16).hex())
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=directory, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"mlflow server did not start ({' '.join(cmd)}):\n{tail}") from None
                time.sleep(0.5)
        yield MlflowServer(uri, artifacts, log, proc.pid)
    finally:
        _stop_group(proc, grace=30)


# -- headless Chromium --------------------------------------------------------------------

def chromium_path() -> str | None:
    """The Chromium binary (``CONTRASWEEP_CHROMIUM`` overrides the search), or None."""
    override = os.environ.get("CONTRASWEEP_CHROMIUM")
    if override:
        return override if os.access(override, os.X_OK) else None
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def require_chromium() -> str:
    """The Chromium binary; skips the calling test when there is none."""
    import pytest

    path = chromium_path()
    if path is None:
        override = os.environ.get("CONTRASWEEP_CHROMIUM")
        pytest.skip(f"CONTRASWEEP_CHROMIUM={override} is not an executable" if override
                    else "no Chromium found (apt-get install chromium, or set CONTRASWEEP_CHROMIUM)")
    return path


def _chromium(args: list[str], timeout: float) -> str:
    """Run headless Chromium once with a fresh profile; its stdout. Kills its process group
    when it outlives ``timeout``."""
    binary = require_chromium()
    # ignore_cleanup_errors: Chromium's crash handler (its own session) may still be writing there
    with tempfile.TemporaryDirectory(prefix="contrasweep-chromium-", ignore_cleanup_errors=True) as profile:
        # XDG_*: keep crash reports and caches in the throw-away profile, not in ~/.config
        env = {**os.environ, "XDG_CONFIG_HOME": profile, "XDG_CACHE_HOME": profile}
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}/user-data", *args]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop_group(proc, grace=5)
            raise TimeoutError(f"chromium ran past {timeout:.0f} s: {' '.join(cmd)}") from None
        finally:
            try:  # whatever it left behind in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    if proc.returncode != 0:
        tail = err.decode(errors="replace")[-2000:]
        raise RuntimeError(f"chromium exited with {proc.returncode}: {' '.join(cmd)}\n{tail}")
    return out.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Element:
    tag: str
    attrs: dict[str, str]
    text: str  # its text content, whitespace collapsed


@dataclass(frozen=True)
class Page:
    """A page as Chromium rendered it: the serialised DOM, its text, and (in document order)
    every link, every element with a ``data-testid`` and every grid cell.

    ``text`` is the body's text content (script, style, noscript and template left out), not
    ``innerText``: it includes elements that CSS hides."""

    url: str
    html: str
    text: str
    elements: tuple[Element, ...]

    def by_testid(self, testid: str) -> list[Element]:
        return [e for e in self.elements if e.attrs.get("data-testid") == testid]

    def cells(self, col_id: str) -> list[str]:
        """The texts of a grid's cells in column ``col_id`` (ag-grid's ``col-id``, e.g.
        ``metrics.`val/accuracy``` in MLflow's runs table), in document order."""
        found = [e for e in self.elements if e.attrs.get("role") == "gridcell" and e.attrs.get("col-id") == col_id]
        return [e.text for e in found]

    def links_to(self, href_suffix: str) -> list[str]:
        """The texts of the links whose ``href`` ends with ``href_suffix``."""
        return [e.text for e in self.elements if e.tag == "a" and e.attrs.get("href", "").endswith(href_suffix)]


class _Parser(HTMLParser):
    SKIP = {"head", "script", "style", "noscript", "template"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.stack: list[tuple[str, int | None, int]] = []  # (tag, index in found, start in parts)
        self.found: list[list] = []  # [tag, attrs, text]
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        attrs = {k: v or "" for k, v in attrs}
        slot = None
        if tag == "a" or "data-testid" in attrs or attrs.get("role") == "gridcell":
            slot = len(self.found)
            self.found.append([tag, attrs, ""])
        self.stack.append((tag, slot, len(self.parts)))
        if tag in self.SKIP:
            self.skipping += 1

    def handle_endtag(self, tag):
        if not any(t == tag for t, _, _ in self.stack):
            return
        while self.stack:  # close whatever the serialiser left open inside it
            open_tag, slot, start = self.stack.pop()
            if open_tag in self.SKIP:
                self.skipping -= 1
            if slot is not None:
                self.found[slot][2] = _collapse(self.parts[start:])
            if open_tag == tag:
                return

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def _collapse(parts: list[str]) -> str:
    return " ".join(" ".join(parts).split())


def parse(html: str, url: str = "") -> Page:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    while parser.stack:
        parser.handle_endtag(parser.stack[-1][0])
    elements = tuple(Element(tag, attrs, text) for tag, attrs, text in parser.found)
    return Page(url, html, _collapse(parser.parts), elements)


def render(url: str, expect: tuple[str, ...] | list[str] = (), *, timeout: float = 30, budget_ms: int = 10_000,
           size: tuple[int, int] | None = None) -> Page:
    """``url`` as rendered by headless Chromium once the page's scripts have run and its
    fetches have answered (``--dump-dom`` after ``--virtual-time-budget`` ms of virtual time,
    which stands still while a fetch is pending). Loads the page again, doubling the budget,
    until every string of ``expect`` is in its text or ``timeout`` seconds have passed; returns
    the last page either way (the caller asserts, with the text in its message).

    ``size``: the window (width, height); a grid that renders only the columns in sight (the
    runs table) needs a wide one."""
    deadline = time.monotonic() + timeout
    window = [f"--window-size={size[0]},{size[1]}"] if size else []
    while True:
        left = deadline - time.monotonic()
        page = parse(_chromium([f"--virtual-time-budget={budget_ms}", *window, "--dump-dom", url], timeout=max(left, 5)),
                     url)
        if all(s in page.text for s in expect) or time.monotonic() + 2 > deadline:
            return page
        budget_ms *= 2
        time.sleep(0.5)


def render_text(url: str, expect: tuple[str, ...] | list[str] = (), **kwargs) -> str:
    """The text of ``render(url, expect, ...)``."""
    return render(url, expect, **kwargs).text


def screenshot(url: str, path: Path, *, size: tuple[int, int] = (1400, 1000), timeout: float = 30,
               budget_ms: int = 10_000) -> Path:
    """A PNG of ``url`` as rendered once the page's fetches have answered."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _chromium([f"--virtual-time-budget={budget_ms}", f"--window-size={size[0]},{size[1]}", "--hide-scrollbars",
               f"--screenshot={path}", url], timeout=timeout)
    if not path.exists():
        raise RuntimeError(f"chromium wrote no screenshot for {url}")
    return path
