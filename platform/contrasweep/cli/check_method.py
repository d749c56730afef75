"""``contrasweep check-method METHOD [--set KEY=VALUE ...]``: the method's contract with the loop
(``trainables.contract``), checked on a tiny random BERT and a toy task in a few seconds,
printed as a table; exit 0 when every check passes, 1 when one fails, 2 (one line) when the
method cannot be imported or declared (docs/methods-own.md).

May import: ``contrasweep.errors``, ``trainables`` (the contract, torch: this command trains).
"""

from __future__ import annotations

import yaml

from contrasweep.errors import UserError


def overrides(items: list[str]) -> dict:
    """``--set KEY=VALUE`` as {key: value}; the value read as YAML (``1e-3``, ``[0.0, 0.1]``, ``true``)."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or "." in key:
            raise UserError(
                f"--set {item!r} is not allowed; allowed: KEY=VALUE with a hyperparameter name as KEY, "
                "e.g. --set temperature=0.1"
            )
        try:
            out[key.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            out[key.strip()] = text
    return out


def cmd_check_method(args) -> int:
    import transformers

    from trainables.contract import CHECKS, check_method

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar per check
    results = check_method(args.method, overrides(args.overrides))
    what = {name: text for name, text, _ in CHECKS}
    width = max(len(r.name) for r in results)
    print(f"contrasweep check-method {args.method}: a tiny random BERT (2 layers, 48 wide) on a toy task")
    print(f"{'check':<{width}}  result  detail")
    for r in results:  # a pass says what was checked and what it found; a failure, why
        detail = f"{what[r.name]}: {r.detail}" if r.passed else r.detail
        print(f"{r.name:<{width}}  {'pass' if r.passed else 'FAIL':<6}  {detail}")
    failed = [r.name for r in results if not r.passed]
    print(
        f"{len(results) - len(failed)} of {len(results)} checks passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0
