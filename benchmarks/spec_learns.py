"""Does each shipped paper spec learn? Its reported point at its smallest data setting, a few
repeats, on the bundled data with the default encoder (MiniLM), against its data's chance level
(issue 55). Not a test: real sweeps (`contrasweep run`), on CPU.

    python benchmarks/spec_learns.py [--specs lacon.yaml scl_moo.yaml ...] [--repeats 3] [--workdir DIR]
                                     [--max-steps N]   # a CPU-sized cap on each trial's optimiser steps
                                     [--max-concurrent 1]  # batches of 480-1024 rows: one trial at a time
                                     [--set fixed.gradient_checkpointing=true ...]  # any override, as for run
    python benchmarks/spec_learns.py --issue-runs      # issue 55's four runs that learned nothing

For each spec the sweep is cut to one configuration: the reported point, every other grid key at
its default as the spec runs the point (a spec that reports none: the first value of each grid key); the setting
with the fewest training examples (the smallest ``k`` or ``n_total``; the first value of any other
setting axis); ``--repeats`` repeats (the first values of a listed ``data.seed``, else that many
training seeds); no early stopping. Everything else is the spec's own: its epochs (or
``fixed.max_steps``), batch size, lr; with ``--max-steps N`` a point whose budget is more than N
optimiser steps trains N (``fixed.max_steps``: its schedule and warm-up scaled to them; a lower
bound on what the spec's own budget learns, said in the table's "spec steps" column). The verdict is the sweep's own
(``contrasweep.tracking.verdict``: a one-sided t-test of the repeats' ``best/val/<metric>``
against their data's chance level at ``evaluation.alpha``), read from its record; the sweep's
summary lines are printed as they came. Results: ``benchmarks/results/spec_learns_<date>.json``.

``--issue-runs``: the four runs of issue 55's table (SCL-MOO's data at N = 20 with 4 data seeds:
CE, and SCL-MOO LS and EPO at Sec. 3's point; tweet sentiment few-shot k = 10, 6 repeats: CE and
SCL-MOO EPO), then the report comparing each pair (its main table says whether both sides are
at chance level).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
PAPER_SPECS = ("ce.yaml", "ce_scl.yaml", "lacon.yaml", "lacon_fusion.yaml", "scl_moo.yaml", "supcl_seq.yaml",
               "abalone.yaml", "simcse.yaml", "vascl.yaml")
SMALLEST = ("k", "n_total")  # setting axes whose smallest value trains on the fewest examples


def one_point(spec: dict, repeats: int, concurrent: int = 2) -> dict:
    """The spec cut to its reported point at its smallest setting, ``repeats`` repeats, no early stopping."""
    out = copy.deepcopy(spec)
    from contrasweep.spec.sweep import hp_defaults

    grid = out.get("grid") or {}
    blocks = grid if isinstance(grid, list) else [grid]
    first = {k: v[0] if isinstance(v, list) else v for block in reversed(blocks) for k, v in block.items()}
    if out.get("reported"):  # the paper's point: what it does not report trains at its default, as the spec runs it
        defaults = hp_defaults(out["method"])
        first = {k: defaults.get(k, v) for k, v in first.items()}
    point = {**first, **(out.get("reported") or {})}
    out["grid"] = {k: [v] for k, v in point.items()}
    out.pop("search", None)
    data = out.setdefault("data", {})
    for key, value in list(data.items()):
        if isinstance(value, list) and key in SMALLEST:
            data[key] = min(value)
        elif isinstance(value, list) and key not in ("seed", "split_seed"):
            data[key] = value[0]
    sweep = out.setdefault("sweep", {})
    if isinstance(data.get("seed"), list):
        data["seed"] = data["seed"][:repeats]
        sweep["seeds"] = (sweep.get("seeds") or [0])[:1]
    else:
        sweep["seeds"] = list(range(repeats))
    sweep.update(searcher="grid", scheduler="none", max_concurrent=concurrent, resources={"cpu": 1})
    sweep.pop("racing", None)
    sweep.pop("budget", None)
    return out


def spec_steps(spec: dict) -> int:
    """The optimiser steps a trial of the one-point ``spec`` trains (its setting's most), as
    ``plan`` counts them: the data is prepared (tokenised into the cache the sweep then reuses)."""
    from contrasweep.runner.inputs import prepare_data
    from contrasweep.runner.plan_steps import setting_steps
    from contrasweep.runner.sweep_plan import sizes_of
    from contrasweep.spec.load import validate

    sweep = validate(copy.deepcopy(spec))
    return max(most for _, most in setting_steps(sweep, sizes_of(prepare_data(sweep))).values())


def capped(spec: dict, max_steps: int | None) -> tuple[dict, int | None]:
    """``spec`` with at most ``max_steps`` optimiser steps a trial, and the steps the spec's own
    budget trains (None without a cap)."""
    if not max_steps:
        return spec, None
    own = spec_steps(spec)
    if own <= max_steps:
        return spec, own
    out = copy.deepcopy(spec)
    out["fixed"] = {**(out.get("fixed") or {}), "max_steps": max_steps}
    for section in ("grid", "reported"):
        (out.get(section) or {}).pop("epochs", None)
    return out, own


def issue_runs() -> dict[str, dict]:
    """Issue 55's table: name -> spec."""
    moo = yaml.safe_load((ROOT / "search_spaces" / "scl_moo.yaml").read_text())
    moo_point = {"temperature": [0.3], "lam": [0.3], "r1": [0.1]}
    bbc = copy.deepcopy(moo)
    bbc["data"].update(n_total=20, seed=[0, 1, 2, 3])
    bbc["fixed"] = {"lr": 1.0e-5, "batch_size": 16, "classifier_dropout": 0.1, "epochs": 10}  # as the issue ran it (20 steps)
    for key in ("search", "reported"):
        bbc.pop(key, None)
    bbc["sweep"].update(scheduler="none", max_concurrent=2, resources={"cpu": 1})
    ce = {**copy.deepcopy(bbc), "method": "ce", "grid": {}}
    ce["fixed"] = {k: v for k, v in ce["fixed"].items() if k != "classifier_dropout"}
    tweet_data = {"source": "tweet_sentiment", "protocol": "few_shot", "k": 10, "seed": [0, 1, 2, 3, 4, 5]}
    tweet_fixed = {"lr": 2.0e-5, "batch_size": 16, "epochs": 10}
    tweet_ce = {**copy.deepcopy(ce), "data": tweet_data, "fixed": tweet_fixed}
    tweet_moo = {**copy.deepcopy(bbc), "data": tweet_data, "fixed": {**tweet_fixed, "classifier_dropout": 0.1},
                 "grid": {**moo_point, "moo": ["epo"]}}
    return {"issue55-bbc-n20-ce": ce, "issue55-bbc-n20-scl-moo": {**bbc, "grid": {**moo_point, "moo": ["ls", "epo"]}},
            "issue55-tweet-k10-ce": tweet_ce, "issue55-tweet-k10-scl-moo-epo": tweet_moo}


def run(name: str, spec: dict, work: Path, uri: str, own_steps: int | None = None) -> dict:
    from contrasweep.folder.record import read as read_record

    spec = {**spec, "name": name, "tracking": {**(spec.get("tracking") or {}), "experiment": "spec-learns"}}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    folder = work / "sweeps" / name
    seconds = None
    if not folder.exists():  # a sweep already in the work dir is only read back
        started = time.perf_counter()
        cmd = [sys.executable, "-m", "contrasweep", "--root", str(work / "sweeps"), "run", str(path), "--name", name,
               "--tracking-uri", uri, "--no-tsne"]
        done = subprocess.run(cmd, env={**os.environ}, cwd=work, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        print(done.stderr.strip(), done.stdout.strip(), sep="\n", flush=True)
        if done.returncode not in (0, 1) or not (folder / "tracking.json").exists():  # 1: a trial failed, the sweep ran
            return {"name": name, "error": done.stderr.strip().splitlines()[-1:], "seconds": seconds}
    record = read_record(folder / "tracking.json")
    out = {"name": name, "method": spec["method"], "data": spec["data"], "grid": spec.get("grid"),
           "fixed": spec.get("fixed"), "seconds": seconds, "spec_steps": own_steps, "configurations": []}
    for group, judged in record.get("verdicts", {}).items():
        values = [e["best_value"] for e in record["trials"].values() if e.get("group") == group and "best_value" in e]
        out["configurations"].append({"group": group, "values": values, **judged})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", nargs="+", default=list(PAPER_SPECS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--issue-runs", action="store_true")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--max-concurrent", type=int, default=2, help="trials at once (default 2, one a core)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a value of each one-point spec, as for `contrasweep run --set`")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="CPU-sized: train at most this many optimiser steps a trial (default: the spec's budget)")
    args = parser.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="contrasweep-learns-"))
    work.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    if args.issue_runs:
        specs = issue_runs()
    else:
        specs = {f"learns-{Path(s).stem}": one_point(yaml.safe_load((ROOT / "search_spaces" / s).read_text()), args.repeats,
                                                      args.max_concurrent) for s in args.specs}
    results = []
    from contrasweep.spec.load import apply_override

    for name, spec in specs.items():
        for item in args.set:
            apply_override(spec, item)
        spec, own = capped(spec, args.max_steps)
        results.append(run(name, spec, work, uri, own))
    if args.issue_runs:  # each pair in one report: the main table says whether both sides are at chance level
        for pair in (("issue55-bbc-n20-scl-moo", "issue55-bbc-n20-ce"), ("issue55-tweet-k10-scl-moo-epo", "issue55-tweet-k10-ce")):
            cmd = [sys.executable, "-m", "contrasweep", "--root", str(work / "sweeps"), "report", pair[0], "--compare",
                   pair[1], "--baseline", pair[1], "--tracking-uri", uri, "--no-tsne", "--out", str(work / f"report-{pair[0]}")]
            print(subprocess.run(cmd, cwd=work, capture_output=True, text=True).stdout, flush=True)
        listed = subprocess.run([sys.executable, "-m", "contrasweep", "--root", str(work / "sweeps"), "list"],
                                cwd=work, capture_output=True, text=True).stdout
        print(listed, flush=True)
    print("| run | method | repeats | best val mean | chance | p | steps | spec steps | learned | sweep s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for c in r.get("configurations", []):
            p = "–" if c.get("p_value") is None else f"{c['p_value']:.2g}"
            print(f"| {r['name']} | {r['method']} | {c['n']} | {c['mean']:.4f} | {c['level']:.4f} | {p} | {c.get('steps') or '–'} "
                  f"| {r.get('spec_steps') or '–'} | {'yes' if c['learned'] else 'no'} | {r['seconds'] or 0:.0f} |")
        if "error" in r:
            print(f"| {r['name']} | error: {r['error']} |")
    out = ROOT / "benchmarks" / "results" / f"spec_learns_{time.strftime('%Y-%m-%d_%H%M')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"issue_runs": args.issue_runs, "results": results}, indent=1, default=str))
    print(f"\n{out}\nMLflow: {uri}")


if __name__ == "__main__":
    main()
