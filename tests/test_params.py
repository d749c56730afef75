import pytest

from contrasweep.errors import SpecError
from trainables.params import LOOP_PARAMS, Param


def test_yaml_style_strings_are_coerced():
    assert LOOP_PARAMS["lr"].coerce("lr", "1e-5") == pytest.approx(1e-5)
    assert LOOP_PARAMS["batch_size"].coerce("batch_size", "32") == 32
    assert LOOP_PARAMS["batch_size"].coerce("batch_size", 32.0) == 32
    assert LOOP_PARAMS["amp"].coerce("amp", "true") is True


@pytest.mark.parametrize(
    "key, value, allowed",
    [
        ("lr", 0.0, "(0, 1]"),
        ("lr", "fast", "(0, 1]"),
        ("batch_size", 2.5, "integer"),
        ("warmup_ratio", 1.0, "[0, 1)"),
        ("epochs", 0, "[1, 10000]"),
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
