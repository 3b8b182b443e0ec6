# cython: language_level=3
"""Avro payloads decoded into column buffers, compiled: the hot loop of
:class:`kafkawire._avro_columns.AvroColumnDecoder`.

A plan (built once per writer schema id by kafkawire._avro_columns) becomes a tree of
``_Step`` objects holding their target columns; every payload of a column runs through it
and appends to growing C buffers, no Python object made per value.  Every length and count
is checked against the bytes left before anything is appended.  Pure-Python twin:
kafkawire._pyavro (same names, same buffers, same errors).
"""

cimport cython
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy, memset
from libc.stdint cimport int64_t, uint64_t, int32_t, uint8_t, INT64_MAX
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.buffer cimport PyBuffer_FillInfo

from kafkawire import _avro_columns as _plan
from kafkawire._avro_columns import (
    BAD_MAGIC, BAD_UTF8, BLOCK_PAST_END, BRANCH_RANGE, DEC_RANGE, EMPTY_ITEMS, ENUM_RANGE,
    ENUM_SYMBOL, INT_RANGE, LEFT_OVER, LONG_VARINT, NEG_LENGTH, PAST_END, SHORT_HEADER,
    TOO_LARGE, TRUNCATED, TS_RANGE, WIDE_DECIMAL, AvroDecodeError, AvroSchemaError, Bad,
)


__all__ = ["State", "compile", "decode"]

cdef enum:
    K_NULL, K_BOOL, K_I32, K_I64, K_F32, K_F64, K_BIN, K_DEC, K_STRUCT, K_LIST, K_MAP

cdef enum:
    O_NULL, O_BOOL, O_INT, O_LONG, O_FLOAT, O_DOUBLE, O_BYTES, O_FIXED, O_ENUM, O_ARRAY, O_MAP,
    O_RECORD, O_UNION, O_WRAP, O_DEFAULT, O_ERROR

# the plan's numbering is the one these enums copy
assert (_plan.K_MAP, _plan.O_ERROR, _plan.O_WRAP, _plan.K_DEC) == (K_MAP, O_ERROR, O_WRAP, K_DEC)

cdef int64_t MAX_EMPTY_ITEMS = _plan.MAX_EMPTY_ITEMS
cdef int64_t INT32_MAX = 2147483647


cdef const uint8_t _EMPTY[1]


@cython.final
cdef class _Buf:
    """A growing C buffer; exported as it is (the buffer protocol), Arrow keeps it alive."""
    cdef char* p
    cdef Py_ssize_t n
    cdef Py_ssize_t cap

    def __dealloc__(self):
        free(self.p)

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.p if self.p != NULL else <char*>_EMPTY, self.n, 1,
                          flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass

    cdef int grow(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap = self.cap * 2
        if cap < self.n + extra:
            cap = self.n + extra
        if cap < 256:
            cap = 256
        cdef char* p = <char*>realloc(self.p, cap)
        if p == NULL:
            raise MemoryError()
        self.p = p
        self.cap = cap
        return 0

    cdef inline int put(self, const void* src, Py_ssize_t k) except -1:
        if self.n + k > self.cap:
            self.grow(k)
        memcpy(self.p + self.n, src, k)
        self.n += k
        return 0

    cdef inline int byte(self, uint8_t b) except -1:
        if self.n + 1 > self.cap:
            self.grow(1)
        self.p[self.n] = <char>b
        self.n += 1
        return 0

    cdef inline int zeros(self, Py_ssize_t k) except -1:
        if self.n + k > self.cap:
            self.grow(k)
        memset(self.p + self.n, 0, k)
        self.n += k
        return 0



cdef inline int32_t _last32(_Buf b) noexcept:
    return (<int32_t*>b.p)[b.n // 4 - 1]


cdef bint _utf8_ok(const uint8_t* s, Py_ssize_t n) noexcept:
    # the strict UTF-8 Python's decoder accepts: no overlongs, surrogates or past U+10FFFF
    cdef Py_ssize_t i = 0
    cdef uint64_t w
    cdef uint8_t c, c1
    while i < n:
        if i + 8 <= n:
            memcpy(&w, s + i, 8)
            if (w & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        c = s[i]
        if c < 0x80:
            i += 1
        elif c < 0xC2:
            return 0
        elif c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return 0
            i += 2
        elif c < 0xF0:
            if i + 2 >= n:
                return 0
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return 0
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                return 0
            i += 3
        elif c < 0xF5:
            if i + 3 >= n:
                return 0
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return 0
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
                return 0
            i += 4
        else:
            return 0
    return 1


@cython.final
cdef class _Col:
    cdef int kind
    cdef bint nullable
    cdef bint utf8
    cdef int64_t scale
    cdef uint64_t limit_hi
    cdef uint64_t limit_lo
    cdef int width
    cdef Py_ssize_t count
    cdef _Buf valid
    cdef _Buf values
    cdef _Buf offsets
    cdef _Buf data
    cdef list children
    # bytes per root row each buffer ended with last time: the next call's first size
    cdef double[4] per_row

    def __cinit__(self):
        self.valid = _Buf()
        self.values = _Buf()
        self.offsets = _Buf()
        self.data = _Buf()
        self.children = []

    cdef int reset(self) except -1:
        cdef int32_t zero = 0
        self.count = 0
        self.valid.n = 0
        self.values.n = 0
        self.data.n = 0
        self.offsets.n = 0
        if self.kind == K_BIN or self.kind == K_LIST or self.kind == K_MAP:
            self.offsets.put(&zero, 4)
        return 0

    cdef inline int set_valid(self) except -1:
        if self.nullable:
            self.valid.byte(1)
        self.count += 1
        return 0

    cdef int null(self) except -1:
        cdef int32_t last
        cdef _Col c
        if self.nullable:
            self.valid.byte(0)
        self.count += 1
        if self.width:
            self.values.zeros(self.width)
        elif self.kind == K_BIN or self.kind == K_LIST or self.kind == K_MAP:
            last = _last32(self.offsets)
            self.offsets.put(&last, 4)
        elif self.kind == K_STRUCT:
            for c in self.children:
                c.null()
        return 0

    cdef int truncate(self, Py_ssize_t n) except -1:
        # a list's items are appended before the list itself: follow the offsets down
        cdef _Col c
        cdef int32_t end
        if self.count > n:
            self.count = n
        if self.nullable and self.valid.n > n:
            self.valid.n = n
        if self.width:
            if self.values.n > n * self.width:
                self.values.n = n * self.width
        elif self.kind == K_BIN or self.kind == K_LIST or self.kind == K_MAP:
            if self.offsets.n > (n + 1) * 4:
                self.offsets.n = (n + 1) * 4
            end = _last32(self.offsets)
            if self.kind == K_BIN:
                if self.data.n > end:
                    self.data.n = end
            else:
                for c in self.children:
                    c.truncate(end)
        elif self.kind == K_STRUCT:
            for c in self.children:
                c.truncate(n)
        return 0

    cdef int put_bytes(self, const uint8_t* p, Py_ssize_t k) except -1:
        cdef uint8_t out[16]
        cdef uint8_t sign
        cdef Py_ssize_t j
        cdef int32_t end
        cdef uint64_t lo, hi
        if self.kind == K_DEC:
            sign = 0xFF if (k and (p[0] & 0x80)) else 0
            if k > 16:
                for j in range(k - 16):
                    if p[j] != sign:
                        raise Bad(WIDE_DECIMAL)
                if (p[k - 16] & 0x80) != (sign & 0x80):
                    raise Bad(WIDE_DECIMAL)
                p += k - 16
                k = 16
            memset(out, sign, 16)
            for j in range(k):
                out[j] = p[k - 1 - j]
            memcpy(&lo, out, 8)
            memcpy(&hi, out + 8, 8)
            if sign:
                # the magnitude of a negative two's complement 128-bit value
                lo = ~lo + 1
                hi = ~hi + (1 if lo == 0 else 0)
            if hi > self.limit_hi or (hi == self.limit_hi and lo >= self.limit_lo):
                raise Bad(DEC_RANGE)
            self.values.put(out, 16)
        else:
            if self.utf8 and not _utf8_ok(p, k):
                raise Bad(BAD_UTF8)
            if self.data.n + k > INT32_MAX:
                raise Bad(TOO_LARGE)
            self.data.put(p, k)
            end = <int32_t>self.data.n
            self.offsets.put(&end, 4)
        return self.set_valid()

    cdef int put_long(self, int64_t v) except -1:
        cdef int32_t i32
        cdef float f32
        cdef double f64
        if self.kind == K_I64:
            if self.scale != 1:
                if v > INT64_MAX // self.scale or v < -(INT64_MAX // self.scale):
                    raise Bad(TS_RANGE)
                v *= self.scale
            self.values.put(&v, 8)
        elif self.kind == K_I32:
            i32 = <int32_t>v
            self.values.put(&i32, 4)
        elif self.kind == K_F32:
            f32 = <float><double>v
            self.values.put(&f32, 4)
        else:
            f64 = <double>v
            self.values.put(&f64, 8)
        return self.set_valid()

    cdef int put_double(self, double v) except -1:
        cdef float f32
        if self.kind == K_F32:
            f32 = <float>v
            self.values.put(&f32, 4)
        else:
            self.values.put(&v, 8)
        return self.set_valid()

    cdef int presize(self, Py_ssize_t rows) except -1:
        # a fetch is shaped like the one before: reserve its sizes instead of regrowing
        cdef _Buf b
        cdef int k = 0
        cdef Py_ssize_t want
        for b in (self.valid, self.values, self.offsets, self.data):
            want = <Py_ssize_t>(self.per_row[k] * rows * 1.125) + 64
            if want > b.cap and want - b.n > 0:
                b.grow(want - b.n)
            k += 1
        return 0

    cdef tuple export(self, Py_ssize_t rows):
        # the buffers themselves go (no copy); the column starts again on new ones
        cdef _Buf b
        cdef int k = 0
        if rows > 0:
            for b in (self.valid, self.values, self.offsets, self.data):
                self.per_row[k] = b.n / <double>rows
                k += 1
        valid = self.valid if self.nullable else None
        if self.width:
            out = (self.count, valid, self.values, None)
        elif self.kind == K_BIN:
            out = (self.count, valid, self.offsets, self.data)
        elif self.kind == K_LIST or self.kind == K_MAP:
            out = (self.count, valid, self.offsets, None)
        else:
            out = (self.count, valid, None, None)
        self.valid = _Buf()
        self.values = _Buf()
        self.offsets = _Buf()
        self.data = _Buf()
        self.reset()
        return out


cdef class State:
    """The growing buffers of one decoder's columns (reused call after call)."""
    cdef list cols
    cdef Py_ssize_t root
    cdef int64_t empty_left

    def __init__(self, specs, root=0):
        cdef _Col c
        self.cols = []
        for s in specs:
            c = _Col()
            c.kind = s.kind
            c.nullable = s.nullable
            c.utf8 = s.utf8
            c.scale = s.scale
            c.width = _plan.WIDTHS.get(s.kind, 0)
            limit = 10 ** s.precision
            c.limit_hi = limit >> 64
            c.limit_lo = limit & 0xFFFFFFFFFFFFFFFF
            self.cols.append(c)
        for c, s in zip(self.cols, specs):
            c.children = [self.cols[i] for i in s.children]
            for k in range(4):
                c.per_row[k] = 0
        self.root = root
        self.reset()

    def reset(self):
        cdef _Col c
        for c in self.cols:
            c.reset()

    def export(self):
        cdef _Col c
        cdef Py_ssize_t rows = (<_Col>self.cols[self.root]).count
        return [c.export(rows) for c in self.cols]

    def presize(self, Py_ssize_t rows):
        cdef _Col c
        for c in self.cols:
            c.presize(rows)


cdef inline Py_ssize_t _long(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end,
                             int64_t* out) except -1:
    cdef uint64_t u = 0
    cdef int shift = 0
    cdef uint8_t b
    cdef int i
    if pos < end and d[pos] < 0x80:
        b = d[pos]
        out[0] = <int64_t>((b >> 1) ^ (0 - (b & 1)))
        return pos + 1
    for i in range(10):
        if pos >= end:
            raise Bad(TRUNCATED)
        b = d[pos]
        pos += 1
        u |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = <int64_t>((u >> 1) ^ (0 - (u & 1)))
            return pos
        shift += 7
    raise Bad(LONG_VARINT)


cdef inline Py_ssize_t _length(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end,
                               int64_t* out) except -1:
    pos = _long(d, pos, end, out)
    if out[0] < 0:
        raise Bad(NEG_LENGTH)
    if out[0] > end - pos:
        raise Bad(PAST_END.format(out[0], end - pos))
    return pos


@cython.final
cdef class _Step:
    cdef int code
    cdef _Col col
    cdef _Col key
    cdef Py_ssize_t size
    cdef Py_ssize_t min_size
    cdef tuple subs
    cdef Py_ssize_t nsubs
    cdef _Step sub0
    cdef tuple syms
    cdef bytes raw
    cdef object msg
    cdef tuple members
    cdef State state

    cdef Py_ssize_t run(self, const uint8_t* d, Py_ssize_t pos, Py_ssize_t end) except -1:
        cdef int code = self.code
        cdef _Col col = self.col
        cdef int64_t v = 0
        cdef float f32
        cdef double f64
        cdef Py_ssize_t i
        cdef _Step sub
        if code == O_INT or code == O_LONG:
            pos = _long(d, pos, end, &v)
            if code == O_INT and (v < -2147483648 or v > 2147483647):
                raise Bad(INT_RANGE)
            if col is not None:
                col.put_long(v)
            return pos
        if code == O_BYTES:
            pos = _length(d, pos, end, &v)
            if col is not None:
                col.put_bytes(d + pos, v)
            return pos + v
        if code == O_RECORD:
            if col is not None:
                col.set_valid()
            for i in range(self.nsubs):
                pos = (<_Step>self.subs[i]).run(d, pos, end)
            return pos
        if code == O_UNION:
            pos = _long(d, pos, end, &v)
            if v < 0 or v >= self.nsubs:
                raise Bad(BRANCH_RANGE.format(v, self.nsubs - 1))
            return (<_Step>self.subs[v]).run(d, pos, end)
        if code == O_NULL:
            if col is not None:
                col.null()
            return pos
        if code == O_BOOL:
            if pos >= end:
                raise Bad(TRUNCATED)
            if col is not None:
                col.values.byte(1 if d[pos] else 0)
                col.set_valid()
            return pos + 1
        if code == O_FLOAT:
            if end - pos < 4:
                raise Bad(TRUNCATED)
            if col is not None:
                memcpy(&f32, d + pos, 4)
                col.put_double(f32)
            return pos + 4
        if code == O_DOUBLE:
            if end - pos < 8:
                raise Bad(TRUNCATED)
            if col is not None:
                memcpy(&f64, d + pos, 8)
                col.put_double(f64)
            return pos + 8
        if code == O_FIXED:
            if end - pos < self.size:
                raise Bad(TRUNCATED)
            if col is not None:
                col.put_bytes(d + pos, self.size)
            return pos + self.size
        if code == O_ENUM:
            pos = _long(d, pos, end, &v)
            if v < 0 or v >= len(self.syms):
                raise Bad(ENUM_RANGE.format(v, len(self.syms) - 1))
            if col is not None:
                sym = self.syms[v]
                if sym is None:
                    raise Bad(ENUM_SYMBOL.format(v, self.msg))
                col.put_bytes(<const uint8_t*>PyBytes_AS_STRING(sym), PyBytes_GET_SIZE(sym))
            return pos
        if code == O_ARRAY or code == O_MAP:
            return self.run_items(d, pos, end)
        if code == O_WRAP:
            col.set_valid()
            for sub_col in self.members:
                (<_Col>sub_col).null()
            return self.sub0.run(d, pos, end)
        if code == O_DEFAULT:
            self.sub0.run(<const uint8_t*>PyBytes_AS_STRING(self.raw), 0,
                          PyBytes_GET_SIZE(self.raw))
            return pos
        raise Bad(self.msg)

    cdef Py_ssize_t run_items(self, const uint8_t* d, Py_ssize_t pos, Py_ssize_t end) except -1:
        cdef int64_t count = 0
        cdef int64_t size = 0
        cdef int64_t n = 0
        cdef uint64_t ucount, k
        cdef Py_ssize_t width = 1 if self.code == O_MAP else self.sub0.min_size
        cdef _Step item = self.sub0
        cdef _Col key = self.key
        cdef int32_t off
        while True:
            pos = _long(d, pos, end, &count)
            if count == 0:
                break
            if count < 0:
                ucount = (<uint64_t>(-(count + 1))) + 1
                pos = _long(d, pos, end, &size)
                if size < 0:
                    raise Bad(NEG_LENGTH)
            else:
                ucount = <uint64_t>count
            if width:
                if ucount > <uint64_t>((end - pos) // width):
                    raise Bad(BLOCK_PAST_END.format(ucount))
            elif ucount > <uint64_t>self.state.empty_left:
                raise Bad(EMPTY_ITEMS)
            else:
                self.state.empty_left -= <int64_t>ucount
            k = 0
            while k < ucount:
                if self.code == O_MAP:
                    pos = _length(d, pos, end, &n)
                    if key is not None:
                        key.put_bytes(d + pos, n)
                    pos += n
                pos = item.run(d, pos, end)
                k += 1
        if self.col is not None:
            n = (<_Col>self.col.children[0]).count
            if n > INT32_MAX:
                raise Bad(TOO_LARGE)
            off = <int32_t>n
            self.col.offsets.put(&off, 4)
            self.col.set_valid()
        return pos


def compile(State state, op):
    """The runnable form of a plan step (its column resolved to the state's buffer)."""
    cdef _Step s = _Step()
    s.state = state
    s.code = op.code
    s.col = state.cols[op.col] if op.col >= 0 else None
    s.subs = tuple(compile(state, o) for o in op.subs)
    s.nsubs = len(s.subs)
    s.sub0 = s.subs[0] if s.subs else None
    s.msg = op.msg
    s.min_size = op.min_size
    s.members = ()
    if op.code == O_FIXED:
        s.size = op.arg
    elif op.code == O_ENUM:
        s.syms = tuple(op.arg)
    elif op.code == O_MAP:
        s.key = state.cols[op.arg] if op.arg >= 0 else None
    elif op.code == O_WRAP:
        s.members = tuple(c for i, c in enumerate(s.col.children) if i != op.arg)
    elif op.code == O_DEFAULT:
        s.raw = op.arg
    return s


def decode(State state, decoder, offsets, data, valid, unframed, bint permissive):
    """Decode every payload into the state's columns; returns the bad rows' (row, schema id,
    reason) in PERMISSIVE mode, raises AvroDecodeError at the first in FAILFAST mode."""
    # Arrow's binary offsets (and the codec's) are int32, large_binary's int64: read either
    cdef bint wide = offsets.dtype.itemsize == 8
    cdef const int64_t[::1] offs64
    cdef const int32_t[::1] offs32
    cdef const uint8_t[::1] buf = data
    cdef const uint8_t[::1] ok
    cdef bint has_valid = valid is not None
    cdef const uint8_t* d = &buf[0] if buf.shape[0] else _EMPTY
    cdef Py_ssize_t n = len(offsets) - 1
    cdef Py_ssize_t row, start, end, pos
    cdef _Col root = <_Col>state.cols[decoder.columns.root]
    cdef _Step plan
    cdef _Step last_plan = None
    cdef int64_t sid = -1
    cdef int64_t last_sid = -1
    # the decoder's own cache of compiled plans (plan_for fills it)
    cdef dict plans = decoder._plans
    cdef bint framed = unframed is None
    if wide:
        offs64 = offsets
    else:
        offs32 = offsets
    if has_valid:
        ok = valid
    state.presize(n)
    bad = []
    for row in range(n):
        if has_valid and not ok[row]:
            root.null()
            continue
        if wide:
            start = offs64[row]
            end = offs64[row + 1]
        else:
            start = offs32[row]
            end = offs32[row + 1]
        sid = -1
        state.empty_left = MAX_EMPTY_ITEMS
        try:
            if framed:
                if end - start < 5:
                    raise Bad(SHORT_HEADER.format(end - start))
                if d[start] != 0:
                    raise Bad(BAD_MAGIC.format(d[start]))
                sid = ((<int64_t>d[start + 1] << 24) | (<int64_t>d[start + 2] << 16)
                       | (<int64_t>d[start + 3] << 8) | <int64_t>d[start + 4])
                if sid == last_sid:
                    plan = last_plan
                else:
                    plan = plans.get(sid)
                    if plan is None:
                        try:
                            plan = decoder.plan_for(sid)
                        except AvroSchemaError as exc:
                            raise Bad(str(exc)) from None
                    last_sid = sid
                    last_plan = plan
                pos = start + 5
            else:
                plan = unframed
                pos = start
            pos = plan.run(d, pos, end)
            if pos != end:
                raise Bad(LEFT_OVER.format(end - pos))
        except Bad as exc:
            root.truncate(row)
            root.null()
            if not permissive:
                raise AvroDecodeError(row, sid if sid >= 0 else None, str(exc)) from None
            bad.append((row, sid if sid >= 0 else None, str(exc)))
    return bad
