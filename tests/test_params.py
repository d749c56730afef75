import pytest

from contrasweep.errors import SpecError
from trainables.params import LOOP_PARAMS, Param, as_text


def test_yaml_style_strings_are_coerced():
    assert LOOP_PARAMS["lr"].coerce("lr", "1e-5") == pytest.approx(1e-5)
    assert LOOP_PARAMS["batch_size"].coerce("batch_size", "32") == 32
    assert LOOP_PARAMS["batch_size"].coerce("batch_size", 32.0) == 32
    assert LOOP_PARAMS["amp"].coerce("amp", "true") == "auto"  # the old boolean form


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("lr", 0.0, "(0, 1]"),
        ("lr", "fast", "(0, 1]"),
        ("batch_size", 2.5, "integer"),
        ("warmup_ratio", 1.0, "[0, 1)"),
        ("epochs", 0, "[1, 10000]"),
        ("max_steps", -1, "an integer in [0, 1000000000]"),
        ("max_steps", 1.5, "an integer in [0, 1000000000]"),
        ("amp", "maybe", "true or false"),
        ("lr", float("nan"), "(0, 1]"),
    ],
)
def test_bad_values_name_value_and_range(key, value, allowed):
    with pytest.raises(SpecError) as err:
        LOOP_PARAMS[key].coerce(key, value)
    message = str(err.value)
    assert key in message and allowed in message and "\n" not in message


def test_choices():
    p = Param("str", "a", choices=("a", "b"))
    assert p.coerce("x", "b") == "b"
    with pytest.raises(SpecError, match="one of 'a', 'b'"):
        p.coerce("x", "c")


def test_list_valued_parameter_and_its_text_form():
    p = Param("floats", [0.0, 0.1], 0.0, 1.0, high_open=True)
    assert p.coerce("d", [0, "0.1", 0.2]) == [0.0, 0.1, 0.2]
    assert p.coerce("d", "0.0,0.1,0.1") == [0.0, 0.1, 0.1]  # duplicates kept
    assert p.coerce("d", as_text([0.0, 0.05])) == [0.0, 0.05]  # round trip through a searcher
    assert as_text(0.3) == 0.3
    for bad in ([], [1.0], "x", 3, [0.1, None]):
        with pytest.raises(SpecError, match=r"allowed: a non-empty list of numbers in \[0, 1\)"):
            p.coerce("d", bad)
