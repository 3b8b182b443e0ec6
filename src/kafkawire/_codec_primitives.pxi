# Part of kafkawire._codec, pulled in by ``include`` in _codec.pyx (one extension module:
# its declarations are in scope here).  The protocol's primitive types: fixed-width
# ints, varints, strings, bytes, arrays, tagged fields (KIP-482); readers and writers.
# The twin, to read side by side: _pycodec_primitives.py.

def alloc_buffer(Py_ssize_t size):
    """A bytearray of ``size`` bytes, not zeroed: for a buffer the caller fills whole (a
    response frame read from the socket), where zeroing it first is wasted work."""
    if size < 0:
        raise ValueError(f"alloc_buffer: size must be >= 0, got {size}")
    return PyByteArray_FromStringAndSize(NULL, size)


# ---------------------------------------------------------------------------------------
# big-endian loads/stores and varints (_wire.pxi; no bounds checks: callers check first)
# ---------------------------------------------------------------------------------------

include "_wire.pxi"

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


cdef inline int _size_var(int64_t v) noexcept nogil:
    return _size_uvar((<uint64_t>v << 1) ^ <uint64_t>(v >> 63))

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

