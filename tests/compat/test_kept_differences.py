"""The differences from the hosts' record readers the drop-ins keep on purpose, one test
each, for both hosts (the list, with why, is in tests/fuzz/atheris_compat.py's docstring;
everything else the drop-ins read exactly as their hosts, exception classes included)."""

from __future__ import annotations

import gzip
import struct
import zlib

import aiokafka.errors as aio_errors
import aiokafka.record.memory_records as aio_memory
import kafka.errors as k_errors
import kafka.record.memory_records as k_memory
import pytest

import kafkawire.compat.aiokafka as kc
import kafkawire.compat.kafka_python as kwkp
from kafkawire import codec

# (name, the host's own MemoryRecords, the drop-in's, the host's corrupt-record error)
HOSTS = [
    ("kafka-python", k_memory.MemoryRecords, kwkp.MemoryRecords, k_errors.CorruptRecordError),
    # aiokafka's pure-Python reader: its Cython one crashes on some damaged data
    ("aiokafka", aio_memory._MemoryRecordsPy, kc.MemoryRecords,
     aio_errors.CorruptRecordException),
]
IDS = [h[0] for h in HOSTS]


def read(memory_records, data) -> list:
    """Every record's (offset, key, value) of every batch, then the exception's class and
    message, if one ends the reading."""
    out = []
    try:
        m = memory_records(data)
        while m.has_next():
            batch = m.next_batch()
            if batch is None:
                break
            for r in batch:
                out.append((r.offset, r.key, r.value))
    except Exception as exc:  # noqa: BLE001 - the class and message are the result
        out.append((type(exc), str(exc)))
    return out


def v2_batch(n: int = 3) -> bytearray:
    """An uncompressed magic-2 batch of ``n`` records, as kafka-python's builder writes it."""
    builder = k_memory.MemoryRecordsBuilder(2, 0, 1 << 20)
    for i in range(n):
        builder.append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i, [])
    builder.close()
    return bytearray(builder.buffer())


def fix_v2_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, codec.crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.mark.parametrize("host, theirs, ours, corrupt", HOSTS, ids=IDS)
def test_record_attributes_with_the_high_bit_read_as_kafka_reads_them(host, theirs, ours,
                                                                       corrupt):
    # Kafka's record attributes are an int8 (unused, 0); both hosts read them as a varint,
    # so a set high bit makes them misread the rest of the record and raise
    buf = v2_batch()
    length0 = buf[61] >> 1  # zigzag varint of one byte: the first record's length
    buf[61 + 1 + length0 + 1] = 0x80  # the second record's attributes
    data = fix_v2_crc(buf)
    host_read = read(theirs, data)
    assert host_read[0] == (0, b"k0", b"v0") and host_read[-1][0] is corrupt
    assert read(ours, data) == [(i, b"k%d" % i, b"v%d" % i) for i in range(3)]


@pytest.mark.parametrize("host, theirs, ours, corrupt", HOSTS, ids=IDS)
def test_payload_past_the_decompression_limit_is_refused_before_it_is_inflated(
        host, theirs, ours, corrupt):
    buf = v2_batch(1)[:61]
    payload = gzip.compress(b"\0" * (codec.DEFAULT_MAX_DECOMPRESSED_SIZE + 1))
    buf += payload
    struct.pack_into(">i", buf, 8, 49 + len(payload))
    buf[22] |= 0x01  # gzip
    data = fix_v2_crc(buf)
    # the host inflates all of it, then finds zeros where a record should be: the same
    # class; the drop-in stops at the limit (a few kilobytes could ask for gigabytes)
    host_read, our_read = read(theirs, data), read(ours, data)
    assert host_read[-1][0] is corrupt and our_read[-1][0] is corrupt
    assert "max_decompressed_size" in our_read[-1][1]
    assert "max_decompressed_size" not in host_read[-1][1]


def wrapper_of(inner: bytes, magic: int = 1) -> bytes:
    """A gzip-compressed magic 0/1 wrapper message around ``inner`` (its CRC right)."""
    value = gzip.compress(inner)
    body = struct.pack(">bb", magic, 1) + (struct.pack(">q", 0) if magic else b"")
    body += struct.pack(">ii", -1, len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 9, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("host, theirs, ours, corrupt", HOSTS, ids=IDS)
def test_inner_set_whose_sizes_lead_back_ends_instead_of_looping(host, theirs, ours,
                                                                 corrupt, magic):
    # an inner message of size -12: the hosts' header walk stays where it is for ever
    # (not run here); the drop-in raises the host's corrupt-record error
    data = wrapper_of(struct.pack(">qi", 0, -12) + b"\0" * 20, magic)
    got = read(ours, data)
    assert got[-1][0] is corrupt and "lead back to" in got[-1][1]


def test_entry_sizes_that_lead_back_end_kafka_pythons_valid_bytes():
    # an entry of size -12 after a whole batch: kafka-python's valid_bytes() walks the
    # same place for ever (not run here); the drop-in raises its corrupt-record error
    data = bytes(fix_v2_crc(v2_batch())) + struct.pack(">qi", 5, -12) + b"\0" * 30
    m = kwkp.MemoryRecords(data)
    with pytest.raises(k_errors.CorruptRecordError, match="lead back to"):
        m.valid_bytes()
