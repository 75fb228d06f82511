"""JSON numbers as Go holds them: a float64 written by ``encoding/json`` (``'f'`` format, the
shortest digits, below 1e21) and read back by apimachinery's ``util/json`` (``convertNumber``:
int64 when the text parses as one); ``reflect.Value.Convert`` of one to an int field."""

import math
from typing import Any

import orjson
import pytest

from controlplane.gonumbers import (
    format_v,
    go_int,
    go_json,
    json_text,
    may_hold_uint64s,
    may_hold_whole_floats,
    uint64s_written_back,
    whole_floats_written_back,
    written_back,
)


@pytest.mark.parametrize(("value", "back"), [
    (80.0, 80),                                   # json.Marshal(80.0) is "80": an int64 read back
    (-0.0, 0),                                    # "-0", which ParseInt reads as 0
    (2.5, 2.5),
    (1e15, 10 ** 15),
    (2.0 ** 62, 4611686018427388000),             # the shortest digits, then zeros, as Go writes them
    (-(2.0 ** 53), -(2 ** 53)),
    (2.0 ** 63, 2.0 ** 63),                       # "9223372036854776000": past int64, a float64 again
    (-(2.0 ** 63), -(2.0 ** 63)),                 # "-9223372036854776000", though -2^63 is an int64
    (1e20, 1e20),
    (1e300, 1e300),                               # "1e+300"
])
def test_written_back_is_what_go_reads_back(value: float, back: float) -> None:
    got = written_back(value)
    assert (got, type(got)) == (back, type(back))


def test_written_back_keeps_what_is_not_a_whole_number() -> None:
    assert math.isnan(written_back(math.nan)) and written_back(math.inf) == math.inf


@pytest.mark.parametrize(("value", "bits", "go"), [
    (3.0, 32, 3),
    (4294967299.0, 32, 3),                        # int64 4294967299, its low 32 bits
    (3000000000, 32, -1294967296),                # an int64 past an int32 wraps
    (-(2 ** 31), 32, -(2 ** 31)),
    (1e300, 64, -(2 ** 63)),                      # amd64's int64(f) of one past int64
    (1e300, 32, 0),                               # ... whose low 32 bits are 0
    (-5.0, 64, -5),
])
def test_go_int_is_reflects_convert(value: float, bits: int, go: int) -> None:
    assert go_int(value, bits) == go


def test_whole_floats_are_written_back_in_place() -> None:
    tree = {"a": 80.0, "b": [1.0, 2.5, {"c": 1e300, "d": "80.0"}], "e": 3, "f": True}
    assert whole_floats_written_back(tree)
    assert orjson.dumps(tree) == b'{"a":80,"b":[1,2.5,{"c":1e+300,"d":"80.0"}],"e":3,"f":true}'
    assert not whole_floats_written_back(tree)


def test_may_hold_whole_floats_finds_each_way_orjson_writes_one() -> None:
    for value in (80.0, 1e16, -3.0, 1e300):
        assert may_hold_whole_floats(orjson.dumps({"a": [value]}))
    assert not may_hold_whole_floats(orjson.dumps({"a": [80, 2.5, "x", True, None, 1e-7]}))


@pytest.mark.parametrize(("value", "go"), [
    (1e20, "100000000000000000000"),              # 'f' below 1e21: orjson wrote 1e+20
    (2.0 ** 63, "9223372036854776000"),           # the shortest digits, then zeros
    (9.3e18, "9300000000000000000"),
    (1e21, "1e+21"),                              # 'e' from 1e21
    (1.5e300, "1.5e+300"),
    (1e-6, "0.000001"),                           # 'f' from 1e-6: orjson wrote 1e-6
    (1.5e-6, "0.0000015"),
    (1e-7, "1e-7"),                               # 'e', its "e-07" cleaned up
    (1.5e-10, "1.5e-10"),
    (5e-324, "5e-324"),
    (0.1, "0.1"),
    (-2.5, "-2.5"),
    (-0.0, "-0"),
])
def test_json_text_is_gos_float_encoder(value: float, go: str) -> None:
    """encoding/json ``floatEncoder``: 'f' for 1e-6 <= |x| < 1e21, else 'e', ``strconv`` precision -1."""
    assert json_text(value) == go
    assert float(go) == value


def test_go_json_rewrites_only_the_floats_orjson_writes_otherwise() -> None:
    tree = {"a": 1e20, "b": "1e+20 and 1.5e-6", "c": [1.5e-6, 2.5, 1e21, 1e-7, 1.7e16], "d": {"e\\\"1e+16": 1e16}}
    assert go_json(orjson.dumps(tree)) == (
        b'{"a":100000000000000000000,"b":"1e+20 and 1.5e-6","c":[0.0000015,2.5,1e+21,1e-7,17000000000000000],'
        b'"d":{"e\\\\\\"1e+16":10000000000000000}}')
    plain = orjson.dumps({"a": 2.5, "b": "x-6", "c": 1e-7, "d": 1e300})
    assert go_json(plain) is plain


@pytest.mark.parametrize(("value", "go"), [
    (1e20, "1e+20"), (1e6, "1e+06"), (123456.5, "123456.5"), (1e-5, "1e-05"), (0.0001, "0.0001"),
    (-1.5, "-1.5"), (float("inf"), "+Inf"),
])
def test_format_v_is_gos_percent_v(value: float, go: str) -> None:
    assert format_v(value) == go


def test_integers_from_2_63_are_the_float64_go_decodes_as_it_writes_it_back() -> None:
    """apimachinery's util/json: an int64 when the text parses as one, else a float64, which Go
    writes in its shortest digits (then read back as orjson reads them: an int below 2^64)."""
    tree: dict[str, Any] = {"a": 9223372036854775808, "b": [9223372036854775807, {"c": 18446744073709551615}],
                            "d": "9223372036854775808", "e": -9223372036854775808}
    assert uint64s_written_back(tree)
    assert tree == {"a": 9223372036854776000, "b": [9223372036854775807, {"c": 18446744073709552000.0}],
                    "d": "9223372036854775808", "e": -9223372036854775808}
    assert type(tree["a"]) is int and type(tree["b"][1]["c"]) is float
    assert not uint64s_written_back(tree)  # (written back: the same again)
    assert may_hold_uint64s(b'{"a":9223372036854775808}') and not may_hold_uint64s(b'{"a":922337203685477580}')
