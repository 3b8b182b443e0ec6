"""The pure-Python twin of kafkawire._codec: same names, same results, same errors.

The contract (names, signatures, semantics) is ``_codec.pyi``; exceptions come from the
factories in :mod:`kafkawire.errors`, so messages match the compiled extension.  Import
through :mod:`kafkawire.codec`, which picks the implementation.

This module does no I/O.
"""

from __future__ import annotations

import struct
import sys
import zlib

from kafkawire import compression as _compression
from kafkawire import errors
from kafkawire._columnar import Columns, data_too_large, record_fields

__all__ = [
    "IMPLEMENTATION",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Record",
    "Batch",
    "ConsumerRecord",
    "crc32",
    "crc32c",
    "crc32c_implementation",
    "decode_batches",
    "decode_records",
    "decode_columnar",
    "decode_consumer_records",
    "encode_message_set",
    "encode_record_batch",
    "encode_columnar",
]

IMPLEMENTATION = "python"
DEFAULT_MAX_DEPTH = 4
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

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

# ---------------------------------------------------------------------------------------
# checksums
# ---------------------------------------------------------------------------------------


def crc32(data, value: int = 0) -> int:
    """CRC32 (IEEE), as zlib.crc32: the checksum of MessageSet magic 0 and 1."""
    if type(data) is not bytes:
        data = _contiguous(data)
    return zlib.crc32(data, value)


_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected
_crc_tables: list | None = None


def _crc32c_tables():
    # Slice-by-8 with 16-bit tables: four lookups per 8 bytes, the fewest Python
    # operations per byte.  Built on first use (about 20 ms, a few MB).
    global _crc_tables
    if _crc_tables is None:
        t = [[0] * 256 for _ in range(8)]
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ _CRC32C_POLY if c & 1 else c >> 1
            t[0][i] = c
        for k in range(1, 8):
            prev = t[k - 1]
            for i in range(256):
                c = prev[i]
                t[k][i] = (c >> 8) ^ t[0][c & 0xFF]
        _crc_tables = [
            t[0],
            [lo ^ hi for hi in t[6] for lo in t[7]],
            [lo ^ hi for hi in t[4] for lo in t[5]],
            [lo ^ hi for hi in t[2] for lo in t[3]],
            [lo ^ hi for hi in t[0] for lo in t[1]],
        ]
    return _crc_tables


_LITTLE = sys.byteorder == "little"
_NUMPY_CRC_MIN = 4096  # below this the plain loop beats numpy's per-call overhead


def crc32c(data, value: int = 0) -> int:
    """CRC32C (Castagnoli): the checksum of RecordBatch magic 2 (KIP-98)."""
    t0, a, b, c, d = _crc_tables or _crc32c_tables()
    crc = (value & _M32) ^ _M32
    mv = _contiguous(data).cast("B")
    n = len(mv)
    if n >= _NUMPY_CRC_MIN:
        return _crc32c_numpy(mv, crc) ^ _M32
    n8 = n & ~7
    if n8:
        words = mv[:n8].cast("Q") if _LITTLE else struct.unpack(f"<{n8 // 8}Q", mv[:n8])
        for w in words:
            x = crc ^ w
            crc = a[x & 0xFFFF] ^ b[(x >> 16) & 0xFFFF] ^ c[(x >> 32) & 0xFFFF] ^ d[x >> 48]
    for byte in mv[n8:]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ _M32


# CRC without pre/post inversion is linear over GF(2), so long inputs are done in numpy:
# every 8-byte word's CRC at once, then pairs combined in a tree, the left one shifted past
# the right one by an operator "append L zero bytes" (tables per power-of-two L).
_np_crc_tables = None
_shift_lists: list = []  # per k: 4 x 256 lists for "append 2**k zero bytes"
_shift_arrays: list = []  # the same as numpy arrays


def _shift_level(k: int):
    import numpy as np

    t0 = (_crc_tables or _crc32c_tables())[0]
    while len(_shift_lists) <= k:
        if not _shift_lists:
            images = [t0[(1 << i) & 0xFF] ^ ((1 << i) >> 8) for i in range(32)]
        else:
            # "append 2**k zero bytes" is "append 2**(k-1)" twice: the previous operator's
            # images of the 32 unit bits, mapped through it once more.
            prev = _shift_lists[-1]
            images = [
                prev[0][x & 0xFF] ^ prev[1][(x >> 8) & 0xFF] ^ prev[2][(x >> 16) & 0xFF] ^ prev[3][x >> 24]
                for x in (1 << i for i in range(32))
            ]
            images = [
                prev[0][x & 0xFF] ^ prev[1][(x >> 8) & 0xFF] ^ prev[2][(x >> 16) & 0xFF] ^ prev[3][x >> 24]
                for x in images
            ]
        tables = []
        for p in range(4):
            table = [0] * 256
            for v in range(1, 256):
                low = v & -v
                table[v] = table[v ^ low] ^ images[8 * p + low.bit_length() - 1]
            tables.append(table)
        _shift_lists.append(tables)
        _shift_arrays.append([np.array(t, dtype=np.uint32) for t in tables])
    return _shift_lists[k], _shift_arrays[k]


def _crc32c_numpy(mv, crc: int) -> int:
    import numpy as np

    global _np_crc_tables
    t0 = (_crc_tables or _crc32c_tables())[0]
    if _np_crc_tables is None:
        _np_crc_tables = [np.array(t, dtype=np.uint32) for t in _crc_tables[1:]]
    a, b, c, d = _np_crc_tables
    n = len(mv)
    head = n & 7
    for byte in mv[:head]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    words = np.frombuffer(mv[head:], dtype="<u8")
    m = len(words)
    crcs = a[words & 0xFFFF] ^ b[(words >> 16) & 0xFFFF] ^ c[(words >> 32) & 0xFFFF] ^ d[words >> 48]
    size = 1 << (m - 1).bit_length()
    if size != m:  # leading zero blocks do not change a CRC that starts from 0
        crcs = np.concatenate((np.zeros(size - m, dtype=np.uint32), crcs))
    k = 3  # blocks of 2**3 bytes
    while len(crcs) > 1:
        t = _shift_level(k)[1]
        left = crcs[0::2]
        crcs = t[0][left & 0xFF] ^ t[1][(left >> 8) & 0xFF] ^ t[2][(left >> 16) & 0xFF] ^ t[3][left >> 24] ^ crcs[1::2]
        k += 1
    # The register left by the head bytes, moved past the 8*m bytes that follow it.
    shift = 8 * m
    k = 0
    while shift:
        if shift & 1:
            t = _shift_level(k)[0]
            crc = t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24]
        shift >>= 1
        k += 1
    return crc ^ int(crcs[0])


def crc32c_implementation() -> str:
    return "python"


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


# ---------------------------------------------------------------------------------------
# Record and Batch
# ---------------------------------------------------------------------------------------

_RECORD_FIELDS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")


class Record:
    """One record: a MessageSet message (magic 0/1) or a RecordBatch record (magic 2)."""

    __slots__ = _RECORD_FIELDS
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers=()):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        # Field by field, so a Record of the compiled extension compares equal too.
        try:
            theirs = (
                other.offset,
                other.timestamp,
                other.timestamp_type,
                other.key,
                other.value,
                tuple(other.headers),
            )
        except (AttributeError, TypeError):
            return NotImplemented
        return (
            self.offset,
            self.timestamp,
            self.timestamp_type,
            self.key,
            self.value,
            tuple(self.headers),
        ) == theirs

    def __repr__(self):
        return (
            f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, "
            f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, value={self.value!r}, "
            f"headers={self.headers!r})"
        )


_BATCH_FIELDS = (
    "base_offset",
    "magic",
    "crc",
    "attributes",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "partition_leader_epoch",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "records",
)


class Batch:
    """One RecordBatch (magic 2), or one top-level message of a MessageSet (magic 0/1).

    For a legacy message, base_offset is the offset of its first (inner) record, crc the
    CRC32 of the (wrapper) message, producer fields -1, partition_leader_epoch -1.
    """

    __slots__ = _BATCH_FIELDS

    def __init__(
        self,
        base_offset,
        magic,
        crc,
        attributes,
        compression,
        timestamp_type,
        is_transactional,
        is_control,
        partition_leader_epoch,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records,
    ):
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
        return (
            f"Batch(base_offset={self.base_offset}, magic={self.magic}, "
            f"compression={self.compression}, is_control={self.is_control}, "
            f"records={len(self.records)})"
        )


_CONSUMER_FIELDS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "headers",
)


class ConsumerRecord:
    """One consumed record: ``topic``, ``partition``, ``offset``, ``timestamp``,
    ``timestamp_type``, ``key``, ``value``, ``headers`` (a tuple of (str, bytes or None)),
    all read-only."""

    __slots__ = _CONSUMER_FIELDS

    def __init__(
        self, topic, partition, offset, timestamp, timestamp_type, key, value, headers=()
    ):
        _fill(self, topic, partition, offset, timestamp, timestamp_type, key, value,
              tuple(headers))

    def __setattr__(self, name, value):
        raise AttributeError("readonly attribute")

    def __delattr__(self, name):
        raise AttributeError("readonly attribute")

    def __repr__(self):
        return (
            f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
            f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r})"
        )

    def __reduce__(self):
        return (ConsumerRecord, tuple(getattr(self, f) for f in _CONSUMER_FIELDS))


# Read-only from outside: the decoder and the constructor set fields through the slots'
# own descriptors, which __setattr__ does not stand in front of.
_SETTERS = tuple(getattr(ConsumerRecord, f).__set__ for f in _CONSUMER_FIELDS)
_SET_KEY, _SET_VALUE = _SETTERS[5], _SETTERS[6]


def _fill(r, *fields):
    for put, value in zip(_SETTERS, fields):
        put(r, value)


# ---------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------
# Records are decoded as tuples (offset, timestamp, timestamp_type, key, value, headers) and
# turned into Record objects (or columns) at the end.


class _Options:
    __slots__ = ("start_offset", "check_crcs", "max_depth", "max_size")

    def __init__(self, start_offset, check_crcs, max_depth, max_size):
        self.start_offset = start_offset
        self.check_crcs = check_crcs
        self.max_depth = max_depth
        self.max_size = max_size


def _entries(data, opts: _Options):
    """Parse the entries of a top-level buffer: a list of (batch header tuple, record tuples).

    The header tuple holds the Batch fields in order, without ``records``.
    """
    t = type(data)
    mv = _contiguous(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    buf = data if t is bytes else mv  # bytes slices are cheaper to copy out of
    n = len(mv)
    pos = 0
    out = []
    while n - pos >= 12:
        offset, size = _S_ENTRY.unpack_from(mv, pos)
        if 12 + size > n - pos:
            break  # a partial entry at the end of a fetch response is normal
        if size < 14:
            raise errors.corrupt(
                "message", offset, f"size {size} is below the 14-byte minimum of any entry"
            )
        magic = _S_INT8.unpack_from(mv, pos + 16)[0]
        end = pos + 12 + size
        if magic == 2:
            out.append(_decode_v2(buf, mv, pos, end, offset, size, opts))
        elif magic == 0 or magic == 1:
            out.append(_decode_legacy_top(buf, mv, pos, end, offset, size, magic, opts))
        else:
            raise errors.unsupported_magic(magic, offset)
        pos = end
    return out


# ---- magic 2 ------------------------------------------------------------------------------


def _decode_v2(buf, mv, pos, end, base_offset, size, opts):
    if size < 49:
        raise errors.corrupt(
            "record batch", base_offset, f"size {size} is below the 49-byte minimum for magic 2"
        )
    (
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _S_BATCH.unpack_from(mv, pos + 12)
    if opts.check_crcs:
        # KIP-98: CRC32C covers everything from the attributes to the end of the batch.
        computed = crc32c(mv[pos + 21 : end])
        if computed != crc:
            raise errors.crc_mismatch("record batch", base_offset, crc, computed)
    if count < 0:
        raise errors.corrupt("record batch", base_offset, f"negative record count {count}")
    codec = attributes & 7
    log_append = attributes & 8
    ttype = 1 if log_append else 0
    body_start = pos + 61
    if codec:
        rbuf = _compression.decompress(codec, mv[body_start:end], opts.max_size)
        rpos = 0
        rend = len(rbuf)
    else:
        rbuf = buf
        rpos = body_start
        rend = end
    records = _decode_v2_records(
        rbuf, rpos, rend, count, base_offset, base_ts, max_ts if log_append else None, ttype,
        opts.start_offset,
    )
    header = (
        base_offset,
        2,
        crc,
        attributes,
        codec,
        ttype,
        bool(attributes & 16),
        bool(attributes & 32),
        leader_epoch,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
    )
    return header, records


class _RecordError(Exception):
    """Internal: a problem inside record ``index`` of a batch; becomes CorruptRecordError."""


def _varint_slow(buf, p, limit_bytes, mask):
    result = 0
    shift = 0
    start = p
    while True:
        if p - start == limit_bytes:
            raise _RecordError(f"varint longer than {limit_bytes} bytes")
        byte = buf[p]  # IndexError past the buffer: caught by the record loop
        p += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & mask, p
        shift += 7


def _span(buf, p, rec_end, what):
    """A record field of varint length then bytes (key, value, header value; -1 is null).

    Returns (bytes or None, position after the field).
    """
    b = buf[p]
    if b < 0x80:
        n = b
        p += 1
    else:
        n, p = _varint_slow(buf, p, 5, _M32)
    n = (n >> 1) ^ -(n & 1)
    if n < 0:
        if n != -1:
            raise _RecordError(f"invalid {what} length {n}")
        return None, p
    if p + n > rec_end:
        raise _RecordError(f"{what} of {n} bytes runs past the end of the record")
    return bytes(buf[p : p + n]), p + n


def _outside_int64(what: str, value: int) -> str:
    return f"{what} {value} is outside the int64 range"


def _decode_v2_records(buf, pos, end, count, base_offset, base_ts, append_ts, ttype, start_offset):
    records = []
    append = records.append
    k = 0
    try:
        while k < count:
            if pos >= end:
                break
            # length varint
            b = buf[pos]
            if b < 0x80:
                length = b
                p = pos + 1
            else:
                length, p = _varint_slow(buf, pos, 5, _M32)
            length = (length >> 1) ^ -(length & 1)
            if length < 0:
                raise _RecordError(f"negative length {length}")
            rec_end = p + length
            if rec_end > end:
                raise _RecordError(f"length {length} runs past the end of the batch")
            p += 1  # attributes (unused, always 0)
            # timestampDelta varlong
            b = buf[p]
            if b < 0x80:
                v = b
                p += 1
            else:
                v, p = _varint_slow(buf, p, 10, _M64)
            ts_delta = (v >> 1) ^ -(v & 1)
            # offsetDelta varint
            b = buf[p]
            if b < 0x80:
                v = b
                p += 1
            else:
                v, p = _varint_slow(buf, p, 5, _M32)
            offset = base_offset + ((v >> 1) ^ -(v & 1))
            key, p = _span(buf, p, rec_end, "key")
            value, p = _span(buf, p, rec_end, "value")
            # headers
            b = buf[p]
            if b < 0x80:
                v = b
                p += 1
            else:
                v, p = _varint_slow(buf, p, 5, _M32)
            hcount = (v >> 1) ^ -(v & 1)
            if hcount == 0:
                headers = ()
            else:
                if hcount < 0:
                    raise _RecordError(f"negative header count {hcount}")
                hs = []
                for _ in range(hcount):
                    v, p = _varint_slow(buf, p, 5, _M32)
                    n = (v >> 1) ^ -(v & 1)
                    if n < 0:
                        raise _RecordError(f"invalid header key length {n}")
                    if p + n > rec_end:
                        raise _RecordError(f"header key of {n} bytes runs past the end of the record")
                    try:
                        hkey = str(buf[p : p + n], "utf-8")
                    except UnicodeDecodeError:
                        raise _RecordError("header key is not valid UTF-8") from None
                    hvalue, p = _span(buf, p + n, rec_end, "header value")
                    hs.append((hkey, hvalue))
                headers = tuple(hs)
            if p != rec_end:
                raise _RecordError(f"its fields take {p - rec_end + length} of its {length} bytes")
            # Offsets and timestamps are int64 in Kafka: a sum outside it is corrupt data.
            if not _INT64_MIN <= offset <= _INT64_MAX:
                raise _RecordError(_outside_int64("offset", offset))
            ts = append_ts if append_ts is not None else base_ts + ts_delta
            if not _INT64_MIN <= ts <= _INT64_MAX:
                raise _RecordError(_outside_int64("timestamp", ts))
            if offset >= start_offset:
                append((offset, ts, ttype, key, value, headers))
            pos = rec_end
            k += 1
    except _RecordError as exc:
        raise errors.corrupt("record batch", base_offset, f"record {k}: {exc}") from None
    except IndexError:
        raise errors.corrupt(
            "record batch", base_offset, f"record {k}: runs past the end of the batch"
        ) from None
    if k < count:
        raise errors.corrupt(
            "record batch", base_offset, f"holds {k} records, fewer than its record count {count}"
        )
    if pos != end:
        raise errors.corrupt(
            "record batch", base_offset, f"{end - pos} bytes follow its {count} records"
        )
    return records


# ---- magic 0 and 1 ----------------------------------------------------------------------


def _parse_message(buf, mv, pos, end, offset, size, magic, check_crcs):
    """Parse one message; returns (crc, attributes, timestamp, key, value)."""
    kind = "message"
    if magic == 1:
        if size < 22:
            raise errors.corrupt(kind, offset, f"size {size} is below the 22-byte minimum for magic 1")
    crc, _magic, attributes = _S_LEGACY.unpack_from(mv, pos + 12)
    attributes &= 0xFF
    if check_crcs:
        computed = zlib.crc32(mv[pos + 16 : end])
        if computed != crc:
            raise errors.crc_mismatch(kind, offset, crc, computed)
    p = pos + 18
    if magic == 1:
        timestamp = _S_INT64.unpack_from(mv, p)[0]
        p += 8
    else:
        timestamp = -1
    key_len = _S_INT32.unpack_from(mv, p)[0]
    p += 4
    if key_len < 0:
        if key_len != -1:
            raise errors.corrupt(kind, offset, f"invalid key length {key_len}")
        key = None
    else:
        if key_len > end - p:
            raise errors.corrupt(kind, offset, f"key of {key_len} bytes runs past the end of the message")
        key = bytes(buf[p : p + key_len])
        p += key_len
    if end - p < 4:
        raise errors.corrupt(kind, offset, "value length runs past the end of the message")
    value_len = _S_INT32.unpack_from(mv, p)[0]
    p += 4
    if value_len < 0:
        if value_len != -1:
            raise errors.corrupt(kind, offset, f"invalid value length {value_len}")
        value_start = -1
    else:
        if value_len > end - p:
            raise errors.corrupt(
                kind, offset, f"value of {value_len} bytes runs past the end of the message"
            )
        value_start = p
        p += value_len
    if p != end:
        raise errors.corrupt(kind, offset, f"{end - p} bytes follow the value")
    return crc, attributes, timestamp, key, value_start, value_len


def _decode_legacy_set(buf, mv, pos, end, depth, wrapper_offset, opts):
    """Decode a message set (the top level, or a decompressed inner set at ``depth``).

    Returns record tuples with offsets in this set's own frame (relative ones stay
    relative; the enclosing wrapper maps them).
    """
    records = []
    while pos < end:
        remaining = end - pos
        if remaining < 12:
            raise errors.corrupt("message", wrapper_offset, "compressed message set is truncated")
        offset, size = _S_ENTRY.unpack_from(mv, pos)
        if 12 + size > remaining:
            raise errors.corrupt("message", wrapper_offset, "compressed message set is truncated")
        if size < 14:
            raise errors.corrupt(
                "message", offset, f"size {size} is below the 14-byte minimum of any entry"
            )
        magic = _S_INT8.unpack_from(mv, pos + 16)[0]
        if magic != 0 and magic != 1:
            if magic == 2:
                raise errors.corrupt(
                    "message", wrapper_offset, "compressed message set holds a magic 2 batch"
                )
            raise errors.unsupported_magic(magic, offset)
        msg_end = pos + 12 + size
        records.extend(_decode_message(buf, mv, pos, msg_end, offset, size, magic, depth, opts)[1])
        pos = msg_end
    return records


def _decode_message(buf, mv, pos, end, offset, size, magic, depth, opts):
    """One message (plain or compressed wrapper); returns (parsed header, record tuples)."""
    crc, attributes, timestamp, key, value_start, value_len = _parse_message(
        buf, mv, pos, end, offset, size, magic, opts.check_crcs
    )
    codec = attributes & 7
    ttype = ((attributes >> 3) & 1) if magic == 1 else -1
    if codec == 0:
        value = None if value_start < 0 else bytes(buf[value_start : value_start + value_len])
        return (crc, attributes, timestamp, ttype), [(offset, timestamp, ttype, key, value, ())]
    if value_start < 0:
        raise errors.corrupt("message", offset, "compressed wrapper message has a null value")
    if depth + 1 > opts.max_depth:
        raise errors.too_deep(depth + 1, opts.max_depth, offset)
    inner = _compression.decompress(
        codec, mv[value_start : value_start + value_len], opts.max_size, legacy_lz4=(magic == 0)
    )
    inner_records = _decode_legacy_set(inner, memoryview(inner), 0, len(inner), depth + 1, offset, opts)
    if magic == 1 and inner_records:
        # KIP-31: inner offsets of a magic 1 wrapper are relative; the wrapper carries the
        # absolute offset of the last inner message.
        shift = offset - inner_records[-1][0]
        if attributes & 8:
            # KIP-32: with LogAppendTime the wrapper's timestamp applies to every record.
            inner_records = [
                (r[0] + shift, timestamp, 1, r[3], r[4], r[5]) for r in inner_records
            ]
        elif shift:
            inner_records = [(r[0] + shift,) + r[1:] for r in inner_records]
    return (crc, attributes, timestamp, ttype), inner_records


def _decode_legacy_top(buf, mv, pos, end, offset, size, magic, opts):
    (crc, attributes, timestamp, ttype), records = _decode_message(
        buf, mv, pos, end, offset, size, magic, 0, opts
    )
    if attributes & 7:
        # KIP-31 shifts of (damaged) wrappers can take an offset outside int64
        for r in records:
            if not _INT64_MIN <= r[0] <= _INT64_MAX:
                raise errors.corrupt("message", offset, _outside_int64("inner message offset", r[0]))
    start = opts.start_offset
    if len(records) == 1:
        if records[0][0] < start:
            records = []
    else:
        records = [r for r in records if r[0] >= start]
    base = records[0][0] if records else offset
    last = records[-1][0] if records else offset
    if not _INT64_MIN <= last - base <= _INT64_MAX:
        raise errors.corrupt(
            "message", offset, f"inner message offsets {base} to {last} span more than the int64 range"
        )
    header = (
        base,
        magic,
        crc,
        attributes,
        attributes & 7,
        ttype,
        False,
        False,
        -1,
        last - base,
        timestamp,
        timestamp,
        -1,
        -1,
        -1,
    )
    return header, records


# ---- public decoders ----------------------------------------------------------------------


def _options(start_offset, check_crcs, max_depth, max_decompressed_size):
    if not isinstance(start_offset, int):
        raise errors.CodecError(
            f"start_offset must be an int (a Kafka offset), not {type(start_offset).__name__}"
        )
    if not _INT64_MIN <= start_offset <= _INT64_MAX:
        raise errors.CodecError(
            f"start_offset {start_offset} is outside the int64 range of Kafka offsets"
        )
    return _Options(int(start_offset), bool(check_crcs), max_depth, max_decompressed_size)


def decode_batches(
    data,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list:
    """Every batch (magic 2) and top-level message (magic 0/1) in ``data``, as Batch objects."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    out = []
    for header, records in _entries(data, opts):
        if records:
            out.append(Batch(*header, [Record(*r) for r in records]))
    return out


def decode_records(
    data,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    include_control: bool = False,
) -> list:
    """Every record in ``data`` (control batches skipped unless ``include_control``)."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    out = []
    for header, records in _entries(data, opts):
        if header[7] and not include_control:
            continue
        out.extend([Record(*r) for r in records])
    return out


def decode_consumer_records(
    data,
    topic,
    partition,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    key_deserializer=None,
    value_deserializer=None,
) -> tuple:
    """``(records, next_offset)``: every record in ``data`` (control batches skipped) as a
    ConsumerRecord of ``topic`` and ``partition``, and the offset after the last batch (or
    legacy message) with records at or past ``start_offset``, control batches included
    (None when there is none).  Deserializers, if given, replace keys and values once
    every batch is decoded, in record order, keys first."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    out = []
    end = None
    new = ConsumerRecord.__new__
    for header, records in _entries(data, opts):
        if not records:
            continue
        end = header[0] + header[9] + 1  # base offset + last offset delta + 1
        if header[7]:  # a control batch
            continue
        for offset, ts, tt, key, value, headers in records:
            r = new(ConsumerRecord)
            _fill(r, topic, partition, offset, ts, tt, key, value, headers)
            out.append(r)
    if key_deserializer is not None or value_deserializer is not None:
        for r in out:
            if key_deserializer is not None:
                _SET_KEY(r, key_deserializer(r.key))
            if value_deserializer is not None:
                _SET_VALUE(r, value_deserializer(r.value))
    return out, end


def decode_columnar(
    data,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Columns:
    """Every record in ``data`` (control batches skipped) as one Columns."""
    import numpy as np

    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    rows = []
    for header, records in _entries(data, opts):
        if not header[7]:
            rows.extend(records)
    # A view, as the extension returns (same arrays, same behaviour): the extension's
    # spans point into the input and decompressed buffers; the twin's into one buffer of
    # the record bytes it decoded.
    parts = []
    pos = 0

    def span(blob):
        nonlocal pos
        start = pos
        if blob is None:
            return start, -1
        parts.append(blob)
        pos += len(blob)
        return start, len(blob)

    ks, kl, vs, vl = [], [], [], []
    hi = [0]
    hks, hkl, hvs, hvl = [], [], [], []
    for r in rows:
        s, ln = span(r[3])
        ks.append(s)
        kl.append(ln)
        s, ln = span(r[4])
        vs.append(s)
        vl.append(ln)
        for hk, hv in r[5]:
            s, ln = span(hk.encode("utf-8", "surrogatepass"))
            hks.append(s)
            hkl.append(ln)
            s, ln = span(hv)
            hvs.append(s)
            hvl.append(ln)
        hi.append(len(hks))
    if pos > _INT32_MAX:
        raise data_too_large(pos)

    def arr(values, dtype):
        a = np.array(values, dtype=dtype)
        return (a, 0, len(a))

    i32, i64 = np.int32, np.int64
    raw = {
        "offsets": arr([r[0] for r in rows], i64),
        "timestamps": arr([r[1] for r in rows], i64),
        "timestamp_types": arr([r[2] for r in rows], np.int8),
        "key_lengths": arr(kl, i32),
        "value_lengths": arr(vl, i32),
        "header_index": arr(hi, i32),
        "header_value_lengths": arr(hvl, i32),
        "_key_starts": arr(ks, i64),
        "_value_starts": arr(vs, i64),
        "_header_key_starts": arr(hks, i64),
        "_header_key_lengths": arr(hkl, i32),
        "_header_value_starts": arr(hvs, i64),
    }
    return Columns._from_view([memoryview(b"".join(parts))], [0], raw, record_type=Record)


# ---------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------


def _check_range(field: str, value, lo: int, hi: int, typename: str) -> None:
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise errors.encode_error(f"{field} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise errors.encode_error(f"{field} {value} out of range")


def _check_ts(i: int, ts: int) -> None:
    if not _INT64_MIN <= ts <= _INT64_MAX:
        raise errors.encode_error(f"record {i}: timestamp {ts} out of range for int64")


def _check_codec(compression, magic: int) -> None:
    if compression not in _compression.CODEC_NAMES:
        raise errors.unsupported_codec(compression)
    if compression == _compression.CODEC_ZSTD and magic < 2:
        # KIP-110: zstd exists only in RecordBatch (magic 2).
        raise errors.unsupported_codec(compression, magic)


def _normalize(records, timestamp: int):
    items = []
    for i, rec in enumerate(records):
        items.append(record_fields(i, rec, timestamp))
    return items


def _message(out: bytearray, offset: int, magic: int, attributes: int, ts: int, key, value) -> None:
    """Append one magic 0/1 message (offset, size, crc, body) to ``out``."""
    body = bytearray()
    body.append(magic)
    body.append(attributes)
    if magic == 1:
        body += _S_INT64.pack(ts)
    if key is None:
        body += b"\xff\xff\xff\xff"
    else:
        body += _S_INT32.pack(len(key))
        body += key
    if value is None:
        body += b"\xff\xff\xff\xff"
    else:
        body += _S_INT32.pack(len(value))
        body += value
    out += _S_ENTRY.pack(offset, len(body) + 4)
    out += _S_UINT32.pack(zlib.crc32(body))
    out += body


def _encode_message_set_items(items, magic, compression, level, base_offset, timestamp, log_append):
    n = len(items)
    if n == 0:
        return b""
    _check_range("base_offset", base_offset, _INT64_MIN, _INT64_MAX - n + 1, "int64")
    if magic == 1:
        for i, (_k, _v, ts, headers) in enumerate(items):
            _check_ts(i, ts)
    for i, item in enumerate(items):
        if item[3]:
            raise errors.encode_error(
                f"record {i}: headers need magic 2 (a RecordBatch); magic {magic} has none"
            )
    if compression == 0:
        out = bytearray()
        attributes = 8 if log_append else 0
        for i, (key, value, ts, _h) in enumerate(items):
            _message(
                out, base_offset + i, magic, attributes, timestamp if log_append else ts, key, value
            )
        return bytes(out)
    inner = bytearray()
    for i, (key, value, ts, _h) in enumerate(items):
        # KIP-31: magic 1 inner offsets are relative (0..n-1); magic 0 ones are absolute.
        _message(inner, i if magic == 1 else base_offset + i, magic, 0, ts, key, value)
    wrapped = _compression.compress(compression, inner, level, legacy_lz4=(magic == 0))
    if magic == 1 and log_append:
        attributes = compression | 8
        wrapper_ts = timestamp
    else:
        attributes = compression
        wrapper_ts = max(item[2] for item in items) if magic == 1 else -1
    out = bytearray()
    _message(out, base_offset + n - 1, magic, attributes, wrapper_ts, None, wrapped)
    return bytes(out)


def encode_message_set(
    records,
    *,
    magic: int = 1,
    compression: int = 0,
    compression_level: int | None = None,
    base_offset: int = 0,
    timestamp: int = -1,
    log_append_time: bool = False,
) -> bytes:
    """A MessageSet (magic 0 or 1) of ``records``; one compressed wrapper when compressing."""
    if magic != 0 and magic != 1:
        raise errors.encode_error(
            f"encode_message_set writes magic 0 or 1, not {magic}; "
            f"use encode_record_batch for magic 2"
        )
    _check_codec(compression, magic)
    if log_append_time and magic == 0:
        raise errors.encode_error("log_append_time needs magic 1 or 2; magic 0 has no timestamps")
    _check_range("timestamp", timestamp, _INT64_MIN, _INT64_MAX, "int64")
    items = _normalize(records, timestamp)
    return _encode_message_set_items(
        items, magic, compression, compression_level, base_offset, timestamp, log_append_time
    )


def _encode_records_section(items, base_ts: int) -> bytearray:
    out = bytearray()
    for i, (key, value, ts, headers) in enumerate(items):
        delta = ts - base_ts
        if not _INT64_MIN <= delta <= _INT64_MAX:
            raise errors.encode_error(
                f"record {i}: timestampDelta {delta} out of range for varlong"
            )
        body = bytearray(b"\x00")  # record attributes: unused, always 0
        body += _zz64(delta)
        body += _zz32(i)
        if key is None:
            body += b"\x01"  # zigzag(-1)
        else:
            body += _zz32(len(key))
            body += key
        if value is None:
            body += b"\x01"
        else:
            body += _zz32(len(value))
            body += value
        body += _zz32(len(headers))
        for hk, hv in headers:
            body += _zz32(len(hk))
            body += hk
            if hv is None:
                body += b"\x01"
            else:
                body += _zz32(len(hv))
                body += hv
        if len(body) > _INT32_MAX:
            raise errors.encode_error(f"record {i}: {len(body)} bytes is larger than a record can be")
        out += _zz32(len(body))
        out += body
    return out


def _encode_batch_items(
    items,
    base_offset,
    compression,
    level,
    timestamp,
    log_append,
    producer_id,
    producer_epoch,
    base_sequence,
    is_transactional,
    is_control,
    leader_epoch,
):
    n = len(items)
    if n == 0:
        raise errors.encode_error("a RecordBatch needs at least one record")
    _check_range("base_offset", base_offset, _INT64_MIN, _INT64_MAX - n + 1, "int64")
    _check_range("producer_id", producer_id, _INT64_MIN, _INT64_MAX, "int64")
    _check_range("producer_epoch", producer_epoch, _INT16_MIN, _INT16_MAX, "int16")
    _check_range("base_sequence", base_sequence, _INT32_MIN, _INT32_MAX, "int32")
    _check_range("partition_leader_epoch", leader_epoch, _INT32_MIN, _INT32_MAX, "int32")
    if n - 1 > _INT32_MAX:
        raise errors.encode_error(f"{n} records are more than one RecordBatch can hold")
    for i, item in enumerate(items):
        _check_ts(i, item[2])
    base_ts = items[0][2]
    max_ts = timestamp if log_append else max(item[2] for item in items)
    section = _encode_records_section(items, base_ts)
    if compression:
        section = _compression.compress(compression, section, level)
    attributes = compression
    if log_append:
        attributes |= 8
    if is_transactional:
        attributes |= 16
    if is_control:
        attributes |= 32
    # From attributes to the end: the part CRC32C covers (KIP-98).
    tail = bytearray(
        struct.pack(
            ">hiqqqhii",
            attributes,
            n - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            n,
        )
    )
    tail += section
    batch_length = 9 + len(tail)  # partitionLeaderEpoch, magic, crc, then the tail
    if batch_length > _INT32_MAX:
        raise errors.encode_error(f"a RecordBatch of {batch_length} bytes is larger than int32 allows")
    out = bytearray(_S_ENTRY.pack(base_offset, batch_length))
    out += _S_INT32.pack(leader_epoch)
    out.append(2)
    out += _S_UINT32.pack(crc32c(tail))
    out += tail
    return bytes(out)


def encode_record_batch(
    records,
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    timestamp: int = -1,
    log_append_time: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One RecordBatch (magic 2) holding ``records``."""
    _check_codec(compression, 2)
    _check_range("timestamp", timestamp, _INT64_MIN, _INT64_MAX, "int64")
    items = _normalize(records, timestamp)
    return _encode_batch_items(
        items,
        base_offset,
        compression,
        compression_level,
        timestamp,
        log_append_time,
        producer_id,
        producer_epoch,
        base_sequence,
        is_transactional,
        is_control,
        partition_leader_epoch,
    )


def _columns_items(columns: Columns):
    view = memoryview(columns.data)
    ko = columns.key_offsets.tolist()
    kl = columns.key_lengths.tolist()
    vo = columns.value_offsets.tolist()
    vl = columns.value_lengths.tolist()
    hi = columns.header_index.tolist()
    hko = columns.header_key_offsets.tolist()
    hvo = columns.header_value_offsets.tolist()
    hvl = columns.header_value_lengths.tolist()
    items = []
    for i, ts in enumerate(columns.timestamps.tolist()):
        key = None if kl[i] < 0 else view[ko[i] : ko[i + 1]]
        value = None if vl[i] < 0 else view[vo[i] : vo[i + 1]]
        if hi[i] == hi[i + 1]:
            headers = ()
        else:
            headers = tuple(
                (view[hko[j] : hko[j + 1]], None if hvl[j] < 0 else view[hvo[j] : hvo[j + 1]])
                for j in range(hi[i], hi[i + 1])
            )
        items.append((key, value, ts, headers))
    return items


def encode_columnar(
    columns: Columns,
    *,
    magic: int = 2,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    log_append_time: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a Columns: magic 2 as one RecordBatch, magic 0/1 as a MessageSet.

    Offsets are ``base_offset + i`` (``columns.offsets`` is ignored); timestamps come from
    the columns.  With ``log_append_time`` the batch (or wrapper) timestamp is the largest
    record timestamp.
    """
    if not isinstance(columns, Columns):
        raise errors.encode_error(
            f"encode_columnar needs a kafkawire Columns, not {type(columns).__name__}"
        )
    if magic not in (0, 1, 2):
        raise errors.encode_error(f"encode_columnar writes magic 0, 1 or 2, not {magic}")
    _check_codec(compression, magic)
    items = _columns_items(columns)
    if magic == 2:
        append_ts = max((item[2] for item in items), default=-1)
        return _encode_batch_items(
            items,
            base_offset,
            compression,
            compression_level,
            append_ts,
            log_append_time,
            producer_id,
            producer_epoch,
            base_sequence,
            is_transactional,
            False,
            partition_leader_epoch,
        )
    if log_append_time and magic == 0:
        raise errors.encode_error("log_append_time needs magic 1 or 2; magic 0 has no timestamps")
    append_ts = max((item[2] for item in items), default=-1)
    return _encode_message_set_items(
        items, magic, compression, compression_level, base_offset, append_ts, log_append_time
    )
