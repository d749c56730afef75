"""Sessions for the loop's tests (torch: imported by the tests that run the loop, not by helpers)."""

from __future__ import annotations

from trainables.sessions import LocalSession


class PruningSession(LocalSession):
    prune = True  # as Tune and Train sessions do: only the best epoch's folder stays


class CrashAfter(LocalSession):
    """A session whose process 'dies' (raises ``error``) right after its n-th report."""

    error: type[BaseException] = RuntimeError

    def __init__(self, root, n, **kwargs):
        super().__init__(root, **kwargs)
        self.n = n

    def report(self, metrics, checkpoint_dir):
        super().report(metrics, checkpoint_dir)
        if len(self.reports) == self.n:
            raise self.error("killed")
