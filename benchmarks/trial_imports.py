"""What a trial process pays to import before it trains (issue 39, part 5).

Each side runs in a fresh Python process, in turns (A B A B ...), and its wall time is read from
outside: A is the trial's import chain as it is (the loop, its Tune session, the method's
module), B is the same chain plus ``sklearn.metrics``, which the chain imported for accuracy,
macro-F1 and MCC until those were computed from a confusion matrix (``trainables/metrics.py``).
The ratio A/B is taken pair by pair, so the machine's drift between runs cancels. It also prints
which heavy packages each method's chain leaves out.

    python benchmarks/trial_imports.py [--runs 7] [--method ce]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ("from trainables.loop import train; from trainables.sessions import TuneSession; "
         "from trainables.registry import get_method; get_method({method!r})")
HEAVY = ("sklearn", "scipy", "pandas")
METHODS = ("ce", "ce_scl", "lacon", "supcl_seq", "scl_moo", "simcse", "vascl", "abalone")


def timed(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
                                                                             "PATH": "/usr/bin:/bin"})
    return time.perf_counter() - started


def heavy_modules(method: str) -> list[str]:
    code = CHAIN.format(method=method) + f"; import sys; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True,
                         env={"PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}", "PATH": "/usr/bin:/bin"})
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--method", default="ce")
    args = parser.parse_args()
    chain = CHAIN.format(method=args.method)
    sides = {"A": chain, "B": chain + "; import sklearn.metrics"}
    timed(sides["A"])  # warm the file cache
    pairs = [(timed(sides["A"]), timed(sides["B"])) for _ in range(args.runs)]
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    print(f"trial import chain ({args.method}), {args.runs} paired runs, wall seconds (median, min-max):")
    print(f"  A as it is              {statistics.median(a):.2f} ({min(a):.2f}-{max(a):.2f})")
    print(f"  B + sklearn.metrics     {statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f})")
    print(f"  A / B (median of pairs) {statistics.median(x / y for x, y in pairs):.3f}")
    for method in METHODS:
        print(f"  {method:10s} imports {', '.join(heavy_modules(method)) or 'none of ' + ', '.join(HEAVY)}")


if __name__ == "__main__":
    main()
