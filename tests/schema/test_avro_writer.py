"""The generated Avro encoder against fastavro, differentially: for every value it encodes,
the bytes are fastavro's; for every value it gives up on, the serializer's bytes (fastavro's
path) are still fastavro's; the schemas it does not cover it declines."""

from __future__ import annotations

import datetime
import decimal
import io
import uuid
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.schema._avro_writer import Fallback, _decimal_bytes, _long, _zigzag_bytes, compile_writer

SCHEMA = {
    "type": "record", "name": "All", "namespace": "kw.gen",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "b", "type": "boolean"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "y", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "x", "type": {"type": "fixed", "name": "X", "size": 3}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt2", "type": ["long", "null"]},
        {"name": "arr", "type": {"type": "array", "items": "long"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "rec", "type": {"type": "record", "name": "R", "fields": [
            {"name": "a", "type": "string"}, {"name": "e2", "type": "E"}]}},
        {"name": "recs", "type": {"type": "array", "items": "R"}},
        {"name": "maybe", "type": ["null", "R"]},
    ],
}
PARSED = parse_schema(SCHEMA)
WRITE = compile_writer(PARSED)
ZONES = [datetime.timezone.utc, datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
         datetime.timezone(-datetime.timedelta(hours=8))]


def fastavro_bytes(value: Any, parsed: Any = PARSED) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parsed, value)
    return out.getvalue()


def generated_bytes(value: Any, write: Any = WRITE) -> bytes:
    out = bytearray()
    write(value, out)
    return bytes(out)


INT = st.integers(-(2**31), 2**31 - 1)
LONG = st.integers(-(2**63), 2**63 - 1)
DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: d.as_tuple().exponent >= -4 and len(d.as_tuple().digits) <= 20) | st.decimals(
    min_value=-10**15, max_value=10**15, places=4, allow_nan=False, allow_infinity=False)
AWARE = st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30),
                     timezones=st.sampled_from(ZONES))
R = st.fixed_dictionaries({"a": st.text(max_size=80), "e2": st.sampled_from(["A", "B", "C"])})
VALUES = st.fixed_dictionaries({
    "i": INT, "l": LONG, "b": st.booleans(),
    "f": st.floats(width=32, allow_nan=False), "d": st.floats(allow_nan=False),
    "s": st.text(max_size=100), "y": st.binary(max_size=100), "n": st.none(),
    "e": st.sampled_from(["A", "B", "C"]), "x": st.binary(min_size=3, max_size=3),
    "dec": DECIMALS, "tsm": AWARE | LONG, "tsu": AWARE | st.integers(-(2**62), 2**62),
    "day": st.dates() | INT, "tm": st.times() | st.integers(0, 86_400_000),
    "tu": st.times() | st.integers(0, 86_400_000_000), "u": st.uuids() | st.uuids().map(str),
    "opt": st.none() | st.text(max_size=70), "opt2": st.none() | LONG,
    "arr": st.lists(LONG, max_size=70), "m": st.dictionaries(st.text(max_size=10), st.none() | st.floats(allow_nan=False),
                                                            max_size=5),
    "rec": R, "recs": st.lists(R, max_size=3), "maybe": st.none() | R,
})


def test_the_schema_is_covered() -> None:
    assert WRITE is not None


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_generated_bytes_are_fastavros(value: dict[str, Any]) -> None:
    try:
        mine = generated_bytes(value)
    except Fallback:
        # Only the inputs it cannot vouch for: none of these here but out-of-range
        # decimals (more digits than the precision after scaling is fastavro's call).
        with pytest.raises(Fallback):
            _decimal_bytes(value["dec"], 4, 20)
        value = value | {"dec": decimal.Decimal("0.0001")}
        mine = generated_bytes(value)
    assert mine == fastavro_bytes(value)


def test_varints_at_every_boundary() -> None:
    for bits in range(64):
        for n in (2**bits - 1, 2**bits, -(2**bits), -(2**bits) - 1):
            if -(2**63) <= n < 2**63:
                assert _long(n) == _zigzag_bytes(n), n
    with pytest.raises(Fallback):
        _long(2**63)


def base_value() -> dict[str, Any]:
    utc = datetime.timezone.utc
    return {"i": 1, "l": -2, "b": True, "f": 1.5, "d": -0.25, "s": "é" * 40, "y": b"\x00" * 70, "n": None, "e": "C",
            "x": b"abc", "dec": decimal.Decimal("-12345.6789"), "tsm": datetime.datetime(1960, 5, 1, 3, 4, 5, 999, tzinfo=utc),
            "tsu": datetime.datetime(2262, 1, 1, tzinfo=utc), "day": datetime.date(1900, 1, 1),
            "tm": datetime.time(23, 59, 59, 999999), "tu": datetime.time(0, 0, 0, 1), "u": uuid.UUID(int=7),
            "opt": None, "opt2": 5, "arr": list(range(-70, 70)), "m": {"k": None, "v": 2.0},
            "rec": {"a": "x", "e2": "A"}, "recs": [], "maybe": {"a": "", "e2": "B"}}


def test_a_full_value() -> None:
    value = base_value()
    assert generated_bytes(value) == fastavro_bytes(value)
    # fastavro counts the digits as written, not once scaled: so does the generated code.
    big = value | {"dec": decimal.Decimal("1E+30"), "s": "x" * 300, "arr": list(range(200))}
    assert generated_bytes(big) == fastavro_bytes(big)


@pytest.mark.parametrize("field, value", [
    ("i", True),                                       # a bool where an int goes
    ("i", 2**31),                                      # outside an int
    ("f", 1),                                          # an int where a float goes
    ("tsm", datetime.datetime(2026, 1, 1)),            # naive: local time to fastavro
    ("day", datetime.datetime(2026, 1, 1, 5)),         # a datetime where a date goes
    ("dec", decimal.Decimal("1.23456")),               # more places than the scale
    ("dec", decimal.Decimal("1" * 21)),                # more digits than the precision
    ("rec", ("kw.gen.R", {"a": "x", "e2": "A"})),      # fastavro's (name, record) notation
    ("arr", (1, 2)),                                   # a tuple for an array
    ("x", b"ab"),                                      # a fixed of the wrong size
])
def test_values_it_leaves_to_fastavro(field: str, value: Any) -> None:
    full = base_value() | {field: value}
    with pytest.raises(Exception):
        generated_bytes(full)


def test_a_missing_field_is_left_to_fastavro() -> None:
    schema = parse_schema({"type": "record", "name": "D", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "dflt"}]})
    write = compile_writer(schema)
    assert write is not None
    with pytest.raises(KeyError):
        generated_bytes({"a": 1}, write)
    assert fastavro_bytes({"a": 1}, schema) == b"\x02\x08dflt"


@pytest.mark.parametrize("schema", [
    {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "long", "string"]}]},
    {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
    {"type": "fixed", "name": "FD", "size": 8, "logicalType": "decimal", "precision": 10, "scale": 2},
    {"type": "long", "logicalType": "local-timestamp-millis"},
])
def test_schemas_it_declines(schema: Any) -> None:
    assert compile_writer(parse_schema(schema)) is None
