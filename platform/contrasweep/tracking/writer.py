"""The tracker's MLflow writes off Tune's event loop (docs/architecture.md, "The tracker's write
path"): one background thread runs them in the order they were submitted, while the loop goes on
scheduling trials.

The loop writes the sweep's record (``tracking.json``) first, then submits the MLflow write. The
write's ``then`` is the record's own follow-up (a run id filled in, ``pending`` or ``unlogged``
cleared). The loop runs it the next time it drains the writer (every tracker hook), so only the
loop changes the record. What a SIGKILL leaves unwritten is still in the record, and ``resume``
writes it (``contrasweep.tracking.tracker``'s catch-up). Epoch rows carry their result's
timestamp, so MLflow's SQL store skips a row it already holds. A run is found by its
``contrasweep.trial_id`` tag when its id never reached the record.

The first store error stops the writer: later writes are not tried, and ``drain`` hands the
error to the loop (``MlflowTracker.store_failed``). Any other error skips its write only and is
raised on the loop by ``drain`` (Tune reports it as it would have). A writer without a thread
(``StoreWriter(sync=True)``) runs each write and its follow-up when it is submitted, and its
errors reach the caller: resume's catch-up, the test phase and the keeping of models use it,
where no Tune loop waits.

May import: ``contrasweep.tracking.store``.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Callable

from contrasweep.tracking.store import store_errors


class StoreWriter:
    def __init__(self, sync: bool = False):
        self.sync = sync
        self.error: BaseException | None = None
        self._ops: queue.Queue = queue.Queue()
        self._done: collections.deque = collections.deque()
        self._raised: collections.deque = collections.deque()  # errors other than the store's
        self._thread = None
        self.cpu_s = 0.0  # the writer thread's CPU seconds so far (benchmarks/trial_scale.py)
        if not sync:
            self._thread = threading.Thread(target=self._work, name="contrasweep-mlflow-writer", daemon=True)
            self._thread.start()

    def submit(self, op: Callable[[], object], then: Callable[[], object] | None = None) -> None:
        """Run ``op`` (MLflow writes) on the writer thread; ``then`` on the loop once it has."""
        if self.error is not None:
            return  # the store failed: what is left waits in the record for `resume`
        if self.sync:  # errors reach the caller as they did before the writer
            op()
            if then is not None:
                then()
            return
        self._ops.put((op, then))

    def _run(self, op, then) -> None:
        try:
            op()
        except store_errors() as exc:
            self.error = exc
            return
        except Exception as exc:  # noqa: BLE001 - raised on the loop by drain()
            self._raised.append(exc)
            return
        if then is not None:
            self._done.append(then)

    def _work(self) -> None:
        while True:
            item = self._ops.get()
            try:
                if item is None:
                    return
                if self.error is None:
                    self._run(*item)
                self.cpu_s = time.thread_time()
            finally:
                self._ops.task_done()

    def drain(self) -> BaseException | None:
        """On the loop: the follow-ups of the writes done so far; the store's error, if one
        stopped the writer (any other error is raised here, where Tune reports it)."""
        while self._done:
            self._done.popleft()()
        if self._raised:
            raise self._raised.popleft()
        return self.error

    def wait(self) -> None:
        """Until every write submitted so far has run (or been skipped after a store error)."""
        if self._thread is not None and self._thread.is_alive():
            self._ops.join()

    def flush(self) -> BaseException | None:
        """``wait``, then ``drain``."""
        self.wait()
        return self.drain()

    def close(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._ops.put(None)
            self._thread.join()
