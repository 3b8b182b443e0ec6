"""Avro payloads into Arrow columns: Confluent-framed values of one Kafka column decoded in
one pass into the Arrow arrays of the reader schema's type.

:class:`AvroColumnDecoder` takes a reader schema (parsed JSON) and, for framed payloads, a
dict schema id -> writer schema.  For each writer schema id it builds once a plan that reads
the writer's encoding into the reader's columns (Avro's schema resolution: fields matched
by name or alias, defaults for fields the writer lacks, numeric promotions, string/bytes,
enum symbols by name, union branches matched by type), then decodes a whole column of
payloads into growing buffers and hands them to pyarrow without a Python object per value.

Avro types become Arrow types as spark-avro makes them Spark types: record -> struct,
enum and string (also uuid) -> string, bytes and fixed -> binary, decimal -> decimal128,
date -> date32, timestamp-millis/micros -> timestamp(us, UTC), local-timestamp-* ->
timestamp(us), time-millis -> int32 and time-micros -> int64 (their underlying types),
array -> list, map -> map<string, ...>; a union of null and one type is that type, nullable;
int|long -> int64, float|double -> float64; any other union -> a struct of ``member0``,
``member1``... (null left out), one of them set per row.

The decoding itself is :mod:`kafkawire._avro` (compiled) or its pure-Python twin
:mod:`kafkawire._pyavro`, chosen with the codec (``KAFKAWIRE_PUREPYTHON=1`` picks the twin);
this module plans and assembles for both, so they give the same arrays and errors.
No I/O; pyarrow and numpy are imported on first use.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from kafkawire import errors

__all__ = ["AvroColumnDecoder", "AvroDecodeError", "AvroSchemaError", "arrow_type"]

# Column kinds (what one Arrow array is built from) and their value widths.
K_NULL, K_BOOL, K_I32, K_I64, K_F32, K_F64, K_BIN, K_DEC, K_STRUCT, K_LIST, K_MAP = range(11)
WIDTHS = {K_BOOL: 1, K_I32: 4, K_I64: 8, K_F32: 4, K_F64: 8, K_DEC: 16}

# Plan steps: what one writer schema node reads, and where it puts it.
(O_NULL, O_BOOL, O_INT, O_LONG, O_FLOAT, O_DOUBLE, O_BYTES, O_FIXED, O_ENUM, O_ARRAY, O_MAP,
 O_RECORD, O_UNION, O_WRAP, O_DEFAULT, O_ERROR) = range(16)

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_NAMED = ("record", "error", "enum", "fixed")
# Items that take no bytes (nulls, empty records) are not bounded by the bytes left; one
# payload may still not hold more than this many (arrays of arrays of them multiply).
MAX_EMPTY_ITEMS = 1 << 20

# Why a payload is bad, worded here once for the compiled decoder and its twin alike (the
# ones with "{}" are formatted with the values at fault).
TRUNCATED = "truncated: a value runs past the end of the payload"
LONG_VARINT = "a varint longer than 10 bytes"
INT_RANGE = "an int outside the 32-bit range"
NEG_LENGTH = "a negative length"
BAD_UTF8 = "a string that is not valid UTF-8"
WIDE_DECIMAL = "a decimal wider than 128 bits"
DEC_RANGE = "a decimal with more digits than its precision"
TS_RANGE = "a timestamp outside the 64-bit microsecond range"
TOO_LARGE = "more than 2147483647 bytes or items in one column; decode in smaller pieces"
EMPTY_ITEMS = f"more than {MAX_EMPTY_ITEMS} items of no bytes each in one payload"
SHORT_HEADER = "{} bytes, fewer than the 5-byte Confluent header"
BAD_MAGIC = "magic byte {}, not 0: not Confluent-framed"
LEFT_OVER = "{} bytes left over after the value"
PAST_END = "a length of {} bytes past the end of the payload ({} left)"
BLOCK_PAST_END = "a block of {} items past the end of the payload"
BRANCH_RANGE = "union branch {} out of range (0 to {})"
ENUM_RANGE = "enum index {} out of range (0 to {})"
ENUM_SYMBOL = "enum symbol number {} is not in the reader's {}"


class Bad(Exception):
    """A payload that cannot be decoded, raised inside either decoder (their row loop turns
    it into AvroDecodeError, or a null row in PERMISSIVE mode)."""


class AvroSchemaError(errors.CodecError):
    """An Avro schema this decoder cannot use, or a writer schema that does not resolve to
    the reader schema (a reader field without a default that the writer lacks, say)."""


class AvroDecodeError(errors.CodecError):
    """A payload that cannot be decoded: ``row`` is its index in the column (the caller maps
    it to a partition and offset), ``schema_id`` the id in its header (None when the header
    itself is wrong or the payloads are unframed), ``reason`` what was wrong."""

    def __init__(self, row: int, schema_id: int | None, reason: str):
        self.row = row
        self.schema_id = schema_id
        self.reason = reason
        where = f"row {row}" if schema_id is None else f"row {row} (schema id {schema_id})"
        super().__init__(f"Avro payload at {where}: {reason}")


# --------------------------------------------------------------------------- schemas


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def normalize(schema: Any) -> Any:
    """``schema`` with named references inlined and every node a dict with a "type"
    (primitives too); refuses recursive types, which no Arrow type can hold."""
    if isinstance(schema, (str, bytes)) and not isinstance(schema, str):
        schema = schema.decode()
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[")):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise AvroSchemaError(f"not an Avro schema (JSON): {exc}") from None
    return _norm(schema, {}, None, ())


def _norm(s: Any, names: dict, ns: str | None, stack: tuple) -> Any:
    if isinstance(s, list):
        return {"type": "union", "branches": [_norm(b, names, ns, stack) for b in s]}
    if isinstance(s, str):
        if s in _PRIMITIVES:
            return {"type": s}
        full = _fullname(s, ns)
        for key in (full, s):
            if key in stack:
                raise AvroSchemaError(f"recursive type {key!r}: Arrow columns cannot hold it")
            if key in names:
                return names[key]
        raise AvroSchemaError(f"unknown type name {s!r}")
    if not isinstance(s, dict) or "type" not in s:
        raise AvroSchemaError(f"not an Avro schema: {s!r:.200}")
    t = s["type"]
    if isinstance(t, (list, dict)) or (isinstance(t, str) and t not in _PRIMITIVES + _NAMED
                                       + ("array", "map")):
        inner = _norm(t, names, ns, stack)
        if s.get("logicalType") and isinstance(t, str) and t in _PRIMITIVES:
            inner = dict(inner, logicalType=s["logicalType"])
        return inner
    out = dict(s)
    if t in _NAMED:
        if "name" not in s:
            raise AvroSchemaError(f"a {t} without a name: {s!r:.200}")
        full = _fullname(s["name"], s.get("namespace", ns))
        out["name"] = full
        child_ns = full.rsplit(".", 1)[0] if "." in full else None
        if t in ("record", "error"):
            out["type"] = "record"
            stack = stack + (full,)
            fields = []
            for f in s.get("fields", ()):
                nf = dict(f)
                nf["type"] = _norm(f["type"], names, child_ns, stack)
                fields.append(nf)
            out["fields"] = fields
        names[full] = out
        if "." in full:
            names.setdefault(_short(full), out)
    elif t == "array":
        out["items"] = _norm(s["items"], names, ns, stack)
    elif t == "map":
        out["values"] = _norm(s["values"], names, ns, stack)
    return out


def _logical(s: dict) -> str | None:
    return s.get("logicalType")


def _is_decimal(s: dict) -> bool:
    return _logical(s) == "decimal" and s["type"] in ("bytes", "fixed")


def _non_null(branches: list) -> list:
    return [b for b in branches if b["type"] != "null"]


class Col:
    """One Arrow array to build: its kind, Arrow type and children (indices into the plan's
    column list); ``scale`` multiplies longs (milliseconds into microseconds)."""

    __slots__ = ("kind", "arrow", "nullable", "utf8", "scale", "children", "names", "index",
                 "union", "precision")

    def __init__(self, kind, arrow, nullable=False, utf8=False, scale=1, children=(), names=(),
                 union=False):
        self.union = union
        self.precision = arrow.precision if kind == K_DEC else 0
        self.kind = kind
        self.arrow = arrow
        self.nullable = nullable
        self.utf8 = utf8
        self.scale = scale
        self.children = list(children)
        self.names = list(names)
        self.index = -1


class Columns:
    """The reader schema's columns, built once per decoder: ``cols`` in index order, the
    root first."""

    def __init__(self, reader: dict):
        import pyarrow as pa

        self.pa = pa
        self.cols: list[Col] = []
        self.root = self._col(reader, True)

    def _add(self, col: Col) -> int:
        col.index = len(self.cols)
        self.cols.append(col)
        return col.index

    def _col(self, s: dict, nullable: bool = False) -> int:
        pa = self.pa
        t = s["type"]
        lt = _logical(s)
        if t == "union":
            branches = s["branches"]
            rest = _non_null(branches)
            nullable = nullable or len(rest) < len(branches)
            kinds = {b["type"] for b in rest}
            if not rest:
                i = self._add(Col(K_NULL, pa.null(), True))
            elif len(rest) == 1:
                i = self._col(rest[0], nullable)
            elif kinds == {"int", "long"} and not any(_logical(b) for b in rest):
                i = self._add(Col(K_I64, pa.int64(), nullable))
            elif kinds == {"float", "double"}:
                i = self._add(Col(K_F64, pa.float64(), nullable))
            else:
                members = [self._col(b, True) for b in rest]
                names = [f"member{k}" for k in range(len(rest))]
                arrow = pa.struct([pa.field(n, self.cols[m].arrow, True)
                                   for n, m in zip(names, members)])
                i = self._add(Col(K_STRUCT, arrow, nullable, children=members, names=names,
                                  union=True))
            return i
        if t == "null":
            col = Col(K_NULL, pa.null(), True)
        elif t == "boolean":
            col = Col(K_BOOL, pa.bool_(), nullable)
        elif t == "int":
            col = Col(K_I32, pa.date32() if lt == "date" else pa.int32(), nullable)
        elif t == "long":
            if lt in ("timestamp-millis", "timestamp-micros"):
                col = Col(K_I64, pa.timestamp("us", tz="UTC"), nullable,
                          scale=1000 if lt == "timestamp-millis" else 1)
            elif lt in ("local-timestamp-millis", "local-timestamp-micros"):
                col = Col(K_I64, pa.timestamp("us"), nullable,
                          scale=1000 if lt == "local-timestamp-millis" else 1)
            else:
                col = Col(K_I64, pa.int64(), nullable)
        elif t == "float":
            col = Col(K_F32, pa.float32(), nullable)
        elif t == "double":
            col = Col(K_F64, pa.float64(), nullable)
        elif _is_decimal(s):
            precision, scale = int(s["precision"]), int(s.get("scale", 0))
            if not 0 < precision <= 38 or not 0 <= scale <= precision:
                raise AvroSchemaError(
                    f"decimal({precision}, {scale}) does not fit Arrow's decimal128 (precision "
                    f"1 to 38, scale 0 to precision)")
            col = Col(K_DEC, pa.decimal128(precision, scale), nullable)
        elif t in ("bytes", "fixed"):
            col = Col(K_BIN, pa.binary(), nullable)
        elif t in ("string", "enum"):
            col = Col(K_BIN, pa.string(), nullable, utf8=True)
        elif t == "record":
            kids = [self._col(f["type"]) for f in s["fields"]]
            names = [f["name"] for f in s["fields"]]
            arrow = pa.struct([pa.field(n, self.cols[k].arrow, self.cols[k].nullable)
                               for n, k in zip(names, kids)])
            col = Col(K_STRUCT, arrow, nullable, children=kids, names=names)
        elif t == "array":
            item = self._col(s["items"])
            c = self.cols[item]
            col = Col(K_LIST, pa.list_(pa.field("element", c.arrow, c.nullable)), nullable,
                      children=[item])
        elif t == "map":
            key = self._add(Col(K_BIN, pa.string(), False, utf8=True))
            value = self._col(s["values"])
            c = self.cols[value]
            col = Col(K_MAP, pa.map_(pa.field("key", pa.string(), False),
                                     pa.field("value", c.arrow, c.nullable)), nullable,
                      children=[key, value])
        else:
            raise AvroSchemaError(f"unsupported Avro type {t!r}")
        return self._add(col)


def arrow_type(schema: Any):
    """The Arrow type a column of ``schema`` decodes into (spark-avro's mapping)."""
    c = Columns(normalize(schema))
    return c.cols[c.root].arrow


# --------------------------------------------------------------------------- resolution


class Op:
    """One step of a plan: ``code`` (O_*), ``col`` the column index it fills (-1: read and
    drop), ``arg`` its parameter (fixed size, enum symbols, member index, default bytes),
    ``subs`` its steps inside, ``msg`` the error an O_ERROR step raises, ``min_size`` the
    fewest bytes it reads."""

    __slots__ = ("code", "col", "arg", "subs", "msg", "min_size")

    def __init__(self, code, col=-1, arg=None, subs=(), msg=None):
        self.code = code
        self.col = col
        self.arg = arg
        self.subs = tuple(subs)
        self.msg = msg
        self.min_size = _min_size(self)


def _min_size(op: Op) -> int:
    c = op.code
    if c in (O_NULL, O_WRAP, O_DEFAULT, O_ERROR):
        return op.subs[0].min_size if c == O_WRAP else 0
    if c == O_FLOAT:
        return 4
    if c == O_DOUBLE:
        return 8
    if c == O_FIXED:
        return op.arg
    if c == O_RECORD:
        return sum(s.min_size for s in op.subs)
    return 1


_PROMOTE = {
    "int": ("int", "long", "float", "double"),
    "long": ("long", "float", "double"),
    "float": ("float", "double"),
    "double": ("double",),
    "string": ("string", "bytes"),
    "bytes": ("bytes", "string"),
}
_READ = {"boolean": O_BOOL, "int": O_INT, "long": O_LONG, "float": O_FLOAT, "double": O_DOUBLE,
         "bytes": O_BYTES, "string": O_BYTES}


def _names_match(w: dict, r: dict) -> bool:
    wn = _short(w["name"])
    return wn == _short(r["name"]) or wn in [_short(a) for a in r.get("aliases", ())]


def _matches(w: dict, r: dict) -> bool:
    """Whether a writer node can be read as reader node ``r`` (a union branch choice)."""
    wt, rt = w["type"], r["type"]
    if wt in _PROMOTE:
        return rt in _PROMOTE[wt]
    if wt != rt:
        return False
    if wt in ("record", "enum", "fixed"):
        return _names_match(w, r)
    return True


class Planner:
    """Builds the plan reading one writer schema into the reader's columns."""

    def __init__(self, columns: Columns):
        self.columns = columns

    def plan(self, writer: dict, reader: dict) -> Op:
        return self._resolve(writer, reader, self.columns.root)

    def skip(self, w: dict) -> Op:
        return self._read(w, w, -1)

    def _resolve(self, w: dict, r: dict, col: int) -> Op:
        wt, rt = w["type"], r["type"]
        if wt == "union":
            return Op(O_UNION, subs=[self._resolve(b, r, col) for b in w["branches"]])
        if rt == "union":
            if wt == "null":
                if any(b["type"] == "null" for b in r["branches"]):
                    return Op(O_NULL, col)
                return Op(O_ERROR, msg="a null written where the reader's union has no null")
            rest = _non_null(r["branches"])
            pick = next((b for b in rest if b["type"] == wt and _matches(w, b)), None)
            if pick is None:
                pick = next((b for b in rest if _matches(w, b)), None)
            if pick is None:
                return Op(O_ERROR, msg=f"the writer's {_describe(w)} matches no branch of "
                                       f"the reader's union")
            c = self.columns.cols[col] if col >= 0 else None
            if c is not None and c.union:
                k = next(i for i, b in enumerate(rest) if b is pick)
                return Op(O_WRAP, col, k, [self._resolve(w, pick, c.children[k])])
            return self._resolve(w, pick, col)
        if wt == "null":
            if rt == "null":
                return Op(O_NULL, col)
            return Op(O_ERROR, msg=f"a null written where the reader expects {_describe(r)}")
        if not _matches(w, r):
            return Op(O_ERROR, msg=f"the writer's {_describe(w)} cannot be read as the "
                                   f"reader's {_describe(r)}")
        if _is_decimal(r) != _is_decimal(w) or (
                _is_decimal(r) and int(w.get("scale", 0)) != int(r.get("scale", 0))):
            return Op(O_ERROR, msg=f"the writer's {_describe(w)} cannot be read as the "
                                   f"reader's {_describe(r)}")
        return self._read(w, r, col)

    def _read(self, w: dict, r: dict, col: int) -> Op:
        """Read writer node ``w`` (already matched to reader node ``r``) into ``col``."""
        wt = w["type"]
        if wt == "union":
            return Op(O_UNION, subs=[self._read(b, b, -1) for b in w["branches"]]) \
                if col < 0 else self._resolve(w, r, col)
        if wt == "null":
            return Op(O_NULL, col)
        if wt in _READ:
            return Op(_READ[wt], col)
        if wt == "fixed":
            if r["type"] == "fixed" and int(r["size"]) != int(w["size"]) and col >= 0:
                return Op(O_ERROR, msg=f"fixed {w['name']} of {w['size']} bytes read as "
                                       f"{r['size']} bytes")
            return Op(O_FIXED, col, int(w["size"]))
        if wt == "enum":
            if col < 0:
                return Op(O_ENUM, -1, tuple(None for _ in w["symbols"]))
            rsyms = r["symbols"]
            default = r.get("default")
            syms = []
            for s in w["symbols"]:
                if s in rsyms:
                    syms.append(s.encode())
                elif default is not None:
                    syms.append(default.encode())
                else:
                    syms.append(None)
            return Op(O_ENUM, col, tuple(syms), msg=f"enum {r['name']}")
        if wt == "array":
            item = self.columns.cols[col].children[0] if col >= 0 else -1
            ritems = r["items"] if col >= 0 else w["items"]
            sub = self._resolve(w["items"], ritems, item) if col >= 0 else self.skip(w["items"])
            return Op(O_ARRAY, col, subs=[sub])
        if wt == "map":
            if col < 0:
                return Op(O_MAP, -1, -1, [self.skip(w["values"])])
            key, value = self.columns.cols[col].children
            return Op(O_MAP, col, key, [self._resolve(w["values"], r["values"], value)])
        if wt == "record":
            if col < 0:
                return Op(O_RECORD, -1, subs=[self.skip(f["type"]) for f in w["fields"]])
            rcol = self.columns.cols[col]
            rfields = {f["name"]: (k, f) for k, f in enumerate(r["fields"])}
            for k, f in enumerate(r["fields"]):
                for a in f.get("aliases", ()):
                    rfields.setdefault(a, (k, f))
            subs = []
            seen = set()
            for f in w["fields"]:
                hit = rfields.get(f["name"])
                if hit is None or hit[0] in seen:
                    subs.append(self.skip(f["type"]))
                    continue
                k, rf = hit
                seen.add(k)
                subs.append(self._resolve(f["type"], rf["type"], rcol.children[k]))
            for k, rf in enumerate(r["fields"]):
                if k in seen:
                    continue
                if "default" not in rf:
                    raise AvroSchemaError(
                        f"the reader's field {r['name']}.{rf['name']} has no default and "
                        f"the writer's record has no such field")
                raw = encode_default(rf["type"], rf["default"])
                subs.append(Op(O_DEFAULT, arg=raw,
                               subs=[self._resolve(rf["type"], rf["type"], rcol.children[k])]))
            return Op(O_RECORD, col, subs=subs)
        raise AvroSchemaError(f"unsupported Avro type {wt!r}")


def _describe(s: dict) -> str:
    t = s["type"]
    if t in ("record", "enum", "fixed"):
        return f"{t} {s['name']}"
    if _logical(s):
        return f"{t} ({_logical(s)})"
    return t


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_default(s: dict, v: Any) -> bytes:
    """A field default (its JSON value) in Avro's binary encoding, read like a payload."""
    t = s["type"]
    try:
        if t == "union":
            # a union's default is a value of its first branch
            return _zigzag(0) + encode_default(s["branches"][0], v)
        if t == "null":
            if v is not None:
                raise ValueError
            return b""
        if t == "boolean":
            return b"\x01" if v else b"\x00"
        if t in ("int", "long"):
            return _zigzag(int(v))
        if t == "float":
            return struct.pack("<f", float(v))
        if t == "double":
            return struct.pack("<d", float(v))
        if t == "bytes":
            raw = v.encode("latin-1")
            return _zigzag(len(raw)) + raw
        if t == "string":
            raw = v.encode()
            return _zigzag(len(raw)) + raw
        if t == "fixed":
            raw = v.encode("latin-1")
            if len(raw) != int(s["size"]):
                raise ValueError
            return raw
        if t == "enum":
            return _zigzag(s["symbols"].index(v))
        if t == "array":
            body = b"".join(encode_default(s["items"], x) for x in v)
            return (_zigzag(len(v)) + body if v else b"") + b"\x00"
        if t == "map":
            body = b"".join(encode_default({"type": "string"}, k) + encode_default(s["values"], x)
                            for k, x in v.items())
            return (_zigzag(len(v)) + body if v else b"") + b"\x00"
        if t == "record":
            out = b""
            for f in s["fields"]:
                if f["name"] in v:
                    out += encode_default(f["type"], v[f["name"]])
                elif "default" in f:
                    out += encode_default(f["type"], f["default"])
                else:
                    raise ValueError
            return out
    except (ValueError, TypeError, AttributeError, KeyError, OverflowError, struct.error):
        pass
    raise AvroSchemaError(f"default {v!r:.100} is not a value of {_describe(s)}")


# --------------------------------------------------------------------------- assembly


def _payloads(column):
    """(n, int32 or int64 offsets of n+1 into data, data as a uint8 array, validity uint8 or
    None): views of the given buffers (Arrow's binary offsets and the codec's columnar ones
    are int32 and reach the decoders as they are)."""
    import numpy as np
    import pyarrow as pa

    valid = None
    if isinstance(column, tuple):
        offsets, data = column[:2]
        valid = column[2] if len(column) > 2 else None
        offsets = np.asarray(offsets)
        offsets = np.ascontiguousarray(
            offsets, dtype=offsets.dtype if offsets.dtype in (np.int32, np.int64) else np.int64)
        data = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) \
            else np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        n = len(offsets) - 1
        if valid is not None:
            valid = np.ascontiguousarray(valid, dtype=np.uint8)
            if len(valid) != n:
                raise AvroSchemaError("validity must have one entry per payload")
    else:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if not isinstance(column, pa.Array):
            column = pa.array(column, pa.binary())
        t = column.type
        if t not in (pa.binary(), pa.large_binary()):
            raise AvroSchemaError(f"payloads must be a binary or large_binary array, not {t}")
        n = len(column)
        bufs = column.buffers()
        width = np.int32 if t == pa.binary() else np.int64
        offsets = np.frombuffer(bufs[1], dtype=width) if bufs[1] is not None \
            else np.zeros(1, width)
        offsets = offsets[column.offset:column.offset + n + 1]
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None \
            else np.zeros(0, np.uint8)
        if column.null_count:
            valid = np.asarray(column.is_valid()).view(np.uint8)
    # the decoders read payloads where these say: an array built by hand must not send them
    # outside its data
    if len(offsets) != n + 1 or (n and (offsets[0] < 0 or offsets[-1] > len(data)
                                        or bool((offsets[1:] < offsets[:-1]).any()))):
        raise AvroSchemaError("payload offsets must be n+1 ascending positions inside the data")
    return n, offsets, data, valid


def assemble(columns: Columns, exported: list, i: int | None = None):
    """The Arrow array of column ``i`` (the root by default) from the implementation's
    buffers: per column (count, validity bytes per slot or None, values/offsets, data)."""
    import numpy as np

    pa = columns.pa
    if i is None:
        i = columns.root
    col = columns.cols[i]
    count, valid, main, data = exported[i]
    vbuf = None
    null_count = 0
    if valid is not None:
        v = np.frombuffer(valid, dtype=np.uint8)[:count]
        null_count = count - int(np.count_nonzero(v))
        if null_count:
            vbuf = pa.py_buffer(np.packbits(v, bitorder="little"))
    k = col.kind
    if k == K_NULL:
        return pa.nulls(count)
    if k == K_BOOL:
        bits = pa.py_buffer(np.packbits(np.frombuffer(main, np.uint8)[:count], bitorder="little"))
        return pa.Array.from_buffers(col.arrow, count, [vbuf, bits], null_count)
    if k in WIDTHS:
        return pa.Array.from_buffers(col.arrow, count, [vbuf, pa.py_buffer(main)], null_count)
    if k == K_BIN:
        return pa.Array.from_buffers(col.arrow, count,
                                     [vbuf, pa.py_buffer(main), pa.py_buffer(data)], null_count)
    kids = [assemble(columns, exported, c) for c in col.children]
    if k == K_STRUCT:
        return pa.Array.from_buffers(col.arrow, count, [vbuf], null_count, children=kids)
    if k == K_LIST:
        return pa.Array.from_buffers(col.arrow, count, [vbuf, pa.py_buffer(main)], null_count,
                                     children=kids)
    entries = pa.Array.from_buffers(pa.struct([col.arrow.key_field, col.arrow.item_field]),
                                    len(kids[0]), [None], 0, children=kids)
    return pa.Array.from_buffers(col.arrow, count, [vbuf, pa.py_buffer(main)], null_count,
                                 children=[entries])


def _load_impl():
    from kafkawire import _twins

    return _twins.load("kafkawire._avro", "kafkawire._pyavro")


class AvroColumnDecoder:
    """Decodes columns of Avro payloads into Arrow arrays of ``reader_schema``'s type.

    ``writer_schemas`` maps schema ids to writer schemas (parsed JSON, or JSON text); ids not
    in it are an error for their rows.  It is any mapping, looked up the first time a payload
    names an id (so it may fetch then), and not copied.  None means every id is written
    with the reader schema.  ``framed=False`` reads bare Avro payloads (no Confluent header), all written
    with ``writer_schema`` (default: the reader schema).  Plans are built once per schema id
    and kept; one decoder is used by one thread at a time.  ``implementation`` picks
    :mod:`kafkawire._avro` or :mod:`kafkawire._pyavro` (default: the one going with the
    codec).
    """

    def __init__(self, reader_schema: Any, writer_schemas: dict | None = None, *,
                 framed: bool = True, writer_schema: Any = None, implementation=None):
        self.reader = normalize(reader_schema)
        self.columns = Columns(self.reader)
        self.arrow_type = self.columns.cols[self.columns.root].arrow
        self._planner = Planner(self.columns)
        self._writers = writer_schemas
        self.framed = framed
        self._impl = implementation or _load_impl()
        self._state = self._impl.State(self.columns.cols, self.columns.root)
        self._plans: dict[int, Any] = {}
        self._unframed = None
        if not framed:
            w = self.reader if writer_schema is None else normalize(writer_schema)
            self._unframed = self._impl.compile(self._state, self._planner.plan(w, self.reader))

    @property
    def implementation(self) -> str:
        return "python" if self._impl.__name__.endswith("_pyavro") else "cython"

    def plan_for(self, schema_id: int):
        """The compiled plan for ``schema_id``; raises AvroSchemaError saying why not."""
        plan = self._plans.get(schema_id)
        if plan is not None:
            return plan
        if self._writers is None:
            writer = self.reader
        else:
            raw = self._writers.get(schema_id)
            if raw is None:
                raise AvroSchemaError(f"unknown schema id {schema_id}: not among the writer "
                                      f"schemas given ({len(self._writers)} ids)")
            writer = normalize(raw)
        plan = self._impl.compile(self._state, self._planner.plan(writer, self.reader))
        self._plans[schema_id] = plan
        return plan

    def _run(self, payloads, permissive: bool):
        n, offsets, data, valid = _payloads(payloads)
        try:
            bad = self._impl.decode(self._state, self, offsets, data, valid, self._unframed,
                                    permissive)
        except BaseException:
            # rows decoded before the failure must not open the next call's columns
            self._state.reset()
            raise
        exported = self._state.export()
        return n, bad, exported

    def decode(self, payloads):
        """The Arrow array of the decoded payloads (null where a payload is null); the first
        bad payload raises AvroDecodeError naming its row and schema id (FAILFAST)."""
        _, _, exported = self._run(payloads, False)
        return assemble(self.columns, exported)

    def decode_permissive(self, payloads):
        """``(array, errors)``: a bad payload gives a null row and its reason in ``errors``
        (a string array, null for good rows) instead of an error (PERMISSIVE)."""
        pa = self.columns.pa
        n, bad, exported = self._run(payloads, True)
        reasons: list = [None] * n
        for row, schema_id, reason in bad:
            reasons[row] = str(AvroDecodeError(row, schema_id, reason))
        return assemble(self.columns, exported), pa.array(reasons, pa.string())
