"""Golden vectors for kafkawire.codec, written by hand from the wire format.

The first vectors are spelled out byte by byte, field by field.  Compressed wrappers and
the larger sets are built with the small framing helpers below, which write the fields in
wire order from the protocol description (they share no code with kafkawire); every CRC
they need comes from zlib (CRC32) or from the bitwise CRC32C reference in this file.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from kafkawire import codec, errors
from kafkawire.codec import Record

# ---------------------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------------------


def crc32c_ref(data: bytes) -> int:
    """Bitwise CRC32C (Castagnoli, reflected polynomial 0x82F63B78): slow and obvious."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def test_crc32c_reference_is_castagnoli() -> None:
    # The standard check value of CRC-32C over "123456789" (RFC 3720, appendix B.4).
    assert crc32c_ref(b"123456789") == 0xE3069283


def gzip_bytes(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    return c.compress(data) + c.flush()


def gunzip(data: bytes) -> bytes:
    return zlib.decompress(data, 47)  # wbits 47: gzip or zlib header, auto-detected


def kbytes(value: bytes | None) -> bytes:
    """Kafka `bytes`: int32 length (-1 for null), then the bytes."""
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def legacy_message(
    offset: int,
    magic: int,
    attributes: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int | None = None,
    crc: int | None = None,
) -> bytes:
    """offset int64, size int32, crc uint32, magic int8, attributes int8,
    [timestamp int64 (magic 1)], key bytes, value bytes; CRC32 covers magic..end."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += kbytes(key) + kbytes(value)
    message = struct.pack(">I", zlib.crc32(body) if crc is None else crc) + body
    return struct.pack(">qi", offset, len(message)) + message


def varint(n: int) -> bytes:
    """Zigzag varint (protobuf style), as every varint inside a v2 record."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if u < 0x80:
            out.append(u)
            return bytes(out)
        out.append((u & 0x7F) | 0x80)
        u >>= 7


def vbytes(value: bytes | None) -> bytes:
    return varint(-1) if value is None else varint(len(value)) + value


def v2_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> bytes:
    """length varint, attributes int8, timestampDelta varlong, offsetDelta varint, key,
    value, headerCount varint, headers (key string, value bytes-or-null)."""
    body = b"\x00" + varint(timestamp_delta) + varint(offset_delta) + vbytes(key) + vbytes(value)
    body += varint(len(headers))
    for hkey, hvalue in headers:
        body += vbytes(hkey.encode()) + vbytes(hvalue)
    return varint(len(body)) + body


def record_batch(
    base_offset: int,
    records: bytes,
    *,
    record_count: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    crc: int | None = None,
) -> bytes:
    """The 61-byte RecordBatch header, then `records` (already compressed if the
    attributes say so); CRC32C covers attributes..end."""
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    ) + records
    after_length = struct.pack(
        ">ibI", partition_leader_epoch, 2, crc32c_ref(tail) if crc is None else crc
    ) + tail
    return struct.pack(">qi", base_offset, len(after_length)) + after_length


def fields(r) -> tuple:
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))


def all_fields(records) -> list[tuple]:
    return [fields(r) for r in records]


def split_legacy(entry: bytes) -> dict:
    """Parse one legacy entry with struct (for checking encoder output field by field)."""
    offset, size, crc, magic, attributes = struct.unpack_from(">qiIbb", entry, 0)
    pos = 18
    timestamp = None
    if magic == 1:
        (timestamp,) = struct.unpack_from(">q", entry, pos)
        pos += 8
    (klen,) = struct.unpack_from(">i", entry, pos)
    pos += 4
    key = None if klen < 0 else entry[pos : pos + klen]
    pos += max(klen, 0)
    (vlen,) = struct.unpack_from(">i", entry, pos)
    pos += 4
    value = None if vlen < 0 else entry[pos : pos + vlen]
    pos += max(vlen, 0)
    assert pos == 12 + size == len(entry), "entry must end exactly where its size says"
    assert crc == zlib.crc32(entry[16:]), "stored CRC32 must cover magic..end"
    return dict(offset=offset, magic=magic, attributes=attributes, timestamp=timestamp,
                key=key, value=value, crc=crc)


# ---------------------------------------------------------------------------------------
# Magic 0: one message, spelled out
# ---------------------------------------------------------------------------------------

MAGIC0_CRC = 0xA4CDAB3A
MAGIC0 = b"".join([
    bytes.fromhex("0000000000000005"),  # offset int64 = 5
    bytes.fromhex("00000014"),          # message size int32 = 20 (crc..end)
    bytes.fromhex("a4cdab3a"),          # crc uint32: CRC32 of the 16 bytes below
    bytes.fromhex("00"),                # magic int8 = 0
    bytes.fromhex("00"),                # attributes int8 = 0 (no compression)
    bytes.fromhex("00000001"), b"k",    # key: int32 length 1, "k"
    bytes.fromhex("00000005"), b"hello",  # value: int32 length 5, "hello"
])


def test_magic0_crc_matches_zlib() -> None:
    assert len(MAGIC0) == 32
    assert zlib.crc32(MAGIC0[16:]) == MAGIC0_CRC
    assert codec.crc32(MAGIC0[16:]) == MAGIC0_CRC


def test_magic0_decode() -> None:
    assert all_fields(codec.decode_records(MAGIC0)) == [(5, -1, -1, b"k", b"hello", ())]
    [batch] = codec.decode_batches(MAGIC0)
    assert batch.magic == 0
    assert batch.base_offset == 5
    assert batch.crc == MAGIC0_CRC
    assert batch.attributes == 0
    assert batch.compression == 0
    assert batch.timestamp_type == -1
    assert batch.is_transactional is False
    assert batch.is_control is False
    assert batch.partition_leader_epoch == -1
    assert batch.last_offset_delta == 0
    assert batch.base_timestamp == -1
    assert batch.max_timestamp == -1
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert all_fields(batch.records) == [(5, -1, -1, b"k", b"hello", ())]


def test_magic0_encode() -> None:
    assert codec.encode_message_set([(b"k", b"hello")], magic=0, base_offset=5) == MAGIC0
    # A timestamp is meaningless in magic 0 and is dropped.
    assert codec.encode_message_set([(b"k", b"hello", 123)], magic=0, base_offset=5) == MAGIC0


@pytest.mark.parametrize(
    "wrap", [bytes, bytearray, memoryview, lambda b: np.frombuffer(b, dtype=np.uint8)]
)
def test_decode_accepts_any_buffer(wrap) -> None:
    assert all_fields(codec.decode_records(wrap(MAGIC0))) == [(5, -1, -1, b"k", b"hello", ())]


# ---------------------------------------------------------------------------------------
# Magic 1: one message with a timestamp, spelled out
# ---------------------------------------------------------------------------------------

MAGIC1_CRC = 0x1CFF7DFC
MAGIC1 = b"".join([
    bytes.fromhex("0000000000000007"),  # offset int64 = 7
    bytes.fromhex("00000019"),          # message size int32 = 25
    bytes.fromhex("1cff7dfc"),          # crc uint32
    bytes.fromhex("01"),                # magic int8 = 1
    bytes.fromhex("00"),                # attributes: no compression, CreateTime (bit 3 = 0)
    bytes.fromhex("0000018bcfe56800"),  # timestamp int64 = 1_700_000_000_000 ms
    bytes.fromhex("ffffffff"),          # key: length -1, null
    bytes.fromhex("00000003"), b"abc",  # value: length 3, "abc"
])


def test_magic1_crc_matches_zlib() -> None:
    assert len(MAGIC1) == 37
    assert zlib.crc32(MAGIC1[16:]) == MAGIC1_CRC


def test_magic1_decode() -> None:
    assert all_fields(codec.decode_records(MAGIC1)) == [
        (7, 1_700_000_000_000, 0, None, b"abc", ())
    ]
    [batch] = codec.decode_batches(MAGIC1)
    assert (batch.magic, batch.base_offset, batch.crc, batch.timestamp_type) == (
        1, 7, MAGIC1_CRC, 0,
    )
    assert batch.base_timestamp == batch.max_timestamp == 1_700_000_000_000
    assert batch.last_offset_delta == 0


def test_magic1_encode() -> None:
    encoded = codec.encode_message_set(
        [(None, b"abc", 1_700_000_000_000)], magic=1, base_offset=7
    )
    assert encoded == MAGIC1
    # A record without timestamp takes the encoder's `timestamp` argument.
    assert codec.encode_message_set(
        [(None, b"abc")], magic=1, base_offset=7, timestamp=1_700_000_000_000
    ) == MAGIC1
    assert codec.encode_message_set(
        [Record(0, 1_700_000_000_000, 0, None, b"abc")], magic=1, base_offset=7
    ) == MAGIC1


def test_magic1_uncompressed_log_append_time_attribute() -> None:
    # Attribute bit 3 on an uncompressed magic-1 message: the timestamp is LogAppendTime.
    data = legacy_message(3, 1, 0x08, b"k", b"v", timestamp=42)
    assert all_fields(codec.decode_records(data)) == [(3, 42, 1, b"k", b"v", ())]


# ---------------------------------------------------------------------------------------
# Compressed legacy wrappers
# ---------------------------------------------------------------------------------------

# Magic 0 gzip: inner offsets are absolute.
MAGIC0_INNER = legacy_message(10, 0, 0, None, b"v10") + legacy_message(11, 0, 0, None, b"v11")
MAGIC0_GZIP = legacy_message(11, 0, 0x01, None, gzip_bytes(MAGIC0_INNER))


def test_magic0_gzip_wrapper_decode() -> None:
    assert all_fields(codec.decode_records(MAGIC0_GZIP)) == [
        (10, -1, -1, None, b"v10", ()),
        (11, -1, -1, None, b"v11", ()),
    ]
    [batch] = codec.decode_batches(MAGIC0_GZIP)
    assert batch.magic == 0
    assert batch.base_offset == 10
    assert batch.last_offset_delta == 1
    assert batch.compression == 1
    assert batch.attributes == 0x01
    assert batch.crc == struct.unpack_from(">I", MAGIC0_GZIP, 12)[0]
    assert len(batch.records) == 2


def test_magic0_gzip_wrapper_encode() -> None:
    encoded = codec.encode_message_set(
        [(None, b"v10"), (None, b"v11")], magic=0, compression=1, base_offset=10
    )
    wrapper = split_legacy(encoded)
    assert wrapper["offset"] == 11  # the wrapper carries the last inner offset
    assert (wrapper["magic"], wrapper["attributes"], wrapper["key"]) == (0, 0x01, None)
    assert gunzip(wrapper["value"]) == MAGIC0_INNER


# Magic 1 gzip, KIP-31: inner offsets are relative; the wrapper holds the absolute offset of
# the last inner message.  Relative offsets 0, 2, 5 (a compacted set) under wrapper 105.
MAGIC1_INNER = (
    legacy_message(0, 1, 0, b"a", b"1", timestamp=1000)
    + legacy_message(2, 1, 0, b"b", b"2", timestamp=3000)
    + legacy_message(5, 1, 0, None, b"3", timestamp=2000)
)
MAGIC1_GZIP = legacy_message(105, 1, 0x01, None, gzip_bytes(MAGIC1_INNER), timestamp=3000)


def test_magic1_gzip_wrapper_relative_offsets() -> None:
    assert all_fields(codec.decode_records(MAGIC1_GZIP)) == [
        (100, 1000, 0, b"a", b"1", ()),
        (102, 3000, 0, b"b", b"2", ()),
        (105, 2000, 0, None, b"3", ()),
    ]
    [batch] = codec.decode_batches(MAGIC1_GZIP)
    assert (batch.magic, batch.base_offset, batch.last_offset_delta) == (1, 100, 5)
    assert batch.base_timestamp == batch.max_timestamp == 3000
    assert batch.timestamp_type == 0
    assert batch.compression == 1


def test_magic1_gzip_wrapper_encode() -> None:
    records = [(b"a", b"1", 1000), (b"b", b"2", 3000), (None, b"3", 2000)]
    encoded = codec.encode_message_set(records, magic=1, compression=1, base_offset=50)
    wrapper = split_legacy(encoded)
    assert wrapper["offset"] == 52
    assert (wrapper["magic"], wrapper["attributes"], wrapper["key"]) == (1, 0x01, None)
    assert wrapper["timestamp"] == 3000  # max inner timestamp
    expected_inner = (
        legacy_message(0, 1, 0, b"a", b"1", timestamp=1000)
        + legacy_message(1, 1, 0, b"b", b"2", timestamp=3000)
        + legacy_message(2, 1, 0, None, b"3", timestamp=2000)
    )
    assert gunzip(wrapper["value"]) == expected_inner
    assert all_fields(codec.decode_records(encoded)) == [
        (50, 1000, 0, b"a", b"1", ()),
        (51, 3000, 0, b"b", b"2", ()),
        (52, 2000, 0, None, b"3", ()),
    ]


# KIP-32: a magic-1 wrapper with LogAppendTime (attribute bit 3) imposes its own timestamp.
MAGIC1_LOG_APPEND = legacy_message(
    21, 1, 0x09,  # gzip | LogAppendTime
    None,
    gzip_bytes(
        legacy_message(0, 1, 0, None, b"x", timestamp=1000)
        + legacy_message(1, 1, 0, None, b"y", timestamp=2000)
    ),
    timestamp=5555,
)


def test_log_append_time_wrapper_decode() -> None:
    assert all_fields(codec.decode_records(MAGIC1_LOG_APPEND)) == [
        (20, 5555, 1, None, b"x", ()),
        (21, 5555, 1, None, b"y", ()),
    ]
    [batch] = codec.decode_batches(MAGIC1_LOG_APPEND)
    assert batch.timestamp_type == 1
    assert batch.attributes == 0x09


def test_log_append_time_wrapper_encode() -> None:
    encoded = codec.encode_message_set(
        [(None, b"x", 1000), (None, b"y", 2000)],
        magic=1, compression=1, base_offset=20, timestamp=5555, log_append_time=True,
    )
    wrapper = split_legacy(encoded)
    assert (wrapper["offset"], wrapper["attributes"], wrapper["timestamp"]) == (21, 0x09, 5555)
    assert all_fields(codec.decode_records(encoded)) == [
        (20, 5555, 1, None, b"x", ()),
        (21, 5555, 1, None, b"y", ()),
    ]


# ---------------------------------------------------------------------------------------
# Magic 2: a RecordBatch with headers, spelled out
# ---------------------------------------------------------------------------------------

V2_CRC = 0xD414A394
V2_BATCH = b"".join([
    bytes.fromhex("0000000000000064"),  # baseOffset int64 = 100
    bytes.fromhex("00000055"),          # batchLength int32 = 85 (49 header bytes + 36)
    bytes.fromhex("ffffffff"),          # partitionLeaderEpoch int32 = -1
    bytes.fromhex("02"),                # magic int8 = 2
    bytes.fromhex("d414a394"),          # crc uint32: CRC32C of attributes..end
    bytes.fromhex("0000"),              # attributes int16: none, CreateTime, plain
    bytes.fromhex("00000001"),          # lastOffsetDelta int32 = 1
    bytes.fromhex("0000018bcfe56800"),  # baseTimestamp int64 = 1_700_000_000_000
    bytes.fromhex("0000018bcfe56805"),  # maxTimestamp int64 = 1_700_000_000_005
    bytes.fromhex("ffffffffffffffff"),  # producerId int64 = -1
    bytes.fromhex("ffff"),              # producerEpoch int16 = -1
    bytes.fromhex("ffffffff"),          # baseSequence int32 = -1
    bytes.fromhex("00000002"),          # recordCount int32 = 2
    # record 0 (all varints zigzag)
    bytes.fromhex("1c"),                # length = 14
    bytes.fromhex("00"),                # attributes int8
    bytes.fromhex("00"),                # timestampDelta = 0
    bytes.fromhex("00"),                # offsetDelta = 0
    bytes.fromhex("04"), b"k0",         # keyLength = 2, "k0"
    bytes.fromhex("04"), b"v0",         # valueLength = 2, "v0"
    bytes.fromhex("02"),                # headerCount = 1
    bytes.fromhex("02"), b"h",          #   header key length 1, "h"
    bytes.fromhex("02"), b"x",          #   header value length 1, "x"
    # record 1
    bytes.fromhex("28"),                # length = 20
    bytes.fromhex("00"),                # attributes
    bytes.fromhex("0a"),                # timestampDelta = 5
    bytes.fromhex("02"),                # offsetDelta = 1
    bytes.fromhex("01"),                # keyLength = -1 (null key)
    bytes.fromhex("0e"), b"value-1",    # valueLength = 7
    bytes.fromhex("04"),                # headerCount = 2
    bytes.fromhex("02"), b"a",          #   key "a"
    bytes.fromhex("01"),                #   value length -1: null
    bytes.fromhex("04"), b"bb",         #   key "bb"
    bytes.fromhex("00"),                #   value length 0: empty
])
V2_RECORDS = [
    (100, 1_700_000_000_000, 0, b"k0", b"v0", (("h", b"x"),)),
    (101, 1_700_000_000_005, 0, None, b"value-1", (("a", None), ("bb", b""))),
]


def test_v2_crc32c_matches_reference() -> None:
    assert len(V2_BATCH) == 12 + 85
    assert crc32c_ref(V2_BATCH[21:]) == V2_CRC
    assert codec.crc32c(V2_BATCH[21:]) == V2_CRC
    # The helper that builds the other vectors agrees with the spelled-out bytes.
    assert record_batch(
        100,
        v2_record(0, 0, b"k0", b"v0", (("h", b"x"),))
        + v2_record(1, 5, None, b"value-1", (("a", None), ("bb", b""))),
        record_count=2, last_offset_delta=1,
        base_timestamp=1_700_000_000_000, max_timestamp=1_700_000_000_005,
    ) == V2_BATCH


def test_v2_decode() -> None:
    assert all_fields(codec.decode_records(V2_BATCH)) == V2_RECORDS
    [batch] = codec.decode_batches(V2_BATCH)
    assert batch.magic == 2
    assert batch.base_offset == 100
    assert batch.crc == V2_CRC
    assert batch.attributes == 0
    assert batch.compression == 0
    assert batch.timestamp_type == 0
    assert batch.is_transactional is False
    assert batch.is_control is False
    assert batch.partition_leader_epoch == -1
    assert batch.last_offset_delta == 1
    assert batch.base_timestamp == 1_700_000_000_000
    assert batch.max_timestamp == 1_700_000_000_005
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert all_fields(batch.records) == V2_RECORDS


def test_v2_encode() -> None:
    records = [
        (b"k0", b"v0", 1_700_000_000_000, [("h", b"x")]),
        (None, b"value-1", 1_700_000_000_005, [(b"a", None), ("bb", bytearray())]),
    ]
    assert codec.encode_record_batch(records, base_offset=100) == V2_BATCH
    as_records = [Record(0, *r[1:]) for r in V2_RECORDS]
    assert codec.encode_record_batch(as_records, base_offset=100) == V2_BATCH


def test_v2_columnar_layout() -> None:
    cols = codec.decode_columnar(V2_BATCH)
    assert len(cols) == 2
    # keys, then values, then header keys, then header values, each region contiguous
    assert bytes(cols.data) == b"k0" + b"v0value-1" + b"habb" + b"x"
    assert list(cols.offsets) == [100, 101]
    assert list(cols.timestamps) == [1_700_000_000_000, 1_700_000_000_005]
    assert list(cols.timestamp_types) == [0, 0]
    assert list(cols.key_offsets) == [0, 2, 2]
    assert list(cols.key_lengths) == [2, -1]
    assert list(cols.value_offsets) == [2, 4, 11]
    assert list(cols.value_lengths) == [2, 7]
    assert list(cols.header_index) == [0, 1, 3]
    assert list(cols.header_key_offsets) == [11, 12, 13, 15]
    assert list(cols.header_value_offsets) == [15, 16, 16, 16]
    assert list(cols.header_value_lengths) == [1, -1, 0]
    assert all_fields(cols.to_records()) == V2_RECORDS


def test_v2_gzip_batch_decode() -> None:
    plain = (
        v2_record(0, 0, b"k", b"first")
        + v2_record(1, 7, b"k", b"second", (("trace", b"1"),))
        + v2_record(2, 3, None, None)
    )
    data = record_batch(
        500, gzip_bytes(plain), attributes=0x01, record_count=3, last_offset_delta=2,
        base_timestamp=10_000, max_timestamp=10_007,
    )
    assert all_fields(codec.decode_records(data)) == [
        (500, 10_000, 0, b"k", b"first", ()),
        (501, 10_007, 0, b"k", b"second", (("trace", b"1"),)),
        (502, 10_003, 0, None, None, ()),
    ]
    assert codec.decode_batches(data)[0].compression == 1


def test_v2_log_append_time_batch() -> None:
    data = record_batch(
        0, v2_record(0, 0, None, b"a") + v2_record(1, 1, None, b"b"),
        attributes=0x08, record_count=2, last_offset_delta=1,
        base_timestamp=100, max_timestamp=9_999,
    )
    assert [(r.timestamp, r.timestamp_type) for r in codec.decode_records(data)] == [
        (9_999, 1), (9_999, 1)
    ]
    encoded = codec.encode_record_batch(
        [(None, b"a", 100), (None, b"b", 101)], timestamp=9_999, log_append_time=True
    )
    assert struct.unpack_from(">h", encoded, 21)[0] == 0x08
    assert struct.unpack_from(">q", encoded, 35)[0] == 9_999  # maxTimestamp
    assert [(r.timestamp, r.timestamp_type) for r in codec.decode_records(encoded)] == [
        (9_999, 1), (9_999, 1)
    ]


def test_v2_gzip_encode_layout() -> None:
    records = [(b"k", b"first", 10_000), (b"k", b"second", 10_007, [("trace", b"1")])]
    encoded = codec.encode_record_batch(records, base_offset=500, compression=1)
    (attributes,) = struct.unpack_from(">h", encoded, 21)
    assert attributes == 0x01
    assert struct.unpack_from(">I", encoded, 17)[0] == crc32c_ref(encoded[21:])
    assert gunzip(encoded[61:]) == (
        v2_record(0, 0, b"k", b"first") + v2_record(1, 7, b"k", b"second", (("trace", b"1"),))
    )


# ---------------------------------------------------------------------------------------
# Transactional and control batches
# ---------------------------------------------------------------------------------------

TXN_BATCH = record_batch(
    1000,
    v2_record(0, 0, b"t", b"in-txn") + v2_record(1, 1, b"t", b"in-txn-2"),
    attributes=0x10,  # transactional (bit 4)
    record_count=2, last_offset_delta=1, base_timestamp=77, max_timestamp=78,
    producer_id=1_234_567_890_123, producer_epoch=3, base_sequence=42,
    partition_leader_epoch=9,
)

# A COMMIT marker: key = version int16 0, type int16 1; value = version int16 0,
# coordinatorEpoch int32 5.  Control batches are always transactional (bits 4 and 5).
CONTROL_KEY = bytes.fromhex("0000" "0001")
CONTROL_VALUE = bytes.fromhex("0000" "00000005")
CONTROL_BATCH = record_batch(
    1002, v2_record(0, 0, CONTROL_KEY, CONTROL_VALUE),
    attributes=0x30, record_count=1, last_offset_delta=0, base_timestamp=79, max_timestamp=79,
    producer_id=1_234_567_890_123, producer_epoch=3, base_sequence=-1,
    partition_leader_epoch=9,
)


def test_transactional_batch() -> None:
    [batch] = codec.decode_batches(TXN_BATCH)
    assert batch.is_transactional is True
    assert batch.is_control is False
    assert batch.attributes == 0x10
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        1_234_567_890_123, 3, 42,
    )
    assert batch.partition_leader_epoch == 9
    assert all_fields(codec.decode_records(TXN_BATCH)) == [
        (1000, 77, 0, b"t", b"in-txn", ()),
        (1001, 78, 0, b"t", b"in-txn-2", ()),
    ]
    encoded = codec.encode_record_batch(
        [(b"t", b"in-txn", 77), (b"t", b"in-txn-2", 78)],
        base_offset=1000, is_transactional=True, producer_id=1_234_567_890_123,
        producer_epoch=3, base_sequence=42, partition_leader_epoch=9,
    )
    assert encoded == TXN_BATCH


def test_control_batch() -> None:
    [batch] = codec.decode_batches(CONTROL_BATCH)
    assert batch.is_control is True
    assert batch.is_transactional is True
    assert all_fields(batch.records) == [(1002, 79, 0, CONTROL_KEY, CONTROL_VALUE, ())]
    data = TXN_BATCH + CONTROL_BATCH
    assert [r.offset for r in codec.decode_records(data)] == [1000, 1001]
    assert [r.offset for r in codec.decode_records(data, include_control=True)] == [
        1000, 1001, 1002,
    ]
    assert list(codec.decode_columnar(data).offsets) == [1000, 1001]
    encoded = codec.encode_record_batch(
        [(CONTROL_KEY, CONTROL_VALUE, 79)], base_offset=1002, is_control=True,
        is_transactional=True, producer_id=1_234_567_890_123, producer_epoch=3,
        partition_leader_epoch=9,
    )
    assert encoded == CONTROL_BATCH


# ---------------------------------------------------------------------------------------
# Mixed buffers, partial trailing entries, start_offset
# ---------------------------------------------------------------------------------------

MIXED = MAGIC0 + MAGIC1 + V2_BATCH
MIXED_RECORDS = [
    (5, -1, -1, b"k", b"hello", ()),
    (7, 1_700_000_000_000, 0, None, b"abc", ()),
    *V2_RECORDS,
]


@pytest.mark.parametrize(
    "tail",
    [
        b"",
        b"\x00" * 11,  # fewer than 12 bytes: not even offset+size
        V2_BATCH[:12],  # offset and size, no body
        V2_BATCH[:60],  # part of the header
        V2_BATCH[:-1],  # all but the last byte
        MAGIC0[:-1],
    ],
    ids=["none", "11-bytes", "header-only", "60-bytes", "minus-1", "magic0-minus-1"],
)
def test_mixed_magics_with_partial_trailing_entry(tail: bytes) -> None:
    data = MIXED + tail
    assert all_fields(codec.decode_records(data)) == MIXED_RECORDS
    assert [b.magic for b in codec.decode_batches(data)] == [0, 1, 2]
    assert all_fields(codec.decode_columnar(data).to_records()) == MIXED_RECORDS


def test_only_partial_entry_is_empty() -> None:
    assert codec.decode_records(V2_BATCH[:-1]) == []
    assert codec.decode_batches(b"") == []
    assert len(codec.decode_columnar(MAGIC1[:20])) == 0


def test_start_offset_inside_compressed_legacy_set() -> None:
    # MAGIC1_GZIP holds offsets 100, 102, 105 behind one wrapper at offset 105.
    assert [r.offset for r in codec.decode_records(MAGIC1_GZIP, start_offset=101)] == [102, 105]
    [batch] = codec.decode_batches(MAGIC1_GZIP, start_offset=101)
    assert batch.base_offset == 102
    assert batch.last_offset_delta == 3
    assert [r.offset for r in batch.records] == [102, 105]
    assert codec.decode_records(MAGIC1_GZIP, start_offset=106) == []
    assert codec.decode_batches(MAGIC1_GZIP, start_offset=106) == []
    assert list(codec.decode_columnar(MAGIC1_GZIP, start_offset=105).offsets) == [105]


def test_start_offset_inside_compressed_batch() -> None:
    encoded = codec.encode_record_batch(
        [(None, b"%d" % i, 1) for i in range(5)], base_offset=40, compression=1
    )
    assert [r.offset for r in codec.decode_records(encoded, start_offset=42)] == [42, 43, 44]
    assert codec.decode_batches(encoded, start_offset=45) == []
    assert list(codec.decode_columnar(encoded, start_offset=44).offsets) == [44]
    assert [r.offset for r in codec.decode_records(MIXED, start_offset=7)] == [7, 100, 101]


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1 :]


def assert_same_error(excinfo: pytest.ExceptionInfo, expected: Exception) -> None:
    assert type(excinfo.value) is type(expected)
    assert str(excinfo.value) == str(expected)


def test_bad_crc_magic0() -> None:
    bad = flip(MAGIC0, len(MAGIC0) - 1)  # last byte of the value
    for decode in (codec.decode_records, codec.decode_batches, codec.decode_columnar):
        with pytest.raises(errors.CorruptRecordError) as excinfo:
            decode(bad)
        assert excinfo.value.offset == 5
        assert excinfo.value.expected == MAGIC0_CRC
        assert excinfo.value.found == zlib.crc32(bad[16:])
        assert excinfo.value.code == 2
        assert_same_error(
            excinfo, errors.crc_mismatch("message", 5, MAGIC0_CRC, zlib.crc32(bad[16:]))
        )
    assert all_fields(codec.decode_records(bad, check_crcs=False)) == [
        (5, -1, -1, b"k", b"helln", ())
    ]


def test_bad_crc_magic2() -> None:
    bad = flip(V2_BATCH, 70)  # inside record 0
    with pytest.raises(errors.CorruptRecordError) as excinfo:
        codec.decode_records(bad)
    assert (excinfo.value.offset, excinfo.value.expected, excinfo.value.found) == (
        100, V2_CRC, crc32c_ref(bad[21:]),
    )
    assert_same_error(
        excinfo, errors.crc_mismatch("record batch", 100, V2_CRC, crc32c_ref(bad[21:]))
    )
    assert len(codec.decode_records(bad, check_crcs=False)) == 2


def test_crc_checked_before_decompression() -> None:
    bad = flip(MAGIC1_GZIP, len(MAGIC1_GZIP) - 10)  # inside the gzip stream
    with pytest.raises(errors.CorruptRecordError) as excinfo:
        codec.decode_records(bad)
    assert excinfo.value.expected is not None  # the CRC error, not a gzip error
    assert excinfo.value.offset == 105


def test_bad_crc_in_second_entry_reports_its_offset() -> None:
    with pytest.raises(errors.CorruptRecordError) as excinfo:
        codec.decode_records(MAGIC0 + flip(MAGIC1, 36))
    assert excinfo.value.offset == 7


@pytest.mark.parametrize("magic", [3, 0x7F, -1])  # the magic byte is an int8
def test_unknown_magic(magic: int) -> None:
    data = MAGIC0[:16] + struct.pack(">b", magic) + MAGIC0[17:]
    for decode in (codec.decode_records, codec.decode_batches, codec.decode_columnar):
        with pytest.raises(errors.UnsupportedMagicError) as excinfo:
            decode(data, check_crcs=False)
        assert_same_error(excinfo, errors.unsupported_magic(magic, 5))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_legacy(codec_id: int) -> None:
    data = legacy_message(8, 1, codec_id, None, b"whatever", timestamp=0)
    with pytest.raises(errors.UnsupportedCodecError) as excinfo:
        codec.decode_records(data)
    assert_same_error(excinfo, errors.unsupported_codec(codec_id))


def test_unknown_codec_v2() -> None:
    data = record_batch(
        0, b"\x00" * 8, attributes=0x07, record_count=1, last_offset_delta=0,
        base_timestamp=0, max_timestamp=0,
    )
    with pytest.raises(errors.UnsupportedCodecError) as excinfo:
        codec.decode_records(data)
    assert_same_error(excinfo, errors.unsupported_codec(7))


def nested_magic0(levels: int, offset: int = 3) -> bytes:
    """`levels` gzip wrappers around one plain magic-0 message, all at `offset`."""
    data = legacy_message(offset, 0, 0, None, b"deep")
    for _ in range(levels):
        data = legacy_message(offset, 0, 0x01, None, gzip_bytes(data))
    return data


def test_nesting_cap() -> None:
    assert codec.DEFAULT_MAX_DEPTH == 4
    assert all_fields(codec.decode_records(nested_magic0(4))) == [(3, -1, -1, None, b"deep", ())]
    with pytest.raises(errors.NestingDepthError) as excinfo:
        codec.decode_records(nested_magic0(5))
    assert_same_error(excinfo, errors.too_deep(5, 4, 3))
    with pytest.raises(errors.NestingDepthError) as excinfo:
        codec.decode_records(nested_magic0(2), max_depth=1)
    assert_same_error(excinfo, errors.too_deep(2, 1, 3))
    with pytest.raises(errors.NestingDepthError) as excinfo:
        codec.decode_batches(nested_magic0(1), max_depth=0)
    assert_same_error(excinfo, errors.too_deep(1, 0, 3))


def test_decompressed_size_cap() -> None:
    from kafkawire import compression

    inner = legacy_message(0, 1, 0, None, b"z" * 1000, timestamp=0)
    data = legacy_message(0, 1, 0x01, None, gzip_bytes(inner), timestamp=0)
    assert len(codec.decode_records(data, max_decompressed_size=len(inner))) == 1
    with pytest.raises(errors.DecompressedSizeError) as excinfo:
        codec.decode_records(data, max_decompressed_size=100)
    assert_same_error(excinfo, errors.too_big(compression.CODEC_NAMES[1], 100))
    batch = codec.encode_record_batch([(None, b"z" * 1000)], compression=1)
    with pytest.raises(errors.DecompressedSizeError):
        codec.decode_columnar(batch, max_decompressed_size=100)


def test_truncated_inner_set_is_corrupt() -> None:
    data = legacy_message(11, 0, 0x01, None, gzip_bytes(MAGIC0_INNER[:-2]))
    with pytest.raises(errors.CorruptRecordError) as excinfo:
        codec.decode_records(data)
    assert str(excinfo.value).startswith("corrupt message at offset ")
    assert excinfo.value.expected is None


def test_null_wrapper_value_is_corrupt() -> None:
    data = legacy_message(4, 1, 0x01, None, None, timestamp=0)
    with pytest.raises(errors.CorruptRecordError) as excinfo:
        codec.decode_records(data)
    assert str(excinfo.value).startswith("corrupt message at offset 4: ")


def assert_structural(data: bytes, kind: str, offset: int) -> None:
    """Every decoder raises corrupt(kind, offset, ...) for `data`, with or without CRCs."""
    for decode in (codec.decode_records, codec.decode_batches, codec.decode_columnar):
        for check in (True, False):
            with pytest.raises(errors.CorruptRecordError) as excinfo:
                decode(data, check_crcs=check)
            assert str(excinfo.value).startswith(f"corrupt {kind} at offset {offset}: ")
            assert excinfo.value.offset == offset
            assert excinfo.value.expected is None and excinfo.value.found is None


def v2_counted(record_count: int, records: bytes) -> bytes:
    return record_batch(
        60, records, record_count=record_count, last_offset_delta=1,
        base_timestamp=0, max_timestamp=0,
    )


TWO_RECORDS = v2_record(0, 0, None, b"a") + v2_record(1, 0, None, b"b")


@pytest.mark.parametrize("count", [3, 1, 0, -1], ids=["too-few", "trailing", "zero", "negative"])
def test_record_count_mismatch(count: int) -> None:
    assert_structural(v2_counted(count, TWO_RECORDS), "record batch", 60)


def test_record_length_mismatch() -> None:
    # record 0 claims one byte more than its fields use
    body = bytes.fromhex("00 00 00 01 02") + b"a" + bytes.fromhex("00")
    bad = varint(len(body) + 1) + body + b"\x00"
    assert_structural(v2_counted(1, bad), "record batch", 60)


def test_record_field_past_record_end() -> None:
    # value length 100 inside a 7-byte record
    body = bytes.fromhex("00 00 00 01 c8 01") + b"a"
    assert_structural(v2_counted(1, varint(len(body)) + body), "record batch", 60)


@pytest.mark.parametrize("size", [13, 0, -1, -(2**31)])
def test_entry_size_below_minimum(size: int) -> None:
    entry = struct.pack(">qi", 9, size) + b"\x00" * 13
    assert_structural(entry, "message", 9)


def test_magic1_too_short() -> None:
    # size 21 (< 22): crc, magic 1, attributes, timestamp, then 7 bytes, too few for the
    # two int32 lengths
    body = struct.pack(">bbq", 1, 0, 0) + b"\x00" * 7
    entry = struct.pack(">qiI", 2, 4 + len(body), zlib.crc32(body)) + body
    assert_structural(entry, "message", 2)


def test_magic2_too_short() -> None:
    entry = V2_BATCH[:8] + struct.pack(">i", 48) + V2_BATCH[12 : 12 + 48]
    assert_structural(entry, "record batch", 100)


def test_key_length_past_message_end() -> None:
    body = struct.pack(">bbi", 0, 0, 50) + b"kk" + struct.pack(">i", -1)
    entry = struct.pack(">qiI", 6, 4 + len(body), zlib.crc32(body)) + body
    assert_structural(entry, "message", 6)


def test_trailing_bytes_inside_message() -> None:
    body = struct.pack(">bb", 0, 0) + kbytes(b"k") + kbytes(b"v") + b"\x00\x00"
    entry = struct.pack(">qiI", 6, 4 + len(body), zlib.crc32(body)) + body
    assert_structural(entry, "message", 6)


# ---- encode errors --------------------------------------------------------------------


def test_encode_empty() -> None:
    assert codec.encode_message_set([], magic=0) == b""
    assert codec.encode_message_set([], magic=1, compression=1) == b""
    with pytest.raises(errors.EncodeError) as excinfo:
        codec.encode_record_batch([])
    assert str(excinfo.value) == "a RecordBatch needs at least one record"


@pytest.mark.parametrize("magic", [2, 3, -1])
def test_encode_message_set_bad_magic(magic: int) -> None:
    with pytest.raises(errors.EncodeError):
        codec.encode_message_set([(b"k", b"v")], magic=magic)


@pytest.mark.parametrize("magic", [0, 1])
def test_encode_zstd_needs_magic2(magic: int) -> None:
    with pytest.raises(errors.UnsupportedCodecError) as excinfo:
        codec.encode_message_set([(b"k", b"v")], magic=magic, compression=4)
    assert_same_error(excinfo, errors.unsupported_codec(4, magic))


def test_encode_unknown_codec() -> None:
    with pytest.raises(errors.UnsupportedCodecError) as excinfo:
        codec.encode_record_batch([(b"k", b"v")], compression=9)
    assert "9" in str(excinfo.value)


@pytest.mark.parametrize(
    "bad",
    [
        42,
        (b"k",),
        ("text key", b"v"),
        (b"k", "text value"),
        (b"k", b"v", "noon"),
        (b"k", b"v", 1.5),
        (b"k", b"v", 1, [(1, b"x")]),
        (b"k", b"v", 1, [("h", "text")]),
        (b"k", b"v", 1, [("h",)]),
        (b"k", b"v", 1, 7),
        (b"k", b"v", 1, [], "extra"),
        (b"k", b"v", 2**63),
    ],
)
def test_encode_bad_record_names_index(bad) -> None:
    records = [(b"ok", b"ok", 1), bad]
    with pytest.raises(errors.EncodeError) as excinfo:
        codec.encode_record_batch(records)
    assert str(excinfo.value).startswith("record 1: ")
    if not (isinstance(bad, tuple) and len(bad) == 4):
        with pytest.raises(errors.EncodeError) as excinfo:
            codec.encode_message_set(records, magic=1)
        assert str(excinfo.value).startswith("record 1: ")


@pytest.mark.parametrize(
    "option, value",
    [
        ("producer_epoch", 40_000),
        ("producer_id", 2**63),
        ("base_sequence", 2**31),
        ("partition_leader_epoch", -(2**31) - 1),
        ("base_offset", 2**63),
    ],
)
def test_encode_option_out_of_range_names_field(option: str, value: int) -> None:
    with pytest.raises(errors.EncodeError) as excinfo:
        codec.encode_record_batch([(b"k", b"v", 0)], **{option: value})
    assert option in str(excinfo.value)
