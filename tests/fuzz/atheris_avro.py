"""libFuzzer harness: the compiled Avro column decoder, its pure-Python twin and fastavro must
agree on any payloads.

Run it (installs nothing; `pip install atheris` first) with

    .venv/bin/python tests/fuzz/atheris_avro.py -max_total_time=60 [corpus_dir]

or without atheris, a seeded mutation loop over the seeds (byte changes, cuts, insertions):

    .venv/bin/python tests/fuzz/atheris_avro.py --loop [--seconds 300] [--seed N]

The first byte of an input picks one of SCHEMAS; the rest is cut into payloads at each
0xFF 0xFE pair and each one is framed with schema id 1 (or left as it is when the input's
second byte is odd, to reach the header checks).  The compiled decoder and the twin must
give the same arrays and the same errors, in both modes, and never crash; every row they
decode must be what fastavro's ``schemaless_reader`` reads from the same bytes, with no byte
left over.  A disagreement raises AssertionError (libFuzzer saves the input).

`check(data)` and `canon` need no atheris: tests/codec/test_avro_columns.py smoke-tests
them under pytest; the file is named so pytest does not collect it.
"""

from __future__ import annotations

import datetime
import decimal
import io
import math
import sys

import fastavro
import pyarrow as pa

from kafkawire import _pyavro
from kafkawire._avro_columns import AvroColumnDecoder, AvroDecodeError, normalize

try:
    from kafkawire import _avro
except ImportError:  # pragma: no cover - the twin alone is still compared with fastavro
    _avro = None

_LEAF = {"name": "Leaf", "type": "record", "fields": [
    {"name": "k", "type": "int"}, {"name": "s", "type": ["null", "string"]}]}
SCHEMAS = [
    "long",
    {"type": "record", "name": "All", "namespace": "fz", "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "y", "type": "bytes"},
        {"name": "n", "type": "null"},
    ]},
    {"type": "record", "name": "Nest", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "x", "type": {"type": "fixed", "name": "X", "size": 3}},
        {"name": "a", "type": {"type": "array", "items": ["null", "long"]}},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "u", "type": ["null", "int", "string", _LEAF]},
        {"name": "o", "type": ["null", "Leaf"]},
    ]},
    {"type": "record", "name": "Logical", "fields": [
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38,
                                 "scale": 4}},
        {"name": "fdec", "type": {"type": "fixed", "name": "FD", "size": 9,
                                  "logicalType": "decimal", "precision": 20, "scale": 2}},
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    ]},
    {"type": "array", "items": {"type": "map", "values": {"type": "array", "items": "int"}}},
    ["int", "long", "null"],
]
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
# A value of each schema (fastavro writes them for the seed corpus).
SAMPLES = [
    [0, -1, 2**63 - 1, -2**63, 300],
    [{"b": True, "i": -2**31, "l": 2**40, "f": 1.5, "d": -0.0, "s": "h\u00e9llo \U0001f600",
      "y": b"\x00\xff", "n": None},
     {"b": False, "i": 2**31 - 1, "l": 0, "f": float("inf"), "d": 1e300, "s": "", "y": b"",
      "n": None}],
    [{"e": "C", "x": b"abc", "a": [None, 5, -6], "m": {"k": "v", "": "\u20ac"},
      "u": {"k": 1, "s": None}, "o": {"k": 2, "s": "t"}},
     {"e": "A", "x": b"\x00\x00\x00", "a": [], "m": {}, "u": "str", "o": None},
     {"e": "B", "x": b"xyz", "a": [1] * 70, "m": {str(i): "" for i in range(70)}, "u": 7,
      "o": None}],
    [{"dec": decimal.Decimal("-12345678901234567890123456789.0123"),
      "fdec": decimal.Decimal("123456789012345.67"), "date": datetime.date(1969, 12, 31),
      "tms": datetime.time(23, 59, 59, 999000), "tus": datetime.time(0, 0, 0, 1),
      "tsm": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=datetime.timezone.utc),
      "tsu": datetime.datetime(1900, 1, 1, 0, 0, 0, 7, tzinfo=datetime.timezone.utc),
      "id": "12345678-1234-5678-1234-567812345678"}],
    [[{"a": [1, 2], "b": []}, {}], []],
    [None, 5, 2**40],
]


def _union_struct(branches) -> bool:
    rest = [b for b in branches if b["type"] != "null"]
    kinds = {b["type"] for b in rest}
    return len(rest) > 1 and kinds != {"int", "long"} and kinds != {"float", "double"}


def _category(branch):
    # a number read back cannot say which numeric branch wrote it (fastavro picks one)
    t = branch["type"]
    return "number" if t in ("int", "long", "float", "double") else (t, branch.get("name"))


def _pick(branches, value):
    """The union branch fastavro wrote ``value`` with (the first that validates it)."""
    from fastavro.validation import validate

    for k, b in enumerate(branches):
        if validate(value, _denorm(b, set()), raise_errors=False):
            return k, b
    raise AssertionError(f"no branch of {branches} holds {value!r}")


def _denorm(s, seen: set):
    """A normalized schema back in Avro's JSON form (each named type defined once)."""
    t = s["type"]
    if t == "union":
        return [_denorm(b, seen) for b in s["branches"]]
    if t in ("record", "enum", "fixed"):
        if s["name"] in seen:
            return s["name"]
        seen.add(s["name"])
    out = dict(s)
    if t == "record":
        out["fields"] = [dict(f, type=_denorm(f["type"], seen)) for f in s["fields"]]
    elif t == "array":
        out["items"] = _denorm(s["items"], seen)
    elif t == "map":
        out["values"] = _denorm(s["values"], seen)
    return out


def canon(s, v, side: str):
    """A comparable form of a decoded value of normalized schema ``s``: ``side`` is "arrow"
    for pyarrow's to_pylist, "fastavro" for fastavro's reader."""
    if v is None:
        return None
    t = s["type"]
    lt = s.get("logicalType")
    if t == "union":
        rest = [b for b in s["branches"] if b["type"] != "null"]
        if _union_struct(s["branches"]):
            if side == "arrow":
                hits = [(k, x) for k, x in enumerate(v.values()) if x is not None]
                assert len(hits) == 1, v
                k, x = hits[0]
                return (_category(rest[k]), canon(rest[k], x, side))
            k, b = _pick(rest, v)
            return (_category(b), canon(b, v, side))
        if side == "fastavro":
            _, b = _pick(rest, v)
            return canon(b, v, side)
        return canon(rest[0], v, side) if len(rest) == 1 else v
    if t == "record":
        return tuple(canon(f["type"], v[f["name"]], side) for f in s["fields"])
    if t == "array":
        return [canon(s["items"], x, side) for x in v]
    if t == "map":
        # a repeated key: fastavro's dict keeps the last, Arrow's map all of them
        items = v.items() if side == "fastavro" else dict(v).items()
        return sorted((k, canon(s["values"], x, side)) for k, x in items)
    if lt in ("time-millis", "time-micros"):
        # fastavro makes a time of day of any int (negative or past a day), modulo a day
        day = 86_400_000 if lt == "time-millis" else 86_400_000_000
        if isinstance(v, datetime.time):
            us = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
            v = us // 1000 if lt == "time-millis" else us
        return v % day
    if side == "fastavro":
        if lt == "date" and isinstance(v, datetime.date):
            return (v - _EPOCH.date()).days
        if lt and "timestamp" in lt:
            if isinstance(v, datetime.datetime):
                epoch = _EPOCH if v.tzinfo else _EPOCH.replace(tzinfo=None)
                return (v - epoch) // datetime.timedelta(microseconds=1)
            return v * 1000 if lt.endswith("millis") else v
    if lt == "uuid":
        return str(v)
    if lt == "decimal" and isinstance(v, decimal.Decimal):
        return v.as_tuple() if v.is_finite() else v
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def seeds() -> list[bytes]:
    """Inputs holding valid payloads of every schema (framed), for a corpus and the tests."""
    out = []
    for k, (schema, values) in enumerate(zip(SCHEMAS, SAMPLES)):
        parsed = fastavro.parse_schema(schema)
        parts = []
        for v in values:
            fo = io.BytesIO()
            fastavro.schemaless_writer(fo, parsed, v)
            parts.append(fo.getvalue())
        out.append(bytes([k, 2]) + b"\xff\xfe".join(parts))
    return out


def fastavro_rows(schema, payloads, offset: int, datetimes: bool = True):
    """fastavro's value per payload (bytes after ``offset``), or None where it fails or
    leaves bytes over; ``datetimes=False`` reads dates and times as their integers."""
    # fastavro parses uuid strings (spark-avro and this decoder keep them as strings) and
    # fails on dates and times past Python's datetime range (Arrow holds them): a payload
    # fastavro cannot read with those logical types is read again without them
    typed = fastavro.parse_schema(_strip(schema, ("uuid",)))
    bare = fastavro.parse_schema(_strip(schema, _DATETIMES))
    out = []
    for p in payloads:
        for parsed in (typed, bare) if datetimes else (bare,):
            fo = io.BytesIO(p[offset:])
            try:
                v = fastavro.schemaless_reader(fo, parsed, None)
            except Exception:  # noqa: BLE001 - fastavro raises many kinds on bad bytes
                continue
            out.append((v,) if fo.tell() == len(p) - offset else None)
            break
        else:
            out.append(None)
    return out


_DATETIMES = ("uuid", "date", "time-millis", "time-micros", "timestamp-millis",
              "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros")


def _strip(s, logical):
    if isinstance(s, list):
        return [_strip(b, logical) for b in s]
    if not isinstance(s, dict):
        return s
    out = {k: _strip(v, logical) if k in ("type", "items", "values") else v
           for k, v in s.items()}
    if out.get("logicalType") in logical:
        del out["logicalType"]
    if "fields" in s:
        out["fields"] = [dict(f, type=_strip(f["type"], logical)) for f in s["fields"]]
    return out


def plain(array):
    """``array`` with dates and timestamps as their integers (to_pylist cannot make Python
    dates of every value Arrow holds)."""
    # rebuilt, not cast: pyarrow's cast and view lose the length of null-typed children
    t = array.type
    target = _plain_type(t)
    if target == t:
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([plain(array.field(i)) for i in range(t.num_fields)],
                                          fields=list(target), mask=mask)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(array.offsets, array.keys, plain(array.items),
                                       type=target, mask=mask)
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(array.offsets, plain(array.values), type=target,
                                        mask=mask)
    return pa.Array.from_buffers(target, len(array), array.buffers(), array.null_count,
                                 array.offset)


def _plain_type(t):
    if pa.types.is_timestamp(t):
        return pa.int64()
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_plain_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(t.key_field, t.item_field.with_type(_plain_type(t.item_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain_type(t.value_type)))
    return t


def _run(impl, schema, column, framed: bool):
    dec = AvroColumnDecoder(schema, {1: schema}, framed=framed, implementation=impl)
    try:
        strict = ("ok", plain(dec.decode(column)).to_pylist())
    except AvroDecodeError as exc:
        strict = ("error", exc.row, exc.schema_id, exc.reason)
    array, errors = dec.decode_permissive(column)
    array.validate(full=True)
    return strict, plain(array).to_pylist(), errors.to_pylist()


def check(data: bytes) -> None:
    if len(data) < 2:
        return
    schema = SCHEMAS[data[0] % len(SCHEMAS)]
    framed = not data[1] & 1
    raw = [p for p in data[2:].split(b"\xff\xfe")]
    payloads = [b"\x00\x00\x00\x00\x01" + p for p in raw] if framed and data[1] & 2 else raw
    column = pa.array(payloads, pa.binary())
    twin = _run(_pyavro, schema, column, framed)
    if _avro is not None:
        compiled = _run(_avro, schema, column, framed)
        assert repr(compiled) == repr(twin), (compiled, twin)
    _, rows, errors = twin
    for row, error in enumerate(errors):
        if framed and error is None and payloads[row][:5] != b"\x00\x00\x00\x00\x01":
            raise AssertionError(f"row {row}: decoded a payload without the header")
    assert_rows_are_fastavros(schema, rows, errors, payloads, 5 if framed else 0)


def assert_rows_are_fastavros(schema, rows, errors, payloads, offset: int) -> None:
    """Every row decoded without an error (``rows``: plain(array).to_pylist()) is what
    fastavro reads from its payload's bytes after ``offset``, none left over."""
    norm = normalize(schema)
    # fastavro's own times of day from negative ints are its own: compare the integers
    reference = fastavro_rows(schema, payloads, offset, datetimes=False)
    for row, (value, error, ref) in enumerate(zip(rows, errors, reference)):
        if error is not None:
            continue
        assert ref is not None, f"row {row}: decoded {value!r}, fastavro could not"
        mine, theirs = canon(norm, value, "arrow"), canon(norm, ref[0], "fastavro")
        assert mine == theirs, (row, mine, theirs)


def mutate(rng, data: bytes) -> bytes:
    """``data`` with one to three bytes changed, runs cut out or bytes put in (past its
    first two, which pick the schema and the framing)."""
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        j = rng.randrange(2, len(out)) if len(out) > 2 else len(out)
        op = rng.randrange(3)
        if op == 0 and j < len(out):
            out[j] = rng.randrange(256)
        elif op == 1:
            del out[j:j + rng.randrange(1, 4)]
        else:
            out[j:j] = bytes([rng.randrange(256)])
    return bytes(out)


def loop(seconds: float, seed: int) -> int:
    """Mutations of the seeds checked for ``seconds``; the input that fails is printed."""
    import random
    import time

    rng = random.Random(seed)
    corpus = seeds()
    for data in corpus:
        check(data)
    count = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        data = mutate(rng, rng.choice(corpus))
        try:
            check(data)
        except AssertionError:
            print(f"disagreement on {data!r}", file=sys.stderr)
            raise
        count += 1
    print(f"atheris_avro --loop: {count} inputs, no disagreement (seed {seed})")
    return count


if __name__ == "__main__":  # pragma: no cover
    if "--loop" in sys.argv:
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--loop", action="store_true")
        ap.add_argument("--seconds", type=float, default=300)
        ap.add_argument("--seed", type=int, default=1)
        opts = ap.parse_args()
        loop(opts.seconds, opts.seed)
    else:
        import atheris

        atheris.Setup(sys.argv, check)
        atheris.Fuzz()
