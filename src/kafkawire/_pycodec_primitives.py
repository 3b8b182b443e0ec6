"""The protocol's primitive types: fixed-width ints, varints, strings, bytes, arrays,
tagged fields (KIP-482); readers and writers.

Part of the pure-Python twin kafkawire._pycodec, which re-exports every name; the
compiled counterpart, to read side by side, is _codec_primitives.pxi.  No I/O.
"""

from __future__ import annotations

import struct

from kafkawire import errors

_INT8_MIN, _INT8_MAX = -(2**7), 2**7 - 1
_INT16_MIN, _INT16_MAX = -(2**15), 2**15 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF

_S_INT8 = struct.Struct(">b")
_S_INT16 = struct.Struct(">h")
_S_INT32 = struct.Struct(">i")
_S_INT64 = struct.Struct(">q")
_S_UINT32 = struct.Struct(">I")
_S_ENTRY = struct.Struct(">qi")  # offset, size: the framing of every MessageSet entry
_S_LEGACY = struct.Struct(">Ibb")  # crc, magic, attributes
# RecordBatch header after baseOffset/batchLength: partitionLeaderEpoch, magic, crc,
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount.
_S_BATCH = struct.Struct(">ibIhiqqqhii")


def alloc_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes for the caller to fill whole (zeroed here: Python
    has no other way to make one)."""
    if size < 0:
        raise ValueError(f"alloc_buffer: size must be >= 0, got {size}")
    return bytearray(size)


# ---------------------------------------------------------------------------------------
# primitives: readers
# ---------------------------------------------------------------------------------------


def _contiguous(buf) -> memoryview:
    """memoryview(buf), refusing a non-contiguous one (the extension needs one pointer)."""
    mv = memoryview(buf)
    if not mv.c_contiguous:
        raise TypeError(
            f"a {type(buf).__name__} that is not C-contiguous cannot be decoded: pass bytes, "
            f"a bytearray or a contiguous buffer (copy it with bytes(...))"
        )
    return mv


def _bytes_view(buf):
    """``buf`` as something indexable by byte (bytes and bytearray are used as they are)."""
    t = type(buf)
    if t is bytes or t is bytearray:
        return buf
    mv = _contiguous(buf)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


def _nbytes(buf) -> int:
    t = type(buf)
    if t is bytes or t is bytearray:
        return len(buf)
    return _contiguous(buf).nbytes


def _remain(buf, pos: int) -> int:
    return max(0, _nbytes(buf) - pos)


def _fixed_reader(what: str, st: struct.Struct):
    size = st.size
    unpack_from = st.unpack_from

    def read(buf, pos):
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error:
            raise errors.truncated(what, pos, size, _remain(buf, pos)) from None
        except BufferError:
            _contiguous(buf)  # raises the TypeError the other readers raise
            raise

    read.__name__ = f"read_{what}"
    read.__doc__ = f"Read a big-endian {what} at ``pos``; returns (value, next_pos)."
    return read


read_int8 = _fixed_reader("int8", _S_INT8)
read_int16 = _fixed_reader("int16", _S_INT16)
read_int32 = _fixed_reader("int32", _S_INT32)
read_int64 = _fixed_reader("int64", _S_INT64)
read_uint32 = _fixed_reader("uint32", _S_UINT32)


def _read_uv(buf, pos: int, what: str, max_bytes: int, mask: int):
    """Unsigned LEB128 of at most ``max_bytes`` bytes, kept to ``mask`` bits as Java does."""
    n = len(buf)
    result = 0
    shift = 0
    p = pos
    while True:
        if p >= n:
            raise errors.truncated(what, pos, p - pos + 1, max(0, n - pos))
        if p - pos == max_bytes:
            raise errors.malformed("varint", pos, f"longer than {max_bytes} bytes")
        byte = buf[p]
        p += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & mask, p
        shift += 7


def read_uvarint(buf, pos: int):
    """Unsigned varint (at most 5 bytes, 32 bits); returns (value, next_pos)."""
    return _read_uv(_bytes_view(buf), pos, "uvarint", 5, _M32)


def read_varint(buf, pos: int):
    """Zigzag varint (int32, at most 5 bytes); returns (value, next_pos)."""
    v, p = _read_uv(_bytes_view(buf), pos, "varint", 5, _M32)
    return (v >> 1) ^ -(v & 1), p


def read_varlong(buf, pos: int):
    """Zigzag varlong (int64, at most 10 bytes); returns (value, next_pos)."""
    v, p = _read_uv(_bytes_view(buf), pos, "varlong", 10, _M64)
    return (v >> 1) ^ -(v & 1), p


def _read_body(buf, pos: int, n: int, what: str):
    end = pos + n
    if end > len(buf):
        raise errors.truncated(what, pos, n, max(0, len(buf) - pos))
    return buf[pos:end], end


def _decode_utf8(raw, pos: int) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise errors.malformed("string", pos, f"invalid UTF-8 at byte {pos + exc.start}") from None


def read_string(buf, pos: int):
    """int16 length (-1: None) then UTF-8 bytes; returns (str or None, next_pos)."""
    buf = _bytes_view(buf)
    n, p = read_int16(buf, pos)
    if n < 0:
        if n == -1:
            return None, p
        raise errors.malformed("string", pos, f"negative length {n}")
    raw, end = _read_body(buf, p, n, "string")
    return _decode_utf8(raw, p), end


def read_bytes(buf, pos: int):
    """int32 length (-1: None) then bytes; returns (bytes or None, next_pos)."""
    buf = _bytes_view(buf)
    n, p = read_int32(buf, pos)
    if n < 0:
        if n == -1:
            return None, p
        raise errors.malformed("bytes", pos, f"negative length {n}")
    raw, end = _read_body(buf, p, n, "bytes")
    return bytes(raw), end


def read_compact_string(buf, pos: int):
    """uvarint length+1 (0: None) then UTF-8 bytes; returns (str or None, next_pos)."""
    buf = _bytes_view(buf)
    n, p = _read_uv(buf, pos, "uvarint", 5, _M32)
    if n == 0:
        return None, p
    raw, end = _read_body(buf, p, n - 1, "string")
    return _decode_utf8(raw, p), end


def read_compact_bytes(buf, pos: int):
    """uvarint length+1 (0: None) then bytes; returns (bytes or None, next_pos)."""
    buf = _bytes_view(buf)
    n, p = _read_uv(buf, pos, "uvarint", 5, _M32)
    if n == 0:
        return None, p
    raw, end = _read_body(buf, p, n - 1, "bytes")
    return bytes(raw), end


def read_array_length(buf, pos: int):
    """int32 array length; -1 means a null array."""
    n, p = read_int32(buf, pos)
    if n < -1:
        raise errors.malformed("array length", pos, f"negative length {n}")
    return n, p


def read_compact_array_length(buf, pos: int):
    """uvarint length+1 (0: null array, returned as -1)."""
    n, p = _read_uv(_bytes_view(buf), pos, "uvarint", 5, _M32)
    return n - 1, p


def read_tagged_fields(buf, pos: int):
    """A tagged-field section (KIP-482): returns ({tag: raw bytes}, next_pos)."""
    buf = _bytes_view(buf)
    count, p = _read_uv(buf, pos, "uvarint", 5, _M32)
    fields: dict[int, bytes] = {}
    prev = -1
    for _ in range(count):
        tag_pos = p
        tag, p = _read_uv(buf, p, "uvarint", 5, _M32)
        if tag <= prev:
            raise errors.malformed(
                "tagged fields", tag_pos, f"tag {tag} follows tag {prev}; tags must ascend"
            )
        prev = tag
        size, p = _read_uv(buf, p, "uvarint", 5, _M32)
        raw, p = _read_body(buf, p, size, "tagged field")
        fields[tag] = bytes(raw)
    return fields, p


# ---------------------------------------------------------------------------------------
# primitives: writers
# ---------------------------------------------------------------------------------------


def _range_error(what: str, value) -> errors.EncodeError:
    return errors.encode_error(f"{what} value {value} out of range")


def _fixed_writer(what: str, st: struct.Struct, lo: int, hi: int):
    pack = st.pack

    def write(out, value):
        if not lo <= value <= hi:
            raise _range_error(what, value)
        out += pack(value)

    write.__name__ = f"write_{what}"
    write.__doc__ = f"Append ``value`` as a big-endian {what}."
    return write


write_int8 = _fixed_writer("int8", _S_INT8, _INT8_MIN, _INT8_MAX)
write_int16 = _fixed_writer("int16", _S_INT16, _INT16_MIN, _INT16_MAX)
write_int32 = _fixed_writer("int32", _S_INT32, _INT32_MIN, _INT32_MAX)
write_int64 = _fixed_writer("int64", _S_INT64, _INT64_MIN, _INT64_MAX)
write_uint32 = _fixed_writer("uint32", _S_UINT32, 0, _UINT32_MAX)

# One-byte encodings, precomputed: most lengths and deltas in a batch are small.
_UV1 = [bytes((i,)) for i in range(128)]


def _uv_bytes(v: int) -> bytes:
    """Unsigned LEB128 of a non-negative int (no range check)."""
    if v < 0x80:
        return _UV1[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _zz32(v: int) -> bytes:
    """Zigzag varint of an int32 (caller checks range)."""
    return _uv_bytes(((v << 1) ^ (v >> 31)) & _M32)


def _zz64(v: int) -> bytes:
    return _uv_bytes(((v << 1) ^ (v >> 63)) & _M64)


def write_uvarint(out, value: int) -> None:
    if not 0 <= value <= _UINT32_MAX:
        raise _range_error("uvarint", value)
    out += _uv_bytes(value)


def write_varint(out, value: int) -> None:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise _range_error("varint", value)
    out += _zz32(value)


def write_varlong(out, value: int) -> None:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _range_error("varlong", value)
    out += _zz64(value)


def size_of_uvarint(value: int) -> int:
    if not 0 <= value <= _UINT32_MAX:
        raise _range_error("uvarint", value)
    return len(_uv_bytes(value))


def size_of_varint(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _range_error("varlong", value)
    return len(_zz64(value))


def _utf8(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise errors.encode_error(f"{what} {value!r:.60} is not valid Unicode") from None
    except AttributeError:
        raise errors.encode_error(f"{what} must be a str or None, not {type(value).__name__}") from None


def _buffer_len(value, what: str):
    if type(value) is bytes or type(value) is bytearray:
        return value, len(value)
    try:
        mv = memoryview(value)
    except TypeError:
        raise errors.encode_error(
            f"{what} must be bytes-like or None, not {type(value).__name__}"
        ) from None
    return mv, mv.nbytes


def write_string(out, value) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    raw = _utf8(value, "string")
    if len(raw) > _INT16_MAX:
        raise errors.encode_error(f"string of {len(raw)} bytes is longer than int16 allows")
    out += _S_INT16.pack(len(raw))
    out += raw


def write_bytes(out, value) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    value, n = _buffer_len(value, "bytes")
    if n > _INT32_MAX:
        raise errors.encode_error(f"bytes of {n} bytes is longer than int32 allows")
    out += _S_INT32.pack(n)
    out += value


def write_compact_string(out, value) -> None:
    if value is None:
        out += b"\x00"
        return
    raw = _utf8(value, "string")
    if len(raw) >= _UINT32_MAX:
        raise errors.encode_error(f"string of {len(raw)} bytes is longer than uvarint allows")
    out += _uv_bytes(len(raw) + 1)
    out += raw


def write_compact_bytes(out, value) -> None:
    if value is None:
        out += b"\x00"
        return
    value, n = _buffer_len(value, "bytes")
    if n >= _UINT32_MAX:
        raise errors.encode_error(f"bytes of {n} bytes is longer than uvarint allows")
    out += _uv_bytes(n + 1)
    out += value


def write_array_length(out, length) -> None:
    if length is None:
        length = -1
    if not -1 <= length <= _INT32_MAX:
        raise _range_error("array length", length)
    out += _S_INT32.pack(length)


def write_compact_array_length(out, length) -> None:
    if length is None:
        out += b"\x00"
        return
    if not 0 <= length < _UINT32_MAX:
        raise _range_error("array length", length)
    out += _uv_bytes(length + 1)


def write_tagged_fields(out, fields) -> None:
    if not fields:
        out += b"\x00"
        return
    tags = sorted(fields)
    out += _uv_bytes(len(tags))
    for tag in tags:
        if not 0 <= tag <= _UINT32_MAX:
            raise _range_error("tag", tag)
        raw, n = _buffer_len(fields[tag], f"tagged field {tag}")
        out += _uv_bytes(tag)
        out += _uv_bytes(n)
        out += raw

