# cython: language_level=3
"""Avro payloads decoded into column buffers, compiled: the hot loop of
:class:`kafkawire._avro_columns.AvroColumnDecoder`.

A plan (built once per writer schema id by kafkawire._avro_columns) becomes a tree of
``_Step`` objects, each holding a C struct that points at its sub-steps' structs and at its
target column's C struct; every payload of a column runs through those structs in plain C
(no Python object touched, no reference counted per value) and appends to growing C
buffers.  Every length and count is checked against the bytes left before anything is
appended.  Pure-Python twin: kafkawire._pyavro (same names, same buffers, same errors).
"""

cimport cython
from libc.stdlib cimport realloc, free, calloc
from libc.string cimport memcpy, memset
from libc.stdint cimport int64_t, uint64_t, int32_t, uint32_t, uint8_t, INT64_MAX
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


ctypedef struct CBuf:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef struct CCol:
    int kind
    bint nullable
    bint utf8
    int64_t scale
    # the largest magnitude a scaled long may have before scaling
    int64_t scale_max
    uint64_t limit_hi
    uint64_t limit_lo
    int width
    Py_ssize_t count
    CBuf valid
    CBuf values
    CBuf offsets
    CBuf data
    CCol** children
    Py_ssize_t nchildren


cdef struct CStep:
    int code
    CCol* col
    CCol* key
    Py_ssize_t size
    Py_ssize_t min_size
    CStep** subs
    Py_ssize_t nsubs
    # enum symbols: pointer and size per index (NULL where the reader lacks the symbol)
    const char** sym_p
    Py_ssize_t* sym_n
    Py_ssize_t nsyms
    # a default's bytes (owned by the _Step's ``raw``)
    const uint8_t* raw
    Py_ssize_t raw_n
    CCol** members
    Py_ssize_t nmembers
    int64_t* empty_left
    # the _Step itself, for the Python objects an error message needs (borrowed)
    void* owner


@cython.final
cdef class _Buf:
    """A C buffer taken over from a column at export; exported as it is (the buffer
    protocol), Arrow keeps it alive."""
    cdef char* p
    cdef Py_ssize_t n

    def __dealloc__(self):
        free(self.p)

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.p if self.p != NULL else <char*>_EMPTY, self.n, 1,
                          flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef _Buf _take(CBuf* b):
    cdef _Buf out = _Buf()
    out.p = b.p
    out.n = b.n
    b.p = NULL
    b.n = 0
    b.cap = 0
    return out


cdef int _grow(CBuf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap = b.cap * 2
    if cap < b.n + extra:
        cap = b.n + extra
    if cap < 256:
        cap = 256
    cdef char* p = <char*>realloc(b.p, cap)
    if p == NULL:
        raise MemoryError()
    b.p = p
    b.cap = cap
    return 0


cdef inline int _put(CBuf* b, const void* src, Py_ssize_t k) except -1:
    if b.n + k > b.cap:
        _grow(b, k)
    memcpy(b.p + b.n, src, k)
    b.n += k
    return 0


cdef inline int _put_small(CBuf* b, const uint8_t* src, Py_ssize_t k) except -1:
    # short values (most strings) copied as two overlapping words inside [src, src + k)
    cdef char* dst
    if b.n + k > b.cap:
        _grow(b, k)
    dst = b.p + b.n
    if 8 <= k <= 16:
        memcpy(dst, src, 8)
        memcpy(dst + k - 8, src + k - 8, 8)
    elif 4 <= k < 8:
        memcpy(dst, src, 4)
        memcpy(dst + k - 4, src + k - 4, 4)
    else:
        memcpy(dst, src, k)
    b.n += k
    return 0


cdef inline int _byte(CBuf* b, uint8_t v) except -1:
    if b.n + 1 > b.cap:
        _grow(b, 1)
    b.p[b.n] = <char>v
    b.n += 1
    return 0


cdef inline int _put32(CBuf* b, int32_t v) except -1:
    if b.n + 4 > b.cap:
        _grow(b, 4)
    memcpy(b.p + b.n, &v, 4)
    b.n += 4
    return 0


cdef inline int _put64(CBuf* b, uint64_t v) except -1:
    if b.n + 8 > b.cap:
        _grow(b, 8)
    memcpy(b.p + b.n, &v, 8)
    b.n += 8
    return 0


cdef int _zeros(CBuf* b, Py_ssize_t k) except -1:
    if b.n + k > b.cap:
        _grow(b, k)
    memset(b.p + b.n, 0, k)
    b.n += k
    return 0


cdef inline int32_t _last32(CBuf* b) noexcept:
    return (<int32_t*>b.p)[b.n // 4 - 1]


cdef bint _utf8_ok(const uint8_t* s, Py_ssize_t n) noexcept:
    # the strict UTF-8 Python's decoder accepts: no overlongs, surrogates or past U+10FFFF
    cdef Py_ssize_t i = 0
    cdef uint64_t w
    cdef uint8_t c, c1
    cdef uint32_t h, t
    cdef Py_ssize_t j
    # most strings are ASCII: whole words (the tail as a last word overlapping the one
    # before, not a partial copy) before the byte-wise check
    if n >= 8:
        while i + 8 <= n:
            memcpy(&w, s + i, 8)
            if (w & 0x8080808080808080ULL) != 0:
                break
            i += 8
        else:
            memcpy(&w, s + n - 8, 8)
            if (w & 0x8080808080808080ULL) == 0:
                return 1
    elif n >= 4:
        memcpy(&h, s, 4)
        memcpy(&t, s + n - 4, 4)
        if ((h | t) & 0x80808080U) == 0:
            return 1
    else:
        c = 0
        for j in range(n):
            c |= s[j]
        if c < 0x80:
            return 1
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




# failures raised out of line: the hot functions keep small frames and no traceback code
cdef int _fail(object msg) except -1:
    raise Bad(msg)


cdef int _fail_fmt(object fmt, object a, object b) except -1:
    raise Bad(fmt.format(a, b))


cdef int _fail_fmt1(object fmt, object a) except -1:
    raise Bad(fmt.format(a))


cdef inline bint _offsets_kind(int kind) noexcept:
    return kind == K_BIN or kind == K_LIST or kind == K_MAP


cdef int _col_reset(CCol* c) except -1:
    c.count = 0
    c.valid.n = 0
    c.values.n = 0
    c.data.n = 0
    c.offsets.n = 0
    if _offsets_kind(c.kind):
        _put32(&c.offsets, 0)
    return 0


cdef inline int _set_valid(CCol* c) except -1:
    if c.nullable:
        _byte(&c.valid, 1)
    c.count += 1
    return 0


cdef int _null(CCol* c) except -1:
    cdef Py_ssize_t i
    if c.nullable:
        _byte(&c.valid, 0)
    c.count += 1
    if c.width:
        _zeros(&c.values, c.width)
    elif _offsets_kind(c.kind):
        _put32(&c.offsets, _last32(&c.offsets))
    elif c.kind == K_STRUCT:
        for i in range(c.nchildren):
            _null(c.children[i])
    return 0


cdef int _truncate(CCol* c, Py_ssize_t n) except -1:
    # a list's items are appended before the list itself: follow the offsets down
    cdef int32_t end
    cdef Py_ssize_t i
    if c.count > n:
        c.count = n
    if c.nullable and c.valid.n > n:
        c.valid.n = n
    if c.width:
        if c.values.n > n * c.width:
            c.values.n = n * c.width
    elif _offsets_kind(c.kind):
        if c.offsets.n > (n + 1) * 4:
            c.offsets.n = (n + 1) * 4
        end = _last32(&c.offsets)
        if c.kind == K_BIN:
            if c.data.n > end:
                c.data.n = end
        else:
            for i in range(c.nchildren):
                _truncate(c.children[i], end)
    elif c.kind == K_STRUCT:
        for i in range(c.nchildren):
            _truncate(c.children[i], n)
    return 0


cdef int _put_dec(CCol* c, const uint8_t* p, Py_ssize_t k) except -1:
    cdef uint8_t out[16]
    cdef uint8_t sign
    cdef Py_ssize_t j
    cdef uint64_t lo, hi
    sign = 0xFF if (k and (p[0] & 0x80)) else 0
    if k > 16:
        for j in range(k - 16):
            if p[j] != sign:
                _fail(WIDE_DECIMAL)
        if (p[k - 16] & 0x80) != (sign & 0x80):
            _fail(WIDE_DECIMAL)
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
    if hi > c.limit_hi or (hi == c.limit_hi and lo >= c.limit_lo):
        _fail(DEC_RANGE)
    _put(&c.values, out, 16)
    return _set_valid(c)


cdef inline int _put_bytes(CCol* c, const uint8_t* p, Py_ssize_t k) except -1:
    if c.kind == K_DEC:
        return _put_dec(c, p, k)
    if c.utf8 and not _utf8_ok(p, k):
        _fail(BAD_UTF8)
    if c.data.n + k > INT32_MAX:
        _fail(TOO_LARGE)
    _put_small(&c.data, p, k)
    _put32(&c.offsets, <int32_t>c.data.n)
    return _set_valid(c)


cdef inline int _put_long(CCol* c, int64_t v) except -1:
    cdef int32_t i32
    cdef float f32
    cdef double f64
    if c.kind == K_I64:
        if c.scale != 1:
            if v > c.scale_max or v < -c.scale_max:
                _fail(TS_RANGE)
            v *= c.scale
        _put64(&c.values, <uint64_t>v)
    elif c.kind == K_I32:
        i32 = <int32_t>v
        _put32(&c.values, i32)
    elif c.kind == K_F32:
        f32 = <float><double>v
        _put(&c.values, &f32, 4)
    else:
        f64 = <double>v
        _put(&c.values, &f64, 8)
    return _set_valid(c)


cdef inline int _put_double(CCol* c, double v) except -1:
    cdef float f32
    if c.kind == K_F32:
        f32 = <float>v
        _put(&c.values, &f32, 4)
    else:
        _put(&c.values, &v, 8)
    return _set_valid(c)


@cython.final
cdef class _Col:
    """One column's C struct, kept at a fixed address for the steps that point at it."""
    cdef CCol c
    cdef list children
    # bytes per root row each buffer ended with last time: the next call's first size
    cdef double[4] per_row

    def __cinit__(self):
        memset(&self.c, 0, sizeof(CCol))
        self.children = []

    def __dealloc__(self):
        free(self.c.valid.p)
        free(self.c.values.p)
        free(self.c.offsets.p)
        free(self.c.data.p)
        free(self.c.children)

    cdef int presize(self, Py_ssize_t rows) except -1:
        # a fetch is shaped like the one before: reserve its sizes instead of regrowing
        cdef CBuf* bufs[4]
        cdef CBuf* b
        cdef int k
        cdef Py_ssize_t want
        bufs[0] = &self.c.valid
        bufs[1] = &self.c.values
        bufs[2] = &self.c.offsets
        bufs[3] = &self.c.data
        for k in range(4):
            b = bufs[k]
            want = <Py_ssize_t>(self.per_row[k] * rows * 1.125) + 64
            if want > b.cap and want - b.n > 0:
                _grow(b, want - b.n)
        return 0

    cdef tuple export(self, Py_ssize_t rows):
        # the buffers themselves go (no copy); the column starts again on new ones
        cdef CCol* c = &self.c
        if rows > 0:
            self.per_row[0] = c.valid.n / <double>rows
            self.per_row[1] = c.values.n / <double>rows
            self.per_row[2] = c.offsets.n / <double>rows
            self.per_row[3] = c.data.n / <double>rows
        valid = _take(&c.valid) if c.nullable else None
        if c.width:
            out = (c.count, valid, _take(&c.values), None)
        elif c.kind == K_BIN:
            out = (c.count, valid, _take(&c.offsets), _take(&c.data))
        elif c.kind == K_LIST or c.kind == K_MAP:
            out = (c.count, valid, _take(&c.offsets), None)
        else:
            out = (c.count, valid, None, None)
        _col_reset(c)
        return out


cdef class State:
    """The growing buffers of one decoder's columns (reused call after call)."""
    cdef list cols
    cdef Py_ssize_t root
    cdef int64_t empty_left

    def __init__(self, specs, root=0):
        cdef _Col c
        cdef Py_ssize_t k
        self.cols = []
        for s in specs:
            c = _Col()
            c.c.kind = s.kind
            c.c.nullable = s.nullable
            c.c.utf8 = s.utf8
            c.c.scale = s.scale
            c.c.scale_max = INT64_MAX // c.c.scale if c.c.scale > 0 else INT64_MAX
            c.c.width = _plan.WIDTHS.get(s.kind, 0)
            limit = 10 ** s.precision
            c.c.limit_hi = limit >> 64
            c.c.limit_lo = limit & 0xFFFFFFFFFFFFFFFF
            self.cols.append(c)
        for c, s in zip(self.cols, specs):
            c.children = [self.cols[i] for i in s.children]
            c.c.nchildren = len(c.children)
            c.c.children = <CCol**>calloc(c.c.nchildren + 1, sizeof(CCol*))
            if c.c.children == NULL:
                raise MemoryError()
            for k in range(c.c.nchildren):
                c.c.children[k] = &(<_Col>c.children[k]).c
            for k in range(4):
                c.per_row[k] = 0
        self.root = root
        self.reset()

    def reset(self):
        cdef _Col c
        for c in self.cols:
            _col_reset(&c.c)

    def export(self):
        cdef _Col c
        cdef Py_ssize_t rows = (<_Col>self.cols[self.root]).c.count
        return [c.export(rows) for c in self.cols]

    def presize(self, Py_ssize_t rows):
        cdef _Col c
        for c in self.cols:
            c.presize(rows)


cdef Py_ssize_t _long_slow(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end,
                           int64_t* out) except -1:
    cdef uint64_t u = 0
    cdef int shift = 0
    cdef uint8_t b
    cdef int i
    for i in range(10):
        if pos >= end:
            _fail(TRUNCATED)
        b = d[pos]
        pos += 1
        u |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = <int64_t>((u >> 1) ^ (0 - (u & 1)))
            return pos
        shift += 7
    _fail(LONG_VARINT)


cdef inline Py_ssize_t _long(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end,
                             int64_t* out) except -1:
    cdef uint8_t b
    if pos < end and d[pos] < 0x80:
        b = d[pos]
        out[0] = <int64_t>((b >> 1) ^ (0 - (b & 1)))
        return pos + 1
    return _long_slow(d, pos, end, out)


cdef inline Py_ssize_t _length(const uint8_t* d, Py_ssize_t pos, Py_ssize_t end,
                               int64_t* out) except -1:
    pos = _long(d, pos, end, out)
    if out[0] < 0:
        _fail(NEG_LENGTH)
    if out[0] > end - pos:
        _fail_fmt(PAST_END, out[0], end - pos)
    return pos


cdef int _raise_msg(CStep* s) except -1:
    raise Bad((<_Step>s.owner).msg)


cdef int _raise_symbol(CStep* s, int64_t v) except -1:
    _fail_fmt(ENUM_SYMBOL, v, (<_Step>s.owner).msg)


cdef inline Py_ssize_t _step(CStep* s, const uint8_t* d, Py_ssize_t pos,
                             Py_ssize_t end) except -1:
    # the commonest leaves run here, without a call; the rest go through _run
    cdef int64_t v = 0
    if s.code == O_BYTES:
        pos = _length(d, pos, end, &v)
        if s.col != NULL:
            _put_bytes(s.col, d + pos, v)
        return pos + v
    if s.code == O_LONG:
        pos = _long(d, pos, end, &v)
        if s.col != NULL:
            _put_long(s.col, v)
        return pos
    return _run(s, d, pos, end)


cdef Py_ssize_t _run(CStep* s, const uint8_t* d, Py_ssize_t pos, Py_ssize_t end) except -1:
    cdef int code = s.code
    cdef CCol* col = s.col
    cdef int64_t v = 0
    cdef float f32
    cdef double f64
    cdef Py_ssize_t i
    if code == O_INT or code == O_LONG:
        pos = _long(d, pos, end, &v)
        if code == O_INT and (v < -2147483648 or v > 2147483647):
            _fail(INT_RANGE)
        if col != NULL:
            _put_long(col, v)
        return pos
    if code == O_BYTES:
        pos = _length(d, pos, end, &v)
        if col != NULL:
            _put_bytes(col, d + pos, v)
        return pos + v
    if code == O_RECORD:
        if col != NULL:
            _set_valid(col)
        for i in range(s.nsubs):
            pos = _step(s.subs[i], d, pos, end)
        return pos
    if code == O_UNION:
        pos = _long(d, pos, end, &v)
        if v < 0 or v >= s.nsubs:
            _fail_fmt(BRANCH_RANGE, v, s.nsubs - 1)
        return _step(s.subs[v], d, pos, end)
    if code == O_NULL:
        if col != NULL:
            _null(col)
        return pos
    if code == O_BOOL:
        if pos >= end:
            _fail(TRUNCATED)
        if col != NULL:
            _byte(&col.values, 1 if d[pos] else 0)
            _set_valid(col)
        return pos + 1
    if code == O_FLOAT:
        if end - pos < 4:
            _fail(TRUNCATED)
        if col != NULL:
            memcpy(&f32, d + pos, 4)
            _put_double(col, f32)
        return pos + 4
    if code == O_DOUBLE:
        if end - pos < 8:
            _fail(TRUNCATED)
        if col != NULL:
            memcpy(&f64, d + pos, 8)
            _put_double(col, f64)
        return pos + 8
    if code == O_FIXED:
        if end - pos < s.size:
            _fail(TRUNCATED)
        if col != NULL:
            _put_bytes(col, d + pos, s.size)
        return pos + s.size
    if code == O_ENUM:
        pos = _long(d, pos, end, &v)
        if v < 0 or v >= s.nsyms:
            _fail_fmt(ENUM_RANGE, v, s.nsyms - 1)
        if col != NULL:
            if s.sym_p[v] == NULL:
                _raise_symbol(s, v)
            _put_bytes(col, <const uint8_t*>s.sym_p[v], s.sym_n[v])
        return pos
    if code == O_ARRAY or code == O_MAP:
        return _run_items(s, d, pos, end)
    if code == O_WRAP:
        _set_valid(col)
        for i in range(s.nmembers):
            _null(s.members[i])
        return _run(s.subs[0], d, pos, end)
    if code == O_DEFAULT:
        _run(s.subs[0], s.raw, 0, s.raw_n)
        return pos
    _raise_msg(s)
    return -1


cdef Py_ssize_t _run_items(CStep* s, const uint8_t* d, Py_ssize_t pos, Py_ssize_t end) except -1:
    cdef int64_t count = 0
    cdef int64_t size = 0
    cdef int64_t n = 0
    cdef uint64_t ucount, k
    cdef bint is_map = s.code == O_MAP
    cdef CStep* item = s.subs[0]
    cdef Py_ssize_t width = 1 if is_map else item.min_size
    cdef CCol* key = s.key
    while True:
        pos = _long(d, pos, end, &count)
        if count == 0:
            break
        if count < 0:
            ucount = (<uint64_t>(-(count + 1))) + 1
            pos = _long(d, pos, end, &size)
            if size < 0:
                _fail(NEG_LENGTH)
        else:
            ucount = <uint64_t>count
        if width:
            if ucount > <uint64_t>((end - pos) // width):
                _fail_fmt1(BLOCK_PAST_END, ucount)
        elif ucount > <uint64_t>s.empty_left[0]:
            _fail(EMPTY_ITEMS)
        else:
            s.empty_left[0] -= <int64_t>ucount
        k = 0
        while k < ucount:
            if is_map:
                pos = _length(d, pos, end, &n)
                if key != NULL:
                    _put_bytes(key, d + pos, n)
                pos += n
            pos = _step(item, d, pos, end)
            k += 1
    if s.col != NULL:
        n = s.col.children[0].count
        if n > INT32_MAX:
            _fail(TOO_LARGE)
        _put32(&s.col.offsets, <int32_t>n)
        _set_valid(s.col)
    return pos


@cython.final
cdef class _Step:
    """One compiled plan step: its C struct, and the Python objects that struct points into
    (sub-steps, columns, enum symbols, default bytes) kept alive here."""
    cdef CStep c
    cdef tuple subs
    cdef tuple syms
    cdef bytes raw
    cdef object msg
    cdef tuple keep
    cdef State state

    def __cinit__(self):
        memset(&self.c, 0, sizeof(CStep))

    def __dealloc__(self):
        free(self.c.subs)
        free(self.c.sym_p)
        free(self.c.sym_n)
        free(self.c.members)


cdef CCol* _colp(State state, Py_ssize_t i) except? NULL:
    return &(<_Col>state.cols[i]).c if i >= 0 else NULL


def compile(State state, op):
    """The runnable form of a plan step (its column resolved to the state's buffer)."""
    cdef _Step s = _Step()
    cdef Py_ssize_t i
    s.state = state
    s.c.owner = <void*>s
    s.c.empty_left = &state.empty_left
    s.c.code = op.code
    s.c.col = _colp(state, op.col)
    s.subs = tuple(compile(state, o) for o in op.subs)
    s.c.nsubs = len(s.subs)
    s.c.subs = <CStep**>calloc(s.c.nsubs + 1, sizeof(CStep*))
    if s.c.subs == NULL:
        raise MemoryError()
    for i in range(s.c.nsubs):
        s.c.subs[i] = &(<_Step>s.subs[i]).c
    s.msg = op.msg
    s.c.min_size = op.min_size
    s.keep = (state,)
    if op.code == O_FIXED:
        s.c.size = op.arg
    elif op.code == O_ENUM:
        s.syms = tuple(op.arg)
        s.c.nsyms = len(s.syms)
        s.c.sym_p = <const char**>calloc(s.c.nsyms + 1, sizeof(char*))
        s.c.sym_n = <Py_ssize_t*>calloc(s.c.nsyms + 1, sizeof(Py_ssize_t))
        if s.c.sym_p == NULL or s.c.sym_n == NULL:
            raise MemoryError()
        for i in range(s.c.nsyms):
            sym = s.syms[i]
            if sym is not None:
                s.c.sym_p[i] = PyBytes_AS_STRING(<bytes>sym)
                s.c.sym_n[i] = PyBytes_GET_SIZE(<bytes>sym)
    elif op.code == O_MAP:
        s.c.key = _colp(state, op.arg)
    elif op.code == O_WRAP:
        col = state.cols[op.col]
        members = [m for k, m in enumerate((<_Col>col).children) if k != op.arg]
        s.keep = (state, tuple(members))
        s.c.nmembers = len(members)
        s.c.members = <CCol**>calloc(s.c.nmembers + 1, sizeof(CCol*))
        if s.c.members == NULL:
            raise MemoryError()
        for i in range(s.c.nmembers):
            s.c.members[i] = &(<_Col>members[i]).c
    elif op.code == O_DEFAULT:
        s.raw = op.arg
        s.c.raw = <const uint8_t*>PyBytes_AS_STRING(s.raw)
        s.c.raw_n = PyBytes_GET_SIZE(s.raw)
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
    cdef CCol* root = &(<_Col>state.cols[decoder.columns.root]).c
    cdef _Step plan
    cdef CStep* step = NULL
    cdef CStep* last_step = NULL
    cdef int64_t sid = -1
    cdef int64_t last_sid = -1
    # the decoder's own cache of compiled plans (plan_for fills it; they stay alive there
    # while this call runs)
    cdef dict plans = decoder._plans
    cdef bint framed = unframed is None
    if wide:
        offs64 = offsets
    else:
        offs32 = offsets
    if has_valid:
        ok = valid
    if not framed:
        plan = unframed
        last_step = &plan.c
    state.presize(n)
    bad = []
    row = 0
    while row < n:
        # one try around the rows, not one per row: a bad row ends the inner loop, is
        # handled below, and the rows after it go on in a new one
        try:
            while row < n:
                if has_valid and not ok[row]:
                    _null(root)
                    row += 1
                    continue
                if wide:
                    start = offs64[row]
                    end = offs64[row + 1]
                else:
                    start = offs32[row]
                    end = offs32[row + 1]
                sid = -1
                state.empty_left = MAX_EMPTY_ITEMS
                if framed:
                    if end - start < 5:
                        raise Bad(SHORT_HEADER.format(end - start))
                    if d[start] != 0:
                        raise Bad(BAD_MAGIC.format(d[start]))
                    sid = ((<int64_t>d[start + 1] << 24) | (<int64_t>d[start + 2] << 16)
                           | (<int64_t>d[start + 3] << 8) | <int64_t>d[start + 4])
                    if sid == last_sid:
                        step = last_step
                    else:
                        plan = plans.get(sid)
                        if plan is None:
                            try:
                                plan = decoder.plan_for(sid)
                            except AvroSchemaError as exc:
                                raise Bad(str(exc)) from None
                        step = &plan.c
                        last_sid = sid
                        last_step = step
                    pos = start + 5
                else:
                    step = last_step
                    pos = start
                pos = _run(step, d, pos, end)
                if pos != end:
                    raise Bad(LEFT_OVER.format(end - pos))
                row += 1
        except Bad as exc:
            _truncate(root, row)
            _null(root)
            if not permissive:
                raise AvroDecodeError(row, sid if sid >= 0 else None, str(exc)) from None
            bad.append((row, sid if sid >= 0 else None, str(exc)))
            row += 1
    return bad
