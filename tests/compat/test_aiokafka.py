"""kafkawire.compat.aiokafka: kafkawire's codec as aiokafka's record layer.

Proof by comparison: on the same bytes, aiokafka's own classes (captured before anything
is installed) and kafkawire's give the same batches, records, CRC results, positions and
exception types, for everything aiokafka's consumer and producer call; builders of each
side write bytes the other side's reader reads identically.  End to end, aiokafka's
producer and consumer on Tansu read back the same data with and without the codec, and
confluent-kafka reads what the patched aiokafka writes, and the other way round.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import struct
import subprocess
import sys
import types
import uuid

import aiokafka.consumer.fetcher as aio_fetcher
import aiokafka.errors as aio_errors
import aiokafka.producer.message_accumulator as aio_accumulator
import aiokafka.producer.producer as aio_producer
import aiokafka.record as aio_record
import aiokafka.record.control_record as aio_control
import aiokafka.record.default_records as aio_default
import aiokafka.record.legacy_records as aio_legacy
import aiokafka.record.memory_records as aio_memory
import pytest
from aiokafka.structs import TopicPartition
from param_ids import stable_id

from kafkawire import codec
from kafkawire.compat import aiokafka as kc

# aiokafka's own selected classes (Cython here), taken before any install.
ORIG_MEMORY = aio_memory.MemoryRecords
# aiokafka's Cython MemoryRecords (0.14) misreads a magic 1 compressed set that follows a
# magic 0 compressed set in one buffer (relative offsets left unshifted, a bug); its
# pure-Python reader is the reference for such mixed buffers.
PY_MEMORY = aio_memory._MemoryRecordsPy
ORIG_PARTITION_RECORDS = aio_fetcher.PartitionRecords
ORIG_DEFAULT_BUILDER = aio_default.DefaultRecordBatchBuilder
ORIG_LEGACY_BUILDER = aio_legacy.LegacyRecordBatchBuilder
ORIG_CONTROL = aio_control.ControlRecord

TP = TopicPartition("topic", 3)


@pytest.fixture(autouse=True)
def _always_uninstall():
    yield
    kc.uninstall()


# ---- data --------------------------------------------------------------------------------


def sample(n: int = 12, headers: bool = True) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % i
        value = None if i % 5 == 3 else (b"x" * 300 if i == 6 else b"value-%d" % i)
        hdrs = [("h", b"v%d" % i), ("null", None)][: i % 3] if headers else []
        out.append((key, value, 1_700_000_000_000 + i * 3, hdrs))
    return out


def v2(records, base, **kw) -> bytes:
    return codec.encode_record_batch(records, base_offset=base, **kw)


def legacy(records, base, magic, compression=0) -> bytes:
    return codec.encode_message_set([r[:3] for r in records], magic=magic, base_offset=base,
                                    compression=compression)


def control(base, pid, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    return codec.encode_record_batch([(key, b"\x00\x00\x00\x00\x00\x00", 5)], base_offset=base,
                                     is_control=True, is_transactional=True, producer_id=pid,
                                     producer_epoch=0)


CODECS = [0, 1, 2, 3, 4]
FORMATS = [(2, c) for c in CODECS] + [(1, c) for c in (0, 1, 2, 3)] + [(0, c) for c in (0, 1, 2)]


def one_set(magic: int, codec_id: int, base: int = 100, n: int = 12) -> bytes:
    if magic == 2:
        return v2(sample(n), base, compression=codec_id)
    return legacy(sample(n, headers=False), base, magic, codec_id)


def mixed() -> bytes:
    """A fetch-like buffer: every magic, compressed and plain, transactions and markers."""
    parts, base = [], 0
    for magic, codec_id in [(0, 0), (0, 1), (1, 0), (1, 2), (2, 0), (2, 3)]:
        parts.append(one_set(magic, codec_id, base, 5))
        base += 5
    parts.append(v2(sample(4), base, is_transactional=True, producer_id=7, producer_epoch=1))
    parts.append(control(base + 4, 7, commit=True))
    base += 5
    parts.append(v2(sample(3), base, is_transactional=True, producer_id=8, producer_epoch=1))
    parts.append(control(base + 3, 8, commit=False))
    base += 4
    parts.append(v2(sample(3), base, compression=4))
    return b"".join(parts)


# ---- reading through a record layer ------------------------------------------------------

DEFAULT_PROPS = ("base_offset", "magic", "crc", "attributes", "compression_type",
                 "timestamp_type", "is_transactional", "is_control_batch", "last_offset_delta",
                 "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                 "base_sequence", "next_offset")
LEGACY_PROPS = ("next_offset", "is_control_batch", "is_transactional", "producer_id")


def walk(memory_records, data) -> list:
    """Everything aiokafka's consumer reads from a MemoryRecords, errors as their types."""
    out: list = []
    try:
        m = memory_records(data)
        out.append(("size", m.size_in_bytes()))
        while m.has_next():
            b = m.next_batch()
            props = DEFAULT_PROPS if hasattr(b, "base_sequence") else LEGACY_PROPS
            out.append(tuple(getattr(b, p) for p in props))
            out.append(("crc ok", b.validate_crc()))
            out.append([(r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                         tuple(r.headers), r.checksum) for r in b])
        out.append(("then", m.next_batch()))
    except Exception as exc:  # noqa: BLE001 - the type is the result
        out.append(("error", type(exc)))
    return out


def content(data, memory_records=ORIG_MEMORY) -> list:
    """walk() without what differs between equally valid encodings: sizes and CRCs."""
    out = []
    for x in walk(memory_records, data):
        if isinstance(x, tuple) and len(x) == len(DEFAULT_PROPS):
            x = x[:2] + x[3:]
        if not (isinstance(x, tuple) and x[0] == "size"):
            out.append(x)
    return out


def same(data, ref=ORIG_MEMORY) -> list:
    theirs = walk(ref, data)
    ours = walk(kc.MemoryRecords, data)
    assert ours == theirs
    return ours


@pytest.mark.parametrize("magic, codec_id", FORMATS, ids=[f"magic{m}-codec{c}" for m, c in FORMATS])
def test_every_format_reads_the_same(magic, codec_id):
    got = same(one_set(magic, codec_id))
    assert sum(len(x) for x in got if isinstance(x, list)) == 12


def test_mixed_buffer_control_and_transactional_batches():
    got = same(mixed(), PY_MEMORY)
    assert any(isinstance(x, tuple) and len(x) == 15 and x[7] for x in got)  # control seen


def test_partial_trailing_batch_and_truncated_input():
    data = mixed()
    for cut in (1, 7, 11, 12, 40, 61, len(data) // 2, len(data) - 1):
        same(data[:cut], PY_MEMORY)
    assert same(b"") == [("size", 0), ("then", None)]


def test_corrupt_crc_is_reported_and_still_decodes():
    data = bytearray(mixed())
    data[-5] ^= 0xFF  # inside the last (zstd) batch: bad CRC, then a corrupt payload
    plain = bytearray(one_set(2, 0) + one_set(1, 0, 112) + one_set(0, 0, 124))
    plain[80] ^= 0x01  # a byte of a record value in the first batch
    got = same(bytes(plain), PY_MEMORY)  # the Cython reader misreads this mix too
    assert ("crc ok", False) in got
    # aiokafka lets the compression library's own exception out: so does the drop-in
    # (aiokafka's own class reads what kafkawire's decoder refuses)
    got = same(bytes(data), PY_MEMORY)
    assert got[-1][0] == "error" and got[-1][1] is not aio_errors.CorruptRecordException


def test_too_small_entry_raises_every_time():
    bad = one_set(2, 0) + struct.pack(">qi", 200, 5) + b"\x00" * 20
    got = same(bad)
    assert got[-1] == ("error", aio_errors.CorruptRecordException)
    m = kc.MemoryRecords(bad)
    m.next_batch()
    for _ in range(2):
        with pytest.raises(aio_errors.CorruptRecordException):
            m.next_batch()


def test_corrupt_compressed_payload_is_aiokafkas_own_exception():
    import gzip

    data = bytearray(one_set(2, 1))
    data[-3] ^= 0xFF  # the gzip trailer
    # aiokafka lets gzip.BadGzipFile out here: so does the drop-in, which is what
    # aiokafka's users' except clauses see
    for mr in (PY_MEMORY, kc.MemoryRecords):
        batch = mr(bytes(data)).next_batch()
        assert batch.validate_crc() is False
        with pytest.raises(gzip.BadGzipFile):
            list(batch)
    theirs, ours = read_errors(bytes(data))
    assert ours == theirs and theirs[0][0] is gzip.BadGzipFile


def _with_codec(magic: int, codec_id: int) -> bytes:
    """A set whose compression attribute says ``codec_id`` (its payload gzip's)."""
    data = bytearray(one_set(magic, 1))
    at = 22 if magic == 2 else 17
    data[at] = (data[at] & ~0x07) | codec_id
    return bytes(data)


def read_errors(data) -> list:
    """The exception (type, message) of iterating the first batch and of the consumer's
    PartitionRecords, through aiokafka's pure-Python reader and kafkawire's."""
    out = []
    for mr, pr in ((PY_MEMORY, ORIG_PARTITION_RECORDS), (kc.MemoryRecords, kc.PartitionRecords)):
        got = []
        for read in (lambda: list(mr(data).next_batch()),
                     lambda: list(pr(TP, mr(data), None, 0, None, None, False, 0))):
            try:
                read()
                got.append(None)
            except Exception as exc:  # noqa: BLE001 - the type and message are compared
                got.append((type(exc), str(exc)))
        out.append(got)
    return out


@pytest.mark.parametrize("magic, codec_id", [(2, 6), (2, 7), (1, 4), (0, 4), (1, 5)])
def test_unknown_codec_is_aiokafkas_unsupported_codec_error(magic, codec_id):
    theirs, ours = read_errors(_with_codec(magic, codec_id))
    assert ours == theirs
    assert theirs[0] == (aio_errors.UnsupportedCodecError,
                         f"UnsupportedCodecError: Unknown compression codec {codec_id:#04x}")
    with pytest.raises(aio_errors.UnsupportedCodecError):
        list(ORIG_MEMORY(_with_codec(magic, codec_id)).next_batch())


@pytest.mark.parametrize("magic, codec_id, name", [(2, 4, "zstd"), (2, 2, "snappy"),
                                                   (1, 3, "lz4"), (0, 1, "gzip")])
def test_a_codec_library_aiokafka_lacks_is_its_error(monkeypatch, magic, codec_id, name):
    # kafkawire's decoder may have the library; the drop-in still refuses as aiokafka does
    import aiokafka.codec as aio_codec

    monkeypatch.setattr(aio_codec, f"has_{name}", lambda: False)
    theirs, ours = read_errors(one_set(magic, codec_id))
    assert ours == theirs
    assert theirs[1] == (aio_errors.UnsupportedCodecError, f"UnsupportedCodecError: "
                         f"Libraries for {name} compression codec not found")


# ---- magic 0/1 wrappers: offsets not yet assigned, a null value -------------------------


def built_wrapper(magic: int, codec_id: int, offset: int, n: int = 10) -> bytes:
    """A compressed set as aiokafka's producer builds it (inner offsets 0..n-1), its
    wrapper's offset then set to ``offset`` (outside every CRC)."""
    builder = ORIG_LEGACY_BUILDER(magic, codec_id, 1 << 20)
    for i, (key, value, ts, _h) in enumerate(sample(n, headers=False)):
        assert builder.append(i, ts, key, value) is not None
    buf = bytearray(builder.build())
    assert buf[17] & 7 == codec_id  # one wrapper, compressed
    struct.pack_into(">q", buf, 0, offset)
    return bytes(buf)


# (aiokafka writes no lz4 in magic 0, KAFKA-3160)
@pytest.mark.parametrize("magic, codec_id", [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3)])
@pytest.mark.parametrize("offset", [0, 4, 8, 9, 10, 100, -1, -(2**62)])
def test_wrapper_without_assigned_offsets_keeps_its_inner_offsets(magic, codec_id, offset):
    # KIP-31: a magic 1 wrapper's offset is its last inner one's; below its last relative
    # offset (9 here) none was assigned, and aiokafka keeps the inner offsets.  (Near
    # -2**63 aiokafka's int64 subtraction wraps around: differs, not followed.)
    data = built_wrapper(magic, codec_id, offset)
    for ref in (ORIG_MEMORY, PY_MEMORY):
        got = same(data, ref)
        for fetch_offset in (0, 3):
            same_consumer(data, ref, fetch_offset=fetch_offset)
    offsets = [r[0] for r in got[3]]
    if magic == 0 or offset < 9:
        assert offsets == list(range(10))
    else:
        assert offsets == list(range(offset - 9, offset + 1))


def null_value_wrapper(magic: int, codec_id: int) -> bytes:
    buf = bytearray(codec.encode_message_set([(None, None, 0)], magic=magic, base_offset=100))
    buf[17] = codec_id
    struct.pack_into(">I", buf, 12, codec.crc32(memoryview(buf)[16:]))
    return bytes(buf)


@pytest.mark.parametrize("magic, codec_id", [(0, 1), (0, 3), (1, 1), (1, 2), (1, 4), (1, 6)])
def test_compressed_wrapper_with_null_value_is_aiokafkas_error_in_its_words(magic, codec_id):
    # refused before its codec is looked at: an unknown codec too
    data = null_value_wrapper(magic, codec_id)
    theirs, ours = read_errors(data)
    assert ours == theirs
    assert theirs == [(aio_errors.CorruptRecordException,
                       "[Error 2] CorruptRecordException: Value of compressed message is None")] * 2
    for ref in (ORIG_MEMORY, PY_MEMORY):
        same(data, ref)
        same_consumer(data, ref)


def test_validate_after_iteration_asserts_like_aiokafka():
    for mr in (ORIG_MEMORY, kc.MemoryRecords):
        b = mr(one_set(2, 0)).next_batch()
        list(b)
        with pytest.raises(AssertionError):
            b.validate_crc()


def test_control_record_parse():
    for key in (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01", b"\x00\x01\xff\xff"):
        assert kc.ControlRecord.parse(key) == ORIG_CONTROL.parse(key)
        assert ORIG_CONTROL.parse(key) == kc.ControlRecord.parse(key)
    assert kc.ABORT_MARKER == aio_control.ABORT_MARKER
    # a key that is not 4 bytes: aiokafka's own exceptions, which its callers see
    for parse in (ORIG_CONTROL.parse, kc.ControlRecord.parse):
        with pytest.raises(struct.error):
            parse(b"\x00")
        with pytest.raises(TypeError):
            parse(None)


# ---- the consumer's PartitionRecords -----------------------------------------------------


def drain(pr_class, mr_class, data, *, fetch_offset=0, isolation=0, aborted=None, step=None,
          kd=None, vd=None):
    """What FetchResult.getall/getone see: records, positions and the error, if any."""
    pr = pr_class(TP, mr_class(data), aborted, fetch_offset, kd, vd, True, isolation)
    seen = [("pos", pr.next_fetch_offset)]
    try:
        if step is None:
            seen.append([tuple(vars(r).values()) for r in pr])
        else:
            while True:
                chunk = []
                for r in pr:
                    chunk.append(tuple(vars(r).values()))
                    if len(chunk) >= step:
                        break
                seen.append((chunk, pr.next_fetch_offset))
                if len(chunk) < step:
                    break
    except Exception as exc:  # noqa: BLE001
        seen.append(("error", type(exc), pr.next_fetch_offset))
    seen.append(("end", pr.next_fetch_offset))
    return seen


def same_consumer(data, ref=ORIG_MEMORY, **kw):
    theirs = drain(ORIG_PARTITION_RECORDS, ref, data, **kw)
    assert drain(kc.PartitionRecords, kc.MemoryRecords, data, **kw) == theirs
    # aiokafka's own PartitionRecords over kafkawire's MemoryRecords agrees too
    assert drain(ORIG_PARTITION_RECORDS, kc.MemoryRecords, data, **kw) == theirs
    return theirs


@pytest.mark.parametrize("step", [None, 1, 4, 7])
def test_partition_records_positions(step):
    same_consumer(mixed(), PY_MEMORY, step=step)
    same_consumer(mixed(), PY_MEMORY, fetch_offset=12, step=step)  # inside compressed sets


@pytest.mark.parametrize("codec_id", CODECS)
def test_partition_records_log_append_time_and_every_codec(codec_id):
    # the records made straight from the bytes: LogAppendTime's batch timestamp and type,
    # headers, null keys and values, sizes, from inside a batch on
    data = (v2(sample(7), 0, compression=codec_id, log_append_time=True, timestamp=1_234)
            + v2(sample(5), 7, compression=codec_id))
    got = same_consumer(data, step=3)
    same_consumer(data, fetch_offset=4)
    assert {r[4] for chunk, _pos in got[1:-1] for r in chunk if r[2] < 7} == {1}


def test_records_iterator_set_from_outside_is_heard():
    # aiokafka's own fetcher tests put records straight into _records_iterator over a
    # records object that is a Mock: neither side reads the Mock then
    from unittest import mock

    seen = []
    for pr_class in (ORIG_PARTITION_RECORDS, kc.PartitionRecords):
        pr = pr_class(TP, mock.Mock(), [], 5, None, None, False, 0)
        pr._records_iterator = iter(["a", "b", "c"])
        first = next(pr)
        result = aio_fetcher.FetchResult(TP, assignment=mock.Mock(), partition_records=pr,
                                         backoff=0)
        result.check_assignment = lambda tp: True
        result._update_position = lambda: None
        seen.append((first, result.getall(), pr.next_fetch_offset))
    assert seen[0] == seen[1] == ("a", ["b", "c"], 5)


def test_records_are_whatever_consumer_record_the_fetcher_names(monkeypatch):
    # the codec makes aiokafka's dataclass through its own __init__; another class (a
    # patched or wrapped ConsumerRecord) is called as aiokafka's fetcher calls it
    import collections

    assert kc._plain_init(aio_fetcher.ConsumerRecord) is aio_fetcher.ConsumerRecord.__init__
    other = collections.namedtuple("Other", list(aio_fetcher.ConsumerRecord.__dataclass_fields__))
    assert kc._plain_init(other) is None
    monkeypatch.setattr(aio_fetcher, "ConsumerRecord", other)
    data = one_set(2, 0, 0, 6)
    pr = kc.PartitionRecords(TP, kc.MemoryRecords(data), None, 2, None, None, True, 0)
    got = list(pr)
    assert [type(r) for r in got] == [other] * 4 and [r.offset for r in got] == [2, 3, 4, 5]
    theirs = list(ORIG_PARTITION_RECORDS(TP, ORIG_MEMORY(data), None, 2, None, None, True, 0))
    assert got == theirs


def test_partition_records_read_committed_skips_aborted():
    got = same_consumer(mixed(), PY_MEMORY, isolation=1, aborted=[(8, 35)])
    offsets = [r[2] for r in got[1]]
    assert 30 in offsets and not {35, 36, 37} & set(offsets)


def test_partition_records_bad_crc_after_good_batches():
    data = bytearray(one_set(2, 0, 0, 5) + one_set(2, 0, 5, 5))
    data[len(data) - 20] ^= 0x01
    got = same_consumer(bytes(data), step=3)
    assert got[-2][0] == "error"


def test_partition_records_deserializer_error_after_earlier_records():
    def kd(key):
        if key == b"key-3":
            raise ValueError("bad key")
        return key

    same_consumer(one_set(2, 0, 0, 8), kd=kd, vd=lambda v: v, step=2)


def _compacted(batch: bytes, last_delta: int) -> bytes:
    """``batch`` whose last offset delta says its last records were compacted away."""
    out = bytearray(batch)
    struct.pack_into(">i", out, 23, last_delta)
    struct.pack_into(">I", out, 17, codec.crc32c(bytes(out[21:])))
    return bytes(out)


def _emptied(base: int, last_delta: int) -> bytes:
    """A batch at ``base`` whose records were all compacted away."""
    out = bytearray(v2([(b"k", b"v", 5, [])], base))
    del out[61:]
    struct.pack_into(">i", out, 8, 61 - 12)
    struct.pack_into(">i", out, 57, 0)
    return _compacted(bytes(out), last_delta)


def small_batches() -> bytes:
    """What a producer with linger 0 writes: a batch per record or two; with compacted
    tails, an emptied batch (offsets 8-9) and a compressed one among them."""
    parts, base = [], 0
    for i in range(12):
        if i == 4:
            parts.append(_emptied(base, 1))
            base += 2
        n = 1 + i % 2
        records = [(b"k%d" % o, b"v%d" % o, 1_700_000_000_000 + o, [("h", b"%d" % o)][: o % 2])
                   for o in range(base, base + n)]
        batch = v2(records, base, compression=3 if i == 5 else 0)
        if i in (3, 8):  # two more offsets the batch covers, compacted away
            batch = _compacted(batch, n + 1)
            n += 2
        parts.append(batch)
        base += n
    return b"".join(parts)


@pytest.mark.parametrize("step", [None, 1, 2, 5])
@pytest.mark.parametrize("fetch_offset", [0, 1, 6])
def test_small_batches_read_together_like_aiokafka(step, fetch_offset):
    data = small_batches()
    same_consumer(data, step=step, fetch_offset=fetch_offset)
    same_consumer(data, step=step, fetch_offset=fetch_offset, isolation=1, aborted=[(8, 3)])
    # a deserializer failing at the first record after an emptied batch (10) and after a
    # compacted tail (19), where aiokafka has moved to the batch before's next offset,
    # and inside a batch (12)
    for bad_value in (b"v10", b"v12", b"v19"):
        def vd(value, bad_value=bad_value):
            if value == bad_value:
                raise ValueError("bad value")
            return value

        got = same_consumer(data, step=step, fetch_offset=fetch_offset, vd=vd)
        assert got[-2][0] == "error"
    overlapping = v2(sample(2), 0) + v2(sample(2), 1) + v2(sample(3), 2)
    same_consumer(overlapping, step=step, fetch_offset=fetch_offset)
    bad = bytearray(data)
    bad[12 + struct.unpack_from(">i", data, 8)[0] + 70] ^= 0x01  # in the second batch
    same_consumer(bytes(bad), step=step, fetch_offset=fetch_offset)
    # uncompressed magic 1 then magic 0 messages, one record each, read as runs too
    plain = (legacy(sample(6, headers=False), 0, 1) + legacy(sample(4, headers=False), 6, 0)
             + v2(sample(2), 10))
    same_consumer(plain, PY_MEMORY, step=step, fetch_offset=fetch_offset)
    same_consumer(plain, PY_MEMORY, step=step, fetch_offset=fetch_offset,
                  vd=lambda value: value[:-1] + b"!" if value != b"value-2" else 1 / 0)
    bad, at = bytearray(plain), 0
    for _ in range(3):
        at += 12 + struct.unpack_from(">i", plain, at + 8)[0]
    bad[at + 30] ^= 0x01  # inside the fourth message
    same_consumer(bytes(bad), PY_MEMORY, step=step, fetch_offset=fetch_offset)


def getall_run(pr_class, mr_class, data, max_records, *, fetch_offset=0, vd=None):
    """aiokafka's FetchResult.getall until the result is used up: each call's records,
    the consumed position and whether more is left, then the error, if any."""
    from aiokafka.consumer.subscription_state import Assignment

    async def made():  # aiokafka creates its assignment's futures on the running loop
        return Assignment([TP])

    assignment = asyncio.run(made())
    assignment.state_value(TP).seek(fetch_offset)
    pr = pr_class(TP, mr_class(data), None, fetch_offset, None, vd, True, 0)
    result = aio_fetcher.FetchResult(TP, assignment=assignment, partition_records=pr, backoff=0)
    seen = []
    while result.has_more():
        try:
            got = result.getall(max_records)
        except Exception as exc:  # noqa: BLE001
            seen.append(("error", type(exc), assignment.state_value(TP).position))
            break
        seen.append(([tuple(vars(r).values()) for r in got],
                     assignment.state_value(TP).position, result.has_more()))
    return seen


@pytest.mark.parametrize("max_records", [None, 1, 4, 5, 1000])
def test_fetch_result_getall_like_aiokafka(max_records):
    data = mixed()
    bad = bytearray(one_set(2, 0, 0, 5) + one_set(2, 0, 5, 5))
    bad[len(bad) - 20] ^= 0x01

    def vd(value):
        if value.endswith(b"-3"):
            raise ValueError("bad value")
        return value

    for buf, kw in [(data, {}), (data, {"fetch_offset": 12}), (bytes(bad), {}),
                    (one_set(2, 0, 0, 8), {"vd": vd})]:
        theirs = getall_run(ORIG_PARTITION_RECORDS, PY_MEMORY, buf, max_records, **kw)
        kc.install()
        try:
            assert aio_fetcher.FetchResult.getall is not kc._ORIGINAL_GETALL
            ours = getall_run(kc.PartitionRecords, kc.MemoryRecords, buf, max_records, **kw)
        finally:
            kc.uninstall()
        assert aio_fetcher.FetchResult.getall is kc._ORIGINAL_GETALL
        assert ours == theirs and ours


def test_partition_records_gaps_and_empty_batches():
    # a compacted batch: offsets 0, 2, 5 of 0..9; then a batch with no records left
    records = [(b"k", b"v%d" % i, 5, []) for i in range(3)]
    batch = bytearray(v2(records, 0))
    empty = bytearray(v2(records[:1], 10))
    struct.pack_into(">i", empty, 23, 4)  # lastOffsetDelta 4: next offset 15
    struct.pack_into(">i", empty, 57, 0)  # no records
    del empty[61:]
    struct.pack_into(">i", empty, 8, 61 - 12)
    struct.pack_into(">I", empty, 17, codec.crc32c(bytes(empty[21:])))
    same_consumer(bytes(batch) + bytes(empty), step=2)
    assert drain(kc.PartitionRecords, kc.MemoryRecords, bytes(empty))[-1] == ("end", 15)


# ---- builders ----------------------------------------------------------------------------


def fill(builder, records, offsets=None):
    meta = []
    for i, (key, value, ts, headers) in enumerate(records):
        offset = i if offsets is None else offsets[i]
        m = builder.append(offset, ts, key, value, headers)
        meta.append(None if m is None else (m.offset, m.size, m.timestamp, m.crc))
        meta.append(builder.size())
    return meta


@pytest.fixture
def frozen_gzip_clock(monkeypatch):
    # the gzip header carries the build time (aiokafka compresses through GzipFile)
    monkeypatch.setattr(gzip, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))


def outcome(fn):
    """What a call gives: its bytes, or the exception's type and message."""
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - the exception itself is what is compared
        return (type(exc), str(exc))
    return bytes(out) if isinstance(out, (bytes, bytearray)) else out


@pytest.mark.parametrize("codec_id", CODECS)
@pytest.mark.parametrize("batch_size", [1 << 20, 600])
def test_default_builder_both_ways(codec_id, batch_size, frozen_gzip_clock):
    records = sample(15)
    args = (2, codec_id, 1, 42, 3, 10, batch_size)
    theirs, ours = ORIG_DEFAULT_BUILDER(*args), kc.DefaultRecordBatchBuilder(*args)
    assert fill(ours, records) == fill(theirs, records)
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence) == (42, 3, 10)
    ours.set_producer_state(43, 4, 11)
    theirs.set_producer_state(43, 4, 11)
    # the same bytes (framing, attributes, CRC) as aiokafka writes, for every codec
    a, b = outcome(theirs.build), outcome(ours.build)
    assert b == a
    if isinstance(a, bytes):
        assert ours.size() == theirs.size() == len(b)
        assert walk(kc.MemoryRecords, a) == walk(ORIG_MEMORY, a)
    for key, value, _ts, headers in records:
        assert (kc.DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
                == ORIG_DEFAULT_BUILDER.estimate_size_in_bytes(key, value, headers))
        assert (ours.size_in_bytes(3, 1_700_000_000_100, key, value, headers)
                == theirs.size_in_bytes(3, 1_700_000_000_100, key, value, headers))


def test_default_builder_edge_cases():
    args = (2, 0, 0, -1, -1, -1, 1 << 20)
    # an empty batch, and appended offsets that are not 0, 1, 2...
    assert bytes(kc.DefaultRecordBatchBuilder(*args).build()) == bytes(
        ORIG_DEFAULT_BUILDER(*args).build())
    records = sample(4)
    theirs, ours = ORIG_DEFAULT_BUILDER(*args), kc.DefaultRecordBatchBuilder(*args)
    assert fill(ours, records, [0, 1, 5, 9]) == fill(theirs, records, [0, 1, 5, 9])
    assert bytes(ours.build()) == bytes(theirs.build())


# Inputs aiokafka's builders take or refuse in their own ways (its Cython and pure-Python
# builders differ among themselves): with the drop-in installed the same happens.
BAD_APPENDS = [
    ("1", 5, b"k", b"v", []), (None, 5, b"k", b"v", []), (0, 5.0, b"k", b"v", []),
    (0, "5", b"k", b"v", []), (0, 5, "k", b"v", []), (0, 5, b"k", 7, []),
    (0, 5, b"k", b"v", [("a", "s")]), (0, 5, b"k", b"v", [(b"a", b"s")]),
    (0, 5, b"k", b"v", None), (0, 5, bytearray(b"k"), memoryview(b"v"), []),
    (0, 1 << 64, b"k", b"v", []), (0, -(1 << 63), b"k", b"v", []), (-1, 5, b"k", b"v", []),
]


def steps(builder_cls, init_args, appends):
    """Each step's outcome: construction, every append (its metadata), build, size."""
    out = []
    try:
        b = builder_cls(*init_args)
    except Exception as exc:  # noqa: BLE001
        return [(type(exc), str(exc))]
    for args in appends:
        m = outcome(lambda args=args: b.append(*args))
        out.append(m if m is None or isinstance(m, tuple) else (m.offset, m.size, m.timestamp, m.crc))
    out.append(outcome(b.build))
    out.append(outcome(b.size))
    return out


@pytest.mark.parametrize("key, value, headers", [
    (b"k", b"v" * 100, []), (None, None, []), (bytearray(b"k"), memoryview(b"v"), []),
    (b"k", b"v", [("h", b"x"), ("\u00e9t\u00e9", None)]), (b"k", b"v", [(b"h", b"x")]),
    ("k", b"v", []), (b"k", 7, []), (b"k", b"v", None)])
def test_estimate_size_like_aiokafka(key, value, headers):
    # aiokafka's producer asks it for every record: the same sizes, the same errors
    assert outcome(lambda: kc.DefaultRecordBatchBuilder.estimate_size_in_bytes(
        key, value, headers)) == outcome(
        lambda: ORIG_DEFAULT_BUILDER.estimate_size_in_bytes(key, value, headers))
    assert kc.DefaultRecordBatchBuilder.size_of(b"k", b"v", []) == ORIG_DEFAULT_BUILDER.size_of(
        b"k", b"v", [])


@pytest.mark.parametrize("bad", BAD_APPENDS, ids=stable_id)
def test_default_builder_same_errors(bad):
    args = (2, 0, 0, -1, -1, -1, 1 << 20)
    good = (0, 1, b"k", b"v", [])
    for appends in ([bad], [good, (1,) + bad[1:] if bad[0] == 0 else bad]):
        assert steps(kc.DefaultRecordBatchBuilder, args, appends) == steps(
            ORIG_DEFAULT_BUILDER, args, appends)


@pytest.mark.parametrize("codec_id", [5, 7])
def test_unknown_codec_same_error(codec_id):
    appends = [(0, 1, b"k", b"v", [])]
    args = (2, codec_id, 0, -1, -1, -1, 1 << 20)
    assert steps(kc.DefaultRecordBatchBuilder, args, appends) == steps(
        ORIG_DEFAULT_BUILDER, args, appends)
    for magic in (0, 1):
        appends = [(0, 1, b"k", b"v")]
        assert steps(kc.LegacyRecordBatchBuilder, (magic, codec_id, 1000), appends) == steps(
            ORIG_LEGACY_BUILDER, (magic, codec_id, 1000), appends)


LEGACY_CASES = [(m, c) for m in (0, 1) for c in CODECS]


@pytest.mark.parametrize("magic, codec_id", LEGACY_CASES)
def test_legacy_builder_both_ways(magic, codec_id, frozen_gzip_clock):
    records = sample(10, headers=False)
    theirs = ORIG_LEGACY_BUILDER(magic, codec_id, 1 << 20)
    ours = kc.LegacyRecordBatchBuilder(magic, codec_id, 1 << 20)
    assert fill(ours, records) == fill(theirs, records)
    # aiokafka's bytes, or its exception (lz4 in magic 0, zstd before magic 2)
    a, b = outcome(theirs.build), outcome(ours.build)
    assert b == a
    assert ours.size() == theirs.size()
    full_theirs = ORIG_LEGACY_BUILDER(magic, codec_id, 200)
    full_ours = kc.LegacyRecordBatchBuilder(magic, codec_id, 200)
    assert fill(full_ours, records) == fill(full_theirs, records)
    assert outcome(full_ours.build) == outcome(full_theirs.build)
    for m in (magic, 5):
        assert (outcome(lambda m=m: kc.LegacyRecordBatchBuilder.record_overhead(m))
                == outcome(lambda m=m: ORIG_LEGACY_BUILDER.record_overhead(m)))


LEGACY_BAD = [("1", 5, b"k", b"v"), (0, 5.0, b"k", b"v"), (0, "5", b"k", b"v"),
              (0, 5, "k", b"v"), (0, 5, b"k", 7), (0, None, b"k", b"v"),
              (0, 5, bytearray(b"k"), memoryview(b"v")), (0, -5, b"k", b"v"),
              (0, 1 << 70, b"k", b"v")]


# (magic 2 in a legacy builder: aiokafka's Cython one writes uninitialised bytes there, so
# its output differs run to run; the drop-in hands such a builder to aiokafka's own)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("bad", LEGACY_BAD, ids=stable_id)
def test_legacy_builder_same_errors(magic, bad, frozen_gzip_clock):
    for appends in ([bad], [(0, 1, b"k", b"v"), (1,) + bad[1:] if bad[0] == 0 else bad]):
        # a record without a timestamp gets the wall clock's (aiokafka's Cython builder
        # reads it in C): the two builds may fall in two milliseconds, so try again
        for _attempt in range(5):
            ours = steps(kc.LegacyRecordBatchBuilder, (magic, 1, 1000), appends)
            theirs = steps(ORIG_LEGACY_BUILDER, (magic, 1, 1000), appends)
            if ours == theirs or bad[1] is not None:
                break
        assert ours == theirs


@pytest.mark.skipif(bool(os.environ.get("AIOKAFKA_NO_EXTENSIONS")), reason="this is that run")
def test_builders_match_pure_python_aiokafka_too():
    # aiokafka without its Cython extensions selects its pure-Python builders, whose
    # messages differ from the Cython ones: the drop-in follows whichever is selected
    env = dict(os.environ, AIOKAFKA_NO_EXTENSIONS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", "builder or unknown_codec"],
        env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# ---- install / uninstall -----------------------------------------------------------------

PLACES = [
    (aio_memory, "MemoryRecords"), (aio_record, "MemoryRecords"),
    (aio_default, "DefaultRecordBatch"), (aio_default, "DefaultRecordBatchBuilder"),
    (aio_legacy, "LegacyRecordBatch"), (aio_legacy, "LegacyRecordBatchBuilder"),
    (aio_memory, "DefaultRecordBatch"), (aio_memory, "LegacyRecordBatch"),
    (aio_control, "ControlRecord"), (aio_control, "ABORT_MARKER"),
    (aio_fetcher, "MemoryRecords"), (aio_fetcher, "ControlRecord"),
    (aio_fetcher, "ABORT_MARKER"), (aio_fetcher, "PartitionRecords"),
    (aio_accumulator, "DefaultRecordBatchBuilder"),
    (aio_producer, "DefaultRecordBatchBuilder"), (aio_producer, "DefaultRecordBatch"),
]


def test_install_uninstall_installed():
    before = {(m.__name__, n): getattr(m, n) for m, n in PLACES}
    assert not kc.installed()
    kc.install(builders=True)
    kc.install()  # twice is harmless
    assert kc.installed()
    for m, n in PLACES:
        assert getattr(m, n) is getattr(kc, n), (m.__name__, n)
    kc.uninstall()
    assert not kc.installed()
    assert {(m.__name__, n): getattr(m, n) for m, n in PLACES} == before
    for (name, n), obj in before.items():
        assert getattr(sys.modules[name], n) is obj
    kc.uninstall()  # also harmless


def test_environment_opt_in():
    code = ("import kafkawire.compat.aiokafka as k, aiokafka.consumer.fetcher as f;"
            "print(k.installed(), f.MemoryRecords is k.MemoryRecords)")
    env = dict(os.environ, KAFKAWIRE_PATCH_AIOKAFKA="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["True", "True"]


# ---- end to end on Tansu -----------------------------------------------------------------


def create_topic(bootstrap: str, partitions: int = 2) -> str:
    from kafkawire.client.cluster import Cluster
    from kafkawire.client.config import Config
    from kafkawire.protocol import apis

    topic = f"compat-aio-{uuid.uuid4().hex[:8]}"
    create = apis.get("CreateTopics")
    cluster = Cluster(Config.client(bootstrap_servers=bootstrap))
    try:
        cluster.bootstrap(15)
        req = create.Request(topics=[create.Request.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=15000)
        assert cluster.request(None, create, req, 15).topics[0].error_code == 0
        assert cluster.partitions_for(topic, 15) == list(range(partitions))
    finally:
        cluster.close()
    return topic


E2E = [(None if i % 7 == 0 else b"k%d" % i, None if i % 11 == 5 and i % 7 else b"v%d" % i * (i % 9),
        [("h", b"%d" % i)] if i % 3 else []) for i in range(300)]


async def aio_produce(bootstrap, topic, compression=None):
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression,
                         linger_ms=5, max_batch_size=4096)
    await p.start()
    try:
        futures = [await p.send(topic, value, key=key, partition=i % 2, headers=headers,
                                timestamp_ms=1_700_000_000_000 + i)
                   for i, (key, value, headers) in enumerate(E2E)]
        await p.flush()
        return [(await f).offset for f in futures]
    finally:
        await p.stop()


async def aio_consume(bootstrap, topic, n):
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest", max_partition_fetch_bytes=2048)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(2)]
        c.assign(tps)
        got = []
        for _ in range(200):
            data = await c.getmany(timeout_ms=500, max_records=37)
            got += [(m.partition, m.offset, m.timestamp, m.timestamp_type, m.key, m.value,
                     m.headers, m.serialized_key_size, m.serialized_value_size, m.checksum)
                    for msgs in data.values() for m in msgs]
            if len(got) >= n:
                break
        positions = [await c.position(tp) for tp in tps]
        return sorted(got), positions
    finally:
        await c.stop()


def expected_e2e():
    return sorted((i % 2, i // 2, 1_700_000_000_000 + i, 0, k, v, tuple(h),
                   -1 if k is None else len(k), -1 if v is None else len(v), None)
                  for i, (k, v, h) in enumerate(E2E))


@pytest.mark.broker
@pytest.mark.parametrize("compression", [None, "lz4"])
def test_aiokafka_end_to_end_with_and_without(tansu_broker, compression):
    bootstrap = tansu_broker.bootstrap
    plain, patched = create_topic(bootstrap), create_topic(bootstrap)
    asyncio.run(aio_produce(bootstrap, plain, compression))
    kc.install(builders=True)  # the write side too
    asyncio.run(aio_produce(bootstrap, patched, compression))
    reads = {}
    for mode in ("installed", "uninstalled"):
        for topic in (plain, patched):
            reads[mode, topic] = asyncio.run(aio_consume(bootstrap, topic, len(E2E)))
        kc.uninstall()
    first = reads["uninstalled", plain]
    assert first[0] == expected_e2e()
    assert first[1] == [150, 150]
    assert all(r == first for r in reads.values())


@pytest.mark.broker
def test_confluent_reads_patched_aiokafka_and_back(tansu_broker):
    import confluent_kafka

    bootstrap = tansu_broker.bootstrap
    ours = create_topic(bootstrap)
    kc.install()
    asyncio.run(aio_produce(bootstrap, ours, "gzip"))
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + ours,
                                 "enable.auto.commit": False, "log_level": 3})
    try:
        c.assign([confluent_kafka.TopicPartition(ours, p, 0) for p in range(2)])
        got = []
        for _ in range(100):
            for m in c.consume(100, 0.5):
                assert m.error() is None
                hdrs = tuple(m.headers() or ())
                k, v = m.key(), m.value()
                got.append((m.partition(), m.offset(), m.timestamp()[1], 0, k, v, hdrs,
                            -1 if k is None else len(k), -1 if v is None else len(v), None))
            if len(got) >= len(E2E):
                break
    finally:
        c.close()
    assert sorted(got) == expected_e2e()

    theirs = create_topic(bootstrap)
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": "snappy",
                                  "linger.ms": 5, "log_level": 3})
    for i, (key, value, headers) in enumerate(E2E):
        p.produce(theirs, value, key, partition=i % 2, headers=headers or None,
                  timestamp=1_700_000_000_000 + i)
    assert p.flush(15) == 0
    patched_read = asyncio.run(aio_consume(bootstrap, theirs, len(E2E)))
    kc.uninstall()
    assert patched_read == asyncio.run(aio_consume(bootstrap, theirs, len(E2E)))
    assert patched_read[0] == expected_e2e()


# ---- the producer's send() path ----------------------------------------------------------


async def _send_outcomes(bootstrap, topic):
    """What send() returns, raises and resolves for ordinary and refused records."""
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=2048,
                         max_request_size=5000)
    await p.start()
    try:
        await p.partitions_for(topic)
        futures = []
        for i in range(400):
            key = b"key%d" % (i % 37) if i % 4 or not i % 5 else None
            kw = {"partition": i % 2} if i % 5 else {}
            futures.append(await p.send(topic, b"v%d" % i * (i % 9), key=key,
                                        timestamp_ms=1_700_000_000_000 + i,
                                        headers=[("h", b"%d" % i)] if i % 7 == 0 else None, **kw))
        refusals = []
        for bad in (dict(value=None, key=None), dict(value=b"x", partition=-1),
                    dict(value=b"x", partition=9), dict(value=b"x" * 6000),
                    dict(value=b"x", headers=[("h", "str")])):
            try:
                await p.send(topic, **bad)
                refusals.append(None)
            except Exception as exc:  # noqa: BLE001 - the class and words are compared
                refusals.append((type(exc), str(exc)))
        await p.flush()
        # aiokafka reports the first record's timestamp for every record of its batch (when
        # the broker answers -1); batch boundaries follow timing, so the timestamp is left out
        # here and held to aiokafka's in test_batch_done_resolves_as_aiokafkas
        results = [(type(f).__name__,
                    (await f)._replace(topic=None, topic_partition=None, timestamp=None))
                   for f in futures]
    finally:
        await p.stop()
    return results, refusals


def _without_and_with(broker, outcomes, builders):
    """``outcomes(bootstrap, topic)`` with aiokafka's own classes, then installed (each
    on a fresh topic)."""
    bootstrap = broker.bootstrap
    plain = asyncio.run(outcomes(bootstrap, create_topic(bootstrap)))
    kc.install(builders=builders)
    assert aio_producer.AIOKafkaProducer.send is kc._send
    ours = asyncio.run(outcomes(bootstrap, create_topic(bootstrap)))
    kc.uninstall()
    return plain, ours


@pytest.mark.broker
@pytest.mark.parametrize("builders", [False, True])
def test_send_behaves_as_aiokafkas(tansu_broker, builders):
    plain, ours = _without_and_with(tansu_broker, _send_outcomes, builders)
    assert aio_producer.AIOKafkaProducer.send is kc._ORIGINAL_SEND
    # every record keyed or pinned, so partitions (murmur2) and offsets compare exactly
    assert ours[0] == plain[0]
    assert {md.partition for _, md in ours[0]} == {0, 1}
    assert ours[1] == plain[1]  # aiokafka's refusals, its classes and words
    assert all(r is not None for r in ours[1][:4])


async def _more_send_outcomes(bootstrap, topic):
    """send() with serializers, the size check's edges, other bytes-like values, debug
    logging on, and after stop(): results, refusals and the log lines."""
    import logging

    from aiokafka import AIOKafkaProducer

    logger = logging.getLogger("aiokafka.producer.producer")
    lines: list = []
    handler = logging.Handler(logging.DEBUG)
    # the line and where it comes from: aiokafka's own send() writes it
    handler.emit = lambda record: lines.append(
        f"{record.getMessage()} at {record.filename}:{record.funcName}")
    outcomes: list = []

    async def attempt(p, *args, **kw):
        try:
            f = await p.send(*args, **kw)
        except Exception as exc:  # noqa: BLE001 - the class and words are compared
            outcomes.append((type(exc), str(exc)))
            return None
        assert f.get_loop() is asyncio.get_running_loop()
        return f

    # no headers, key None: the estimate is 82 + 1 + (2 + n) + 1 for an n-byte value
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=2048,
                         max_request_size=5000)
    await p.start()
    futures = []
    try:
        await p.partitions_for(topic)
        for n in (4913, 4914, 4915):
            futures.append(await attempt(p, topic, b"e" * n, partition=0))
        for value in (bytearray(b"ba"), memoryview(b"mv"), b""):
            futures.append(await attempt(p, topic, value, key=b"k", partition=1))
        futures.append(await attempt(p, topic, "text", partition=1))
        old_level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        try:
            for i in range(3):
                futures.append(await attempt(p, topic, b"logged%d" % i, key=b"k", partition=i % 2))
        finally:
            logger.setLevel(old_level)
            logger.removeHandler(handler)
        await p.flush()
    finally:
        await p.stop()
    await attempt(p, topic, b"after stop", partition=0)

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_request_size=5000,
                         key_serializer=lambda k: k.encode(),
                         value_serializer=lambda v: None if v is None else v * 2)
    await p.start()
    try:
        await p.partitions_for(topic)
        for i in range(20):
            futures.append(await attempt(p, topic, b"s%d" % i, key="key%d" % i))
        futures.append(await attempt(p, topic, None, key="tombstone", partition=1))
        futures.append(await attempt(p, topic, b"x" * 2460, key="big", partition=1))
        futures.append(await attempt(p, topic, b"x" * 2500, key="too big", partition=1))
        await p.flush()
    finally:
        await p.stop()
    results = [None if f is None else
               (await f)._replace(topic=None, topic_partition=None, timestamp=None)
               for f in futures]
    return results, outcomes, [line.replace(topic, "T") for line in lines]


@pytest.mark.broker
@pytest.mark.parametrize("builders", [False, True])
def test_send_edges_behave_as_aiokafkas(tansu_broker, builders):
    plain, ours = _without_and_with(tansu_broker, _more_send_outcomes, builders)
    assert ours == plain
    results, refusals, lines = ours
    assert [r is None for r in results[:3]] == [False, False, True]  # 5000 fits, 5001 not
    assert refusals[0][0] is aio_errors.MessageSizeTooLargeError
    assert lines[0] == ("Sending (key=b'k' value=b'logged0') to "
                        "TopicPartition(topic='T', partition=0) at producer.py:send")
    assert len(lines) == 3
    assert refusals[-1][0] is aio_errors.MessageSizeTooLargeError  # the serialized size


def test_installed_send_is_a_coroutine_function_as_aiokafkas():
    import inspect

    from aiokafka import AIOKafkaProducer

    kc.install()
    send = AIOKafkaProducer.send
    assert send is kc._send
    assert inspect.iscoroutinefunction(send) and asyncio.iscoroutinefunction(send)
    assert send.__name__ == "send" and send.__qualname__ == "AIOKafkaProducer.send"
    assert send.__doc__ == kc._ORIGINAL_SEND.__doc__
    assert (inspect.signature(send).parameters.keys()
            == inspect.signature(kc._ORIGINAL_SEND).parameters.keys())


def test_a_send_never_awaited_warns_as_aiokafkas():
    import gc
    import warnings

    from aiokafka import AIOKafkaProducer

    async def dropped():
        p = AIOKafkaProducer(bootstrap_servers="127.0.0.1:9")  # never started: no I/O
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            coro = p.send("t", b"x")
            names = (coro.__name__, coro.__qualname__)
            del coro
            gc.collect()
        p._closed = True  # no "Unclosed AIOKafkaProducer" (it never started)
        return names, [(w.category, str(w.message)) for w in caught
                       if issubclass(w.category, RuntimeWarning)]

    plain = asyncio.run(dropped())
    kc.install()
    assert asyncio.run(dropped()) == plain
    assert plain == (("send", "AIOKafkaProducer.send"),
                     [(RuntimeWarning, "coroutine 'AIOKafkaProducer.send' was never awaited")])


@pytest.mark.broker
def test_installed_send_runs_only_when_awaited(tansu_broker):
    """As aiokafka's coroutine: calling send() puts nothing into a batch until awaited."""
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=tansu_broker.bootstrap, linger_ms=1000)
        await p.start()
        try:
            topic = create_topic(tansu_broker.bootstrap)
            await p.partitions_for(topic)
            await p.send(topic, b"first", partition=0)  # opens the partition's batch
            batch = p._message_accumulator._batches[TopicPartition(topic, 0)][-1]
            coro = p.send(topic, b"second", partition=0)
            assert asyncio.iscoroutine(coro)
            assert batch.record_count == 1
            task = asyncio.ensure_future(coro)
            future = await task
            assert batch.record_count == 2
            skipped = p.send(topic, b"never", partition=0)
            skipped.close()
            await p.flush()
            assert (await future).offset == 1
            return batch.record_count
        finally:
            await p.stop()

    kc.install()
    assert asyncio.run(run()) == 2


@pytest.mark.parametrize("broker_timestamp", [-1, 1_800_000_000_000, None])
def test_batch_done_resolves_as_aiokafkas(broker_timestamp):
    async def resolved(done):
        batch = aio_accumulator.MessageBatch(
            TopicPartition("t", 3), aio_accumulator.BatchBuilder(16384, 0), 30, 0)
        futures = [batch.append(b"k%d" % i, b"v", 1_700_000_000_000 + 7 * i) for i in range(20)]
        futures[4].cancel()
        futures[9].set_result("already")
        done(batch, 1000, broker_timestamp, 55)
        return ([f.cancelled() or f.result() for f in futures],
                batch.future.result(), type(futures[0].result()))

    want = asyncio.run(resolved(kc._ORIGINAL_DONE))
    got = asyncio.run(resolved(kc._batch_done))
    assert got == want
    assert got[0][0].offset == 1000 and got[0][19].offset == 1019
    assert got[0][4] is True and got[0][9] == "already"
    if broker_timestamp == -1:  # aiokafka keeps the first record's time for the rest
        assert {md.timestamp for md in got[0][10:]} == {1_700_000_000_000}
