"""A per-schema Avro binary encoder, generated as Python source once per writer schema.

fastavro's encoder walks the schema for every value; most of a small record's time goes
there.  :func:`compile_writer` writes, for one parsed schema, a function with the schema
unrolled into straight-line code (field by field; varints of up to 14 bits from a table)
and returns
it, or None when the schema has a part it does not cover (unions other than ``[null, X]``,
fixed decimals, local timestamps, ...), in which case the caller keeps fastavro.

The generated function is strict: any value it is not sure to encode as fastavro does
(a missing field, a bool where an int goes, a naive datetime, a tuple for a record)
raises (:class:`Fallback`, or what Python raised on the way, a KeyError for a missing
field), and the caller encodes that value with fastavro instead.  So
every payload is fastavro's, byte for byte (the differential test checks it), and the
fast path is only taken where it agrees.
"""

from __future__ import annotations

import datetime
import decimal
import struct
import uuid
from typing import Any, Callable

__all__ = ["Fallback", "compile_writer"]


class Fallback(Exception):
    """The generated encoder cannot vouch for this value: encode it with fastavro."""


def _varint(z: int) -> bytes:
    """The unsigned varint of ``z`` (already zigzagged)."""
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _zigzag_bytes(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_DAYS_SHIFT = datetime.date(1970, 1, 1).toordinal()
_MILLI = datetime.timedelta(milliseconds=1)
_MICRO = datetime.timedelta(microseconds=1)
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                         traps=[decimal.Inexact, decimal.Rounded, decimal.Overflow])


# Varints 14 bits at a time from two tables: the last group (1 or 2 bytes) and a middle
# group (2 bytes, both with the continuation bit); a loop per 7 bits is most of a large
# long's cost in Python.
_LAST = tuple(_varint(z) for z in range(1 << 14))
_MIDDLE = tuple(bytes(((z & 0x7F) | 0x80, ((z >> 7) & 0x7F) | 0x80)) for z in range(1 << 14))


def _long(n: int) -> bytes:
    if not _LONG_MIN <= n <= _LONG_MAX:
        raise Fallback
    z = (n << 1) ^ (n >> 63)
    if z < 0x4000:
        return _LAST[z]
    if z < 0x10000000:
        return _MIDDLE[z & 0x3FFF] + _LAST[z >> 14]
    if z < 0x40000000000:
        return _MIDDLE[z & 0x3FFF] + _MIDDLE[(z >> 14) & 0x3FFF] + _LAST[z >> 28]
    head = _MIDDLE[z & 0x3FFF] + _MIDDLE[(z >> 14) & 0x3FFF] + _MIDDLE[(z >> 28) & 0x3FFF]
    return head + _varint(z >> 42)


def _decimal_bytes(value: Any, scale: int, precision: int) -> bytes:
    # fastavro's bytes-decimal rule: the unscaled value, two's complement, big-endian, in
    # (bit length + 8) // 8 bytes; more digits than the precision, or than the scale
    # allows, are its errors (raised by fastavro on the fallback).
    _, digits, exp = value.as_tuple()
    if type(exp) is not int or len(digits) > precision or exp + scale < 0:
        raise Fallback
    unscaled = int(value.scaleb(scale, _EXACT))  # exact: exp + scale >= 0
    return unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)


def _timestamp(value: Any, unit: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is not datetime.datetime or value.tzinfo is None:
        raise Fallback  # a naive datetime is local time to fastavro
    # Floor division of timedeltas is exact integer arithmetic, as fastavro's is.
    return (value - _EPOCH) // unit


def _date(value: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is not datetime.date:
        raise Fallback
    return value.toordinal() - _DAYS_SHIFT


def _time(value: Any, unit: int) -> int:
    if type(value) is int:
        return value
    if type(value) is not datetime.time:
        raise Fallback
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    if unit == 1000:
        return seconds * 1000 + value.microsecond // 1000
    return seconds * 1000000 + value.microsecond


class _Unsupported(Exception):
    pass


class _Gen:
    def __init__(self, named: dict[str, Any]):
        self.named = named
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.n = 0

    def var(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, value: Any) -> str:
        name = self.var("_c")
        self.consts[name] = value
        return name

    def emit_varint(self, out: list[str], ind: str, expr: str, lo: int, hi: int) -> None:
        z = self.var("z")
        out.append(f"{ind}if type({expr}) is not int or not {lo} <= {expr} <= {hi}: raise Fallback")
        out.append(f"{ind}{z} = ({expr} << 1) ^ ({expr} >> 63)")
        out.append(f"{ind}o += _LAST[{z}] if {z} < 16384 else _long({expr})")

    def emit(self, schema: Any, expr: str, out: list[str], ind: str) -> None:
        if isinstance(schema, str) and schema in self.named:
            schema = self.named[schema]
        if isinstance(schema, list):
            return self.emit_union(schema, expr, out, ind)
        if isinstance(schema, dict):
            kind = schema["type"]
            logical = schema.get("logicalType")
            if logical is not None:
                return self.emit_logical(schema, logical, expr, out, ind)
        else:
            kind = schema
        if kind == "null":
            out.append(f"{ind}if {expr} is not None: raise Fallback")
        elif kind == "boolean":
            out.append(f"{ind}if {expr} is True: o += b'\\x01'")
            out.append(f"{ind}elif {expr} is False: o += b'\\x00'")
            out.append(f"{ind}else: raise Fallback")
        elif kind == "int":
            self.emit_varint(out, ind, expr, _INT_MIN, _INT_MAX)
        elif kind == "long":
            self.emit_varint(out, ind, expr, _LONG_MIN, _LONG_MAX)
        elif kind in ("float", "double"):
            code = "<f" if kind == "float" else "<d"
            out.append(f"{ind}if type({expr}) is not float: raise Fallback")
            out.append(f"{ind}o += _pack({code!r}, {expr})")
        elif kind == "string":
            b = self.var("b")
            out.append(f"{ind}if type({expr}) is not str: raise Fallback")
            out.append(f"{ind}{b} = {expr}.encode()")
            out.append(f"{ind}o += _LAST[len({b}) << 1] if len({b}) < 8192 else _long(len({b}))")
            out.append(f"{ind}o += {b}")
        elif kind == "bytes":
            out.append(f"{ind}if type({expr}) is not bytes: raise Fallback")
            out.append(f"{ind}o += _LAST[len({expr}) << 1] if len({expr}) < 8192 else _long(len({expr}))")
            out.append(f"{ind}o += {expr}")
        elif kind == "fixed":
            out.append(f"{ind}if type({expr}) is not bytes or len({expr}) != {int(schema['size'])}: raise Fallback")
            out.append(f"{ind}o += {expr}")
        elif kind == "enum":
            table = self.const({s: _zigzag_bytes(i) for i, s in enumerate(schema["symbols"])})
            out.append(f"{ind}o += {table}[{expr}]")  # KeyError (not a symbol): fastavro's error
        elif kind == "array":
            item = self.var("i")
            out.append(f"{ind}if type({expr}) is not list: raise Fallback")
            out.append(f"{ind}if {expr}:")
            out.append(f"{ind}    o += _LAST[len({expr}) << 1] if len({expr}) < 8192 else _long(len({expr}))")
            out.append(f"{ind}    for {item} in {expr}:")
            self.emit(schema["items"], item, out, ind + "        ")
            out.append(f"{ind}o += b'\\x00'")
        elif kind == "map":
            k, v, kb = self.var("k"), self.var("v"), self.var("kb")
            out.append(f"{ind}if type({expr}) is not dict: raise Fallback")
            out.append(f"{ind}if {expr}:")
            out.append(f"{ind}    o += _LAST[len({expr}) << 1] if len({expr}) < 8192 else _long(len({expr}))")
            out.append(f"{ind}    for {k}, {v} in {expr}.items():")
            out.append(f"{ind}        if type({k}) is not str: raise Fallback")
            out.append(f"{ind}        {kb} = {k}.encode()")
            out.append(f"{ind}        o += _LAST[len({kb}) << 1] if len({kb}) < 8192 else _long(len({kb}))")
            out.append(f"{ind}        o += {kb}")
            self.emit(schema["values"], v, out, ind + "        ")
            out.append(f"{ind}o += b'\\x00'")
        elif kind in ("record", "error"):
            out.append(f"{ind}if type({expr}) is not dict: raise Fallback")
            for f in schema["fields"]:
                v = self.var("f")
                # A missing field is a KeyError: fastavro then fills in the default.
                out.append(f"{ind}{v} = {expr}[{f['name']!r}]")
                self.emit(f["type"], v, out, ind)
        else:
            raise _Unsupported(kind)

    def emit_union(self, schema: list[Any], expr: str, out: list[str], ind: str) -> None:
        if len(schema) != 2 or "null" not in schema:
            raise _Unsupported("union")
        null_at = schema.index("null")
        other = schema[1 - null_at]
        if isinstance(other, list) or other == "null":
            raise _Unsupported("union")
        out.append(f"{ind}if {expr} is None:")
        out.append(f"{ind}    o += {_zigzag_bytes(null_at)!r}")
        out.append(f"{ind}else:")
        out.append(f"{ind}    o += {_zigzag_bytes(1 - null_at)!r}")
        self.emit(other, expr, out, ind + "    ")

    def emit_logical(self, schema: dict[str, Any], logical: str, expr: str, out: list[str], ind: str) -> None:
        kind = schema["type"]
        t = self.var("t")
        if logical == "decimal" and kind == "bytes":
            scale, precision = int(schema.get("scale", 0)), int(schema["precision"])
            b = self.var("b")
            out.append(f"{ind}if type({expr}) is not _Decimal: raise Fallback")
            out.append(f"{ind}{b} = _decimal_bytes({expr}, {scale}, {precision})")
            out.append(f"{ind}o += _LAST[len({b}) << 1] if len({b}) < 8192 else _long(len({b}))")
            out.append(f"{ind}o += {b}")
        elif logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            unit = "_MILLI" if logical == "timestamp-millis" else "_MICRO"
            out.append(f"{ind}{t} = _timestamp({expr}, {unit})")
            self.emit_varint(out, ind, t, _LONG_MIN, _LONG_MAX)
        elif logical == "date" and kind == "int":
            out.append(f"{ind}{t} = _date({expr})")
            self.emit_varint(out, ind, t, _INT_MIN, _INT_MAX)
        elif logical in ("time-millis", "time-micros") and kind == ("int" if logical == "time-millis" else "long"):
            unit = 1000 if logical == "time-millis" else 1000000
            out.append(f"{ind}{t} = _time({expr}, {unit})")
            self.emit_varint(out, ind, t, _INT_MIN if unit == 1000 else _LONG_MIN,
                             _INT_MAX if unit == 1000 else _LONG_MAX)
        elif logical == "uuid" and kind == "string":
            out.append(f"{ind}{t} = str({expr}) if type({expr}) is _UUID else {expr}")
            self.emit("string", t, out, ind)
        else:
            raise _Unsupported(logical)


def compile_writer(parsed: Any) -> Callable[[Any, bytearray], None] | None:
    """For a fastavro-parsed schema, ``write(value, out)`` appending the value's Avro
    binary encoding to the bytearray ``out`` (raising :class:`Fallback` for a value to
    leave to fastavro), or None when the schema has parts it does not cover."""
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    gen = _Gen(named)
    body: list[str] = []
    try:
        if _recursive(parsed, named, set()):
            return None
        gen.emit(parsed, "value", body, "    ")
    except _Unsupported:
        return None
    source = "def write(value, o):\n" + "\n".join(body) + "\n"
    if len(body) > 5000:  # a schema this large gains little and compiles slowly
        return None
    scope: dict[str, Any] = {
        "Fallback": Fallback, "_LAST": _LAST, "_long": _long, "_pack": struct.pack,
        "_decimal_bytes": _decimal_bytes, "_timestamp": _timestamp, "_MILLI": _MILLI, "_MICRO": _MICRO, "_date": _date, "_time": _time,
        "_Decimal": decimal.Decimal, "_UUID": uuid.UUID, **gen.consts,
    }
    exec(compile(source, "<kafkawire avro writer>", "exec"), scope)
    return scope["write"]  # type: ignore[no-any-return]


def _recursive(schema: Any, named: dict[str, Any], open_: set[str]) -> bool:
    """Whether the schema refers to a record from inside itself (a linked list, a tree):
    straight-line code would not end, so those stay with fastavro."""
    if isinstance(schema, str):
        if schema in open_:
            return True
        if schema in named:
            return _recursive(named[schema], named, open_)
        return False
    if isinstance(schema, list):
        return any(_recursive(s, named, open_) for s in schema)
    kind = schema.get("type")
    if kind in ("record", "error"):
        name = schema.get("name")
        inner = open_ | {name}
        return any(_recursive(f["type"], named, inner) for f in schema["fields"])
    if kind == "array":
        return _recursive(schema["items"], named, open_)
    if kind == "map":
        return _recursive(schema["values"], named, open_)
    return False
