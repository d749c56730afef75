"""data.labels (issue 57): class names that differ only in surrounding spaces are one class by
default, names that differ only in case are named with the setting that merges them, and a
few-shot draw a class cannot give names the short classes with their rows and what works.

The data is a new user's: support messages as JSON lines with an ``intent`` column, four
intents and two messy rows (``'billing '`` and ``'Billing'``)."""

from __future__ import annotations

import json

import pytest

from contrasweep.data import prepare
from contrasweep.data.prepare import data_notes
from contrasweep.errors import DataError

INTENTS = ("account", "billing", "returns", "shipping")


def _support(path, per_intent=40, messy=("billing ", "Billing")):
    rows = [{"message": f"message {i} about {intent}", "intent": intent}
            for intent in INTENTS for i in range(per_intent)]
    rows += [{"message": f"odd message {i}", "intent": label} for i, label in enumerate(messy)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture()
def support(tmp_path):
    return _support(tmp_path / "support.jsonl")


@pytest.fixture()
def run(tiny_model_dir, cache_dir):
    def _run(**cfg):
        return prepare({"text": "message", "label": "intent", **cfg}, tokenizer=tiny_model_dir, max_length=16)

    return _run


def _rows(prep) -> dict:
    return {name: sum(prep.stats[s]["per_class"][name] for s in ("train", "validation", "test"))
            for name in prep.label_names}


def test_spaces_are_stripped_by_default_and_a_case_variant_is_named_with_its_setting(run, support):
    prep = run(source=support)
    assert prep.label_names == ["Billing", "account", "billing", "returns", "shipping"]
    assert _rows(prep)["billing"] == 41  # 'billing ' is billing
    assert prep.labels == {"merged": {"billing": ["billing", "billing "]},
                           "similar": [{"names": ["Billing", "billing"], "differ_in": "case",
                                        "set": "data.labels.casefold: true"}]}
    notes = data_notes(prep.stats, prep.dropped, prep.labels)
    assert notes[:2] == [
        "labels 'billing' and 'billing ' are one class 'billing' (data.labels: surrounding spaces stripped)",
        "labels 'Billing' and 'billing' differ only in case: set data.labels.casefold: true to merge them",
    ]
    again = run(source=support)  # the cache keeps what was merged and what was not
    assert again.cache_hit and again.labels == prep.labels


def test_casefold_merges_the_case_variant_into_four_classes(run, support):
    prep = run(source=support, labels={"casefold": True})
    assert prep.label_names == list(INTENTS)
    assert _rows(prep) == {"account": 40, "billing": 42, "returns": 40, "shipping": 40}
    assert prep.labels == {"merged": {"billing": ["Billing", "billing", "billing "]}}
    assert "case folded" in data_notes(prep.stats, prep.dropped, prep.labels)[0]
    assert prep.key != run(source=support).key  # another rule, another cache entry


def test_strip_false_keeps_the_spaced_label_and_names_the_setting(run, support):
    prep = run(source=support, labels={"strip": False})
    assert "billing " in prep.label_names and len(prep.label_names) == 6
    (similar,) = prep.labels["similar"]
    assert similar["names"] == ["Billing", "billing", "billing "]
    assert similar["set"] == "data.labels.casefold: true and data.labels.strip: true"
    cased = run(source=support, labels={"strip": False, "casefold": True})  # case folded, spaces kept
    assert cased.labels["merged"] == {"billing": ["Billing", "billing"]}
    assert data_notes(cased.stats, cased.dropped, cased.labels)[0] == (
        "labels 'Billing' and 'billing' are one class 'billing' (data.labels: case folded)")


def test_clean_labels_report_nothing(run, tmp_path):
    prep = run(source=_support(tmp_path / "clean.jsonl", messy=()))
    assert prep.labels == {} and data_notes(prep.stats, prep.dropped, prep.labels) == []


def test_few_shot_shortfall_names_the_short_class_and_the_merge_that_works(run, support):
    """9dfe1bb said `... it has 1; allowed: k <= 0` for the stray 'Billing '."""
    with pytest.raises(DataError) as excinfo:
        run(source=support, protocol="few_shot", k=8)
    message = str(excinfo.value)
    assert "\n" not in message and "k <= 0" not in message
    assert "needs 16 training rows of each class (as many for train as for validation); short: 'Billing' has " in message
    assert "allowed: drop class 'Billing'" in message
    assert message.endswith("or merge 'Billing' and 'billing' (they differ only in case): data.labels.casefold: true")
    prep = run(source=support, protocol="few_shot", k=8, labels={"casefold": True})  # what the line says works
    assert prep.label_names == list(INTENTS) and prep.stats["train"]["n"] == 32


def test_few_shot_shortfall_gives_the_largest_k_every_class_can_give(run, support):
    with pytest.raises(DataError) as excinfo:
        run(source=support, protocol="few_shot", k=15, labels={"casefold": True})
    message = str(excinfo.value)
    # 70 % of each class is training: 28 rows (billing 29 or 30), so k <= 14
    assert "short: 'account' has 28 (needs 30), " in message and "allowed: k <= 14 (the most every class can give)" in message
    assert "or merge" not in message  # nothing left to merge
    run(source=support, protocol="few_shot", k=14, labels={"casefold": True})


@pytest.mark.parametrize("labels, fragment", [
    ({"strip": "yes"}, "data.labels.strip must be true or false, got 'yes'"),
    ({"lower": True}, "data.labels {'lower': True} is not allowed; allowed: a mapping of strip (true/false, default "
                      "true), casefold (true/false, default false)"),
    ("casefold", "data.labels 'casefold' is not allowed"),
])
def test_bad_label_rules_are_one_line_errors(run, support, labels, fragment):
    with pytest.raises(DataError) as excinfo:
        run(source=support, labels=labels)
    assert fragment in str(excinfo.value) and "\n" not in str(excinfo.value)
