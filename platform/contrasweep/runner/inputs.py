"""What every trial of a sweep reads: each data variant tokenised once (the content-hashed cache),
put once into Ray's object store, and the static configuration the trials share
(docs/architecture.md, "Data flow").

May import: ``contrasweep.data``, ``contrasweep.spec``, ``contrasweep.search.registry``,
``contrasweep.runner.shipping``, ``contrasweep.folder`` (the sweep's folder); Ray (inside ``put_data``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from contrasweep.data import DataConfig, load_splits, prepare
from contrasweep.data.multilabel.prepare import MultiLabelConfig, is_multilabel, prepare_multilabel
from contrasweep.data.prepare import data_notes as notes_of
from contrasweep.data.sts import prepare_sts as tokenise_pairs
from contrasweep.folder import sweeps
from contrasweep.runner.shipping import worker_path
from contrasweep.search.registry import check, pause_epochs, reported_names, tests_in_trials
from contrasweep.spec.axes import expand, keep_order
from contrasweep.spec.identity import reported_config
from contrasweep.spec.load import validate
from contrasweep.spec.names import hp_values
from contrasweep.spec.static import SweepStatic
from contrasweep.spec.sweep import Sweep


def load_sweep(sweep_dir: sweeps.SweepDir, raw: dict | None = None) -> Sweep:
    """The sweep a folder holds (its ``spec.yaml``, or ``raw``), validated, with its data
    variants in the order its trials ran them (``sweep.json``'s ``variant_order``, written by
    ``contrasweep extend``: new variants come after those that ran)."""
    sweep = check(validate(sweep_dir.spec() if raw is None else raw))
    order = sweep_dir.meta().get("variant_order")
    if order and sweep.variants:
        sweep.variants = keep_order(sweep.variants, order)
    return sweep


def prepare_data(sweep: Sweep) -> list:
    """Tokenise every data variant once into the content-hashed cache (no Ray needed: bad
    data fails before any process starts or any sweep folder is made). One ``PreparedData``
    per variant, in ``sweep.variants`` order."""
    out = []
    for variant in sweep.variants or expand(sweep.data, is_multilabel(sweep.data)):
        if is_multilabel(sweep.data):
            out.append(
                prepare_multilabel(
                    MultiLabelConfig.from_dict(variant.data), sweep.encoder["name"], sweep.encoder["max_length"]
                )
            )
        else:
            out.append(
                prepare(
                    DataConfig.from_dict(variant.data),
                    tokenizer=sweep.encoder["name"],
                    max_length=sweep.encoder["max_length"],
                )
            )
    return out


SPLIT_NAMES = ("train", "validation", "test")


def split_rows(prepared) -> dict:
    """One data variant's rows per split, and the labelled source rows in none of them
    (``PreparedData.unused``; None where they are not known): what ``run``'s first line and
    ``plan`` say of it (docs/spec.md, "How the splits are carved")."""
    rows = {split: int(prepared.stats.get(split, {}).get("n", 0)) for split in SPLIT_NAMES}
    return {**rows, "unused": getattr(prepared, "unused", None)}


def sizes_text(rows: dict) -> str:
    """``train 64 / validation 64 / test 48 rows`` of ``split_rows``."""
    return " / ".join(f"{split} {rows[split]}" for split in SPLIT_NAMES) + " rows"


def rows_line(prepared: list) -> str:
    """The first variant's split sizes, for the sweep's first line."""
    first = sizes_text(split_rows(prepared[0]))
    return first + (f" in the first of {len(prepared)} data variants" if len(prepared) > 1 else "")


def data_notes(prepared: list) -> list[str]:
    """Every variant's notes on its data (``contrasweep.data.prepare.data_notes``), each once."""
    return list(
        dict.fromkeys(
            note for one in prepared for note in notes_of(one.stats, one.dropped, getattr(one, "labels", None))
        )
    )


def reported_line(sweep: Sweep) -> str | None:
    """The console's line for a reported point outside the user's grid (``Sweep.outside_reported``):
    the values it trains with for the swept keys, as run names show them; None inside the grid."""
    outside = reported_names(sweep)
    if not outside:
        return None
    point = {**outside["defaults"], **outside["config"]}
    values = hp_values(point, sweep.method, sweep.varied)
    return (
        "the spec's reported point runs first, as a configuration of its own outside the grid "
        f"(its runs are named '(reported)'): {values}"
    )


def prepare_sts(sweep: Sweep) -> dict | None:
    """STS pairs of ``evaluation.sts``, tokenised once on the driver (None without one)."""
    source = sweep.evaluation.get("sts")
    return tokenise_pairs(source, sweep.encoder["name"], sweep.encoder["max_length"]) if source else None


def put_data(prepared: list, sts: dict | None = None) -> list:
    """One copy of each variant's tokenised splits (and the STS pairs) in the object store,
    shared by every trial of that variant."""
    import ray

    refs = []
    for one in prepared:
        payload = {"tables": load_splits(one.path), "num_labels": one.num_labels, "label_names": one.label_names}
        if sts is not None:
            payload["sts"] = sts
        refs.append(ray.put(payload))
    return refs


def sweep_static(sweep: Sweep, sweep_dir: sweeps.SweepDir, prepared: list, shipped: Sequence[str] = ()) -> SweepStatic:
    """The sweep's fixed part (``contrasweep.spec.static``), built once per driver; ``shipped``:
    the local files a cluster's workers get (``paths``: where a worker reads each)."""
    static = SweepStatic.of(
        sweep,
        prepared,
        sweep_dir,
        paths={value: worker_path(value) for value in shipped},
        tests_in_trials=tests_in_trials(sweep),
        reported=reported_names(sweep),
    )
    # the scheduler's pause epochs for these variants' training rows (a max_steps budget's epochs):
    # the rungs the scheduler builds from the same static (search.schedulers)
    return dataclasses.replace(
        static,
        checkpoint_at=tuple(pause_epochs(sweep, static.train_rows)),
        reported_config=reported_config(sweep, static),
    )
