"""kafkawire.compat.kafka_python: kafka-python's record layer replaced by kafkawire's codec.

On the same bytes, kafka-python's own classes and kafkawire's give the same results and
raise the same exception types, for everything kafka-python's consumer (the fetcher)
and producer (accumulator, sender) call; builders write bytes the other side reads the
same; and end to end on Tansu the patched KafkaProducer / KafkaConsumer exchange data
identically with the unpatched ones and with confluent-kafka.
"""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
import time
import types
import uuid

import kafka
import kafka.consumer.fetcher as k_fetcher
import kafka.codec as k_codec
import kafka.errors as k_errors
import kafka.producer.kafka as k_producer
import kafka.producer.record_accumulator as k_accumulator
import kafka.record as k_record
import kafka.record.default_records as k_default
import kafka.record.legacy_records as k_legacy
import kafka.record.memory_records as k_memory
import pytest
from kafka.consumer.fetcher import Fetcher
from kafka.structs import TopicPartition
from param_ids import stable_id

import kafkawire.compat.kafka_python as kwkp
from kafkawire import codec
from kafkawire.compat import _hostbytes

# kafka-python's own classes, taken before any test installs anything
ORIG = {
    "MemoryRecords": k_memory.MemoryRecords,
    "MemoryRecordsBuilder": k_memory.MemoryRecordsBuilder,
    "DefaultRecordBatchBuilder": k_default.DefaultRecordBatchBuilder,
    "LegacyRecordBatchBuilder": k_legacy.LegacyRecordBatchBuilder,
}


@pytest.fixture(autouse=True)
def _never_leak_the_patch():
    """No other test may see a patched kafka-python, whatever happens here."""
    yield
    kwkp.uninstall()
    assert k_memory.MemoryRecords is ORIG["MemoryRecords"]


@pytest.fixture
def patched():
    kwkp.install()
    yield kwkp
    kwkp.uninstall()


# ---- data -------------------------------------------------------------------------------

BASE = 1_000
CODECS = {0: [0, 1, 2, 3], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3, 4]}
CASES = [(m, c) for m in (0, 1, 2) for c in CODECS[m]]
IDS = [f"magic{m}-codec{c}" for m, c in CASES]


def sample(magic, n=12):
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else (b"" if i % 5 == 0 else b"key-%d" % i)
        value = None if i % 6 == 5 else (b"x" * 300 if i == 3 else b"value-%d" % i)
        headers = []
        if magic == 2 and i % 3:
            headers = [("h1", b"a%d" % i), ("empty", b""), ("null", None)][: i % 4]
        out.append((1_600_000_000_000 + i * 5 + (i % 2) * 900, key, value, headers))
    return out


def assign_offsets(data, base):
    """What a broker does on append: the offset fields (outside every CRC)."""
    buf = bytearray(data)
    pos = 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        magic = buf[pos + 16]
        if magic == 2:
            struct.pack_into(">q", buf, pos, base)
            (delta,) = struct.unpack_from(">i", buf, pos + 23)
            base += delta + 1
        elif buf[pos + 17] & 7:
            # a wrapper carries its last inner offset; count its inner messages
            n = len(list(ORIG["MemoryRecords"](bytes(data[pos : pos + 12 + size])).next_batch()))
            struct.pack_into(">q", buf, pos, base + n - 1)
            base += n
        else:
            struct.pack_into(">q", buf, pos, base)
            base += 1
        pos += 12 + size
    return bytes(buf)


def orig_build(magic, compression, records, **kw):
    b = ORIG["MemoryRecordsBuilder"](magic, compression, 1 << 20, **kw)
    for ts, key, value, headers in records:
        assert b.append(ts, key, value, headers) is not None
    b.close()
    return bytes(b.buffer())


# ---- what the fetcher and the producer look at -------------------------------------------

BATCH_V2 = ["base_offset", "size_in_bytes", "leader_epoch", "magic", "crc", "attributes",
            "last_offset_delta", "last_offset", "next_offset", "compression_type",
            "timestamp_type", "is_transactional", "is_control_batch", "first_timestamp",
            "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "has_sequence",
            "last_sequence", "records_count"]
BATCH_LEGACY = ["base_offset", "size_in_bytes", "timestamp_type", "compression_type", "magic"]
RECORD = ["offset", "timestamp", "timestamp_type", "key", "value", "headers", "checksum",
          "size_in_bytes"]


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return ("raises", type(exc))


def view_batch(batch):
    names = BATCH_V2 if batch.magic == 2 else BATCH_LEGACY
    out = {n: getattr(batch, n) for n in names}
    out["validate_crc"] = batch.validate_crc()
    if batch.magic == 2:
        out["has_producer_id"] = batch.has_producer_id()
    records = []
    it = outcome(lambda: iter(batch))
    if it[0] == "raises":
        records.append(it)
    it = iter(()) if it[0] == "raises" else it[1]
    while True:
        r = outcome(lambda: _next(it))
        if r[0] == "raises":
            records.append(r)
            break
        rec = r[1]
        if rec is StopIteration:
            break
        records.append({n: getattr(rec, n) for n in RECORD} | {"crc_ok": rec.validate_crc()}
                       | ({"abort": rec.abort, "commit": rec.commit, "type": rec.type,
                           "version": rec.version} if batch.magic == 2 and batch.is_control_batch
                          else {}))
    out["records"] = records
    return out


def view_memory(cls, data):
    """Everything MemoryRecords gives, in order; an exception type ends it."""
    m = cls(data)
    out = [("size", m.size_in_bytes()), ("valid", m.valid_bytes())]
    while m.has_next():
        r = outcome(m.next_batch)
        if r[0] == "raises":
            out.append(r)
            break
        out.append(outcome(lambda b=r[1]: view_batch(b)))
    out.append(("after", outcome(lambda: m.next_batch() is None), m.valid_bytes()))
    return out


def same_view(data):
    # damaged data included: the same exception classes, kafka-python's own leaks too
    # (struct.error, BadGzipFile, ...), as its users' except clauses see them
    theirs = view_memory(ORIG["MemoryRecords"], data)
    ours = view_memory(kwkp.MemoryRecords, data)
    assert ours == theirs
    return ours


def fetched(cls, data, fetch_offset=0, check_crcs=True, counters=None, **kw):
    """The fetcher's unpacking (ConsumerRecords, then an exception type or None); with
    ``counters`` (a list), its records_read, bytes_read and leader_epoch are appended."""
    pr = Fetcher.PartitionRecords(fetch_offset, TopicPartition("t", 0), cls(data),
                                  check_crcs=check_crcs, **kw)
    got = []
    error = None
    while pr:  # until drained, as the fetcher does
        try:
            got += pr.take(5)
        except Exception as exc:  # noqa: BLE001
            error = type(exc)
            break
    if counters is not None:
        counters.append((pr.records_read, pr.bytes_read, pr.leader_epoch))
    return got, error, pr.next_fetch_offset


def same_fetch(data, user_errors=False, **kw):
    """``user_errors``: the exceptions come from the user's deserializers, not from
    decoding (compared the same way)."""
    theirs_counters, ours_counters = [], []
    got, error, nxt = fetched(ORIG["MemoryRecords"], data, counters=theirs_counters, **kw)
    theirs = (got, error, nxt)
    ours = fetched(kwkp.MemoryRecords, data, **kw)  # kafka-python's own per-record loop
    assert ours == theirs
    kwkp.install()  # and kafkawire's in its place
    try:
        patched = fetched(kwkp.MemoryRecords, data, counters=ours_counters, **kw)
    finally:
        kwkp.uninstall()
    assert patched == theirs
    if error is None:  # (kafka-python counts a record read before raising the next)
        assert ours_counters == theirs_counters
    return ours


def _next(it):
    """next(), with the end as a value (outcome() reports exceptions by type)."""
    try:
        return next(it)
    except StopIteration:
        return StopIteration


# ---- reading ------------------------------------------------------------------------------


@pytest.mark.parametrize("magic, compression", CASES, ids=IDS)
def test_reads_like_kafka_python(magic, compression):
    data = assign_offsets(orig_build(magic, compression, sample(magic)), BASE)
    view = same_view(data)
    assert sum(len(b[1]["records"]) for b in view[2:-1]) == 12
    got, error, _ = same_fetch(data)
    assert len(got) == 12 and error is None


def test_mixed_magics_in_one_buffer_and_fetch_offset_inside_a_wrapper():
    parts = []
    base = BASE
    for magic, compression in CASES:
        parts.append(assign_offsets(orig_build(magic, compression, sample(magic, 5)), base))
        base += 5
    data = b"".join(parts)
    same_view(data)
    got, error, nxt = same_fetch(data, fetch_offset=BASE + 27)  # inside a magic 1 wrapper
    assert got[0].offset == BASE + 27 and error is None and nxt == base


@pytest.mark.parametrize("compression", [0, 1])
def test_kafkawire_sets_read_alike(compression):
    recs = [(b"k%d" % i, b"v%d" % i, 5_000 + i, [("h", b"x")] if i % 2 else []) for i in range(6)]
    data = (
        codec.encode_record_batch(recs, base_offset=BASE, compression=compression)
        + codec.encode_record_batch(recs, base_offset=BASE + 6, compression=compression,
                                    timestamp=99_000, log_append_time=True)
        + codec.encode_message_set([r[:3] for r in recs], magic=1, base_offset=BASE + 12,
                                   compression=compression, timestamp=98_000,
                                   log_append_time=True)
        + codec.encode_message_set([r[:3] for r in recs], magic=0, base_offset=BASE + 18,
                                   compression=compression)
    )
    same_view(data)
    got, error, _ = same_fetch(data)
    assert len(got) == 24 and error is None


def test_transactional_and_control_batches():
    txn = dict(producer_id=4242, producer_epoch=3, is_transactional=True)
    data = (
        codec.encode_record_batch([(b"k", b"a", 10), (None, b"b", 11)], base_offset=BASE,
                                  base_sequence=7, compression=1, **txn)
        + codec.encode_record_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01", 12)],
                                    base_offset=BASE + 2, is_control=True, **txn)  # ABORT
        + codec.encode_record_batch([(b"k", b"c", 13)], base_offset=BASE + 3, base_sequence=9,
                                    **txn)
        + codec.encode_record_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x01", 14)],
                                    base_offset=BASE + 4, is_control=True, **txn)  # COMMIT
    )
    same_view(data)
    got, error, nxt = same_fetch(data)
    assert [r.value for r in got] == [b"a", b"b", b"c"] and nxt == BASE + 5

    # read_committed with the first transaction aborted: the consumer skips its batch
    from kafka.consumer.fetcher import IsolationLevel

    class Aborted:
        producer_id = 4242
        first_offset = BASE

    got, error, nxt = same_fetch(data, isolation_level=IsolationLevel.READ_COMMITTED,
                                 aborted_transactions=[Aborted()])
    assert [r.value for r in got] == [b"c"] and error is None


class _Upper:
    def deserialize(self, topic, headers, data):
        return None if data is None else data.upper()


class _FailsOnValue4:
    def deserialize(self, topic, headers, data):
        if data == b"value-4":
            raise ValueError("cannot read value-4")
        return data


@pytest.mark.parametrize("magic", [1, 2])
def test_deserializers_and_one_failing_mid_batch(magic):
    data = assign_offsets(orig_build(magic, 0, sample(magic, 12)), BASE)
    got, error, _ = same_fetch(data, key_deserializer=_Upper(), value_deserializer=_Upper())
    assert error is None and got[1].value == b"VALUE-1"
    # the records before it come out, then the error, at the same record as kafka-python
    got, error, nxt = same_fetch(data, user_errors=True, value_deserializer=_FailsOnValue4())
    assert error is ValueError and [r.offset for r in got] == [BASE + i for i in range(4)]


def test_empty_batch_and_sequence_wrap():
    # A batch whose records were all compacted away keeps its offsets (KIP-98).
    built = bytearray(orig_build(2, 0, [(1, b"k", b"v", [])], producer_id=5, producer_epoch=0,
                                 base_sequence=2**31 - 1))
    struct.pack_into(">i", built, 23, 3)  # last_offset_delta 3: wraps the sequence
    full = bytes(built)
    empty = bytearray(full[:61])
    struct.pack_into(">i", empty, 8, 49)
    struct.pack_into(">i", empty, 57, 0)
    struct.pack_into(">I", empty, 17, codec.crc32c(bytes(empty[21:])))
    struct.pack_into(">I", built, 17, codec.crc32c(bytes(built[21:])))
    data = assign_offsets(bytes(empty), BASE) + assign_offsets(bytes(built), BASE + 1)
    same_view(data)
    assert same_fetch(data)[2] == BASE + 5


def _corrupt(data, at):
    buf = bytearray(data)
    buf[at] ^= 0xFF
    return bytes(buf)


@pytest.mark.parametrize("magic, compression", CASES, ids=IDS)
@pytest.mark.parametrize("check_crcs", [True, False], ids=["check", "nocheck"])
def test_corrupt_crc(magic, compression, check_crcs):
    good = assign_offsets(orig_build(magic, compression, sample(magic, 4)), BASE)
    bad = assign_offsets(orig_build(magic, compression, sample(magic, 4)), BASE + 4)
    data = good + _corrupt(bad, len(bad) - 2) + good
    same_view(data)
    got, error, _ = same_fetch(data, check_crcs=check_crcs)
    if check_crcs:
        assert error is k_errors.CorruptRecordError and len(got) >= 4


@pytest.mark.parametrize("cut", [1, 5, 12, 30, 60])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_partial_trailing_batch_and_truncated_input(magic, cut):
    one = assign_offsets(orig_build(magic, 1, sample(magic, 3)), BASE)
    two = assign_offsets(orig_build(magic, 0, sample(magic, 3)), BASE + 3)
    same_view(one + two[: len(two) - cut])
    same_fetch(one + two[: len(two) - cut])
    same_view(one[:cut])


def test_structural_damage_raises_the_same_type():
    one = assign_offsets(orig_build(2, 0, sample(2, 3)), BASE)
    # a record length that runs past its batch, CRC made valid again
    buf = bytearray(one)
    buf[61] = 0x7E
    struct.pack_into(">I", buf, 17, codec.crc32c(bytes(buf[21:])))
    same_view(bytes(buf))
    assert same_fetch(bytes(buf))[1] is k_errors.CorruptRecordError
    # an entry smaller than any message
    tiny = struct.pack(">qi", 0, 10) + b"\x00" * 10
    same_view(one + tiny)
    assert same_fetch(one + tiny)[1] is k_errors.CorruptRecordError


@pytest.mark.parametrize("magic", [1, 2])
def test_unknown_codec_raises_unsupported_codec_error(magic):
    buf = bytearray(assign_offsets(orig_build(magic, 1, sample(magic, 3)), BASE))
    if magic == 2:
        buf[22] = (buf[22] & 0xF8) | 6
        struct.pack_into(">I", buf, 17, codec.crc32c(bytes(buf[21:])))
    else:
        buf[17] = (buf[17] & 0xF8) | 6
        struct.pack_into(">I", buf, 12, codec.crc32(bytes(buf[16:])))
    same_view(bytes(buf))
    assert same_fetch(bytes(buf))[1] is k_errors.UnsupportedCodecError


def _codec_errors(data) -> list:
    """(type, message) of reading the first batch's records, kafka-python's then ours."""
    out = []
    for cls in (ORIG["MemoryRecords"], kwkp.MemoryRecords):
        try:
            list(cls(data).next_batch())
            out.append(None)
        except Exception as exc:  # noqa: BLE001 - the type and message are compared
            out.append((type(exc), str(exc)))
    return out


@pytest.mark.parametrize("magic, codec_id", [(2, 6), (2, 7), (1, 6), (1, 4), (0, 4)])
def test_unknown_codec_is_kafka_pythons_error_in_its_words(magic, codec_id):
    buf = bytearray(assign_offsets(orig_build(magic, 1, sample(magic, 3)), BASE))
    at = 22 if magic == 2 else 17
    buf[at] = (buf[at] & 0xF8) | codec_id
    theirs, ours = _codec_errors(bytes(buf))
    assert ours == theirs and theirs[0] is k_errors.UnsupportedCodecError
    assert theirs[1].endswith("Unrecognized compression type" + (
        f": {codec_id}" if magic == 2 else ""))


@pytest.mark.parametrize("magic, codec_id, name", [(2, 1, "gzip"), (2, 4, "zstd"),
                                                   (1, 2, "snappy"), (0, 1, "gzip")])
def test_a_codec_library_kafka_python_lacks_is_its_error(monkeypatch, magic, codec_id, name):
    # kafkawire's decoder may have the library; the drop-in still refuses as kafka-python
    data = assign_offsets(orig_build(magic, codec_id, sample(magic, 30)), BASE)
    assert _hostbytes.entry_codec(data) == (magic, codec_id)  # compressed, not left plain
    monkeypatch.setattr(k_codec, f"has_{name}", lambda: False)
    theirs, ours = _codec_errors(data)
    assert ours == theirs == (k_errors.UnsupportedCodecError,
                              f"UnsupportedCodecError: Libraries for {name} compression codec "
                              f"not found")


# ---- magic 0/1 wrappers: offsets not yet assigned, a null value -------------------------


def built_wrapper(magic, compression, offset, n=10):
    """A compressed set as kafka-python's producer builds it (inner offsets 0..n-1), its
    wrapper's offset then set to ``offset`` (outside every CRC)."""
    buf = bytearray(orig_build(magic, compression, sample(magic, n)))
    assert buf[17] & 7 == compression  # one wrapper, compressed
    struct.pack_into(">q", buf, 0, offset)
    return bytes(buf)


@pytest.mark.parametrize("compression", [1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("offset", [0, 4, 8, 9, 10, BASE, -1, -(2**63)])
def test_wrapper_without_assigned_offsets_keeps_its_inner_offsets(magic, compression, offset):
    # KIP-31: a magic 1 wrapper's offset is its last inner one's; below its last relative
    # offset (9 here) none was assigned, and kafka-python keeps the inner offsets
    data = built_wrapper(magic, compression, offset)
    view = same_view(data)
    offsets = [r["offset"] for r in view[2][1]["records"]]
    if magic == 0 or offset < 9:
        assert offsets == list(range(10))
    else:
        assert offsets == list(range(offset - 9, offset + 1))
    for fetch_offset in (0, 3):
        got, error, _ = same_fetch(data, fetch_offset=fetch_offset)
        assert error is None and [r.offset for r in got] == [o for o in offsets if o >= fetch_offset]


def null_value_wrapper(magic, codec_id):
    buf = bytearray(codec.encode_message_set([(None, None, 0)], magic=magic, base_offset=BASE))
    buf[17] = codec_id
    struct.pack_into(">I", buf, 12, codec.crc32(memoryview(buf)[16:]))
    return bytes(buf)


@pytest.mark.parametrize("magic, codec_id", [(0, 1), (0, 2), (1, 1), (1, 3), (1, 4), (1, 6)])
def test_compressed_wrapper_with_null_value_is_kafka_pythons_error_in_its_words(magic, codec_id):
    # refused before its codec is looked at: an unknown codec too
    data = null_value_wrapper(magic, codec_id)
    theirs, ours = _codec_errors(data)
    assert ours == theirs and theirs[0] is k_errors.CorruptRecordError
    assert theirs[1].endswith(": Value of compressed message is None")
    got, error, _ = same_fetch(data)
    assert got == [] and error is k_errors.CorruptRecordError


def test_a_replaced_record_validate_crc_is_asked_per_record(monkeypatch):
    # kafka-python's fetcher asks every record's validate_crc(), always true in magic 2;
    # a test's double that says otherwise is heard with the drop-in too
    data = assign_offsets(orig_build(2, 0, sample(2, 3)), BASE)
    seen = []
    for record_cls, memory_records, install in ((k_default.DefaultRecord, ORIG["MemoryRecords"],
                                                 False),
                                                (kwkp.DefaultRecord, kwkp.MemoryRecords, True)):
        answers = iter([True, True, False])
        monkeypatch.setattr(record_cls, "validate_crc", lambda self, a=answers: next(a))
        if install:
            kwkp.install()
        pr = Fetcher.PartitionRecords(BASE, TopicPartition("t", 0), memory_records(data))
        first = [r.offset for r in pr.take(10)]
        with pytest.raises(k_errors.CorruptRecordError) as info:
            pr.take(10)
        seen.append((first, str(info.value)))
        kwkp.uninstall()
    assert seen[0] == seen[1]
    assert seen[0][0] == [BASE, BASE + 1] and "failed crc check" in seen[0][1]


def _frames(data):
    pos, out = 0, []
    while pos < len(data):
        out.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return out


@pytest.mark.parametrize("magic, compression", CASES, ids=IDS)
def test_damaged_crc_before_an_entry_of_negative_size_is_heard(magic, compression):
    # an entry header with a negative size after the last complete batch: the batches
    # before it are still CRC-checked (the one-call decode must not take them as checked)
    good = assign_offsets(orig_build(magic, compression, sample(magic, 3)), BASE)
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # the last byte of the only batch: its CRC no longer holds
    # its header otherwise that of a gzip wrapper
    data = bytes(bad) + struct.pack(">qiIbb", BASE + 50, -(2**31), 0, 1, 1)
    checks = []
    for cls in (ORIG["MemoryRecords"], kwkp.MemoryRecords):
        m = cls(data)
        checks.append([m.next_batch().validate_crc() for _ in range(len(_frames(good)))])
    assert checks[0] == checks[1] and checks[1][-1] is False
    _got, error, _ = same_fetch(data)
    assert error is k_errors.CorruptRecordError


def test_short_batch_header_is_kafka_pythons_struct_error():
    # kafka-python lets struct.error out of DefaultRecordBatch for a short batch: so does
    # the drop-in, which is what its users' except clauses see
    data = struct.pack(">qiib", BASE, 20, 0, 2) + b"\x00" * 19
    for cls in (ORIG["MemoryRecords"], kwkp.MemoryRecords):
        with pytest.raises(struct.error):
            cls(data).next_batch()


def test_batch_iteration_protocol():
    data = assign_offsets(orig_build(2, 0, sample(2, 3)), BASE)
    for cls in (ORIG["MemoryRecords"], kwkp.MemoryRecords):
        b = cls(data).next_batch()
        assert next(b).offset == BASE  # the fetcher's abort-marker check calls next() first
        rest = list(b)
        assert [r.offset for r in rest] == [BASE + 1, BASE + 2]
        assert list(b) == []  # a v2 batch is its own, one-shot iterator
        with pytest.raises(AssertionError):
            b.validate_crc()
    legacy = assign_offsets(orig_build(1, 1, sample(1, 3)), BASE)
    for cls in (ORIG["MemoryRecords"], kwkp.MemoryRecords):
        b = cls(legacy).next_batch()
        assert len(list(b)) == 3 and len(list(b)) == 3  # legacy batches iterate afresh


# ---- building ------------------------------------------------------------------------------


def build_both(magic, compression, records, batch_size=1 << 20, **kw):
    """Drive both MemoryRecordsBuilders the way the accumulator does; return their traces."""
    out = []
    for cls in (ORIG["MemoryRecordsBuilder"], kwkp.MemoryRecordsBuilder):
        b = cls(magic, compression, batch_size, **kw)
        trace = []
        for ts, key, value, headers in records:
            md = b.append(ts, key, value, headers)
            trace.append(None if md is None else (md.offset, md.crc, md.size, md.timestamp))
            trace.append((b.is_full(), b.size_in_bytes(), b.next_offset()))
        if magic == 2 and kw.get("producer_id", -1) != -1:
            b.set_producer_state(kw["producer_id"], kw["producer_epoch"], 17, True)
        b.close()
        b.close()  # a retried batch is closed again: no double compression
        trace.append((b.size_in_bytes(), b.is_full(), b.producer_id, b.producer_epoch,
                      b.base_sequence))
        out.append((trace, bytes(b.buffer()), b.compression_rate()))
    return out


@pytest.fixture
def frozen_gzip_clock(monkeypatch):
    # the gzip header carries the build time (kafka-python compresses through GzipFile)
    monkeypatch.setattr(gzip, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.0))


@pytest.mark.parametrize("magic, compression", CASES, ids=IDS)
def test_builders_match(magic, compression, frozen_gzip_clock):
    (t_trace, t_bytes, _), (o_trace, o_bytes, o_rate) = build_both(
        magic, compression, sample(magic, 30), batch_size=2000)
    assert o_trace == t_trace  # metadata, fullness and sizes while appending and after
    # the bytes kafka-python writes (framing, attributes, CRC), for every codec
    assert o_bytes == t_bytes
    # each side's bytes read the same through the other side's decoder
    a = assign_offsets(o_bytes, BASE)
    b = assign_offsets(t_bytes, BASE)
    strip = lambda view: [  # noqa: E731 - what compression changes in a batch's looks
        [{k: v for k, v in r.items() if k not in ("size_in_bytes",)} for r in item[1]["records"]]
        for item in view[2:-1]]
    assert strip(view_memory(ORIG["MemoryRecords"], a)) == strip(
        view_memory(ORIG["MemoryRecords"], b))
    assert strip(view_memory(kwkp.MemoryRecords, b)) == strip(view_memory(kwkp.MemoryRecords, a))
    assert o_rate > 0


def result(fn):
    """What a call gives: its bytes or metadata, or the exception's type and message."""
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - the exception itself is what is compared
        return (type(exc), str(exc))
    if isinstance(out, (bytes, bytearray)):
        return bytes(out)
    return out if out is None or isinstance(out, int) else repr(out)


def steps(builder_cls, init_args, appends):
    try:
        b = builder_cls(*init_args)
    except Exception as exc:  # noqa: BLE001
        return [(type(exc), str(exc))]
    out = [result(lambda args=args: b.append(*args)) for args in appends]
    return out + [result(b.build), result(b.size)]


# Inputs kafka-python's builders take or refuse in their own ways: with the drop-in
# installed the same happens, with the same exception type and message.
BAD_APPENDS = [
    ("1", 5, b"k", b"v", []), (None, 5, b"k", b"v", []), (0, 5.0, b"k", b"v", []),
    (0, "5", b"k", b"v", []), (0, 5, "k", b"v", []), (0, 5, b"k", 7, []),
    (0, 5, b"k", b"v", [("a", "s")]), (0, 5, b"k", b"v", [(b"a", b"s")]),
    (0, 5, bytearray(b"k"), memoryview(b"v"), []), (0, 1 << 64, b"k", b"v", []),
    (0, -(1 << 63), b"k", b"v", []), (-1, 5, b"k", b"v", []),
]


@pytest.mark.parametrize("bad", BAD_APPENDS, ids=stable_id)
def test_builders_raise_what_kafka_python_raises(bad):
    follow = (1,) + bad[1:] if bad[0] == 0 else bad
    for appends in ([bad], [(0, 1, b"k", b"v", []), follow]):
        args = (2, 0, 0, -1, -1, -1, 1 << 20)
        assert steps(kwkp.DefaultRecordBatchBuilder, args, appends) == steps(
            ORIG["DefaultRecordBatchBuilder"], args, appends)
        legacy = [a[:4] for a in appends]
        for magic in (0, 1):
            for c in (0, 1, 4, 7):
                args = (magic, c, 1 << 20)
                assert steps(kwkp.LegacyRecordBatchBuilder, args, legacy) == steps(
                    ORIG["LegacyRecordBatchBuilder"], args, legacy)
    for c in (5, 7):
        args = (2, c, 0, -1, -1, -1, 1 << 20)
        assert steps(kwkp.DefaultRecordBatchBuilder, args, [(0, 1, b"k", b"v", [])]) == steps(
            ORIG["DefaultRecordBatchBuilder"], args, [(0, 1, b"k", b"v", [])])


def test_idempotent_transactional_builder():
    recs = sample(2, 5)
    (t_trace, t_bytes, _), (o_trace, o_bytes, _) = build_both(
        2, 4, recs, producer_id=77, producer_epoch=2, base_sequence=0)
    assert o_trace == t_trace and o_bytes == t_bytes
    b = kwkp.MemoryRecordsBuilder(2, 0, 1000)
    b.close()
    with pytest.raises(k_errors.IllegalStateError):
        b.set_producer_state(1, 1, 1, False)
    with pytest.raises(k_errors.UnsupportedVersionError):
        kwkp.MemoryRecordsBuilder(1, 0, 1000).set_producer_state(1, 1, 1, False)


def test_builder_type_errors_and_estimates():
    for name in ("DefaultRecordBatchBuilder", "LegacyRecordBatchBuilder"):
        theirs, ours = ORIG[name], getattr(kwkp, name)
        for args in [(None, b"v"), (b"k" * 300, None), (b"", b"x" * 20000)]:
            if name == "DefaultRecordBatchBuilder":
                h = [("a", b"b"), ("c", None)]
                assert ours.estimate_size_in_bytes(*args, h) == theirs.estimate_size_in_bytes(*args, h)
                assert ours.size_in_bytes(3, 70, *args, h) == theirs.size_in_bytes(3, 70, *args, h)
            else:
                for m in (0, 1):
                    for c in (0, 2):
                        assert ours.estimate_size_in_bytes(m, c, *args) == \
                            theirs.estimate_size_in_bytes(m, c, *args)
    for bad in [("k", b"v"), (b"k", 5)]:
        for cls in (ORIG["MemoryRecordsBuilder"], kwkp.MemoryRecordsBuilder):
            for magic in (1, 2):
                with pytest.raises(TypeError):
                    cls(magic, 0, 1000).append(1, *bad)
    for cls in (ORIG["MemoryRecordsBuilder"], kwkp.MemoryRecordsBuilder):
        with pytest.raises(k_errors.UnsupportedCodecError):
            b = cls(1, 4, 1000)  # zstd needs magic 2
            b.append(1, b"k", b"v")
            b.close()


def test_skip_writes_what_kafka_python_writes():
    out = []
    for cls in (ORIG["MemoryRecordsBuilder"], kwkp.MemoryRecordsBuilder):
        b = cls(2, 0, 1 << 20)
        b.append(1, b"a", b"b")
        b.skip(3)
        b.append(2, b"c", b"d")
        b.close()
        out.append(bytes(b.buffer()))
    assert out[0] == out[1]


# ---- install / uninstall ---------------------------------------------------------------------

PATCH_POINTS = [
    (k_record, "MemoryRecords"), (k_record, "MemoryRecordsBuilder"),
    (k_memory, "MemoryRecords"), (k_memory, "DefaultRecordBatch"),
    (k_memory, "LegacyRecordBatchBuilder"), (k_fetcher, "MemoryRecords"),
    (k_accumulator, "MemoryRecords"), (k_accumulator, "MemoryRecordsBuilder"),
    (k_producer, "DefaultRecordBatchBuilder"), (k_producer, "LegacyRecordBatchBuilder"),
]


def test_install_uninstall_installed():
    before = {(m.__name__, n): m.__dict__[n] for m, n in PATCH_POINTS}
    assert not kwkp.installed()
    kwkp.install()
    kwkp.install()  # twice is harmless
    assert kwkp.installed()
    assert k_fetcher.MemoryRecords is kwkp.MemoryRecords
    assert k_accumulator.MemoryRecordsBuilder is kwkp.MemoryRecordsBuilder
    assert k_producer.DefaultRecordBatchBuilder is kwkp.DefaultRecordBatchBuilder
    kwkp.uninstall()
    assert not kwkp.installed()
    assert {(m.__name__, n): m.__dict__[n] for m, n in PATCH_POINTS} == before
    kwkp.uninstall()  # and so is uninstalling twice


def test_environment_variable_opt_in_and_runner(tmp_path):
    env = dict(os.environ, KAFKAWIRE_PATCH_KAFKA_PYTHON="1")
    probe = ("import kafkawire.compat.kafka_python as k, kafka.consumer.fetcher as f; "
             "print(k.installed(), f.MemoryRecords is k.MemoryRecords)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["True", "True"]
    env["KAFKAWIRE_PATCH_KAFKA_PYTHON"] = "0"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    script = tmp_path / "app.py"
    script.write_text("import sys, kafkawire.compat.kafka_python as k\n"
                      "print(k.installed(), sys.argv[1:])\n")
    out = subprocess.run([sys.executable, "-m", "kafkawire.compat.kafka_python", str(script),
                          "x"], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True ['x']"


def test_compat_package_imports_no_peer():
    probe = "import sys, kafkawire.compat; print('kafka' in sys.modules, 'aiokafka' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]


# ---- end to end on Tansu ------------------------------------------------------------------------

E2E = [(f"k{i}".encode() if i % 3 else None,
        None if i % 17 == 16 and i % 3 else f"value {i}".encode() * (1 + i % 5),
        1_700_000_000_000 + i, [("h", f"{i}".encode()), ("e", b"")] if i % 2 else [])
       for i in range(300)]


def _topic(prefix):
    return f"kwkp-{prefix}-{uuid.uuid4().hex[:8]}"


def kp_produce(bootstrap, topic, compression):
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression,
                            linger_ms=5, batch_size=4096)
    try:
        futures = [p.send(topic, value=v, key=k, partition=0, timestamp_ms=ts, headers=h)
                   for k, v, ts, h in E2E]
        p.flush(20)
        return [(f.get(10).offset, f.get(10).checksum) for f in futures]
    finally:
        p.close(5)


def kp_consume(bootstrap, topic, n=len(E2E)):
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                            consumer_timeout_ms=3000, fetch_max_bytes=50_000,
                            max_partition_fetch_bytes=20_000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = []
        for m in c:
            got.append(m._replace(leader_epoch=None))
            if len(got) == n:
                break
        return got
    finally:
        c.close()


def as_sent(messages):
    return [(m.key, m.value, m.timestamp, [tuple(h) for h in m.headers]) for m in messages]


@pytest.mark.broker
@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_end_to_end_patched_equals_unpatched(tansu_broker, compression):
    topic = _topic(f"e2e-{compression}")
    sent_orig = kp_produce(tansu_broker.bootstrap, topic, compression)
    plain = kp_consume(tansu_broker.bootstrap, topic)
    kwkp.install()
    try:
        topic2 = _topic(f"e2e-kw-{compression}")
        sent_kw = kp_produce(tansu_broker.bootstrap, topic2, compression)
        ours = kp_consume(tansu_broker.bootstrap, topic)
        ours2 = kp_consume(tansu_broker.bootstrap, topic2)
    finally:
        kwkp.uninstall()
    plain2 = kp_consume(tansu_broker.bootstrap, topic2)
    assert as_sent(plain) == [(k, v, ts, h) for k, v, ts, h in E2E]
    assert ours == plain  # every ConsumerRecord field, the same bytes read both ways
    assert sent_kw == sent_orig  # offsets and checksums the producer reports
    assert ours2 == plain2
    assert as_sent(ours2) == as_sent(plain)


confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.mark.broker
@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_confluent_reads_patched_kafka_python_and_back(tansu_broker, patched, compression):
    topic = _topic(f"to-ck-{compression}")
    kp_produce(tansu_broker.bootstrap, topic, compression)
    c = confluent_kafka.Consumer({"bootstrap.servers": tansu_broker.bootstrap, "group.id": "x",
                                  "enable.auto.commit": False, "log_level": 3})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(E2E) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if not m.error():
                    got.append((m.key(), m.value(), m.timestamp()[1], m.headers() or []))
    finally:
        c.close()
    assert got == [(k, v, ts, h) for k, v, ts, h in E2E]

    back = _topic(f"from-ck-{compression}")
    p = confluent_kafka.Producer({"bootstrap.servers": tansu_broker.bootstrap,
                                  "compression.type": compression or "none", "log_level": 3})
    for k, v, ts, h in E2E:
        p.produce(back, v, key=k, partition=0, timestamp=ts, headers=h)
    assert p.flush(20) == 0
    ours = kp_consume(tansu_broker.bootstrap, back)
    kwkp.uninstall()
    plain = kp_consume(tansu_broker.bootstrap, back)
    assert ours == plain
    assert as_sent(ours) == [(k, v, ts, h) for k, v, ts, h in E2E]


# ---- the producer's send() path ------------------------------------------------------------


def test_murmur2_is_kafka_pythons():
    import kafka.partitioner.default as k_partitioner

    data = [os.urandom(n) for n in range(64)] + [bytearray(b"key"), b"", [1, 2, 3, 250]]
    want = [kwkp._ORIG_MURMUR2(d) for d in data]
    with_codec = []
    kwkp.install()
    try:
        with_codec = [k_partitioner.murmur2(d) for d in data]
        with pytest.raises(TypeError):  # what kafka-python's own raises for a str
            k_partitioner.murmur2("abc")
    finally:
        kwkp.uninstall()
    assert with_codec == want
    assert all(0 <= h <= 0xFFFFFFFF for h in want)


def _send_outcomes(bootstrap, topic):
    """What send() returns, raises and calls back for ordinary and refused records."""
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=2048,
                            max_request_size=5000)
    called = []
    try:
        p.partitions_for(topic)
        futures = []
        for i in range(400):
            # every record keyed or pinned: sticky placement (kafka-python's own send) of
            # unkeyed, unpinned records would shift the offsets compared below
            key = f"key{i % 37}".encode() if i % 4 or not i % 5 else None
            kw = {"partition": i % 3} if i % 5 else {}
            f = p.send(topic, value=b"v%d" % i * (i % 9), key=key, timestamp_ms=1_700_000_000_000 + i,
                       headers=[("h", b"%d" % i)] if i % 7 == 0 else None, **kw)
            f.add_callback(lambda md, i=i: called.append((i, md.partition)))
            futures.append(f)
        refusals = []
        for bad in (dict(value=None, key=None), dict(value=b"x", headers=("h", b"x")),
                    dict(value=b"x", headers=[("h", "str")]), dict(value=b"x", partition=-1),
                    dict(value=b"x", partition=99), dict(value="text"), dict(value=b"x", key=7),
                    dict(value=b"x" * 6000)):
            try:
                p.send(topic, **bad)
                refusals.append(None)
            except Exception as exc:  # noqa: BLE001 - the class and words are compared
                refusals.append((type(exc), str(exc).replace(topic, "TOPIC")))
        p.flush(20)
        results = [(type(f).__name__, f.get(10)._replace(topic=None, topic_partition=None))
                   for f in futures]
    finally:
        p.close(5)
    return results, refusals, sorted(called)


@pytest.mark.broker
def test_send_behaves_as_kafka_pythons(tansu_broker):
    admin = kafka.KafkaAdminClient(bootstrap_servers=tansu_broker.bootstrap)
    topics = [_topic("send-plain"), _topic("send-kw")]
    try:
        admin.create_topics([kafka.admin.NewTopic(t, 3, 1) for t in topics])
    finally:
        admin.close()
    plain = _send_outcomes(tansu_broker.bootstrap, topics[0])
    kwkp.install()
    try:
        ours = _send_outcomes(tansu_broker.bootstrap, topics[1])
    finally:
        kwkp.uninstall()
    # same partitions (keys through murmur2), offsets, checksums, sizes, future type
    assert ours[0] == plain[0]
    assert len({md.partition for _, md in ours[0]}) == 3
    assert ours[1] == plain[1]  # every refusal: kafka-python's class and words
    assert all(r is not None for r in ours[1])
    assert ours[2] == plain[2]  # every callback, with the partition it reports
    assert [i for i, _ in ours[2]] == list(range(400))


@pytest.mark.broker
def test_send_partitions_keys_as_kafka_pythons_partitioner(tansu_broker):
    """A keyed record's partition, computed in send() for kafka-python's DefaultPartitioner,
    is the one that partitioner picks; another partitioner (a subclass too) and a
    KafkaProducer subclass with its own _partition are still called, once per record."""
    from kafka.partitioner.default import DefaultPartitioner

    topic = _topic("send-keys")
    admin = kafka.KafkaAdminClient(bootstrap_servers=tansu_broker.bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, 5, 1)])
    finally:
        admin.close()
    calls = []

    class Last(DefaultPartitioner):
        def partition(self, topic, key, serialized_key, value, serialized_value, cluster):
            calls.append(serialized_key)
            return 4

    class Own(kafka.KafkaProducer):
        def _partition(self, *args):
            calls.append(args[4])
            return 1

    keys = [b"k%d" % i for i in range(200)] + [b"", bytearray(b"ba"), b"\xff" * 40]
    kwkp.install()
    try:
        for cls, kw, expect in ((kafka.KafkaProducer, {}, None),
                                (kafka.KafkaProducer, {"partitioner": Last()}, 4),
                                (Own, {}, 1)):
            calls.clear()
            p = cls(bootstrap_servers=tansu_broker.bootstrap, linger_ms=5, **kw)
            try:
                p.partitions_for(topic)
                futures = [p.send(topic, value=b"v", key=k) for k in keys]
                p.flush(20)
                got = [f.get(10).partition for f in futures]
                if expect is None:  # kafka-python's pick, with its own murmur2
                    assert got == [(kwkp._ORIG_MURMUR2(k) & 0x7FFFFFFF) % 5 for k in keys]
                    assert len(set(got)) == 5 and calls == []
                else:
                    assert got == [expect] * len(keys) and calls == keys
            finally:
                p.close(5)
    finally:
        kwkp.uninstall()


def _impls():
    """The compiled helpers and their twin, each configured as kafka_python configures
    the one it uses."""
    from kafkawire.compat import _factory_py

    impls = [_factory_py]
    try:
        from kafkawire import _compat
    except ImportError:  # the twin-only build
        _compat = None
    if _compat is not None and codec.IMPLEMENTATION == "cython":
        impls.append(_compat)
    for impl in impls:
        impl.configure_kafka_python(
            kwkp._FRM, kwkp._Lock, kwkp._RecordMetadata, kwkp._k_future.log,
            kwkp.MemoryRecordsBuilder, kwkp.DefaultRecordBatchBuilder,
            k_accumulator.AtomicInteger, time.monotonic)
    return impls


@pytest.mark.parametrize("impl", _impls(), ids=lambda m: m.__name__)
def test_record_future_is_kafka_pythons_own(impl):
    """The future _send makes is the one FutureRecordMetadata(...) makes, field by field
    (this catches a kafka-python release that adds state to it)."""
    from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

    def state(f):
        slots = [s for cls in type(f).__mro__ for s in getattr(cls, "__slots__", ())]
        return {s: getattr(f, s) for s in slots if s != "_lock"}

    headers = [("a", b"xy"), ("é", b"")]
    theirs_pf, ours_pf = FutureProduceResult(("t", 0)), FutureProduceResult(("t", 0))
    theirs = FutureRecordMetadata(theirs_pf, 5, 1_700, None, 3, 10, 2 + 1 + 2)
    ours = impl.kafka_python_record_future(ours_pf, 5, 1_700, None, b"key", b"0123456789",
                                           headers)
    assert type(ours) is type(theirs)
    assert {k: v for k, v in state(ours).items() if k != "_produce_future"} == \
        {k: v for k, v in state(theirs).items() if k != "_produce_future"}
    assert ours._produce_future is ours_pf
    assert type(ours._lock) is type(theirs._lock)
    ours_pf.success((100, -1, None))
    theirs_pf.success((100, -1, None))
    assert ours.get(0) == theirs.get(0)


def _resolved_runs(make, result, fail=None):
    """Seven record futures on one batch future, the third and fifth made by kafka-python
    (as the first record of a batch is, and a record sent through its own send()), each
    with a callback (the fourth's raising); what each holds once the batch resolves, and
    the order the callbacks ran in."""
    from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

    pf = FutureProduceResult(kafka.TopicPartition("t", 2))
    calls = []
    futures = []
    for i in range(7):
        if i in (2, 4):
            f = FutureRecordMetadata(pf, i, 1_700 + i, None, 3, 4, -1)
        else:
            f = make(pf, i, 1_700 + i, None, b"abc", b"defg", [("h", b"x")] if i == 6 else [])
        f.add_callback(lambda md, i=i: calls.append(("ok", i, md.offset)))
        f.add_errback(lambda exc, i=i: calls.append(("error", i, str(exc))))
        if i == 3:
            f.add_callback(lambda md: 1 / 0)  # logged by kafka-python's Future, not raised
        futures.append(f)
    registered = len(pf._callbacks)
    if fail is None:
        pf.success(result)
    else:
        pf.failure(fail)
    return ([(f.is_done, f.value, type(f.exception), str(f.exception)) for f in futures], calls,
            registered)


@pytest.mark.parametrize("impl", _impls(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("result", [(100, -1, None), (100, 1_800_000_000_000, None),
                                    (-1, None, None), (7, -1, lambda i: k_errors.KafkaError(f"#{i}")),
                                    k_errors.KafkaTimeoutError("expired")],
                         ids=["create-time", "log-append-time", "no-offset", "record-errors",
                              "failure"])
def test_runs_of_record_futures_resolve_as_kafka_pythons(impl, result):
    """Record futures made by kafkawire are resolved by one callback per run of them on
    the batch's future: every future as kafka-python's own resolves it, the callbacks in
    the records' order, runs and kafka-python's own futures interleaved."""
    from kafka.producer.future import FutureRecordMetadata

    fail = result if isinstance(result, Exception) else None
    def theirs_make(pf, i, ts, crc, k, v, h):
        return FutureRecordMetadata(pf, i, ts, crc, len(k), len(v),
                                    sum(len(a.encode()) + len(b) for a, b in h) if h else -1)

    theirs = _resolved_runs(theirs_make, result, fail)
    kwkp.install()
    try:
        ours = _resolved_runs(impl.kafka_python_record_future, result, fail)
    finally:
        kwkp.uninstall()
    assert ours[:2] == theirs[:2]
    assert all(done for done, *_ in ours[0])
    assert [i for _, i, _ in ours[1]] == list(range(7))
    assert (ours[2], theirs[2]) == (5, 7)  # runs [0, 1], [3], [5, 6]; one each of theirs


@pytest.mark.parametrize("impl", _impls(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("outcome", ["success", "record-errors", "failure"])
@pytest.mark.parametrize("batch_raises", [False, True], ids=["batch-logs", "batch-raises"])
def test_a_record_callback_raising_does_not_stop_the_rest_of_its_run(impl, outcome, batch_raises,
                                                                      monkeypatch, caplog):
    """With error_on_callbacks, a record's callback (or errback) that raises ends that
    record's callbacks, and kafka-python's batch future logs it and goes on to the next
    record (or, with its own error_on_callbacks, raises it and stops): the rest of a run
    are resolved as kafka-python's own futures are."""
    from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

    monkeypatch.setattr(FutureRecordMetadata, "error_on_callbacks", True)
    monkeypatch.setattr(FutureProduceResult, "error_on_callbacks", batch_raises)

    def resolve(make):
        pf = FutureProduceResult(TopicPartition("t", 0))
        calls = []
        futures = [make(pf, i, 1_700 + i, None, b"k", b"v", []) for i in range(3)]
        for i, f in enumerate(futures):
            f.add_callback(lambda md, i=i: calls.append(("ok", i, md.offset)))
            f.add_errback(lambda exc, i=i: calls.append(("error", i, str(exc))))
        futures[0].add_callback(lambda md: 1 / 0)
        futures[0].add_errback(lambda exc: 1 / 0)
        caplog.clear()
        raised = False
        with caplog.at_level(40, logger="kafka.future"):
            try:
                if outcome == "failure":
                    pf.failure(k_errors.KafkaTimeoutError("expired"))
                else:
                    pf.success((100, -1, (lambda i: k_errors.KafkaError(f"#{i}"))
                                if outcome == "record-errors" else None))
            except ZeroDivisionError:
                raised = True
        logged = [r.getMessage() for r in caplog.records if r.name == "kafka.future"]
        return [(f.is_done, f.value, str(f.exception)) for f in futures], calls, logged, raised

    theirs = resolve(lambda pf, i, ts, crc, k, v, h: FutureRecordMetadata(pf, i, ts, crc, 1, 1, -1))
    kwkp.install()
    try:
        ours = resolve(impl.kafka_python_record_future)
    finally:
        kwkp.uninstall()
    assert ours == theirs
    assert ours[3] is batch_raises
    assert [done for done, *_ in ours[0]] == [True, not batch_raises, not batch_raises]
    assert len(ours[2]) == 2  # the record's own loop, then the batch future's


@pytest.mark.parametrize("result", [(100, -1, None), (100, 1_800_000_000_000, None),
                                    (-1, None, None), (7, -1, lambda i: k_errors.KafkaError(f"#{i}"))])
def test_record_futures_resolve_as_kafka_pythons(result):
    from kafka.producer.future import FutureProduceResult, FutureRecordMetadata

    def resolved():
        pf = FutureProduceResult(kafka.TopicPartition("t", 2))
        futures = [FutureRecordMetadata(pf, i, 1_700 + i, None, 3, 4, -1) for i in range(3)]
        pf.success(result)
        return [(f.is_done, f.value, type(f.exception), str(f.exception)) for f in futures]

    theirs = resolved()
    kwkp.install()
    try:
        assert k_producer.FutureRecordMetadata._produce_success is kwkp._produce_success
        ours = resolved()
    finally:
        kwkp.uninstall()
    assert ours == theirs
    assert all(done for done, *_ in ours)


@pytest.mark.parametrize("impl", _impls(), ids=lambda m: m.__name__)
def test_a_split_batch_resolves_its_records_as_kafka_pythons(impl):
    """A batch the broker refused as too large is split and its record futures rebound
    to the new batches (RecordAccumulator.split_and_reenqueue): each resolves once, with
    its offset in the new batch, whether kafka-python or kafkawire appended it."""
    from kafka.producer.record_accumulator import RecordAccumulator

    def outcome(append):
        acc = RecordAccumulator(batch_size=1 << 20, linger_ms=5, message_version=2,
                                compression_attrs=0)
        tp = TopicPartition("t", 0)
        futures = [append(acc, tp, 1_700 + i, b"k%d" % i, b"v" * i, []) for i in range(9)]
        (batch,) = acc._batches[tp]
        acc._batches[tp].popleft()
        batch.records.close()
        assert acc.split_and_reenqueue(batch) == 2
        for base, new in zip((100, 200), list(acc._batches[tp])):
            new.records.close()
            new.complete(base, -1)
        return [(f.get(0).offset, f.get(0).timestamp, f.get(0).serialized_value_size)
                for f in futures]

    theirs = outcome(lambda acc, *args: acc.append(*args)[0])
    kwkp.install()
    try:
        ours = outcome(lambda *args: impl.kafka_python_append(*args)[0])
    finally:
        kwkp.uninstall()
    assert ours == theirs
    assert [o for o, _, _ in ours] == [100, 101, 102, 103, 104, 200, 201, 202, 203]


@pytest.mark.parametrize("impl", _impls(), ids=lambda m: m.__name__)
def test_record_callbacks_see_the_collector_as_the_program_left_it(impl):
    """The collector is paused while a batch's futures are resolved, not while a user's
    callback runs: a callback sees it on, and what a callback sets stays."""
    import gc

    from kafka.producer.future import FutureProduceResult

    pf = FutureProduceResult(kafka.TopicPartition("t", 0))
    seen = []
    for i in range(3):
        f = impl.kafka_python_record_future(pf, i, 1_700, None, b"k", b"v", [])
        f.add_callback(lambda md: seen.append(gc.isenabled()))
    f.add_callback(lambda md: gc.disable())
    assert gc.isenabled()
    try:
        pf.success((0, -1, None))
        assert seen == [True, True, True]
        assert not gc.isenabled()  # the last callback's doing
    finally:
        gc.enable()


@pytest.mark.broker
def test_send_writes_kafka_pythons_debug_lines(tansu_broker, caplog, monkeypatch):
    """With debug logging on, send() writes kafka-python's lines, the producer's own
    words in them (kafkawire formats them only when they are written), and none once
    kafka-python has silenced its module's logger (a producer's close() from __del__
    puts a null logger in its place)."""
    import logging

    topic = _topic("send-log")

    def lines(log=logging.getLogger(k_producer.__name__)):
        # (the last producer's __del__ may have put the null logger in place already)
        monkeypatch.setattr(k_producer, "log", log)
        p = kafka.KafkaProducer(bootstrap_servers=tansu_broker.bootstrap, linger_ms=5)
        try:
            p.partitions_for(topic)
            caplog.clear()
            with caplog.at_level(10, logger="kafka.producer.kafka"):
                for i in range(3):
                    p.send(topic, b"v%d" % i, key=b"k", partition=0)
            p.flush(20)
            return [r.getMessage().replace(str(p), "PRODUCER") for r in caplog.records
                    if r.name == "kafka.producer.kafka"]
        finally:
            p.close(5)

    theirs = lines()
    kwkp.install()
    try:
        ours = lines()
        silenced = lines(types.SimpleNamespace(debug=lambda *a: None, info=lambda *a: None,
                                               isEnabledFor=lambda *a: None))
    finally:
        kwkp.uninstall()
    assert ours == theirs
    assert any("PRODUCER: Waking up the sender" in line for line in ours)
    assert silenced == []


@pytest.mark.parametrize("bad_key", [None, b"\x00\x00\x01", b"\x00\x00\x00\x01\x00"])
@pytest.mark.parametrize("compression", [0, 4])
def test_control_record_whose_key_is_not_4_bytes_raises_where_kafka_python_does(
        bad_key, compression):
    # kafka-python reads a control record's version and type when it makes the record:
    # TypeError for a null key, struct.error for another size, after the records before
    records = [(1_700_000_000_000, b"\x00\x00\x00\x01", b"", []),
               (1_700_000_000_001, bad_key, b"", [])]
    buf = bytearray(assign_offsets(orig_build(2, compression, records), BASE))
    buf[22] |= 0x30  # a control batch of a transaction (the CRC made right again)
    struct.pack_into(">I", buf, 17, codec.crc32c(bytes(buf[21:])))
    got = same_view(bytes(buf))
    batch = got[2][1]
    assert [r["offset"] for r in batch["records"][:-1]] == [BASE]
    assert batch["records"][-1] == ("raises", TypeError if bad_key is None else struct.error)
    same_fetch(bytes(buf))
