"""JSON numbers as Go holds them: a float64 written by ``encoding/json`` (``'f'`` format, the
shortest digits, below 1e21) and read back by apimachinery's ``util/json`` (``convertNumber``:
int64 when the text parses as one); ``reflect.Value.Convert`` of one to an int field."""

import math

import orjson
import pytest

from controlplane.gonumbers import go_int, may_hold_whole_floats, whole_floats_written_back, written_back


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
