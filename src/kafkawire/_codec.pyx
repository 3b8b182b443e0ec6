# cython: language_level=3, freethreading_compatible=False
# freethreading_compatible=False: on a free-threaded CPython (3.13t/3.14t) importing this
# module turns the GIL back on, with a RuntimeWarning.  Not True yet, because the module
# has mutable module-level state shared by threads: the lazy caches _Columns and
# _data_too_large (decode_columnar writes the pair one after the other, so without the GIL
# a second thread can see _Columns set and call _data_too_large while it is still None),
# _record_fields and _ColumnsType.  Import those at module init, make sure nothing else is
# written after import, then declare True.
"""kafkawire._codec: the compiled codec core (contract: _codec.pyi).

Same names, results, exceptions and messages as the pure-Python twin kafkawire._pycodec;
every exception is built by the factories in kafkawire.errors.  Hot loops work on raw
pointers obtained once per input buffer; every length read from the wire is checked
against the bytes that remain before it is used.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_FromStringAndSize, PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize, PyByteArray_Check
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.tuple cimport PyTuple_GET_SIZE
from libc.stdint cimport int8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t
from libc.stdint cimport INT64_MIN, INT64_MAX
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, free

cimport cython

from kafkawire import errors as _errors
from kafkawire import compression as _compression

cdef extern from "_crc.h" nogil:
    int kw_crc_init_from_env()
    uint32_t kw_crc32(uint32_t crc, const unsigned char *p, size_t n)
    uint32_t kw_crc32c(uint32_t crc, const unsigned char *p, size_t n)

ctypedef const unsigned char* cptr

IMPLEMENTATION = "cython"
DEFAULT_MAX_DEPTH = 4
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

# KAFKAWIRE_CRC32C=table forces the portable CRC32C path and =no-clmul the sse4.2 path
# without its PCLMULQDQ merge (read once, at import; see _crc.h), so tests can cover
# every path on one machine.
cdef int _CRC_IMPL = kw_crc_init_from_env()
_CRC_NAMES = {0: "table", 1: "sse4.2", 2: "armv8", 3: "sse4.2-no-clmul"}

# Below this many bytes releasing the GIL costs more than it gives.
DEF NOGIL_BYTES = 65536

cdef tuple _EMPTY = ()


cdef int _getbuf(object obj, Py_buffer* view) except -1:
    """A simple (contiguous) buffer of ``obj``; a non-contiguous one is a TypeError."""
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except (BufferError, ValueError):  # numpy says ValueError
        if memoryview(obj).c_contiguous:
            raise
        raise TypeError(
            f"a {type(obj).__name__} that is not C-contiguous cannot be decoded: pass bytes, "
            f"a bytearray or a contiguous buffer (copy it with bytes(...))") from None
    return 0


# ---------------------------------------------------------------------------------------
# checksums
# ---------------------------------------------------------------------------------------

cdef inline uint32_t _crc32c(cptr p, Py_ssize_t n) noexcept:
    cdef uint32_t c
    if n >= NOGIL_BYTES:
        with nogil:
            c = kw_crc32c(0, p, <size_t>n)
        return c
    return kw_crc32c(0, p, <size_t>n)


cdef inline uint32_t _crc32(cptr p, Py_ssize_t n) noexcept:
    cdef uint32_t c
    if n >= NOGIL_BYTES:
        with nogil:
            c = kw_crc32(0, p, <size_t>n)
        return c
    return kw_crc32(0, p, <size_t>n)


def crc32(data, value=0):
    """CRC32 (IEEE 802.3) of ``data``, continuing from ``value``; as zlib.crc32."""
    cdef Py_buffer view
    cdef uint32_t c = <uint32_t>(value & 0xFFFFFFFF)
    _getbuf(data, &view)
    try:
        if view.len >= NOGIL_BYTES:
            with nogil:
                c = kw_crc32(c, <cptr>view.buf, <size_t>view.len)
        else:
            c = kw_crc32(c, <cptr>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32c(data, value=0):
    """CRC32C (Castagnoli) of ``data``, continuing from ``value``; hardware when present."""
    cdef Py_buffer view
    cdef uint32_t c = <uint32_t>(value & 0xFFFFFFFF)
    _getbuf(data, &view)
    try:
        if view.len >= NOGIL_BYTES:
            with nogil:
                c = kw_crc32c(c, <cptr>view.buf, <size_t>view.len)
        else:
            c = kw_crc32c(c, <cptr>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32c_implementation():
    """Which CRC32C path is active: "sse4.2", "armv8" or "table"; "sse4.2-no-clmul" is the
    sse4.2 path without its PCLMULQDQ stream merge (CPUs without it, or forced), about half
    as fast below 24 KiB."""
    return _CRC_NAMES[_CRC_IMPL]


def alloc_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes, not zeroed: for a buffer the caller fills whole (a
    response frame read from the socket), where zeroing it first is wasted work."""
    if size < 0:
        raise ValueError(f"alloc_buffer: size must be >= 0, got {size}")
    return PyByteArray_FromStringAndSize(NULL, size)


# ---------------------------------------------------------------------------------------
# big-endian loads/stores and varints (no bounds checks: callers check first)
# ---------------------------------------------------------------------------------------

cdef inline uint16_t _be16(cptr p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline uint32_t _be32(cptr p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]

cdef inline uint64_t _be64(cptr p) noexcept nogil:
    return (<uint64_t>_be32(p) << 32) | <uint64_t>_be32(p + 4)

cdef inline void _put16(unsigned char* p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v

cdef inline void _put32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v

cdef inline void _put64(unsigned char* p, uint64_t v) noexcept nogil:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)

# Varint readers return 0 when fine, 1 when the buffer ends first, 2 when too long.
DEF VAR_OK = 0
DEF VAR_TRUNC = 1
DEF VAR_LONG = 2
# _rspan adds these for a length-prefixed field inside a record.
DEF SPAN_BAD_LENGTH = 3
DEF SPAN_PAST_END = 4

cdef inline int64_t _zz32(uint64_t u) noexcept nogil:
    cdef uint32_t v = <uint32_t>u
    return <int64_t>(<int32_t>((v >> 1) ^ (0 - (v & 1))))


cdef inline int64_t _zz64(uint64_t u) noexcept nogil:
    return <int64_t>((u >> 1) ^ (0 - (u & 1)))


cdef inline int _size_uvar(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n

cdef inline int _size_var(int64_t v) noexcept nogil:
    return _size_uvar((<uint64_t>v << 1) ^ <uint64_t>(v >> 63))

cdef inline unsigned char* _put_uvar(unsigned char* p, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <unsigned char>(v | 0x80)
        p += 1
        v >>= 7
    p[0] = <unsigned char>v
    return p + 1

cdef inline unsigned char* _put_var(unsigned char* p, int64_t v) noexcept nogil:
    return _put_uvar(p, (<uint64_t>v << 1) ^ <uint64_t>(v >> 63))


# ---------------------------------------------------------------------------------------
# primitives
# ---------------------------------------------------------------------------------------

cdef inline Py_ssize_t _remain(Py_ssize_t n, Py_ssize_t pos) noexcept:
    return n - pos if n > pos else 0


cdef object _read_fixed(buf, Py_ssize_t pos, int kind):
    cdef Py_buffer v
    cdef cptr p
    cdef Py_ssize_t eff, size
    cdef str what
    _getbuf(buf, &v)
    try:
        if kind == 0:
            size, what = 1, "int8"
        elif kind == 1:
            size, what = 2, "int16"
        elif kind == 2:
            size, what = 4, "int32"
        elif kind == 3:
            size, what = 8, "int64"
        else:
            size, what = 4, "uint32"
        eff = pos + v.len if pos < 0 else pos  # negative positions count from the end
        if eff < 0 or eff > v.len or v.len - eff < size:
            raise _errors.truncated(what, pos, size, _remain(v.len, pos))
        p = <cptr>v.buf + eff
        if kind == 0:
            return <int8_t>p[0], pos + 1
        if kind == 1:
            return <int16_t>_be16(p), pos + 2
        if kind == 2:
            return <int32_t>_be32(p), pos + 4
        if kind == 3:
            return <int64_t>_be64(p), pos + 8
        return _be32(p), pos + 4
    finally:
        PyBuffer_Release(&v)


def read_int8(buf, Py_ssize_t pos):
    """Read a big-endian int8 at ``pos``; returns (value, next_pos)."""
    return _read_fixed(buf, pos, 0)

def read_int16(buf, Py_ssize_t pos):
    """Read a big-endian int16 at ``pos``; returns (value, next_pos)."""
    return _read_fixed(buf, pos, 1)

def read_int32(buf, Py_ssize_t pos):
    """Read a big-endian int32 at ``pos``; returns (value, next_pos)."""
    return _read_fixed(buf, pos, 2)

def read_int64(buf, Py_ssize_t pos):
    """Read a big-endian int64 at ``pos``; returns (value, next_pos)."""
    return _read_fixed(buf, pos, 3)

def read_uint32(buf, Py_ssize_t pos):
    """Read a big-endian uint32 at ``pos``; returns (value, next_pos)."""
    return _read_fixed(buf, pos, 4)


cdef uint64_t _read_uv(Py_buffer* v, Py_ssize_t* pos, str what, int maxbytes) except? 0xFFFFFFFFFFFFFFFF:
    """Unsigned LEB128 of at most ``maxbytes`` bytes; bits past 32/64 dropped, as Java does."""
    cdef Py_ssize_t start = pos[0]
    cdef Py_ssize_t p = start
    cdef cptr b = <cptr>v.buf
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char byte
    while True:
        if p >= v.len or p < 0:
            raise _errors.truncated(what, start, p - start + 1, _remain(v.len, start))
        if p - start == maxbytes:
            raise _errors.malformed("varint", start, f"longer than {maxbytes} bytes")
        byte = b[p]
        p += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            break
        shift += 7
    pos[0] = p
    if maxbytes == 5:
        result &= 0xFFFFFFFF
    return result


def read_uvarint(buf, Py_ssize_t pos):
    """Unsigned varint (at most 5 bytes, 32 bits); returns (value, next_pos)."""
    cdef Py_buffer v
    cdef uint64_t u
    _getbuf(buf, &v)
    try:
        u = _read_uv(&v, &pos, "uvarint", 5)
        return u, pos
    finally:
        PyBuffer_Release(&v)


def read_varint(buf, Py_ssize_t pos):
    """Zigzag varint (int32, at most 5 bytes); returns (value, next_pos)."""
    cdef Py_buffer v
    cdef uint64_t u
    _getbuf(buf, &v)
    try:
        u = _read_uv(&v, &pos, "varint", 5)
        return _zz32(u), pos
    finally:
        PyBuffer_Release(&v)


def read_varlong(buf, Py_ssize_t pos):
    """Zigzag varlong (int64, at most 10 bytes); returns (value, next_pos)."""
    cdef Py_buffer v
    cdef uint64_t u
    _getbuf(buf, &v)
    try:
        u = _read_uv(&v, &pos, "varlong", 10)
        return _zz64(u), pos
    finally:
        PyBuffer_Release(&v)


cdef object _body(Py_buffer* v, Py_ssize_t p, Py_ssize_t n, str what, bint text):
    """n bytes at p, as bytes or (text) as str."""
    cdef cptr b = <cptr>v.buf
    if p + n > v.len:
        raise _errors.truncated(what, p, n, _remain(v.len, p))
    if text:
        try:
            return PyUnicode_DecodeUTF8(<const char*>(b + p), n, NULL)
        except UnicodeDecodeError as exc:
            raise _errors.malformed("string", p, f"invalid UTF-8 at byte {p + exc.start}") from None
    return PyBytes_FromStringAndSize(<const char*>(b + p), n)


DEF LEN_INT16 = 1   # _read_fixed kinds double as length kinds
DEF LEN_INT32 = 2
DEF LEN_COMPACT = 9


cdef object _read_sized(buf, Py_ssize_t pos, int lenkind, bint text):
    # int16/int32 length (-1: None) or compact uvarint length+1 (0: None), then the body
    cdef Py_buffer v
    cdef int64_t n
    cdef Py_ssize_t p = pos
    cdef str what = "string" if text else "bytes"
    _getbuf(buf, &v)
    try:
        if lenkind == LEN_COMPACT:
            n = <int64_t>_read_uv(&v, &p, "uvarint", 5) - 1
            if n == -1:
                return None, p
        else:
            n, p = _read_fixed(buf, pos, lenkind)
            if n < 0:
                if n == -1:
                    return None, p
                raise _errors.malformed(what, pos, f"negative length {n}")
        return _body(&v, p, <Py_ssize_t>n, what, text), p + <Py_ssize_t>n
    finally:
        PyBuffer_Release(&v)


def read_string(buf, Py_ssize_t pos):
    """int16 length (-1: None) then UTF-8 bytes; returns (str or None, next_pos)."""
    return _read_sized(buf, pos, LEN_INT16, True)

def read_bytes(buf, Py_ssize_t pos):
    """int32 length (-1: None) then bytes; returns (bytes or None, next_pos)."""
    return _read_sized(buf, pos, LEN_INT32, False)

def read_compact_string(buf, Py_ssize_t pos):
    """uvarint length+1 (0: None) then UTF-8 bytes; returns (str or None, next_pos)."""
    return _read_sized(buf, pos, LEN_COMPACT, True)

def read_compact_bytes(buf, Py_ssize_t pos):
    """uvarint length+1 (0: None) then bytes; returns (bytes or None, next_pos)."""
    return _read_sized(buf, pos, LEN_COMPACT, False)


def read_array_length(buf, Py_ssize_t pos):
    """int32 array length; -1 means a null array."""
    n, p = _read_fixed(buf, pos, 2)
    if n < -1:
        raise _errors.malformed("array length", pos, f"negative length {n}")
    return n, p


def read_compact_array_length(buf, Py_ssize_t pos):
    """uvarint length+1 (0: null array, returned as -1)."""
    cdef Py_buffer v
    cdef int64_t n
    _getbuf(buf, &v)
    try:
        n = <int64_t>_read_uv(&v, &pos, "uvarint", 5) - 1
        return n, pos
    finally:
        PyBuffer_Release(&v)


def read_tagged_fields(buf, Py_ssize_t pos):
    """A tagged-field section (KIP-482): returns ({tag: raw bytes}, next_pos)."""
    cdef Py_buffer v
    cdef uint64_t count
    cdef int64_t tag, prev = -1, size
    cdef uint64_t done = 0
    cdef Py_ssize_t tag_pos
    cdef dict fields = {}
    _getbuf(buf, &v)
    try:
        count = _read_uv(&v, &pos, "uvarint", 5)
        while done < count:
            done += 1
            tag_pos = pos
            tag = <int64_t>_read_uv(&v, &pos, "uvarint", 5)
            if tag <= prev:
                raise _errors.malformed(
                    "tagged fields", tag_pos, f"tag {tag} follows tag {prev}; tags must ascend")
            prev = tag
            size = <int64_t>_read_uv(&v, &pos, "uvarint", 5)
            fields[tag] = _body(&v, pos, <Py_ssize_t>size, "tagged field", False)
            pos += <Py_ssize_t>size
        return fields, pos
    finally:
        PyBuffer_Release(&v)


# ---- writers ----

cdef inline object _range_error(str what, value):
    return _errors.encode_error(f"{what} value {value} out of range")


cdef int _append(out, const unsigned char* p, Py_ssize_t k) except -1:
    cdef Py_ssize_t n
    if PyByteArray_Check(out):
        n = PyByteArray_GET_SIZE(out)
        PyByteArray_Resize(out, n + k)
        memcpy(<unsigned char*>PyByteArray_AS_STRING(out) + n, p, k)
    else:
        out += PyBytes_FromStringAndSize(<const char*>p, k)
    return 0


cdef int _append_obj(out, object raw) except -1:
    out += raw
    return 0


cdef int _write_fixed(out, value, int size, str what, lo, hi) except -1:
    cdef unsigned char tmp[8]
    cdef int64_t v
    if not lo <= value <= hi:
        raise _range_error(what, value)
    if what == "uint32":
        _put32(tmp, <uint32_t>(<uint64_t>value))
        return _append(out, tmp, 4)
    v = value
    if size == 1:
        tmp[0] = <unsigned char>v
    elif size == 2:
        _put16(tmp, <uint16_t>v)
    elif size == 4:
        _put32(tmp, <uint32_t>v)
    else:
        _put64(tmp, <uint64_t>v)
    return _append(out, tmp, size)


def write_int8(out, value):
    """Append ``value`` as a big-endian int8."""
    _write_fixed(out, value, 1, "int8", -128, 127)

def write_int16(out, value):
    """Append ``value`` as a big-endian int16."""
    _write_fixed(out, value, 2, "int16", -32768, 32767)

def write_int32(out, value):
    """Append ``value`` as a big-endian int32."""
    _write_fixed(out, value, 4, "int32", -2147483648, 2147483647)

def write_int64(out, value):
    """Append ``value`` as a big-endian int64."""
    _write_fixed(out, value, 8, "int64", -9223372036854775808, 9223372036854775807)

def write_uint32(out, value):
    """Append ``value`` as a big-endian uint32."""
    _write_fixed(out, value, 4, "uint32", 0, 4294967295)


cdef int _append_uv(out, uint64_t v) except -1:
    cdef unsigned char tmp[10]
    return _append(out, tmp, _put_uvar(tmp, v) - tmp)


def write_uvarint(out, value):
    if not 0 <= value <= 4294967295:
        raise _range_error("uvarint", value)
    _append_uv(out, <uint64_t>value)

def write_varint(out, value):
    if not -2147483648 <= value <= 2147483647:
        raise _range_error("varint", value)
    cdef int64_t v = value
    _append_uv(out, <uint32_t>((<uint32_t>v << 1) ^ <uint32_t>(v >> 31)))

def write_varlong(out, value):
    if not -9223372036854775808 <= value <= 9223372036854775807:
        raise _range_error("varlong", value)
    cdef int64_t v = value
    _append_uv(out, (<uint64_t>v << 1) ^ <uint64_t>(v >> 63))

def size_of_uvarint(value):
    if not 0 <= value <= 4294967295:
        raise _range_error("uvarint", value)
    return _size_uvar(<uint64_t>value)

def size_of_varint(value):
    if not -9223372036854775808 <= value <= 9223372036854775807:
        raise _range_error("varlong", value)
    return _size_var(<int64_t>value)


cdef bytes _utf8_of(value, str what):
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise _errors.encode_error(f"{what} {value!r:.60} is not valid Unicode") from None
    except AttributeError:
        raise _errors.encode_error(
            f"{what} must be a str or None, not {type(value).__name__}") from None


cdef object _buffer_of(value, str what, Py_ssize_t* n):
    cdef object mv
    if PyBytes_CheckExact(value) or type(value) is bytearray:
        n[0] = len(value)
        return value
    try:
        mv = memoryview(value)
    except TypeError:
        raise _errors.encode_error(
            f"{what} must be bytes-like or None, not {type(value).__name__}") from None
    n[0] = mv.nbytes
    return mv


def write_string(out, value):
    if value is None:
        _append(out, <const unsigned char*>b"\xff\xff", 2)
        return
    raw = _utf8_of(value, "string")
    if len(raw) > 32767:
        raise _errors.encode_error(f"string of {len(raw)} bytes is longer than int16 allows")
    _write_fixed(out, len(raw), 2, "int16", -32768, 32767)
    _append_obj(out, raw)

def write_bytes(out, value):
    cdef Py_ssize_t n = 0
    if value is None:
        _append(out, <const unsigned char*>b"\xff\xff\xff\xff", 4)
        return
    value = _buffer_of(value, "bytes", &n)
    if n > 2147483647:
        raise _errors.encode_error(f"bytes of {n} bytes is longer than int32 allows")
    _write_fixed(out, n, 4, "int32", -2147483648, 2147483647)
    _append_obj(out, value)

def write_compact_string(out, value):
    if value is None:
        _append(out, <const unsigned char*>b"\x00", 1)
        return
    raw = _utf8_of(value, "string")
    if len(raw) >= 4294967295:
        raise _errors.encode_error(f"string of {len(raw)} bytes is longer than uvarint allows")
    _append_uv(out, len(raw) + 1)
    _append_obj(out, raw)

def write_compact_bytes(out, value):
    cdef Py_ssize_t n = 0
    if value is None:
        _append(out, <const unsigned char*>b"\x00", 1)
        return
    value = _buffer_of(value, "bytes", &n)
    if n >= 4294967295:
        raise _errors.encode_error(f"bytes of {n} bytes is longer than uvarint allows")
    _append_uv(out, n + 1)
    _append_obj(out, value)

def write_array_length(out, length):
    if length is None:
        length = -1
    if not -1 <= length <= 2147483647:
        raise _range_error("array length", length)
    _write_fixed(out, length, 4, "int32", -2147483648, 2147483647)

def write_compact_array_length(out, length):
    if length is None:
        _append(out, <const unsigned char*>b"\x00", 1)
        return
    if not 0 <= length < 4294967295:
        raise _range_error("array length", length)
    _append_uv(out, <uint64_t>length + 1)

def write_tagged_fields(out, fields):
    """A tagged-field section (KIP-482), tags in ascending order."""
    cdef Py_ssize_t n = 0
    if not fields:
        _append(out, <const unsigned char*>b"\x00", 1)
        return
    tags = sorted(fields)
    _append_uv(out, len(tags))
    for tag in tags:
        if not 0 <= tag <= 4294967295:
            raise _range_error("tag", tag)
        raw = _buffer_of(fields[tag], f"tagged field {tag}", &n)
        _append_uv(out, <uint64_t>tag)
        _append_uv(out, n)
        _append_obj(out, raw)


# ---------------------------------------------------------------------------------------
# Record and Batch
# ---------------------------------------------------------------------------------------

# Records and Batches hold bytes, ints and tuples of them: they cannot form reference
# cycles unless a caller builds one on purpose, so they stay out of the cyclic GC.  With
# GC tracking, gen-0 collections (one per 700 new objects) cost about a fifth of a decode.
@cython.final
@cython.no_gc
cdef class Record:
    """One record: a MessageSet message (magic 0/1) or a RecordBatch record (magic 2)."""

    cdef public int64_t offset
    cdef public int64_t timestamp
    cdef public int timestamp_type
    cdef public object key
    cdef public object value
    cdef public object headers

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        # Field by field, so Records of the two implementations compare equal.
        try:
            theirs = (other.offset, other.timestamp, other.timestamp_type, other.key,
                      other.value, tuple(other.headers))
        except (AttributeError, TypeError):
            return NotImplemented
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                tuple(self.headers)) == theirs

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"timestamp_type={self.timestamp_type}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.timestamp_type, self.key,
                         self.value, self.headers))


@cython.final
@cython.no_gc
cdef class Batch:
    """One RecordBatch (magic 2), or one top-level message of a MessageSet (magic 0/1)."""

    cdef public int64_t base_offset
    cdef public int magic
    cdef public uint32_t crc
    cdef public int attributes
    cdef public int compression
    cdef public int timestamp_type
    cdef public bint is_transactional
    cdef public bint is_control
    cdef public int32_t partition_leader_epoch
    cdef public int64_t last_offset_delta
    cdef public int64_t base_timestamp
    cdef public int64_t max_timestamp
    cdef public int64_t producer_id
    cdef public int producer_epoch
    cdef public int32_t base_sequence
    cdef public list records

    def __init__(self, base_offset, magic, crc, attributes, compression, timestamp_type,
                 is_transactional, is_control, partition_leader_epoch, last_offset_delta,
                 base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                 records):
        self.base_offset = base_offset
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.compression = compression
        self.timestamp_type = timestamp_type
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records = records

    def __repr__(self):
        return (f"Batch(base_offset={self.base_offset}, magic={self.magic}, "
                f"compression={self.compression}, is_control={self.is_control}, "
                f"records={len(self.records)})")


# What Consumer.poll() hands out, made by decode_consumer_records straight from the batch:
# one object per record (no Record to wrap), topic and partition shared by every record of
# a call.  Read-only: only the decoder and the constructor set fields, so a record holding
# bytes, str, None and tuples of them cannot be part of a reference cycle, and the decoder
# leaves those out of the cyclic GC (as CPython does for tuples of atomic objects); with
# deserializers, whose results may be anything, they are tracked.  The decoder allocates
# and fills records without the type's tp_new (_Decoder.consumer_record, _CRFields): keep
# the class free of cdef methods (a vtable tp_new would have to set) and of __cinit__.
@cython.final
cdef class ConsumerRecord:
    """One consumed record: ``topic``, ``partition``, ``offset``, ``timestamp``,
    ``timestamp_type``, ``key``, ``value``, ``headers`` (a tuple of (str, bytes or None)),
    all read-only."""

    # Object fields are read through member descriptors (see kw_fast_members below);
    # timestamp_type is an object too, at no cost (-1, 0 and 1 are cached ints).
    cdef readonly object topic
    cdef readonly object partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers

    def __init__(self, topic, partition, offset, timestamp, int timestamp_type, key, value,
                 headers=()):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = tuple(headers)

    def __repr__(self):
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r})")

    def __reduce__(self):
        return (ConsumerRecord, (self.topic, self.partition, self.offset, self.timestamp,
                                 self.timestamp_type, self.key, self.value, self.headers))


cdef extern from "Python.h":
    ctypedef struct PyObject
    ctypedef struct PyTypeObject
    void PyObject_GC_Track(object op)
    PyObject* _PyObject_GC_New(PyTypeObject* tp)  # what the PyObject_GC_New macro calls
    int PyList_Append(object list, PyObject* item) except -1
    void Py_DecRef(PyObject* o)
    void Py_INCREF(PyObject* o)


# The decoder fills a new record's struct itself (see _Decoder.consumer_record), through
# this view of it: raw pointers, so Cython does not release what the fields held before.
cdef extern from *:
    ctypedef struct _CRFields "struct __pyx_obj_9kafkawire_6_codec_ConsumerRecord":
        PyObject* topic
        PyObject* partition
        int64_t offset
        int64_t timestamp
        PyObject* timestamp_type
        PyObject* key
        PyObject* value
        PyObject* headers


# Cython reads cdef attributes through getset properties: a C call per read, which
# CPython's specializing interpreter (3.11+, PEP 659) leaves generic.  A read-only member
# descriptor of type T_OBJECT_EX (what __slots__ make) it turns into a direct load
# (LOAD_ATTR_SLOT): `r.value` in a loop over poll()'s records costs about half as much.
# The fields are never NULL (Cython sets them to None first), so T_OBJECT_EX never raises.
cdef extern from *:
    """
    #include <structmember.h>
    #ifdef Py_T_OBJECT_EX
    #define KW_T_OBJECT_EX Py_T_OBJECT_EX
    #define KW_READONLY Py_READONLY
    #else
    #define KW_T_OBJECT_EX T_OBJECT_EX
    #define KW_READONLY READONLY
    #endif
    #define KW_CR_OFF(f) offsetof(struct __pyx_obj_9kafkawire_6_codec_ConsumerRecord, f)
    #define KW_CR_TOPIC KW_CR_OFF(topic)
    #define KW_CR_PARTITION KW_CR_OFF(partition)
    #define KW_CR_TIMESTAMP_TYPE KW_CR_OFF(timestamp_type)
    #define KW_CR_KEY KW_CR_OFF(key)
    #define KW_CR_VALUE KW_CR_OFF(value)
    #define KW_CR_HEADERS KW_CR_OFF(headers)
    #define KW_NMEMBERS 6

    /* The descriptors point at these: they live as long as the module. */
    static PyMemberDef kw_cr_members[KW_NMEMBERS];

    /* Replace the type's properties named in ``names`` by read-only member descriptors
       at ``offsets``. */
    static int kw_fast_members(PyObject *type, const char **names, const Py_ssize_t *offsets)
    {
        PyTypeObject *t = (PyTypeObject *)type;
        int i;
        for (i = 0; i < KW_NMEMBERS; i++) {
            PyObject *d;
            kw_cr_members[i].name = names[i];
            kw_cr_members[i].type = KW_T_OBJECT_EX;
            kw_cr_members[i].offset = offsets[i];
            kw_cr_members[i].flags = KW_READONLY;
            kw_cr_members[i].doc = NULL;
            d = PyDescr_NewMember(t, &kw_cr_members[i]);
            if (d == NULL)
                return -1;
            if (PyDict_SetItemString(t->tp_dict, names[i], d) < 0) {
                Py_DECREF(d);
                return -1;
            }
            Py_DECREF(d);
        }
        PyType_Modified(t);
        return 0;
    }
    """
    Py_ssize_t KW_CR_TOPIC, KW_CR_PARTITION, KW_CR_TIMESTAMP_TYPE, KW_CR_KEY, KW_CR_VALUE
    Py_ssize_t KW_CR_HEADERS
    int kw_fast_members(object t, const char** names, const Py_ssize_t* offsets) except -1


cdef const char* _CR_NAMES[6]
cdef Py_ssize_t _CR_OFFSETS[6]
_CR_NAMES[:] = [b"topic", b"partition", b"timestamp_type", b"key", b"value", b"headers"]
_CR_OFFSETS[:] = [KW_CR_TOPIC, KW_CR_PARTITION, KW_CR_TIMESTAMP_TYPE, KW_CR_KEY, KW_CR_VALUE,
                  KW_CR_HEADERS]
kw_fast_members(ConsumerRecord, _CR_NAMES, _CR_OFFSETS)


cdef inline Record _new_record(int64_t offset, int64_t ts, int tt, object key, object value,
                               object headers):
    cdef Record r = Record.__new__(Record)
    r.offset = offset
    r.timestamp = ts
    r.timestamp_type = tt
    r.key = key
    r.value = value
    r.headers = headers
    return r


cdef inline object _bytes_or_none(cptr p, Py_ssize_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>p, n)


# ---------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------
# One walker serves the three decoders; ``mode`` says what happens to each record.  Checks
# and their order follow the twin exactly, so both raise the same error for the same bytes.

DEF MODE_BATCHES = 0
DEF MODE_RECORDS = 1
DEF MODE_VIEW = 2    # columnar: one pass writing arrays of where record fields start
DEF MODE_CONSUMER = 3  # ConsumerRecords of one partition, control batches skipped

cdef str _KIND_MSG = "message"
cdef str _KIND_BATCH = "record batch"


cdef inline int _rvar(cptr r, Py_ssize_t lim, Py_ssize_t* pos, uint64_t* out,
                      int maxbytes) noexcept nogil:
    """Varint inside a record: the byte-count limit is checked before the buffer end."""
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t start = i
    cdef uint64_t result = 0
    cdef unsigned int shift = 0
    cdef unsigned char b
    if i < lim and r[i] < 0x80:
        out[0] = r[i]
        pos[0] = i + 1
        return VAR_OK
    while True:
        if i - start == maxbytes:
            return VAR_LONG
        if i >= lim:
            return VAR_TRUNC
        b = r[i]
        i += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            break
        shift += 7
    pos[0] = i
    out[0] = result
    return VAR_OK


cdef inline int _rspan(cptr r, Py_ssize_t lim, Py_ssize_t* pos, Py_ssize_t end,
                       bint nullable, cptr* start, int64_t* n) noexcept nogil:
    """One varint-length-prefixed field of a record (key, value, header key or value).

    Sets start/n (n = -1 for null when nullable) and moves pos past the field's bytes,
    which must end by ``end``; returns a VAR_* or SPAN_* status.
    """
    cdef uint64_t u
    cdef int st = _rvar(r, lim, pos, &u, 5)
    if st:
        n[0] = 0  # unused by the caller's error path; set so n is never uninitialised
        return st
    n[0] = _zz32(u)
    start[0] = r + pos[0]
    if n[0] < 0:
        return VAR_OK if nullable and n[0] == -1 else SPAN_BAD_LENGTH
    if pos[0] + n[0] > end:
        return SPAN_PAST_END
    pos[0] += n[0]
    return VAR_OK


# Offsets inside magic 1 wrappers are shifted (KIP-31) by amounts read from the wire; a
# damaged wrapper can shift them outside int64.  The shift is kept exact in 128 bits so
# such offsets are reported (as the twin does with Python ints) instead of wrapping.
cdef struct I128:
    int64_t hi
    uint64_t lo

cdef inline I128 _i128(int64_t v) noexcept nogil:
    cdef I128 r
    r.hi = -1 if v < 0 else 0
    r.lo = <uint64_t>v
    return r

cdef inline I128 _i128_add(I128 a, I128 b) noexcept nogil:
    cdef I128 r
    r.lo = a.lo + b.lo
    r.hi = a.hi + b.hi + (1 if r.lo < a.lo else 0)
    return r

cdef inline I128 _i128_sub(I128 a, I128 b) noexcept nogil:
    cdef I128 r
    r.lo = a.lo - b.lo
    r.hi = a.hi - b.hi - (1 if a.lo < b.lo else 0)
    return r

cdef inline bint _i128_fits(I128 a) noexcept nogil:
    return a.hi == (-1 if <int64_t>a.lo < 0 else 0)

cdef object _i128_py(I128 a):
    return (<object>a.hi) * 18446744073709551616 + <object>a.lo

cdef inline bint _add_overflows(int64_t a, int64_t b) noexcept nogil:
    return (b > 0 and a > INT64_MAX - b) or (b < 0 and a < INT64_MIN - b)

cdef str _outside_int64(str what, value):
    return f"{what} {value} is outside the int64 range"

cdef str _span_error(first, last):
    return f"inner message offsets {first} to {last} span more than the int64 range"


cdef object _rec_error(int64_t base_offset, int32_t k, int status, int maxbytes):
    if status == VAR_LONG:
        return _errors.corrupt(_KIND_BATCH, base_offset,
                               f"record {k}: varint longer than {maxbytes} bytes")
    return _errors.corrupt(_KIND_BATCH, base_offset,
                           f"record {k}: runs past the end of the batch")


cdef object _rec_corrupt(int64_t base_offset, int32_t k, str problem):
    return _errors.corrupt(_KIND_BATCH, base_offset, f"record {k}: {problem}")


cdef object _span_corrupt(int64_t base_offset, int32_t k, int status, str what, int64_t n):
    """The error for a non-zero _rspan status on field ``what`` of record k."""
    if status == SPAN_BAD_LENGTH:
        return _rec_corrupt(base_offset, k, f"invalid {what} length {n}")
    if status == SPAN_PAST_END:
        return _rec_corrupt(base_offset, k, f"{what} of {n} bytes runs past the end of the record")
    return _rec_error(base_offset, k, status, 5)


# MODE_VIEW output: per kept record its offset, timestamp, timestamp type, and where its
# key and value start (in the address space of the decoder's buffers) with their lengths;
# per header the same for its key and value.  The loop over records of the common shape
# (kw_v2_run) is plain C, written out below: a tight loop of its own (not inlined into
# _Decoder.batch), its rare exits marked unlikely.  It is most of a columnar decode's time.
cdef extern from *:
    """
    #include <stdint.h>
    /* One block (see _Decoder.relayout) with cap records' room per array, at fixed places
       kw_v2_body relies on: off 0, ts 8*cap, ks 16*cap, kl 24*cap, vl 28*cap, vs 32*cap
       (bytes), then hidx and tt. */
    typedef struct {
        int64_t *off; int64_t *ts; int8_t *tt; int32_t *kl; int32_t *vl; int32_t *hidx;
        int64_t *ks; int64_t *vs; Py_ssize_t n; Py_ssize_t cap;
        int64_t *hks; int32_t *hkl; int64_t *hvs; int32_t *hvl; Py_ssize_t nh; Py_ssize_t hcap;
    } kw_vout;

    /* kw_v2_run reads a few bytes past a field before checking it (at most 3 per varint,
       and it reads only where lengths checked against the record's end led): it takes a
       record only with this many readable bytes after the record's end. */
    #define KW_SLACK 16

    #if defined(__GNUC__) || defined(__clang__)
    #define KW_NOINLINE __attribute__((noinline))
    #define KW_INLINE static inline __attribute__((always_inline))
    #define KW_UNLIKELY(x) __builtin_expect(!!(x), 0)
    #define KW_OPAQUE(x) __asm__("" : "+r"(x))
    #else
    #define KW_OPAQUE(x) ((void)0)
    #define KW_NOINLINE
    #define KW_INLINE static __forceinline
    #define KW_UNLIKELY(x) (x)
    #endif

    /* The varint at p[x] if it takes 1 to 3 bytes (3 are readable): into u, x moved past
       it; else FAIL.  Each size adds its own constant, so no size is carried around. */
    #define KW_VAR3(p, x, u, FAIL)                                                 \
        do {                                                                       \
            uint32_t b0_ = (p)[x], b1_, b2_;                                       \
            if (b0_ < 0x80) {                                                      \
                (u) = b0_;                                                         \
                (x) += 1;                                                          \
            } else if ((b1_ = (p)[(x) + 1]) < 0x80) {                              \
                (u) = (b0_ & 0x7F) | (b1_ << 7);                                   \
                (x) += 2;                                                          \
            } else if ((b2_ = (p)[(x) + 2]) < 0x80) {                              \
                (u) = (b0_ & 0x7F) | ((b1_ & 0x7F) << 7) | (b2_ << 14);            \
                (x) += 3;                                                          \
            } else {                                                               \
                FAIL;                                                              \
            }                                                                      \
        } while (0)

    /* MODE_VIEW's loop over the records of a batch (see _v2_run in _codec.pyx).  It runs
       at ~5 instructions per cycle, so every instruction counts: positions are kept in
       the view's address space (rv[rbase + x] is r[x], no add per stored start), the
       records left count down, and a value length is checked by the record's end check
       alone (q moves by at most 2^21 there, and nothing is read at it).  The six
       arrays are written through two pointers walking the block (po: int64 columns, pl:
       int32 ones) and the distance h = 4*cap, as [po], [po+2h], [po+4h], [po+8h], [pl],
       [pl+h]: three registers, not six pointers and an index, so the loop's values stay
       in registers (six pointers were reloaded from the stack per record).  kw_v2_run
       below makes a copy of it for the usual batch (CreateTime, every record kept). */
    KW_INLINE Py_ssize_t kw_v2_body(
        const unsigned char *r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos,
        int32_t *kp, int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
        int lat, int emit, int64_t start, int64_t rbase, kw_vout *o, const int keep_all)
    {
        Py_ssize_t i, i0 = o->n, q, rec_end, j, end;
        int32_t k = *kp, left;
        int32_t nh = (int32_t)o->nh, *hidx;
        unsigned char *po = (unsigned char *)(o->off + i0), *pl = (unsigned char *)(o->kl + i0);
        Py_ssize_t h = 4 * o->cap;
        uint64_t ts_mask = lat ? 0 : ~(uint64_t)0;
        const unsigned char *rv = (const unsigned char *)((uintptr_t)r - (uintptr_t)rbase);
        if (lat)
            base_ts = max_ts;
        if (!emit)
            start = INT64_MAX; /* a control batch: checked, nothing kept */
        /* records must end by here: in the batch, with KW_SLACK readable bytes after them
           (so a record starting at the batch's end is refused by its length: no check of
           rpos against rn per record) */
        end = rlim - KW_SLACK < rn ? rlim - KW_SLACK : rn;
        if (rpos >= end || k >= count)
            goto done;
        end += rbase;
        rpos += rbase;
        left = count - k;
        for (;;) {
            uint32_t u, ut, uo, uk, uv;
            int64_t kl, vl, ks, vs, offset;
            unsigned char last;
            q = rpos;
            KW_VAR3(rv, q, u, goto stop);
            if (KW_UNLIKELY(u & 1)) /* a negative length */
                break;
            rec_end = q + (Py_ssize_t)(u >> 1);
            if (KW_UNLIKELY(rec_end > end))
                break;
            /* The header count, 0 in one byte, must be the record's last byte: read it
               now, off the chain of fields that leads to it. */
            last = rv[rec_end - 1];
            q += 1; /* attributes: unused (KIP-98) */
            KW_VAR3(rv, q, ut, goto stop);
            KW_VAR3(rv, q, uo, goto stop);
            if (KW_UNLIKELY(uo & 1)) /* a negative offset delta: the general loop's */
                break;
            KW_VAR3(rv, q, uk, goto stop);
            ks = q;
            if (!(uk & 1)) {
                kl = (int64_t)(uk >> 1);
                if (KW_UNLIKELY(q + kl > rec_end))
                    break;
                q += kl;
            } else if (uk == 1) {
                kl = -1;
            } else {
                break; /* a negative length other than -1 (null) */
            }
            KW_VAR3(rv, q, uv, goto stop);
            vs = q;
            if (!(uv & 1)) {
                vl = (int64_t)(uv >> 1);
                q += vl;
            } else if (uv == 1) {
                vl = -1;
            } else {
                break;
            }
            /* no headers (a count of 0 in one byte), nothing after them */
            if (KW_UNLIKELY(((q + 1) ^ rec_end) | last))
                break;
            offset = base_offset + (int64_t)(uo >> 1);
            if (keep_all || offset >= start) {
                KW_OPAQUE(h); /* keeps h a register: no pointer per array derived from it */
                *(int64_t *)po = offset;
                *(int64_t *)(po + 2 * h) = base_ts + (int64_t)((uint64_t)(int64_t)(int32_t)
                                              ((ut >> 1) ^ (0 - (ut & 1))) & ts_mask);
                *(int64_t *)(po + 4 * h) = ks;
                *(int64_t *)(po + 8 * h) = vs;
                *(int32_t *)pl = (int32_t)kl;
                *(int32_t *)(pl + h) = (int32_t)vl;
                po += 8;
                pl += 4;
            }
            rpos = rec_end;
            if (--left == 0)
                break;
        }
    stop:
        rpos -= rbase;
        k = count - left;
    done:
        i = i0 + (po - (unsigned char *)(o->off + i0)) / 8;
        if (i > i0) {
            memset(o->tt + i0, lat ? 1 : 0, (size_t)(i - i0));
            hidx = o->hidx;
            for (j = i0 + 1; j <= i; j++)
                hidx[j] = nh;
        }
        o->n = i;
        *kp = k;
        return rpos;
    }

    static KW_NOINLINE Py_ssize_t kw_v2_run(
        const unsigned char *r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos,
        int32_t *kp, int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
        int lat, int emit, int64_t start, int64_t rbase, kw_vout *o)
    {
        /* offset deltas are >= 0 in the loop, so no record is below start here */
        if (!lat && emit && start <= base_offset)
            return kw_v2_body(r, rn, rlim, rpos, kp, count, base_offset, base_ts, max_ts,
                              0, 1, start, rbase, o, 1);
        return kw_v2_body(r, rn, rlim, rpos, kp, count, base_offset, base_ts, max_ts,
                          lat, emit, start, rbase, o, 0);
    }
    """
    ctypedef struct VOut "kw_vout":
        int64_t* off
        int64_t* ts
        int8_t* tt
        int32_t* kl
        int32_t* vl
        int32_t* hidx
        int64_t* ks
        int64_t* vs
        Py_ssize_t n
        Py_ssize_t cap
        int64_t* hks
        int32_t* hkl
        int64_t* hvs
        int32_t* hvl
        Py_ssize_t nh
        Py_ssize_t hcap
    Py_ssize_t kw_v2_run(cptr r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos, int32_t* kp,
                         int32_t count, int64_t base_offset, int64_t base_ts, int64_t max_ts,
                         bint lat, bint emit, int64_t start, int64_t rbase,
                         VOut* o) noexcept nogil


cdef inline bint _ascii(cptr p, Py_ssize_t n) noexcept nogil:
    """All bytes below 0x80 (valid UTF-8 without decoding it)."""
    cdef Py_ssize_t i
    cdef unsigned char acc = 0
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


# _v2_run (kw_v2_run) takes batches whose base offset and base timestamp are within this
# of 0: adding a delta of at most 3 varint bytes cannot leave int64 then.
cdef int64_t _FAST_BASE = 4611686018427387904


cdef inline Py_ssize_t _v2_run(cptr r, Py_ssize_t rn, Py_ssize_t rlim, Py_ssize_t rpos,
                               int32_t* kp, int32_t count, int64_t base_offset,
                               int64_t base_ts, int64_t max_ts, bint lat, bint emit,
                               int64_t start, int64_t rbase, VOut* o) noexcept nogil:
    """MODE_VIEW's loop over the records of a batch: as many whole records as it can, from
    ``rpos`` (record kp[0]); returns where it stopped.  r[:rlim] is readable.

    It takes the common shape only: varints of at most 3 bytes, an offset delta >= 0, no
    headers, fields that fill the record exactly, KW_SLACK readable bytes after it; the
    caller made room for ``count`` records and checked the bases (_FAST_BASE).  At
    anything else it stops before that record, and the general loop in _Decoder.batch
    decodes it or raises its error.  The values it keeps are the general loop's.  (The
    loop is kw_v2_run, in C.)
    """
    return kw_v2_run(r, rn, rlim, rpos, kp, count, base_offset, base_ts, max_ts, lat, emit,
                     start, rbase, o)


@cython.final
cdef class _Decoder:
    cdef int64_t start_offset
    cdef bint check_crcs
    cdef object max_depth
    cdef object max_size
    cdef int mode
    cdef bint include_control
    cdef list out
    cdef list cur            # records of the top-level legacy message (MODE_BATCHES)
    # the top-level legacy entry being decoded: its kept offsets, an offset outside int64
    # (raised once the entry is decoded, as the twin checks its finished records), and
    # the last record's exact offset (KIP-31 shift of an enclosing wrapper)
    cdef Py_ssize_t leg_kept
    cdef int64_t leg_first, leg_last
    cdef object leg_overflow
    cdef Py_ssize_t leaves
    cdef I128 last_leaf
    # MODE_VIEW: the arrays (in two bytearrays, grown as needed, pointers in ``o``), the buffers
    # record fields are found in (the input, then each decompressed one) with where each
    # starts in the one address space of the *_starts arrays, and the buffer being walked
    cdef VOut o
    cdef object block
    cdef object hblock
    cdef list segs
    cdef list bases
    cdef int64_t vtotal
    cdef cptr seg_ptr
    cdef int64_t seg_vbase
    # MODE_CONSUMER: the records' topic and partition, and where the last batch (or legacy
    # message) that had records at or past start_offset ends: end_base + end_delta + 1
    cdef object topic
    cdef object partition
    cdef bint has_end
    cdef int64_t end_base
    cdef int64_t end_delta

    cdef object inflate(self, object src, Py_ssize_t start, Py_ssize_t end, int codec,
                        bint legacy_lz4):
        cdef object r = _compression.decompress(codec, memoryview(src).cast("B")[start:end],
                                                self.max_size, legacy_lz4=legacy_lz4)
        if not PyBytes_CheckExact(r):
            r = bytes(r)
        if self.mode == MODE_VIEW:
            # Records are read in place in the decompressed bytes (the one copy).
            self.segs.append(memoryview(r))
            self.bases.append(self.vtotal)
            self.vtotal += PyBytes_GET_SIZE(r)
        return r

    cdef int grow(self, Py_ssize_t need) except -1:
        """Room for ``need`` records in MODE_VIEW's record block (kept records move)."""
        cdef Py_ssize_t cap = self.o.cap * 2
        if need <= self.o.cap:
            return 0
        if cap < need:
            cap = need
        if cap < 64:
            cap = 64
        self.block = self.relayout(cap)
        return 0

    cdef object relayout(self, Py_ssize_t cap):
        """A record block for ``cap`` records holding the ``o.n`` kept so far; sets the
        pointers.  Layout (kw_v2_body writes by it): offsets, timestamps, key starts
        (int64), key lengths, value lengths (int32), value starts (int64), header_index
        (cap + 1, int32), timestamp types (int8).
        One block, not a buffer per array: freed, it stays with malloc for the next
        decode, where separate buffers went back to the system and were page-faulted in
        again (a third of the time for small records)."""
        cdef Py_ssize_t n = self.o.n
        cdef object block = PyByteArray_FromStringAndSize(NULL, 45 * cap + 4)
        cdef unsigned char* b = <unsigned char*>PyByteArray_AS_STRING(block)
        cdef int64_t* off = <int64_t*>b
        cdef int64_t* ts = <int64_t*>(b + 8 * cap)
        cdef int64_t* ks = <int64_t*>(b + 16 * cap)
        cdef int32_t* kl = <int32_t*>(b + 24 * cap)
        cdef int32_t* vl = <int32_t*>(b + 28 * cap)
        cdef int64_t* vs = <int64_t*>(b + 32 * cap)
        cdef int32_t* hidx = <int32_t*>(b + 40 * cap)
        cdef int8_t* tt = <int8_t*>(b + 44 * cap + 4)
        if self.o.cap > 0:
            memcpy(off, self.o.off, 8 * n)
            memcpy(ts, self.o.ts, 8 * n)
            memcpy(ks, self.o.ks, 8 * n)
            memcpy(vs, self.o.vs, 8 * n)
            memcpy(kl, self.o.kl, 4 * n)
            memcpy(vl, self.o.vl, 4 * n)
            memcpy(hidx, self.o.hidx, 4 * (n + 1))
            memcpy(tt, self.o.tt, n)
        else:
            hidx[0] = 0
        self.o.off, self.o.ts, self.o.ks, self.o.vs = off, ts, ks, vs
        self.o.kl, self.o.vl, self.o.hidx, self.o.tt = kl, vl, hidx, tt
        self.o.cap = cap
        return block

    cdef int hgrow(self) except -1:
        """Room for one more header in MODE_VIEW's header block (layout: starts of keys,
        starts of values, key lengths, value lengths)."""
        cdef Py_ssize_t cap, nh = self.o.nh
        cdef object block
        cdef unsigned char* b
        if nh < self.o.hcap:
            return 0
        cap = self.o.hcap * 2 if self.o.hcap >= 32 else 64
        block = PyByteArray_FromStringAndSize(NULL, 24 * cap)
        b = <unsigned char*>PyByteArray_AS_STRING(block)
        if nh:
            memcpy(b, self.o.hks, 8 * nh)
            memcpy(b + 8 * cap, self.o.hvs, 8 * nh)
            memcpy(b + 16 * cap, self.o.hkl, 4 * nh)
            memcpy(b + 20 * cap, self.o.hvl, 4 * nh)
        self.o.hks = <int64_t*>b
        self.o.hvs = <int64_t*>(b + 8 * cap)
        self.o.hkl = <int32_t*>(b + 16 * cap)
        self.o.hvl = <int32_t*>(b + 20 * cap)
        self.o.hcap = cap
        self.hblock = block
        return 0

    cdef inline int keep_record(self, int64_t offset, int64_t ts, int tt, int64_t ks,
                                Py_ssize_t kl, int64_t vs, Py_ssize_t vl) except -1:
        cdef Py_ssize_t i = self.o.n
        if i >= self.o.cap:
            self.grow(i + 1)
        self.o.off[i] = offset
        self.o.ts[i] = ts
        self.o.tt[i] = <int8_t>tt
        self.o.ks[i] = ks
        self.o.kl[i] = <int32_t>kl
        self.o.vs[i] = vs
        self.o.vl[i] = <int32_t>vl
        self.o.hidx[i + 1] = <int32_t>self.o.nh
        self.o.n = i + 1
        return 0

    # ---- the top level: entries of offset int64, size int32, <size bytes> ----
    cdef int top(self, object src, cptr p, Py_ssize_t n) except -1:
        cdef Py_ssize_t pos = 0
        cdef int64_t offset
        cdef int32_t size
        cdef int magic
        while n - pos >= 12:
            offset = <int64_t>_be64(p + pos)
            size = <int32_t>_be32(p + pos + 8)
            if size > n - pos - 12:
                return 0  # a partial entry at the end of a fetch response is normal
            if size < 14:
                raise _errors.corrupt(_KIND_MSG, offset,
                                      f"size {size} is below the 14-byte minimum of any entry")
            magic = <int8_t>p[pos + 16]
            if magic == 2:
                if size < 49:
                    raise _errors.corrupt(_KIND_BATCH, offset,
                                          f"size {size} is below the 49-byte minimum for magic 2")
                self.batch(src, p, n, pos, 12 + size, offset)
            elif magic == 0 or magic == 1:
                if self.mode == MODE_BATCHES:
                    self.cur = []
                self.leg_kept = 0
                self.leg_overflow = None
                self.message(src, p, pos, 12 + size, offset, _i128(0), 0, False, 0)
                if self.leg_overflow is not None:
                    raise _errors.corrupt(_KIND_MSG, offset, _outside_int64(
                        "inner message offset", self.leg_overflow))
                if self.leg_kept and not _i128_fits(
                        _i128_sub(_i128(self.leg_last), _i128(self.leg_first))):
                    raise _errors.corrupt(_KIND_MSG, offset, _span_error(self.leg_first,
                                                                         self.leg_last))
                if self.mode == MODE_BATCHES and self.cur:
                    self.legacy_batch(p + pos + 12, magic)
            else:
                raise _errors.unsupported_magic(magic, offset)
            pos += 12 + size
        return 0

    # ---- a decompressed inner message set; a truncated one is corrupt ----
    cdef int inner_set(self, object src, cptr p, Py_ssize_t n, int depth,
                       int64_t wrapper_offset, I128 delta, bint lat, int64_t lat_ts) except -1:
        cdef Py_ssize_t pos = 0
        cdef int64_t offset
        cdef int32_t size
        cdef int magic
        while pos < n:
            if n - pos < 12:
                raise _errors.corrupt(_KIND_MSG, wrapper_offset,
                                      "compressed message set is truncated")
            offset = <int64_t>_be64(p + pos)
            size = <int32_t>_be32(p + pos + 8)
            if size > n - pos - 12:
                raise _errors.corrupt(_KIND_MSG, wrapper_offset,
                                      "compressed message set is truncated")
            if size < 14:
                raise _errors.corrupt(_KIND_MSG, offset,
                                      f"size {size} is below the 14-byte minimum of any entry")
            magic = <int8_t>p[pos + 16]
            if magic != 0 and magic != 1:
                if magic == 2:
                    raise _errors.corrupt(_KIND_MSG, wrapper_offset,
                                          "compressed message set holds a magic 2 batch")
                raise _errors.unsupported_magic(magic, offset)
            self.message(src, p, pos, 12 + size, offset, delta, depth, lat, lat_ts)
            pos += 12 + size
        return 0

    cdef int legacy_batch(self, cptr m, int magic) except -1:
        cdef Batch b = Batch.__new__(Batch)
        cdef Record first = <Record>self.cur[0]
        cdef Record last = <Record>self.cur[len(self.cur) - 1]
        cdef int attrs = m[5]
        b.base_offset = first.offset
        b.magic = magic
        b.crc = _be32(m)
        b.attributes = attrs
        b.compression = attrs & 7
        b.timestamp_type = ((attrs >> 3) & 1) if magic == 1 else -1
        b.is_transactional = False
        b.is_control = False
        b.partition_leader_epoch = -1
        b.last_offset_delta = last.offset - first.offset
        b.base_timestamp = <int64_t>_be64(m + 6) if magic == 1 else -1
        b.max_timestamp = b.base_timestamp
        b.producer_id = -1
        b.producer_epoch = -1
        b.base_sequence = -1
        b.records = self.cur
        self.out.append(b)
        return 0

    # ---- one magic 0/1 message at base[pos:pos+total]; errors name ``offset`` as written,
    # records get offset + delta (the mapping of enclosing magic 1 wrappers, KIP-31) ----
    cdef int message(self, object src, cptr base, Py_ssize_t pos, Py_ssize_t total,
                     int64_t offset, I128 delta, int depth, bint lat, int64_t lat_ts) except -1:
        cdef cptr m = base + pos + 12       # crc
        cdef Py_ssize_t size = total - 12
        cdef uint32_t stored
        cdef uint32_t computed
        cdef int magic = m[4]
        cdef int attrs = m[5]
        cdef int codec = attrs & 7
        cdef Py_ssize_t q = 6
        cdef int64_t ts = -1
        cdef int tt = -1
        cdef int32_t kl, vl
        cdef cptr k
        cdef cptr v
        cdef object inner
        cdef cptr ip
        cdef Py_ssize_t ipos, iend
        cdef int64_t absolute
        cdef I128 exact, last_inner
        cdef int32_t isize
        cdef cptr outer_ptr
        cdef int64_t outer_vbase
        cdef int last_codec
        cdef _Decoder sub
        if magic == 1 and size < 22:
            raise _errors.corrupt(_KIND_MSG, offset,
                                  f"size {size} is below the 22-byte minimum for magic 1")
        stored = _be32(m)
        if self.check_crcs:
            computed = _crc32(m + 4, size - 4)
            if computed != stored:
                raise _errors.crc_mismatch(_KIND_MSG, offset, stored, computed)
        if magic == 1:
            ts = <int64_t>_be64(m + 6)
            tt = (attrs >> 3) & 1
            q = 14
        kl = <int32_t>_be32(m + q)
        q += 4
        if kl < -1:
            raise _errors.corrupt(_KIND_MSG, offset, f"invalid key length {kl}")
        if kl > size - q:
            raise _errors.corrupt(_KIND_MSG, offset,
                                  f"key of {kl} bytes runs past the end of the message")
        k = m + q
        if kl > 0:
            q += kl
        if size - q < 4:
            raise _errors.corrupt(_KIND_MSG, offset, "value length runs past the end of the message")
        vl = <int32_t>_be32(m + q)
        q += 4
        if vl < -1:
            raise _errors.corrupt(_KIND_MSG, offset, f"invalid value length {vl}")
        if vl > size - q:
            raise _errors.corrupt(_KIND_MSG, offset,
                                  f"value of {vl} bytes runs past the end of the message")
        v = m + q
        if vl > 0:
            q += vl
        if q != size:
            raise _errors.corrupt(_KIND_MSG, offset, f"{size - q} bytes follow the value")
        exact = _i128_add(delta, _i128(offset))
        if codec == 0:
            self.leaves += 1
            self.last_leaf = exact
            if not _i128_fits(exact):
                if self.leg_overflow is None:
                    self.leg_overflow = _i128_py(exact)
                return 0
            absolute = <int64_t>exact.lo
            if lat:
                ts = lat_ts
                tt = 1
            if absolute < self.start_offset:
                return 0
            if self.leg_kept == 0:
                self.leg_first = absolute
            self.leg_last = absolute
            self.leg_kept += 1
            if self.mode == MODE_RECORDS:
                self.out.append(_new_record(absolute, ts, tt, _bytes_or_none(k, kl),
                                            _bytes_or_none(v, vl), _EMPTY))
            elif self.mode == MODE_BATCHES:
                self.cur.append(_new_record(absolute, ts, tt, _bytes_or_none(k, kl),
                                            _bytes_or_none(v, vl), _EMPTY))
            elif self.mode == MODE_CONSUMER:
                self.consumer_record(absolute, ts, <object>tt, _bytes_or_none(k, kl),
                                     _bytes_or_none(v, vl), _EMPTY)
                self.has_end = True
                self.end_base = absolute
                self.end_delta = 0
            else:
                self.keep_record(absolute, ts, tt, self.seg_vbase + (k - self.seg_ptr), kl,
                                 self.seg_vbase + (v - self.seg_ptr), vl)
            return 0
        # A compressed wrapper: its value is a whole message set.
        if vl < 0:
            raise _errors.corrupt(_KIND_MSG, offset, "compressed wrapper message has a null value")
        if depth + 1 > self.max_depth:
            raise _errors.too_deep(depth + 1, self.max_depth, offset)
        inner = self.inflate(src, v - base, v - base + vl, codec, magic == 0)
        ip = <cptr>PyBytes_AS_STRING(inner)
        iend = PyBytes_GET_SIZE(inner)
        if magic == 1:
            # KIP-31: inner offsets are relative; the wrapper carries the absolute offset
            # of the last inner record.
            ipos = 0
            last_inner = _i128(offset)
            last_codec = 0
            while iend - ipos >= 12:
                isize = <int32_t>_be32(ip + ipos + 8)
                if isize < 0 or isize > iend - ipos - 12:
                    break
                last_inner = _i128(<int64_t>_be64(ip + ipos))
                last_codec = ip[ipos + 17] & 7 if isize >= 6 else 0
                ipos += 12 + isize
            if last_codec and ipos == iend:
                # The last entry is itself a wrapper (nested compression, which no Kafka
                # client writes): its last record, not its own offset, anchors the shift.
                # Decode the inner set once just to find that record (errors, if any,
                # are the ones the real walk below would raise first).
                sub = _decoder(MODE_RECORDS, INT64_MIN, self.check_crcs, self.max_depth,
                               self.max_size, True)
                sub.inner_set(inner, ip, iend, depth + 1, offset, _i128(0), False, 0)
                if sub.leaves:
                    last_inner = sub.last_leaf
            if (attrs >> 3) & 1 and not lat:
                # KIP-32: a LogAppendTime wrapper's timestamp applies to every inner record
                lat = True
                lat_ts = ts
            delta = _i128_sub(exact, last_inner)
        if self.mode != MODE_VIEW:
            self.inner_set(inner, ip, iend, depth + 1, offset, delta, lat, lat_ts)
            return 0
        # The inner records are in the buffer inflate() just added, at the last base.
        outer_ptr = self.seg_ptr
        outer_vbase = self.seg_vbase
        self.seg_ptr = ip
        self.seg_vbase = <int64_t>self.bases[len(self.bases) - 1]
        try:
            self.inner_set(inner, ip, iend, depth + 1, offset, delta, lat, lat_ts)
        finally:
            self.seg_ptr = outer_ptr
            self.seg_vbase = outer_vbase
        return 0

    # ---- one magic 2 RecordBatch at base[pos:pos+total]; base holds n bytes ----
    cdef int batch(self, object src, cptr base, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t total,
                   int64_t base_offset) except -1:
        cdef cptr p = base + pos
        cdef uint32_t stored = _be32(p + 17)
        cdef uint32_t computed
        cdef int attrs = <int16_t>_be16(p + 21)
        cdef int codec = attrs & 7
        cdef bint lat = (attrs >> 3) & 1
        cdef bint control = (attrs >> 5) & 1
        cdef int64_t base_ts = <int64_t>_be64(p + 27)
        cdef int64_t max_ts = <int64_t>_be64(p + 35)
        cdef int32_t count = <int32_t>_be32(p + 57)
        cdef object inner = None
        cdef cptr r
        cdef Py_ssize_t rn, rlim, q, rec_end, rpos
        cdef int32_t k
        cdef int64_t h
        cdef uint64_t u = 0
        cdef int st
        cdef int64_t length, ts_delta, od, kl, vl, hcount, hkl, hvl
        cdef int64_t offset, ts
        cdef int tt = 1 if lat else 0
        cdef cptr kp
        cdef cptr vp
        cdef cptr hk
        cdef cptr hv
        cdef bint keep
        cdef bint emit = True
        cdef bint reached = False
        cdef object tto = tt  # MODE_CONSUMER: the timestamp type as a Python int, once
        cdef object headers
        cdef list hlist
        cdef object hkey = None
        cdef list records = None
        cdef bint fast = False
        cdef int64_t rbase = 0
        cdef Py_ssize_t room
        if self.check_crcs:
            # KIP-98: CRC32C covers everything from the attributes to the end of the batch
            computed = _crc32c(p + 21, total - 21)
            if computed != stored:
                raise _errors.crc_mismatch(_KIND_BATCH, base_offset, stored, computed)
        if count < 0:
            raise _errors.corrupt(_KIND_BATCH, base_offset, f"negative record count {count}")
        if control and (self.mode == MODE_VIEW or self.mode == MODE_CONSUMER or
                        (self.mode == MODE_RECORDS and not self.include_control)):
            emit = False  # still decoded, so bad control batches fail as in the twin
        if codec:
            inner = self.inflate(src, pos + 61, pos + total, codec, False)
            r = <cptr>PyBytes_AS_STRING(inner)
            rn = PyBytes_GET_SIZE(inner)
            rlim = rn
        else:
            r = p + 61
            rn = total - 61
            rlim = n - pos - 61  # field reads may run into the next entry; lengths catch it
        if self.mode == MODE_BATCHES:
            records = []
        elif self.mode == MODE_VIEW:
            # where r[0] is in the address space of the view's starts
            if codec:
                rbase = <int64_t>self.bases[len(self.bases) - 1]
            else:
                rbase = self.seg_vbase + (r - self.seg_ptr)
            # A kept record takes 7 bytes at least: room for all of them up front, and
            # _v2_run's offsets (base + an int32 delta) cannot leave int64.
            room = rn // 7 + 1
            self.grow(self.o.n + (count if count < room else room))
            fast = (-_FAST_BASE <= base_offset <= _FAST_BASE
                    and -_FAST_BASE <= base_ts <= _FAST_BASE)
        elif self.mode == MODE_CONSUMER and emit:
            # Records of the common shape through _v2_run too: it keeps their fields'
            # spans (relative to r, rbase 0), made into records right after each run.
            # With consumer_record's own allocation, 22% fewer instructions per record
            # than the general loop and tp_new (callgrind, 100-byte values).
            room = rn // 7 + 1
            self.grow(count if count < room else room)
            fast = (-_FAST_BASE <= base_offset <= _FAST_BASE
                    and -_FAST_BASE <= base_ts <= _FAST_BASE)
        rpos = 0
        k = 0
        while k < count:
            if fast:
                rpos = _v2_run(r, rn, rlim, rpos, &k, count, base_offset, base_ts, max_ts,
                               lat, emit, self.start_offset, rbase, &self.o)
                if self.mode == MODE_CONSUMER and self.o.n:
                    reached = True
                    self.consumer_run(r, tto)
                if k >= count:
                    break
            if rpos >= rn:
                break
            q = rpos
            st = _rvar(r, rlim, &q, &u, 5)
            if st:
                raise _rec_error(base_offset, k, st, 5)
            length = _zz32(u)
            if length < 0:
                raise _rec_corrupt(base_offset, k, f"negative length {length}")
            rec_end = q + length
            if rec_end > rn:
                raise _rec_corrupt(base_offset, k, f"length {length} runs past the end of the batch")
            q += 1  # attributes: unused (KIP-98)
            st = _rvar(r, rlim, &q, &u, 10)
            if st:
                raise _rec_error(base_offset, k, st, 10)
            ts_delta = _zz64(u)
            st = _rvar(r, rlim, &q, &u, 5)
            if st:
                raise _rec_error(base_offset, k, st, 5)
            od = _zz32(u)
            offset = <int64_t>(<uint64_t>base_offset + <uint64_t>od)
            st = _rspan(r, rlim, &q, rec_end, True, &kp, &kl)
            if st:
                raise _span_corrupt(base_offset, k, st, "key", kl)
            st = _rspan(r, rlim, &q, rec_end, True, &vp, &vl)
            if st:
                raise _span_corrupt(base_offset, k, st, "value", vl)
            st = _rvar(r, rlim, &q, &u, 5)
            if st:
                raise _rec_error(base_offset, k, st, 5)
            hcount = _zz32(u)
            keep = emit and offset >= self.start_offset
            headers = _EMPTY
            if hcount != 0:
                if hcount < 0:
                    raise _rec_corrupt(base_offset, k, f"negative header count {hcount}")
                hlist = [] if keep and self.mode != MODE_VIEW else None
                h = 0
                while h < hcount:
                    st = _rspan(r, rlim, &q, rec_end, False, &hk, &hkl)
                    if st:
                        raise _span_corrupt(base_offset, k, st, "header key", hkl)
                    if not _ascii(hk, hkl):
                        try:
                            hkey = PyUnicode_DecodeUTF8(<const char*>hk, hkl, NULL)
                        except UnicodeDecodeError:
                            raise _rec_corrupt(base_offset, k, "header key is not valid UTF-8") from None
                    elif hlist is not None:
                        hkey = PyUnicode_DecodeUTF8(<const char*>hk, hkl, NULL)
                    st = _rspan(r, rlim, &q, rec_end, True, &hv, &hvl)
                    if st:
                        raise _span_corrupt(base_offset, k, st, "header value", hvl)
                    if keep:
                        if hlist is not None:
                            hlist.append((hkey, _bytes_or_none(hv, hvl)))
                        else:
                            self.hgrow()
                            self.o.hks[self.o.nh] = rbase + (hk - r)
                            self.o.hkl[self.o.nh] = <int32_t>hkl
                            self.o.hvs[self.o.nh] = rbase + (hv - r)
                            self.o.hvl[self.o.nh] = <int32_t>hvl
                            self.o.nh += 1
                    h += 1
                if hlist is not None:
                    headers = tuple(hlist)
            if q != rec_end:
                raise _rec_corrupt(base_offset, k,
                                   f"its fields take {q - rec_end + length} of its {length} bytes")
            # Offsets and timestamps are int64 in Kafka: a sum outside it is corrupt data.
            if _add_overflows(base_offset, od):
                raise _rec_corrupt(base_offset, k,
                                   _outside_int64("offset", <object>base_offset + <object>od))
            if not lat and _add_overflows(base_ts, ts_delta):
                raise _rec_corrupt(base_offset, k,
                                   _outside_int64("timestamp", <object>base_ts + <object>ts_delta))
            rpos = rec_end
            k += 1
            if not keep:
                if offset >= self.start_offset:
                    reached = True  # a control batch's record: the position moves past it
                continue
            reached = True
            ts = max_ts if lat else <int64_t>(<uint64_t>base_ts + <uint64_t>ts_delta)
            if self.mode == MODE_RECORDS:
                self.out.append(_new_record(offset, ts, tt, _bytes_or_none(kp, kl),
                                            _bytes_or_none(vp, vl), headers))
            elif self.mode == MODE_CONSUMER:
                self.consumer_record(offset, ts, tto, _bytes_or_none(kp, kl),
                                     _bytes_or_none(vp, vl), headers)
            elif self.mode == MODE_BATCHES:
                records.append(_new_record(offset, ts, tt, _bytes_or_none(kp, kl),
                                           _bytes_or_none(vp, vl), headers))
            else:
                self.keep_record(offset, ts, tt, rbase + (kp - r), kl, rbase + (vp - r), vl)
        if k < count:
            raise _errors.corrupt(_KIND_BATCH, base_offset,
                                  f"holds {k} records, fewer than its record count {count}")
        if rpos != rn:
            raise _errors.corrupt(_KIND_BATCH, base_offset,
                                  f"{rn - rpos} bytes follow its {count} records")
        if self.mode == MODE_BATCHES and records:
            self.out.append(self.make_batch(p, base_offset, attrs, stored, records))
        elif reached and self.mode == MODE_CONSUMER:
            self.has_end = True
            self.end_base = base_offset
            self.end_delta = <int32_t>_be32(p + 23)
        return 0

    cdef inline int consumer_record(self, int64_t offset, int64_t ts, object tt, object key,
                                    object value, object headers) except -1:
        # Allocated as PyObject_GC_New does and filled here, not through the type's
        # tp_new: nothing zeroed, no None put in to be taken out again, and never
        # tracked by the cyclic GC (it holds bytes, str, None and tuples only; see
        # ConsumerRecord).
        cdef PyObject* o = _PyObject_GC_New(<PyTypeObject*>ConsumerRecord)
        cdef _CRFields* f = <_CRFields*>o
        if o == NULL:
            raise MemoryError()
        f.topic = <PyObject*>self.topic
        f.partition = <PyObject*>self.partition
        f.offset = offset
        f.timestamp = ts
        f.timestamp_type = <PyObject*>tt
        f.key = <PyObject*>key
        f.value = <PyObject*>value
        f.headers = <PyObject*>headers
        Py_INCREF(f.topic)
        Py_INCREF(f.partition)
        Py_INCREF(f.timestamp_type)
        Py_INCREF(f.key)
        Py_INCREF(f.value)
        Py_INCREF(f.headers)
        try:
            PyList_Append(self.out, o)
        finally:
            Py_DecRef(o)
        return 0

    cdef int consumer_run(self, cptr r, object tt) except -1:
        """The records _v2_run kept (spans into ``r``, no headers) as ConsumerRecords;
        empties the run's arrays."""
        cdef Py_ssize_t i
        cdef Py_ssize_t n = self.o.n
        for i in range(n):
            self.consumer_record(self.o.off[i], self.o.ts[i], tt,
                                 _bytes_or_none(r + self.o.ks[i], self.o.kl[i]),
                                 _bytes_or_none(r + self.o.vs[i], self.o.vl[i]), _EMPTY)
        self.o.n = 0
        return 0

    cdef Batch make_batch(self, cptr p, int64_t base_offset, int attrs, uint32_t stored,
                          list records):
        cdef Batch b = Batch.__new__(Batch)
        b.base_offset = base_offset
        b.magic = 2
        b.crc = stored
        b.attributes = attrs
        b.compression = attrs & 7
        b.timestamp_type = (attrs >> 3) & 1
        b.is_transactional = (attrs >> 4) & 1
        b.is_control = (attrs >> 5) & 1
        b.partition_leader_epoch = <int32_t>_be32(p + 12)
        b.last_offset_delta = <int32_t>_be32(p + 23)
        b.base_timestamp = <int64_t>_be64(p + 27)
        b.max_timestamp = <int64_t>_be64(p + 35)
        b.producer_id = <int64_t>_be64(p + 43)
        b.producer_epoch = <int16_t>_be16(p + 51)
        b.base_sequence = <int32_t>_be32(p + 53)
        b.records = records
        return b


cdef int _check_start(object start_offset) except -1:
    if not isinstance(start_offset, int):
        raise _errors.CodecError(
            f"start_offset must be an int (a Kafka offset), not {type(start_offset).__name__}")
    if not INT64_MIN <= start_offset <= INT64_MAX:
        raise _errors.CodecError(
            f"start_offset {start_offset} is outside the int64 range of Kafka offsets")
    return 0


cdef _Decoder _decoder(int mode, start_offset, check_crcs, max_depth, max_decompressed_size,
                       include_control):
    cdef _Decoder d = _Decoder.__new__(_Decoder)
    d.mode = mode
    d.start_offset = start_offset
    d.check_crcs = check_crcs
    d.max_depth = max_depth
    d.max_size = max_decompressed_size
    d.include_control = include_control
    d.out = []
    return d


cdef int _run(_Decoder d, object data) except -1:
    cdef Py_buffer view
    _getbuf(data, &view)
    try:
        d.top(data, <cptr>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


def decode_batches(data, *, start_offset=0, check_crcs=True, max_depth=DEFAULT_MAX_DEPTH,
                   max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Every batch (magic 2) and top-level message (magic 0/1) in ``data``, as Batch objects."""
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_BATCHES, start_offset, check_crcs, max_depth,
                               max_decompressed_size, False)
    _run(d, data)
    return d.out


def decode_records(data, *, start_offset=0, check_crcs=True, max_depth=DEFAULT_MAX_DEPTH,
                   max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, include_control=False):
    """Every record in ``data`` (control batches skipped unless ``include_control``)."""
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_RECORDS, start_offset, check_crcs, max_depth,
                               max_decompressed_size, include_control)
    _run(d, data)
    return d.out


def decode_consumer_records(data, topic, partition, *, start_offset=0, check_crcs=True,
                            max_depth=DEFAULT_MAX_DEPTH,
                            max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
                            key_deserializer=None, value_deserializer=None):
    """``(records, next_offset)``: every record in ``data`` (control batches skipped) as a
    ConsumerRecord of ``topic`` and ``partition``, and the offset after the last batch (or
    legacy message) with records at or past ``start_offset``, control batches included
    (None when there is none).  Deserializers, if given, replace keys and values once
    every batch is decoded, in record order, keys first."""
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_CONSUMER, start_offset, check_crcs, max_depth,
                               max_decompressed_size, False)
    cdef ConsumerRecord r
    d.topic = topic
    d.partition = partition
    _run(d, data)
    if key_deserializer is not None or value_deserializer is not None:
        for r in d.out:
            if key_deserializer is not None:
                r.key = key_deserializer(r.key)
            if value_deserializer is not None:
                r.value = value_deserializer(r.value)
            PyObject_GC_Track(r)  # the results may be anything, cycles included
    if not d.has_end:
        return d.out, None
    return d.out, <object>d.end_base + d.end_delta + 1


_Columns = None
_data_too_large = None


cdef int64_t _payload(VOut* o) noexcept nogil:
    """Bytes of the kept keys, values, header keys and header values."""
    cdef int64_t total = 0
    cdef Py_ssize_t i
    for i in range(o.n):
        if o.kl[i] > 0:
            total += o.kl[i]
        if o.vl[i] > 0:
            total += o.vl[i]
    for i in range(o.nh):
        total += o.hkl[i]
        if o.hvl[i] > 0:
            total += o.hvl[i]
    return total


cdef Py_ssize_t _record_bound(cptr p, Py_ssize_t n) noexcept nogil:
    """Room to start MODE_VIEW's arrays with: at most this many records are kept from the
    complete top-level entries of p[:n] that are uncompressed batches (a record takes 7
    bytes at least), plus a guess for the others; the arrays grow if it is short."""
    cdef Py_ssize_t pos = 0, total = 0, bound
    cdef int32_t size, count
    while n - pos >= 12:
        size = <int32_t>_be32(p + pos + 8)
        if size < 14 or size > n - pos - 12:
            break
        if size >= 49 and p[pos + 16] == 2:
            count = <int32_t>_be32(p + pos + 57)
            bound = (size - 49) // 7 + 1 if (p[pos + 22] & 7) == 0 else 64
            if count > 0:
                total += count if count < bound else bound
        else:
            total += 1
        pos += 12 + size
    return total


cdef inline object _alloc(Py_ssize_t nbytes):
    return PyByteArray_FromStringAndSize(NULL, nbytes)


def decode_columnar(data, *, start_offset=0, check_crcs=True, max_depth=DEFAULT_MAX_DEPTH,
                    max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Every record in ``data`` (control batches skipped) as one Columns.

    One pass, no record bytes copied: the Columns is a view of ``data`` (copied first if
    it is writable) and of the decompressed bytes of compressed batches.
    """
    global _Columns, _data_too_large
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_VIEW, start_offset, check_crcs, max_depth,
                               max_decompressed_size, False)
    cdef Py_buffer view
    cdef Py_ssize_t n, nh, cap, hcap
    if _Columns is None:
        from kafkawire._columnar import Columns, data_too_large
        _Columns = Columns
        _data_too_large = data_too_large
    _getbuf(data, &view)
    if not view.readonly:
        # The Columns points into its input: a buffer someone may still write to is copied
        # once, so decoded records never change (and a bytearray stays resizable).
        try:
            data = PyBytes_FromStringAndSize(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        _getbuf(data, &view)
    try:
        seg = memoryview(data)
        if seg.ndim != 1 or seg.format != "B":
            seg = seg.cast("B")
        d.o.cap = 0
        d.block = d.relayout(_record_bound(<cptr>view.buf, view.len))
        d.hblock = _alloc(0)
        d.segs = [seg]
        d.bases = [0]
        d.vtotal = view.len
        d.seg_ptr = <cptr>view.buf
        d.seg_vbase = 0
        d.top(data, <cptr>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    if d.vtotal > 2147483647:
        # Kept fields are disjoint pieces of the decoded buffers, so only then can they
        # add up to more than int32 offsets in ``data`` can address.
        total = _payload(&d.o)
        if total > 2147483647:
            raise _data_too_large(total)
    n = d.o.n
    nh = d.o.nh
    if d.o.cap > 2 * n + 64:
        d.block = d.relayout(n)  # most of the room went unused (start_offset, control)
    cap = d.o.cap
    hcap = d.o.hcap
    rec = d.block
    hdr = d.hblock
    return _Columns._from_view(d.segs, d.bases, {
        "offsets": (rec, 0, n),
        "timestamps": (rec, 8 * cap, n),
        "_key_starts": (rec, 16 * cap, n),
        "key_lengths": (rec, 24 * cap, n),
        "value_lengths": (rec, 28 * cap, n),
        "_value_starts": (rec, 32 * cap, n),
        "header_index": (rec, 40 * cap, n + 1),
        "timestamp_types": (rec, 44 * cap + 4, n),
        "_header_key_starts": (hdr, 0, nh),
        "_header_value_starts": (hdr, 8 * hcap, nh),
        "_header_key_lengths": (hdr, 16 * hcap, nh),
        "header_value_lengths": (hdr, 20 * hcap, nh),
    }, _gather_spans, Record)


def _gather_spans(segments, bases, starts, lengths, out, Py_ssize_t pos, offsets):
    """Columns' ``gather`` (see kafkawire._columnar.gather_spans) for the extension's views:
    copy each span's bytes into ``out`` from ``pos`` on, offsets into ``offsets``."""
    cdef Py_ssize_t nseg = len(segments), n, i, j, lo, hi
    cdef Py_buffer sb, lb, ob, fb
    cdef Py_buffer* segbufs
    cdef int64_t* segbase
    cdef int64_t s
    cdef int32_t length
    cdef const int64_t* st
    cdef const int32_t* ln
    cdef int32_t* offs
    cdef unsigned char* o
    cdef Py_ssize_t got = 0
    if nseg < 1 or len(bases) != nseg:
        raise _errors.CodecError("gather: one base per segment, at least one segment")
    segbufs = <Py_buffer*>malloc(nseg * sizeof(Py_buffer))
    segbase = <int64_t*>malloc(nseg * sizeof(int64_t))
    if segbufs == NULL or segbase == NULL:
        free(segbufs)
        free(segbase)
        raise MemoryError()
    _getbuf(starts, &sb)
    try:
        _getbuf(lengths, &lb)
        try:
            _getbuf(out, &ob)
            try:
                _getbuf(offsets, &fb)
                try:
                    for j in range(nseg):
                        _getbuf(segments[j], &segbufs[j])
                        got += 1
                        segbase[j] = bases[j]
                    n = lb.len // 4
                    if sb.len != 8 * n or fb.len != 4 * (n + 1) or fb.readonly or ob.readonly:
                        raise _errors.CodecError("gather: starts, lengths and offsets disagree")
                    st = <const int64_t*>sb.buf
                    ln = <const int32_t*>lb.buf
                    offs = <int32_t*>fb.buf
                    o = <unsigned char*>ob.buf
                    j = 0
                    for i in range(n):
                        offs[i] = <int32_t>pos
                        length = ln[i]
                        if length <= 0:
                            continue
                        s = st[i]
                        if not (segbase[j] <= s and s + length <= segbase[j] + segbufs[j].len):
                            lo = 0
                            hi = nseg - 1
                            while lo < hi:  # the last segment starting at or before s
                                j = (lo + hi + 1) // 2
                                if segbase[j] <= s:
                                    lo = j
                                else:
                                    hi = j - 1
                            j = lo
                            if not (segbase[j] <= s and s + length <= segbase[j] + segbufs[j].len):
                                raise _errors.CodecError(
                                    f"gather: span {s}+{length} is outside the decoded buffers")
                        if pos + length > ob.len:
                            raise _errors.CodecError("gather: the output buffer is too small")
                        memcpy(o + pos, <cptr>segbufs[j].buf + (s - segbase[j]), length)
                        pos += length
                    offs[n] = <int32_t>pos
                finally:
                    for j in range(got):
                        PyBuffer_Release(&segbufs[j])
                    PyBuffer_Release(&fb)
            finally:
                PyBuffer_Release(&ob)
        finally:
            PyBuffer_Release(&lb)
    finally:
        PyBuffer_Release(&sb)
        free(segbufs)
        free(segbase)
    return pos


# ---------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------
# Input records are flattened into C arrays (pointers into the caller's bytes objects),
# the exact output size is computed, and the output bytes object is written in one pass.
# Inputs other than the common shapes go through kafkawire._columnar.record_fields, the
# normaliser the twin uses, so unusual inputs and their errors are handled identically.

from libc.stdlib cimport realloc

cdef int64_t _I64_MIN = INT64_MIN
cdef int64_t _I64_MAX = INT64_MAX

cdef struct ERec:
    const char* key
    Py_ssize_t klen      # -1: null
    const char* val
    Py_ssize_t vlen      # -1: null
    int64_t ts
    Py_ssize_t h0        # first header slot
    Py_ssize_t hn        # header count
    Py_ssize_t body      # magic 2: record size without its length varint

cdef struct EHdr:
    const char* key
    Py_ssize_t klen
    const char* val
    Py_ssize_t vlen


@cython.final
cdef class _Input:
    """Encoder input flattened to C arrays; ``keep`` holds every object they point into."""

    cdef ERec* recs
    cdef EHdr* hdrs
    cdef Py_ssize_t n, nh, hcap
    cdef list keep
    cdef Py_ssize_t bad_ts       # first record whose timestamp does not fit int64, or -1
    cdef object bad_ts_value
    cdef Py_ssize_t first_headers  # first record with headers, or -1

    def __dealloc__(self):
        free(self.recs)
        free(self.hdrs)

    cdef int alloc(self, Py_ssize_t n) except -1:
        self.n = n
        self.recs = <ERec*>malloc((n if n else 1) * sizeof(ERec))
        if self.recs == NULL:
            raise MemoryError()
        self.keep = []
        self.bad_ts = -1
        self.first_headers = -1
        return 0

    cdef EHdr* add_header(self) except NULL:
        cdef EHdr* grown
        cdef Py_ssize_t cap
        if self.nh == self.hcap:
            cap = self.hcap * 2 + 16
            grown = <EHdr*>realloc(self.hdrs, cap * sizeof(EHdr))
            if grown == NULL:
                raise MemoryError()
            self.hdrs = grown
            self.hcap = cap
        self.nh += 1
        return &self.hdrs[self.nh - 1]

    cdef int set_ts(self, Py_ssize_t i, object ts) except -1:
        if _I64_MIN <= ts <= _I64_MAX:
            self.recs[i].ts = <int64_t>ts
        else:
            self.recs[i].ts = 0
            if self.bad_ts < 0:
                self.bad_ts = i
                self.bad_ts_value = ts
        return 0

    cdef int set_blob(self, const char** p, Py_ssize_t* n, object x) except -1:
        # x: None, bytes, bytearray or memoryview (already normalised)
        if x is None:
            p[0] = NULL
            n[0] = -1
            return 0
        if not PyBytes_CheckExact(x):
            x = bytes(x)
            self.keep.append(x)
        p[0] = PyBytes_AS_STRING(x)
        n[0] = PyBytes_GET_SIZE(x)
        return 0


_record_fields = None


cdef inline bint _plain(object x) noexcept:
    return x is None or PyBytes_CheckExact(x)


cdef _Input _flatten(object records, object default_ts):
    global _record_fields
    cdef _Input inp = _Input.__new__(_Input)
    cdef list items
    cdef Py_ssize_t i, n, size
    cdef ERec* e
    cdef EHdr* h
    cdef Record rec
    cdef object key = None, value = None, ts = None, headers = None
    cdef tuple t
    cdef bint fast
    # Our own list (and, below, our own references to Record fields): the C arrays point
    # into these objects while the records are written, possibly without the GIL.
    items = list(records)
    n = len(items)
    inp.alloc(n)
    inp.keep.append(items)
    for i in range(n):
        r = items[i]
        fast = False
        if type(r) is tuple:
            t = <tuple>r
            size = PyTuple_GET_SIZE(t)
            if 2 <= size <= 4:
                key = t[0]
                value = t[1]
                ts = t[2] if size > 2 else None
                headers = t[3] if size > 3 else None
                fast = (_plain(key) and _plain(value) and (ts is None or type(ts) is int)
                        and (headers is None or (type(headers) is tuple and not headers)
                             or (type(headers) is list and not headers)))
        elif type(r) is Record:
            rec = <Record>r
            key = rec.key
            value = rec.value
            ts = rec.timestamp
            headers = rec.headers
            fast = (_plain(key) and _plain(value) and type(headers) is tuple and not headers)
            if fast:
                inp.keep.append(key)
                inp.keep.append(value)
        e = &inp.recs[i]
        e.h0 = inp.nh
        e.hn = 0
        if fast:
            if ts is None:
                ts = default_ts
            inp.set_blob(&e.key, &e.klen, key)
            inp.set_blob(&e.val, &e.vlen, value)
            inp.set_ts(i, ts)
            continue
        if _record_fields is None:
            from kafkawire._columnar import record_fields
            _record_fields = record_fields
        fields = _record_fields(i, r, default_ts)
        inp.keep.append(fields)  # the C arrays point into these objects
        key, value, ts, headers = fields
        inp.set_blob(&e.key, &e.klen, key)
        inp.set_blob(&e.val, &e.vlen, value)
        inp.set_ts(i, ts)
        if headers:
            if inp.first_headers < 0:
                inp.first_headers = i
            inp.keep.append(headers)
            for hk, hv in headers:
                h = inp.add_header()
                inp.set_blob(&h.key, &h.klen, hk)
                inp.set_blob(&h.val, &h.vlen, hv)
                inp.recs[i].hn += 1
    return inp


cdef inline Py_ssize_t _pos(Py_ssize_t n) noexcept nogil:
    return n if n > 0 else 0


cdef Py_ssize_t _size_v2(_Input inp, int64_t base_ts) except -1:
    """Size of the records section; sets each record's body size."""
    cdef Py_ssize_t i, j, total = 0, body
    cdef ERec* e
    cdef EHdr* h
    for i in range(inp.n):
        e = &inp.recs[i]
        if (e.ts < 0 and base_ts > 0 and e.ts < _I64_MIN + base_ts) or \
           (e.ts > 0 and base_ts < 0 and e.ts > _I64_MAX + base_ts):
            raise _errors.encode_error(
                f"record {i}: timestampDelta {e.ts - <object>base_ts} out of range for varlong")
        body = (1 + _size_var(e.ts - base_ts) + _size_var(i) + _size_var(e.klen) + _pos(e.klen)
                + _size_var(e.vlen) + _pos(e.vlen) + _size_var(e.hn))
        for j in range(e.h0, e.h0 + e.hn):
            h = &inp.hdrs[j]
            body += _size_var(h.klen) + h.klen + _size_var(h.vlen) + _pos(h.vlen)
        if body > 2147483647:
            raise _errors.encode_error(f"record {i}: {body} bytes is larger than a record can be")
        e.body = body
        total += _size_var(body) + body
    return total


cdef unsigned char* _write_v2(unsigned char* o, _Input inp, int64_t base_ts) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef ERec* e
    cdef EHdr* h
    for i in range(inp.n):
        e = &inp.recs[i]
        o = _put_var(o, e.body)
        o[0] = 0  # record attributes: unused (KIP-98)
        o = _put_var(o + 1, e.ts - base_ts)
        o = _put_var(o, i)
        o = _put_var(o, e.klen)
        if e.klen > 0:
            memcpy(o, e.key, e.klen)
            o += e.klen
        o = _put_var(o, e.vlen)
        if e.vlen > 0:
            memcpy(o, e.val, e.vlen)
            o += e.vlen
        o = _put_var(o, e.hn)
        for j in range(e.h0, e.h0 + e.hn):
            h = &inp.hdrs[j]
            o = _put_var(o, h.klen)
            memcpy(o, h.key, h.klen)
            o += h.klen
            o = _put_var(o, h.vlen)
            if h.vlen > 0:
                memcpy(o, h.val, h.vlen)
                o += h.vlen
    return o


cdef int _check_range(str field, value, lo, hi, str typename) except -1:
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise _errors.encode_error(f"{field} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise _errors.encode_error(f"{field} {value} out of range")
    return 0


cdef int _check_codec(compression, magic) except -1:
    if compression not in _compression.CODEC_NAMES:
        raise _errors.unsupported_codec(compression)
    if compression == 4 and magic < 2:
        # KIP-110: zstd exists only in RecordBatch (magic 2)
        raise _errors.unsupported_codec(compression, magic)
    return 0


cdef int _check_record_ts(_Input inp) except -1:
    if inp.bad_ts >= 0:
        raise _errors.encode_error(
            f"record {inp.bad_ts}: timestamp {inp.bad_ts_value} out of range for int64")
    return 0


cdef object _encode_v2(_Input inp, base_offset, compression, level, timestamp, log_append,
                       producer_id, producer_epoch, base_sequence, is_transactional,
                       is_control, leader_epoch):
    cdef Py_ssize_t n = inp.n, i, rsize, total
    cdef int64_t base_ts, max_ts
    cdef int attrs
    cdef int codec
    cdef object out, raw
    cdef unsigned char* o
    if n == 0:
        raise _errors.encode_error("a RecordBatch needs at least one record")
    _check_range("base_offset", base_offset, _I64_MIN, _I64_MAX - n + 1, "int64")
    _check_range("producer_id", producer_id, _I64_MIN, _I64_MAX, "int64")
    _check_range("producer_epoch", producer_epoch, -32768, 32767, "int16")
    _check_range("base_sequence", base_sequence, -2147483648, 2147483647, "int32")
    _check_range("partition_leader_epoch", leader_epoch, -2147483648, 2147483647, "int32")
    if n - 1 > 2147483647:
        raise _errors.encode_error(f"{n} records are more than one RecordBatch can hold")
    _check_record_ts(inp)
    codec = compression
    base_ts = inp.recs[0].ts
    if log_append:
        max_ts = timestamp
    else:
        max_ts = base_ts
        for i in range(1, n):
            if inp.recs[i].ts > max_ts:
                max_ts = inp.recs[i].ts
    attrs = codec
    if log_append:
        attrs |= 0x08
    if is_transactional:
        attrs |= 0x10
    if is_control:
        attrs |= 0x20
    rsize = _size_v2(inp, base_ts)
    if codec == 0:
        total = 61 + rsize
        if total - 12 > 2147483647:
            raise _errors.encode_error(
                f"a RecordBatch of {total - 12} bytes is larger than int32 allows")
        out = PyBytes_FromStringAndSize(NULL, total)
        o = <unsigned char*>PyBytes_AS_STRING(out)
        if rsize >= NOGIL_BYTES:
            with nogil:
                _write_v2(o + 61, inp, base_ts)
        else:
            _write_v2(o + 61, inp, base_ts)
    else:
        raw = PyBytes_FromStringAndSize(NULL, rsize)
        o = <unsigned char*>PyBytes_AS_STRING(raw)
        if rsize >= NOGIL_BYTES:
            with nogil:
                _write_v2(o, inp, base_ts)
        else:
            _write_v2(o, inp, base_ts)
        raw = _compression.compress(codec, raw, level)
        if not PyBytes_CheckExact(raw):
            raw = bytes(raw)
        total = 61 + PyBytes_GET_SIZE(raw)
        if total - 12 > 2147483647:
            raise _errors.encode_error(
                f"a RecordBatch of {total - 12} bytes is larger than int32 allows")
        out = PyBytes_FromStringAndSize(NULL, total)
        o = <unsigned char*>PyBytes_AS_STRING(out)
        memcpy(o + 61, PyBytes_AS_STRING(raw), total - 61)
    _put64(o, <uint64_t><int64_t>base_offset)
    _put32(o + 8, <uint32_t>(total - 12))
    _put32(o + 12, <uint32_t><int32_t>leader_epoch)
    o[16] = 2
    _put16(o + 21, <uint16_t>attrs)
    _put32(o + 23, <uint32_t>(n - 1))
    _put64(o + 27, <uint64_t>base_ts)
    _put64(o + 35, <uint64_t>max_ts)
    _put64(o + 43, <uint64_t><int64_t>producer_id)
    _put16(o + 51, <uint16_t><int16_t>producer_epoch)
    _put32(o + 53, <uint32_t><int32_t>base_sequence)
    _put32(o + 57, <uint32_t>n)
    # KIP-98: CRC32C covers attributes..end, so it is computed last
    _put32(o + 17, _crc32c(o + 21, total - 21))
    return out


def encode_record_batch(records, *, base_offset=0, compression=0, compression_level=None,
                        timestamp=-1, log_append_time=False, producer_id=-1,
                        producer_epoch=-1, base_sequence=-1, is_transactional=False,
                        is_control=False, partition_leader_epoch=-1):
    """One RecordBatch (magic 2) holding ``records``."""
    _check_codec(compression, 2)
    _check_range("timestamp", timestamp, _I64_MIN, _I64_MAX, "int64")
    cdef _Input inp = _flatten(records, timestamp)
    return _encode_v2(inp, base_offset, compression, compression_level, timestamp,
                      log_append_time, producer_id, producer_epoch, base_sequence,
                      is_transactional, is_control, partition_leader_epoch)


cdef unsigned char* _put_message(unsigned char* o, int64_t offset, int magic, int attrs,
                                 int64_t ts, const char* k, Py_ssize_t kl, const char* v,
                                 Py_ssize_t vl) noexcept:
    cdef unsigned char* m = o + 12
    cdef unsigned char* q
    cdef Py_ssize_t size = (14 if magic == 0 else 22) + _pos(kl) + _pos(vl)
    _put64(o, <uint64_t>offset)
    _put32(o + 8, <uint32_t>size)
    m[4] = <unsigned char>magic
    m[5] = <unsigned char>attrs
    q = m + 6
    if magic == 1:
        _put64(q, <uint64_t>ts)
        q += 8
    _put32(q, <uint32_t>kl)
    q += 4
    if kl > 0:
        memcpy(q, k, kl)
        q += kl
    _put32(q, <uint32_t>vl)
    q += 4
    if vl > 0:
        memcpy(q, v, vl)
        q += vl
    _put32(m, _crc32(m + 4, size - 4))
    return q


cdef object _encode_legacy(_Input inp, int magic, compression, level, base_offset, timestamp,
                           log_append):
    cdef Py_ssize_t n = inp.n, i, total = 0, m, head = 14 if magic == 0 else 22
    cdef ERec* e
    cdef object out, comp
    cdef unsigned char* o
    cdef int64_t max_ts, wrapper_ts, c_base, c_append_ts = 0
    cdef int attrs, codec
    if n == 0:
        return b""
    _check_range("base_offset", base_offset, _I64_MIN, _I64_MAX - n + 1, "int64")
    if magic == 1:
        _check_record_ts(inp)
    if inp.first_headers >= 0:
        raise _errors.encode_error(
            f"record {inp.first_headers}: headers need magic 2 (a RecordBatch); magic {magic} "
            f"has none")
    codec = compression
    c_base = base_offset
    if log_append:
        c_append_ts = timestamp
    for i in range(n):
        e = &inp.recs[i]
        m = head + _pos(e.klen) + _pos(e.vlen)
        if m > 2147483647:
            raise _errors.encode_error(f"record {i}: {m} bytes is larger than a message can be")
        total += 12 + m
    out = PyBytes_FromStringAndSize(NULL, total)
    o = <unsigned char*>PyBytes_AS_STRING(out)
    max_ts = inp.recs[0].ts
    for i in range(n):
        e = &inp.recs[i]
        if e.ts > max_ts:
            max_ts = e.ts
        if codec == 0:
            o = _put_message(o, c_base + i, magic, 8 if log_append else 0,
                             c_append_ts if log_append else e.ts, e.key, e.klen, e.val, e.vlen)
        else:
            # KIP-31: magic 1 inner offsets are relative (0..n-1); magic 0 ones are absolute
            o = _put_message(o, i if magic == 1 else c_base + i, magic, 0, e.ts, e.key, e.klen,
                             e.val, e.vlen)
    if codec == 0:
        return out
    comp = _compression.compress(codec, out, level, legacy_lz4=(magic == 0))
    if not PyBytes_CheckExact(comp):
        comp = bytes(comp)
    m = head + PyBytes_GET_SIZE(comp)
    if m > 2147483647:
        raise _errors.encode_error(f"a compressed message of {m} bytes is larger than int32 allows")
    if magic == 1 and log_append:
        attrs = codec | 0x08  # KIP-32: LogAppendTime
        wrapper_ts = c_append_ts
    else:
        attrs = codec
        wrapper_ts = max_ts if magic == 1 else -1
    out = PyBytes_FromStringAndSize(NULL, 12 + m)
    o = <unsigned char*>PyBytes_AS_STRING(out)
    _put_message(o, c_base + n - 1, magic, attrs, wrapper_ts, NULL, -1,
                 PyBytes_AS_STRING(comp), PyBytes_GET_SIZE(comp))
    return out


def encode_message_set(records, *, magic=1, compression=0, compression_level=None,
                       base_offset=0, timestamp=-1, log_append_time=False):
    """A MessageSet (magic 0 or 1) of ``records``; one compressed wrapper when compressing."""
    if magic != 0 and magic != 1:
        raise _errors.encode_error(
            f"encode_message_set writes magic 0 or 1, not {magic}; "
            f"use encode_record_batch for magic 2")
    _check_codec(compression, magic)
    if log_append_time and magic == 0:
        raise _errors.encode_error("log_append_time needs magic 1 or 2; magic 0 has no timestamps")
    _check_range("timestamp", timestamp, _I64_MIN, _I64_MAX, "int64")
    cdef _Input inp = _flatten(records, timestamp)
    return _encode_legacy(inp, magic, compression, compression_level, base_offset, timestamp,
                          log_append_time)


cdef inline void _span(Py_ssize_t a, Py_ssize_t b, Py_ssize_t size, Py_ssize_t* start,
                       Py_ssize_t* length) noexcept:
    # Python slice semantics (clamped), as the twin's memoryview slicing
    if a < 0:
        a = a + size if a + size > 0 else 0
    if b < 0:
        b = b + size if b + size > 0 else 0
    if a > size:
        a = size
    if b > size:
        b = size
    start[0] = a
    length[0] = b - a if b > a else 0


_ColumnsType = None


cdef _Input _columns_input(columns):
    cdef _Input inp = _Input.__new__(_Input)
    cdef Py_ssize_t n, i, j, size, a = 0, ln = 0
    cdef const char* base
    cdef ERec* e
    cdef EHdr* h
    data = bytes(memoryview(columns.data).cast("B"))
    ts = columns.timestamps.tolist()
    ko = columns.key_offsets.tolist()
    kl = columns.key_lengths.tolist()
    vo = columns.value_offsets.tolist()
    vl = columns.value_lengths.tolist()
    hi = columns.header_index.tolist()
    hko = columns.header_key_offsets.tolist()
    hvo = columns.header_value_offsets.tolist()
    hvl = columns.header_value_lengths.tolist()
    n = len(ts)
    inp.alloc(n)
    inp.keep.append(data)
    base = PyBytes_AS_STRING(data)
    size = PyBytes_GET_SIZE(data)
    for i in range(n):
        e = &inp.recs[i]
        inp.set_ts(i, ts[i])
        if kl[i] < 0:
            e.key = NULL
            e.klen = -1
        else:
            _span(ko[i], ko[i + 1], size, &a, &ln)
            e.key = base + a
            e.klen = ln
        if vl[i] < 0:
            e.val = NULL
            e.vlen = -1
        else:
            _span(vo[i], vo[i + 1], size, &a, &ln)
            e.val = base + a
            e.vlen = ln
        e.h0 = inp.nh
        e.hn = 0
        if hi[i] != hi[i + 1]:
            if inp.first_headers < 0:
                inp.first_headers = i
            for j in range(hi[i], hi[i + 1]):
                h = inp.add_header()
                e = &inp.recs[i]
                _span(hko[j], hko[j + 1], size, &a, &ln)
                h.key = base + a
                h.klen = ln
                if hvl[j] < 0:
                    h.val = NULL
                    h.vlen = -1
                else:
                    _span(hvo[j], hvo[j + 1], size, &a, &ln)
                    h.val = base + a
                    h.vlen = ln
                e.hn += 1
    return inp


def encode_columnar(columns, *, magic=2, base_offset=0, compression=0, compression_level=None,
                    log_append_time=False, producer_id=-1, producer_epoch=-1,
                    base_sequence=-1, is_transactional=False, partition_leader_epoch=-1):
    """Encode a Columns: magic 2 as one RecordBatch, magic 0/1 as a MessageSet.

    Offsets are ``base_offset + i`` (``columns.offsets`` is ignored); timestamps come from
    the columns.  With ``log_append_time`` the batch (or wrapper) timestamp is the largest
    record timestamp.
    """
    global _ColumnsType
    if _ColumnsType is None:
        from kafkawire._columnar import Columns
        _ColumnsType = Columns
    if not isinstance(columns, _ColumnsType):
        raise _errors.encode_error(
            f"encode_columnar needs a kafkawire Columns, not {type(columns).__name__}")
    if magic not in (0, 1, 2):
        raise _errors.encode_error(f"encode_columnar writes magic 0, 1 or 2, not {magic}")
    _check_codec(compression, magic)
    cdef _Input inp = _columns_input(columns)
    append_ts = -1
    if inp.n:
        append_ts = max(columns.timestamps.tolist())
    if magic == 2:
        return _encode_v2(inp, base_offset, compression, compression_level, append_ts,
                          log_append_time, producer_id, producer_epoch, base_sequence,
                          is_transactional, False, partition_leader_epoch)
    if log_append_time and magic == 0:
        raise _errors.encode_error("log_append_time needs magic 1 or 2; magic 0 has no timestamps")
    return _encode_legacy(inp, magic, compression, compression_level, base_offset, append_ts,
                          log_append_time)
