"""Pure-Python twin of :mod:`kafkawire._avro`: Avro payloads decoded into column buffers.

Same names, same buffers, same errors as the compiled module (tests/codec/test_avro_columns.py
and tests/fuzz/atheris_avro.py hold them to it); :mod:`kafkawire._avro_columns` plans for
both and assembles the Arrow arrays.  No I/O.
"""

from __future__ import annotations

import struct
from array import array

from kafkawire._avro_columns import (
    BAD_MAGIC, BAD_UTF8, BLOCK_PAST_END, BRANCH_RANGE, DEC_RANGE, EMPTY_ITEMS, ENUM_RANGE,
    ENUM_SYMBOL, INT_RANGE, K_BIN, K_BOOL, K_DEC, K_F32, K_F64, K_I32, K_I64, K_LIST, K_MAP,
    K_STRUCT, LEFT_OVER, LONG_VARINT, MAX_EMPTY_ITEMS, NEG_LENGTH, O_ARRAY, O_BOOL, O_BYTES,
    O_DEFAULT, O_DOUBLE, O_ENUM, O_FIXED, O_FLOAT, O_INT, O_LONG, O_MAP, O_NULL, O_RECORD,
    O_UNION, O_WRAP, PAST_END, SHORT_HEADER, TOO_LARGE, TRUNCATED, TS_RANGE, WIDE_DECIMAL,
    AvroDecodeError, AvroSchemaError, Bad,
)

__all__ = ["State", "compile", "decode"]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_MASK64 = 2**64 - 1
_TYPECODES = {K_BOOL: "B", K_I32: "i", K_I64: "q", K_F32: "f", K_F64: "d"}
_unpack_f = struct.Struct("<f").unpack_from
_unpack_d = struct.Struct("<d").unpack_from



class _Col:
    __slots__ = ("kind", "nullable", "utf8", "scale", "children", "count", "valid", "values",
                 "offsets", "data", "limit")

    def __init__(self, spec):
        self.kind = spec.kind
        self.nullable = spec.nullable
        self.utf8 = spec.utf8
        self.scale = spec.scale
        self.limit = 10 ** spec.precision
        self.children = []
        self.reset()

    def reset(self):
        self.count = 0
        self.valid = bytearray()
        k = self.kind
        self.values = array(_TYPECODES[k]) if k in _TYPECODES else bytearray()
        self.offsets = array("i", [0])
        self.data = bytearray()

    def set_valid(self):
        if self.nullable:
            self.valid.append(1)
        self.count += 1

    def null(self):
        if self.nullable:
            self.valid.append(0)
        self.count += 1
        k = self.kind
        if k in _TYPECODES:
            self.values.append(0)
        elif k == K_DEC:
            self.values += bytes(16)
        elif k in (K_BIN, K_LIST, K_MAP):
            self.offsets.append(self.offsets[-1])
        elif k == K_STRUCT:
            for c in self.children:
                c.null()

    def truncate(self, n):
        # a list's items are appended before the list itself: follow the offsets down
        self.count = min(self.count, n)
        if self.nullable:
            del self.valid[n:]
        k = self.kind
        if k in _TYPECODES:
            del self.values[n:]
        elif k == K_DEC:
            del self.values[n * 16:]
        elif k == K_BIN:
            del self.offsets[n + 1:]
            del self.data[self.offsets[n]:]
        elif k in (K_LIST, K_MAP):
            del self.offsets[n + 1:]
            for c in self.children:
                c.truncate(self.offsets[n])
        elif k == K_STRUCT:
            for c in self.children:
                c.truncate(n)

    def export(self):
        k = self.kind
        valid = bytes(self.valid) if self.nullable else None
        if k in _TYPECODES or k == K_DEC:
            return (self.count, valid, bytes(self.values), None)
        if k == K_BIN:
            return (self.count, valid, self.offsets.tobytes(), bytes(self.data))
        if k in (K_LIST, K_MAP):
            return (self.count, valid, self.offsets.tobytes(), None)
        return (self.count, valid, None, None)


class State:
    """The growing buffers of one decoder's columns (reused call after call)."""

    def __init__(self, specs, root=0):
        self.empty_left = MAX_EMPTY_ITEMS
        self.cols = [_Col(s) for s in specs]
        for c, s in zip(self.cols, specs):
            c.children = [self.cols[i] for i in s.children]

    def reset(self):
        for c in self.cols:
            c.reset()

    def export(self):
        out = [c.export() for c in self.cols]
        self.reset()
        return out


class _Step:
    __slots__ = ("code", "col", "arg", "subs", "msg", "min_size", "members", "state")


def compile(state, op):
    """The runnable form of a plan step (its column resolved to the state's buffer)."""
    s = _Step()
    s.state = state
    s.code = op.code
    s.col = state.cols[op.col] if op.col >= 0 else None
    s.arg = op.arg
    if op.code == O_MAP:
        s.arg = state.cols[op.arg] if op.arg >= 0 else None
    s.subs = tuple(compile(state, o) for o in op.subs)
    s.msg = op.msg
    s.min_size = op.min_size
    s.members = tuple(c for i, c in enumerate(s.col.children) if i != op.arg) \
        if op.code == O_WRAP else ()
    return s


def _long(data, pos, end):
    shift = 0
    u = 0
    for i in range(10):
        if pos >= end:
            raise Bad(TRUNCATED)
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            u &= _MASK64
            v = (u >> 1) ^ -(u & 1)
            return v, pos
        shift += 7
    raise Bad(LONG_VARINT)


def _length(data, pos, end):
    n, pos = _long(data, pos, end)
    if n < 0:
        raise Bad(NEG_LENGTH)
    if n > end - pos:
        raise Bad(PAST_END.format(n, end - pos))
    return n, pos


def _put_bytes(col, raw):
    if col.kind == K_DEC:
        v = int.from_bytes(raw, "big", signed=True)
        try:
            le = v.to_bytes(16, "little", signed=True)
        except OverflowError:
            raise Bad(WIDE_DECIMAL) from None
        if abs(v) >= col.limit:
            raise Bad(DEC_RANGE)
        col.values += le
    else:
        if col.utf8:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise Bad(BAD_UTF8) from None
        if len(col.data) + len(raw) > _INT32_MAX:
            raise Bad(TOO_LARGE)
        col.data += raw
        col.offsets.append(len(col.data))
    col.set_valid()


def _put_number(col, v):
    k = col.kind
    if k == K_I64 and col.scale != 1:
        if abs(v) > _INT64_MAX // col.scale:
            raise Bad(TS_RANGE)
        v *= col.scale
    elif k in (K_F32, K_F64):
        v = float(v)
    col.values.append(v)
    col.set_valid()


def _run(s, data, pos, end):
    code = s.code
    col = s.col
    if code == O_INT or code == O_LONG:
        v, pos = _long(data, pos, end)
        if code == O_INT and not -2**31 <= v <= _INT32_MAX:
            raise Bad(INT_RANGE)
        if col is not None:
            _put_number(col, v)
        return pos
    if code == O_BYTES:
        n, pos = _length(data, pos, end)
        if col is not None:
            _put_bytes(col, bytes(data[pos:pos + n]))
        return pos + n
    if code == O_RECORD:
        if col is not None:
            col.set_valid()
        for sub in s.subs:
            pos = _run(sub, data, pos, end)
        return pos
    if code == O_UNION:
        i, pos = _long(data, pos, end)
        if not 0 <= i < len(s.subs):
            raise Bad(BRANCH_RANGE.format(i, len(s.subs) - 1))
        return _run(s.subs[i], data, pos, end)
    if code == O_NULL:
        if col is not None:
            col.null()
        return pos
    if code == O_BOOL:
        if pos >= end:
            raise Bad(TRUNCATED)
        if col is not None:
            col.values.append(1 if data[pos] else 0)
            col.set_valid()
        return pos + 1
    if code == O_FLOAT or code == O_DOUBLE:
        width = 4 if code == O_FLOAT else 8
        if end - pos < width:
            raise Bad(TRUNCATED)
        if col is not None:
            v = (_unpack_f if width == 4 else _unpack_d)(data, pos)[0]
            col.values.append(v)
            col.set_valid()
        return pos + width
    if code == O_FIXED:
        n = s.arg
        if end - pos < n:
            raise Bad(TRUNCATED)
        if col is not None:
            _put_bytes(col, bytes(data[pos:pos + n]))
        return pos + n
    if code == O_ENUM:
        i, pos = _long(data, pos, end)
        if not 0 <= i < len(s.arg):
            raise Bad(ENUM_RANGE.format(i, len(s.arg) - 1))
        if col is not None:
            sym = s.arg[i]
            if sym is None:
                raise Bad(ENUM_SYMBOL.format(i, s.msg))
            _put_bytes(col, sym)
        return pos
    if code == O_ARRAY or code == O_MAP:
        item = s.subs[0]
        key = s.arg if code == O_MAP else None
        width = 1 if code == O_MAP else item.min_size
        while True:
            count, pos = _long(data, pos, end)
            if count == 0:
                break
            if count < 0:
                count = -count
                size, pos = _long(data, pos, end)
                if size < 0:
                    raise Bad(NEG_LENGTH)
            if width:
                if count > (end - pos) // width:
                    raise Bad(BLOCK_PAST_END.format(count))
            elif count > s.state.empty_left:
                raise Bad(EMPTY_ITEMS)
            else:
                s.state.empty_left -= count
            for _ in range(count):
                if code == O_MAP:
                    n, pos = _length(data, pos, end)
                    if key is not None:
                        _put_bytes(key, bytes(data[pos:pos + n]))
                    pos += n
                pos = _run(item, data, pos, end)
        if col is not None:
            n = col.children[0].count
            if n > _INT32_MAX:
                raise Bad(TOO_LARGE)
            col.offsets.append(n)
            col.set_valid()
        return pos
    if code == O_WRAP:
        col.set_valid()
        for m in s.members:
            m.null()
        return _run(s.subs[0], data, pos, end)
    if code == O_DEFAULT:
        raw = s.arg
        _run(s.subs[0], raw, 0, len(raw))
        return pos
    raise Bad(s.msg)


def decode(state, decoder, offsets, data, valid, unframed, permissive):
    """Decode every payload into the state's columns; returns the bad rows' (row, schema id,
    reason) in PERMISSIVE mode, raises AvroDecodeError at the first in FAILFAST mode."""
    root = state.cols[decoder.columns.root]
    bad = []
    n = len(offsets) - 1
    plans = decoder._plans  # plan_for fills it
    data = mv = memoryview(data)
    for row in range(n):
        if valid is not None and not valid[row]:
            root.null()
            continue
        start = int(offsets[row])
        end = int(offsets[row + 1])
        sid = None
        state.empty_left = MAX_EMPTY_ITEMS
        try:
            if unframed is None:
                if end - start < 5:
                    raise Bad(SHORT_HEADER.format(end - start))
                if data[start] != 0:
                    raise Bad(BAD_MAGIC.format(data[start]))
                sid = int.from_bytes(mv[start + 1:start + 5], "big")
                plan = plans.get(sid)
                if plan is None:
                    try:
                        plan = decoder.plan_for(sid)
                    except AvroSchemaError as exc:
                        raise Bad(str(exc)) from None
                pos = start + 5
            else:
                plan = unframed
                pos = start
            pos = _run(plan, data, pos, end)
            if pos != end:
                raise Bad(LEFT_OVER.format(end - pos))
        except Bad as exc:
            root.truncate(row)
            root.null()
            if not permissive:
                raise AvroDecodeError(row, sid, str(exc)) from None
            bad.append((row, sid, str(exc)))
    return bad
