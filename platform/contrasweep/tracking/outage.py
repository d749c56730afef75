"""A tracking server that goes away mid-sweep, as the writer process sees it (issue 73).

Before, MLflow's client retried a failed request for about four minutes (7 retries, backoff
factor 2) and said nothing: a server down for 30 s cost nothing but was never mentioned, one
down for longer stopped the sweep as a store failure. Now the writer
(``contrasweep.tracking.writer``) asks MLflow for fewer, shorter retries (``quick_retries``:
about 3 s before a request is given up, a user's own ``MLFLOW_HTTP_REQUEST_*`` kept) and, when a
call fails because the server did not answer (``unreachable``: the connection refused, reset, cut
mid-answer or timed out, or HTTP 429/5xx after MLflow's retries), holds the calls that follow (``Held``):

* it says so once, in one line the driver prints (``MLflow server … unreachable since …: N calls
  queued, nothing lost``), and again every ``REMIND_S`` while it lasts;
* it keeps reading the driver's calls, so the driver never waits on a full pipe and Tune goes
  on (trials start, train and end: their runs are made queued too, ``run_ids``; a call that waits
  for its answer, such as ``get_run``, waits for the server: every answer comes after the writes
  queued before it);
* it tries the failed call again every ``RETRY_S`` (a ``log_batch`` without the metric rows its
  run already has: the request the server died in may have been applied), then applies what it
  held, in order, and says in one line that the server is back and how many calls it applied.

What is held is bounded: past ``QUEUE_MB`` (``CONTRASWEEP_MLFLOW_QUEUE_MB``, default 256) of
held calls the writer stops as on a store failure: the driver stops the sweep as Ctrl-C does,
nothing is lost (every queued call is in the write-ahead log, ``mlflow_wal/``), and ``resume``
applies the log once the server answers. A driver that ends while the server is away leaves its
calls in the log too.

May import: ``contrasweep.tracking.frames`` and the standard library (requests' exception classes
where an error is classified, in the writer).
"""

from __future__ import annotations

import os
import select
import time
from collections import deque
from collections.abc import Callable

from contrasweep.tracking.frames import receive

QUEUE_ENV = "CONTRASWEEP_MLFLOW_QUEUE_MB"
QUEUE_MB = 256
RETRY_S = (1.0, 2.0, 4.0, 5.0)  # then every 5 s
REMIND_S = 300.0
# MLflow's client retries (urllib3) before a request fails: 2 retries, 0 s then 2 s apart
QUICK_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


def is_server(tracking_uri: str) -> bool:
    return tracking_uri.startswith(("http://", "https://"))


def quick_retries() -> None:
    """The writer's MLflow requests give up after about 3 s (``QUICK_RETRIES``) rather than 4 min:
    ``Held`` retries for as long as it takes, and says so. A user's own settings are kept."""
    for key, value in QUICK_RETRIES.items():
        os.environ.setdefault(key, value)


def queue_mb() -> float:
    """The bound on held calls, in MB (``CONTRASWEEP_MLFLOW_QUEUE_MB``: a positive number, else
    the default)."""
    try:
        mb = float(os.environ.get(QUEUE_ENV, "") or QUEUE_MB)
    except ValueError:
        return QUEUE_MB
    return mb if mb > 0 else QUEUE_MB


def unreachable(exc: BaseException) -> str | None:
    """Why, in a few words, when ``exc`` says the server did not answer; ``None`` for any other
    error (a refused permission, a run that does not exist, a bad value: the store's own)."""
    from http.client import IncompleteRead

    import requests

    seen = exc
    for _ in range(10):
        if isinstance(seen, requests.exceptions.RetryError):
            return "it answered with errors: " + " ".join(str(seen).split())[-120:]
        if isinstance(seen, requests.exceptions.Timeout):
            return "no answer in time"
        if isinstance(seen, (requests.exceptions.ChunkedEncodingError, IncompleteRead)):
            return "connection cut mid-answer"
        if isinstance(seen, requests.exceptions.ConnectionError):
            text = str(seen)
            return (
                "connection refused"
                if "refused" in text.lower()
                else "connection reset"
                if "reset" in text.lower() or "aborted" in text.lower()
                else "no connection"
            )
        if isinstance(seen, (ConnectionError, TimeoutError)):
            return type(seen).__name__
        cause = seen.__cause__ or seen.__context__
        if cause is None:
            return None
        seen = cause
    return None


class Held:
    """The driver's calls the writer holds while the server is away, in the order they came;
    ``next_frame`` hands them out before it reads the pipe again."""

    def __init__(self, tracking_uri: str, inp: int, tell: Callable[[str], None]):
        self.uri, self.inp, self.tell = tracking_uri, inp, tell
        self.frames: deque[bytes] = deque()
        self.bytes = 0
        self.limit_mb = queue_mb()
        self.limit = int(self.limit_mb * (1 << 20))
        self.ended = False  # the driver's pipe ended while the server was away

    def next_frame(self) -> bytes:
        if self.frames:
            frame = self.frames.popleft()
            self.bytes -= len(frame)
            return frame
        if self.ended:
            raise EOFError
        return receive(self.inp)

    def wait_back(self, attempt: Callable[[], object], why: str) -> tuple[object, str | None]:
        """Try ``attempt`` until the server answers, holding what the driver sends meanwhile;
        ``(its value, None)``, or ``(None, the line that stops the sweep)`` past the bound or
        when the driver has ended. An error that is not the server's absence is raised."""
        since = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(since))
        self.tell(
            f"MLflow server {self.uri} unreachable since {stamp} ({why}): {_calls(self._queued())} queued, "
            "nothing lost; the sweep goes on and they are applied once it answers"
        )
        tries, reminded = 0, since
        while True:
            delay = RETRY_S[min(tries, len(RETRY_S) - 1)]
            tries += 1
            if not self._hold_for(delay):
                if self.ended:
                    return None, (
                        f"MLflow server {self.uri} unreachable since {stamp} and the driver ended: "
                        f"{_calls(self._queued())} kept in the sweep's write-ahead log; `contrasweep resume` "
                        "applies them once it answers"
                    )
                return None, (
                    f"MLflow server {self.uri} unreachable since {stamp}: {_calls(self._queued())} queued "
                    f"reached the bound of {self.limit_mb:g} MB ({QUEUE_ENV}); the sweep stops as "
                    "Ctrl-C does, nothing lost: `contrasweep resume` applies them once the server answers"
                )
            try:
                value = attempt()
            except Exception as exc:
                if unreachable(exc) is None:
                    raise
                if time.time() - reminded >= REMIND_S:
                    reminded = time.time()
                    self.tell(
                        f"MLflow server {self.uri} still unreachable since {stamp}: {_calls(self._queued())} "
                        f"queued ({self.bytes / (1 << 20):.1f} of {self.limit_mb:g} MB), nothing lost"
                    )
                continue
            self.tell(
                f"MLflow server {self.uri} back after {time.time() - since:.0f} s: applying the "
                f"{_calls(self._queued())} queued meanwhile"
            )
            return value, None

    def _queued(self) -> int:
        return len(self.frames) + 1  # the call being tried, and what came after it

    def _hold_for(self, seconds: float) -> bool:
        """Read the driver's calls for ``seconds``; False past the bound or at the pipe's end."""
        deadline = time.monotonic() + seconds
        while not self.ended:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if select.select([self.inp], [], [], left)[0]:
                try:
                    frame = receive(self.inp)
                except EOFError:
                    self.ended = True
                    return False
                self.frames.append(frame)
                self.bytes += len(frame)
                if self.bytes > self.limit:
                    return False
        return False


def _calls(n: int) -> str:
    return f"{n} call" if n == 1 else f"{n} calls"
