"""Interoperability with independent encoders and decoders: kafka-python and aiokafka.

Sets built by their record builders must decode identically with kafkawire, and sets
kafkawire builds must decode (CRCs valid) identically with their readers, for every
format x codec each peer supports.  aiokafka ships a Cython and a pure-Python
implementation; both are exercised.

Producers do not know offsets: the peers' builders write wrapper/base offset 0 and a
broker assigns the real one.  `assign_offsets` does what the broker does (the offset field
is outside every CRC), so that the relative offsets of KIP-31 resolve as they would after
a fetch.
"""

from __future__ import annotations

import random
import struct

import aiokafka.record.default_records as aio_default
import aiokafka.record.legacy_records as aio_legacy
import aiokafka.record.memory_records as aio_memory
import kafka.record.default_records as kafka_default
import kafka.record.legacy_records as kafka_legacy
import kafka.record.memory_records as kafka_memory
import pytest

from kafkawire import codec


class Peer:
    def __init__(self, name, legacy_builder, default_builder, memory_records, codecs):
        self.name = name
        self.legacy_builder = legacy_builder
        self.default_builder = default_builder
        self.memory_records = memory_records
        self.codecs = codecs  # magic -> codecs the peer supports

    def __repr__(self) -> str:
        return self.name


PEERS = [
    Peer(
        "kafka-python",
        kafka_legacy.LegacyRecordBatchBuilder,
        kafka_default.DefaultRecordBatchBuilder,
        kafka_memory.MemoryRecords,
        {0: [0, 1, 2, 3], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3, 4]},
    ),
    Peer(
        "aiokafka-cython",
        aio_legacy.LegacyRecordBatchBuilder,
        aio_default.DefaultRecordBatchBuilder,
        aio_memory.MemoryRecords,
        # aiokafka refuses lz4 with magic 0 (the KIP-57 checksum quirk, KAFKA-3160)
        {0: [0, 1, 2], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3, 4]},
    ),
    Peer(
        "aiokafka-python",
        aio_legacy._LegacyRecordBatchBuilderPy,
        aio_default._DefaultRecordBatchBuilderPy,
        aio_memory._MemoryRecordsPy,
        {0: [0, 1, 2], 1: [0, 1, 2, 3], 2: [0, 1, 2, 3, 4]},
    ),
]


def test_aiokafka_cython_records_are_loaded() -> None:
    # Otherwise the "cython" peer above would silently be the pure one twice.
    assert aio_legacy.LegacyRecordBatchBuilder is not aio_legacy._LegacyRecordBatchBuilderPy
    assert aio_default.DefaultRecordBatchBuilder is not aio_default._DefaultRecordBatchBuilderPy


CASES = [
    (peer, magic, codec_id)
    for peer in PEERS
    for magic in (0, 1, 2)
    for codec_id in peer.codecs[magic]
]
CASE_IDS = [f"{peer.name}-magic{magic}-codec{codec_id}" for peer, magic, codec_id in CASES]
BASE = 1_000


def sample_records(magic: int, n: int = 25) -> list[tuple]:
    """(key, value, timestamp, headers): nulls, empties, binary, a big compressible value."""
    rng = random.Random(magic * 100 + n)
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else (b"" if i % 7 == 0 else b"key-%d" % i)
        if i % 5 == 3:
            value = None
        elif i == 10:
            value = b"0123456789" * 500
        else:
            value = rng.randbytes(rng.randrange(0, 60))
        headers = []
        if magic == 2 and i % 3:
            headers = [("trace", b"t%d" % i), ("empty", b""), ("null", None)][: i % 4]
        out.append((key, value, 1_600_000_000_000 + i * 7 + (i % 3) * 1000, headers))
    return out


def expected_records(records, magic, base=BASE):
    out = []
    for i, (key, value, ts, headers) in enumerate(records):
        if magic == 0:
            out.append((base + i, -1, -1, key, value, ()))
        else:
            out.append((base + i, ts, 0, key, value, tuple(headers)))
    return out


def fields(r) -> tuple:
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))


# ---- the broker's part: assigning offsets ----------------------------------------------


def assign_offsets(data: bytes, base: int, count: int) -> bytes:
    """Rewrite the offset fields of a freshly produced set as a broker appends it."""
    buf = bytearray(data)
    magic = buf[16]
    if magic == 2:
        struct.pack_into(">q", buf, 0, base)  # baseOffset; records carry deltas
        return bytes(buf)
    pos = 0
    entries = []
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        entries.append(pos)
        pos += 12 + size
    if len(entries) == 1 and buf[17] & 0x07:  # attributes of the first entry
        # one compressed wrapper: it carries the offset of its last inner message
        struct.pack_into(">q", buf, 0, base + count - 1)
    else:
        for i, at in enumerate(entries):
            struct.pack_into(">q", buf, at, base + i)
    return bytes(buf)


# ---- peers: build and read --------------------------------------------------------------


def peer_build(peer: Peer, magic: int, codec_id: int, records, base: int = BASE) -> bytes:
    if magic == 2:
        builder = peer.default_builder(
            magic=2, compression_type=codec_id, is_transactional=0, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 24,
        )
        for i, (key, value, ts, headers) in enumerate(records):
            assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    else:
        builder = peer.legacy_builder(magic=magic, compression_type=codec_id, batch_size=1 << 24)
        # magic 0 inner offsets are absolute (a broker recompresses to assign them);
        # magic 1 inner offsets are relative (KIP-31)
        first = base if magic == 0 else 0
        for i, (key, value, ts, _headers) in enumerate(records):
            assert builder.append(first + i, timestamp=ts, key=key, value=value)
    return assign_offsets(bytes(builder.build()), base, len(records))


def peer_read(peer: Peer, data: bytes) -> tuple[list[tuple], list]:
    memory = peer.memory_records(bytes(data))
    records, batches = [], []
    while memory.has_next():
        batch = memory.next_batch()
        assert batch.validate_crc(), f"{peer.name} rejects the CRC of a kafkawire set"
        batches.append(batch)
        for r in batch:
            records.append((
                r.offset,
                -1 if r.timestamp is None else r.timestamp,
                -1 if r.timestamp_type is None else r.timestamp_type,
                r.key,
                r.value,
                tuple(tuple(h) for h in (r.headers or ())),
            ))
    return records, batches


# ---- tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("peer, magic, codec_id", CASES, ids=CASE_IDS)
def test_peer_sets_decode_in_kafkawire(peer: Peer, magic: int, codec_id: int) -> None:
    records = sample_records(magic)
    data = peer_build(peer, magic, codec_id, records)
    expected = expected_records(records, magic)
    # the peer reads its own set the same way (a check of the expectation itself)
    assert peer_read(peer, data)[0] == expected
    assert [fields(r) for r in codec.decode_records(data)] == expected
    assert [fields(r) for r in codec.decode_columnar(data).to_records()] == expected
    batches = codec.decode_batches(data)
    assert all(b.magic == magic and b.compression == codec_id for b in batches)
    assert batches[0].base_offset == BASE
    assert [fields(r) for r in codec.decode_records(data, start_offset=BASE + 20)] == expected[20:]


@pytest.mark.parametrize("peer, magic, codec_id", CASES, ids=CASE_IDS)
def test_kafkawire_sets_decode_in_peer(peer: Peer, magic: int, codec_id: int) -> None:
    records = sample_records(magic)
    if magic == 2:
        data = codec.encode_record_batch(records, base_offset=BASE, compression=codec_id)
    else:
        data = codec.encode_message_set(
            [r[:3] for r in records], magic=magic, compression=codec_id, base_offset=BASE
        )
    expected = expected_records(records, magic)
    got, batches = peer_read(peer, data)
    assert got == expected
    if magic == 2:  # (aiokafka's legacy batches do not expose their codec)
        assert all(b.compression_type == codec_id for b in batches)
        [batch] = batches
        assert batch.base_offset == BASE
        assert batch.last_offset_delta == len(records) - 1
        assert batch.max_timestamp == max(r[2] for r in records)
        assert batch.first_timestamp == records[0][2]
        assert batch.crc == codec.decode_batches(data)[0].crc


@pytest.mark.parametrize("peer", PEERS, ids=repr)
@pytest.mark.parametrize("codec_id", [0, 1, 2, 3, 4])
def test_kafkawire_columnar_sets_decode_in_peer(peer: Peer, codec_id: int) -> None:
    records = sample_records(2)
    cols = codec.Columns.from_records(records)
    data = codec.encode_columnar(cols, base_offset=BASE, compression=codec_id)
    assert peer_read(peer, data)[0] == expected_records(records, 2)


@pytest.mark.parametrize("peer", PEERS, ids=repr)
def test_log_append_time_wrapper_in_peer(peer: Peer) -> None:
    records = [(b"k", b"v%d" % i, 1000 + i) for i in range(3)]
    data = codec.encode_message_set(
        records, magic=1, compression=1, base_offset=7, timestamp=99_000, log_append_time=True
    )
    got, _ = peer_read(peer, data)
    assert [(r[0], r[1], r[2]) for r in got] == [(7, 99_000, 1), (8, 99_000, 1), (9, 99_000, 1)]
    batch = codec.encode_record_batch(
        [(*r, []) for r in records], base_offset=7, timestamp=99_000, log_append_time=True
    )
    got, _ = peer_read(peer, batch)
    assert [(r[0], r[1], r[2]) for r in got] == [(7, 99_000, 1), (8, 99_000, 1), (9, 99_000, 1)]


@pytest.mark.parametrize("peer", PEERS, ids=repr)
def test_transactional_batches_both_ways(peer: Peer) -> None:
    records = [(b"k", b"v%d" % i, 5000 + i, []) for i in range(4)]
    data = codec.encode_record_batch(
        records, base_offset=BASE, compression=1, is_transactional=True,
        producer_id=123_456_789, producer_epoch=7, base_sequence=40,
    )
    got, [batch] = peer_read(peer, data)
    assert len(got) == 4
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123_456_789, 7, 40)

    builder = peer.default_builder(
        magic=2, compression_type=1, is_transactional=1, producer_id=123_456_789,
        producer_epoch=7, base_sequence=40, batch_size=1 << 20,
    )
    for i, (key, value, ts, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    theirs = assign_offsets(bytes(builder.build()), BASE, 4)
    [ours] = codec.decode_batches(theirs)
    assert ours.is_transactional is True and ours.is_control is False
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence) == (123_456_789, 7, 40)
    assert [fields(r) for r in ours.records] == expected_records(records, 2)


@pytest.mark.parametrize("peer", PEERS, ids=repr)
def test_control_batch_in_peer(peer: Peer) -> None:
    commit = (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x03", 77)  # COMMIT, coordinator 3
    data = codec.encode_record_batch(
        [commit], base_offset=50, is_control=True, is_transactional=True,
        producer_id=9, producer_epoch=1,
    )
    memory = peer.memory_records(bytes(data))
    batch = memory.next_batch()
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert codec.decode_records(data) == []


def test_all_peers_read_one_mixed_buffer() -> None:
    """One fetch-like buffer mixing kafkawire and peer sets of all magics."""
    parts = []
    expected = []
    offset = 0
    common = [c for c in CASES if all(c[2] in p.codecs[c[1]] for p in PEERS)]
    for peer, magic, codec_id in common[::3]:
        records = sample_records(magic, n=5)
        parts.append(peer_build(peer, magic, codec_id, records, base=offset))
        expected += expected_records(records, magic, base=offset)
        offset += 5
    data = b"".join(parts)
    assert [fields(r) for r in codec.decode_records(data)] == expected
    # aiokafka's Cython MemoryRecords (0.14) misreads this buffer (a magic-1 lz4 set after
    # seven other mixed-magic sets is taken for magic 0); its pure-Python reader and
    # kafka-python read it, so they are the reference here.
    for peer in (PEERS[0], PEERS[2]):
        assert peer_read(peer, data)[0] == expected
