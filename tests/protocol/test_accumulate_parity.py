"""The producer's per-record append, compiled (kafkawire._accumulate) and its pure-Python
twin (kafkawire.protocol._accumulate_py): for the same sequence of appends both give the
same decisions (which appends the hot path takes, which batch and offset delta, when a
batch is made or closed, the memory reserved) and byte-identical batches, equal to
``codec.encode_record_batch`` of the same records, for every compression.
"""

from __future__ import annotations

import os
import random
import threading
from collections import deque
from typing import Any

import pytest
from twins import both_forms

from kafkawire import codec, errors
from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.client.producer import RecordFuture
from kafkawire.protocol import _accumulate_py, accumulator
from kafkawire.protocol.accumulator import RECORD_OVERHEAD, Accumulator

IMPLS, _compiled = both_forms("kafkawire._accumulate", _accumulate_py)
needs_compiled = pytest.mark.skipif(_compiled is None, reason="kafkawire._accumulate is not built")

NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CODECS = [codec.CODEC_NONE, codec.CODEC_GZIP, codec.CODEC_SNAPPY, codec.CODEC_LZ4, codec.CODEC_ZSTD]


def test_the_implementation_follows_the_codec() -> None:
    # KAFKAWIRE_PUREPYTHON picks both twins; CI's expectation covers this one too, so a
    # missing _accumulate extension fails the compiled run instead of passing as Python.
    assert accumulator.IMPLEMENTATION == codec.IMPLEMENTATION
    expected = os.environ.get("KAFKAWIRE_EXPECT_IMPLEMENTATION")
    if expected:
        assert accumulator.IMPLEMENTATION == expected


def _records(rng: random.Random, n: int) -> list[tuple]:
    out = []
    base = 1_700_000_000_000
    for i in range(n):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 16, 200]))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 5, 100, 300, 20_000]))
        ts = base + rng.randrange(-5000, 5000)
        headers = None
        if rng.random() < 0.3:
            headers = tuple((rng.choice([b"", b"h", "\u00e9t\u00e9".encode()]) + bytes([65 + j]),
                             None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 3, 150])))
                            for j in range(rng.randrange(0, 4)))
        out.append((key, value, ts, headers))
    return out


def _as_codec_input(records: list[tuple]) -> list[tuple]:
    return [(k, v, ts, [(hk.decode(), hv) for hk, hv in (h or ())]) for k, v, ts, h in records]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("compression", CODECS)
def test_batch_bytes_equal_the_codec(impl: Any, compression: int) -> None:
    rng = random.Random(compression)
    records = _records(rng, 300)
    b = impl.Batch("t", 0, 0.0, 1.0, None)
    assert [b.add(*r) for r in records] == list(range(len(records)))
    assert b.count() == b.appended == len(records)
    for stamp in [(-1, -1, -1, False), (4242, 7, 100, False), (4242, 7, 2**31 - 5, True)]:
        got = b.encode_v2(compression, None, *stamp)
        want = codec.encode_record_batch(
            _as_codec_input(records), compression=compression, producer_id=stamp[0],
            producer_epoch=stamp[1], base_sequence=stamp[2], is_transactional=stamp[3])
        if compression in (codec.CODEC_NONE, codec.CODEC_GZIP, codec.CODEC_LZ4, codec.CODEC_ZSTD):
            assert got == want
        (batch,) = codec.decode_batches(got)
        assert batch.producer_id == stamp[0] and batch.base_sequence == stamp[2]
        assert [(r.key, r.value, r.timestamp) for r in batch.records] == [r[:3] for r in records]
        assert [[(k.encode(), v) for k, v in r.headers] for r in batch.records] == [
            list(r[3] or ()) for r in records]


@needs_compiled
@pytest.mark.parametrize("compression", CODECS)
def test_twins_give_identical_bytes(compression: int) -> None:
    rng = random.Random(100 + compression)
    records = _records(rng, 500)
    out = []
    for impl in (_accumulate_py, _compiled):
        b = impl.Batch("t", 3, 0.0, 1.0, None)
        for r in records:
            b.add(*r)
        out.append(b.encode_v2(compression, None, 9, 1, 17, True))
    assert out[0] == out[1]


@pytest.mark.parametrize("impl", IMPLS)
def test_batch_edges(impl: Any) -> None:
    b = impl.Batch("t", 0, 0.0, 1.0, None)
    with pytest.raises(errors.EncodeError, match="at least one record"):
        b.encode_v2(0, None, -1, -1, -1, False)
    # Extreme timestamps: a delta that does not fit a varlong is refused, nothing added.
    b.add(None, b"a", -(2**63))
    with pytest.raises(errors.EncodeError, match="timestampDelta"):
        b.add(None, b"b", 2**63 - 1)
    assert b.count() == 1
    b.add(b"k", None, -(2**63) + 5)
    data = b.encode_v2(0, None, -1, -1, -1, False)
    assert data == codec.encode_record_batch([(None, b"a", -(2**63)), (b"k", None, -(2**63) + 5)])
    # Bytes-likes: bytearray and memoryview keys and values, as bytes.
    c = impl.Batch("t", 0, 0.0, 1.0, None)
    c.add(bytearray(b"key"), memoryview(b"value"), 5, [(b"h", bytearray(b"x"))])
    assert c.encode_v2(0, None, -1, -1, -1, False) == codec.encode_record_batch(
        [(b"key", b"value", 5, [("h", b"x")])])
    # Done: the records are let go of, and encoding again is an error, not wrong bytes.
    c.free()
    assert c.count() == 1
    with pytest.raises(ValueError, match="done"):
        c.encode_v2(0, None, -1, -1, -1, False)


def _trace(impl: Any, ops: list[tuple], batch_size: int, compression: int) -> list:
    """Drive an Accumulator built on ``impl`` through ``ops`` as both producers do (the
    hot path first, the full path when it says no); a trace of every decision and the
    bytes of every batch."""
    cfg = Config.producer(bootstrap_servers="h:1", batch_size=batch_size, linger_ms=5,
                          buffer_memory=1 << 30, compression_type=NAMES[compression],
                          enable_idempotence=False)
    acc = Accumulator(cfg, Future)
    clock = iter(range(10**9, 2 * 10**9, 1_000_000))
    app = impl.Appender(acc.open, acc.batch_size, threading.Lock(), RecordFuture, lambda: next(clock))
    trace: list = []

    def new_batch(topic: str, partition: int, now: float) -> Any:
        # The accumulator makes the twin's batches here; this test makes ``impl``'s.
        b = impl.Batch(topic, partition, now, now + acc.delivery_timeout, acc.new_future())
        b.allocate(acc.batch_size)
        q = acc.batches.setdefault((topic, partition), deque())
        q.append(b)
        acc.incomplete.add(b)
        acc.open[(topic, partition)] = b
        return b

    acc.new_batch = new_batch  # type: ignore[method-assign]
    now = 0.0
    for topic, partition, key, value, ts, headers in ops:
        now += 0.001
        fut = app.append(topic, partition, key, value, ts, headers)
        if fut is not None:
            b, index, stamp = fut
            trace.append(("hot", b.topic, b.partition, index, stamp, b.size))
            continue
        k, v, h, size = accumulator.prepare_record(key, value, headers, 10**7, 10**7)
        if ts is None:
            ts = next(clock) // 1_000_000
        record = (k, v, ts, h) if h else (k, v, ts)
        tp = (topic, partition)
        reserve = acc.reservation(size) if acc.needs_new_batch(tp, size) else 0
        b, index, made, closed = acc.append(tp, record, size, reserve, now)
        trace.append(("full", b.topic, b.partition, index, made, closed, b.size, b.reserved, acc.used_memory))
    by_node, _expired, _wait, _ = acc.collect(now + 1.0, lambda t, p: 1, flushing=True)
    for b in by_node.get(1, []):
        trace.append(("batch", b.topic, b.partition, b.count(), acc.encode(b, 2)))
        try:  # a broker too old for RecordBatch: a magic 1 message set, if no headers
            trace.append(("magic 1", acc.encode(b, 1)))
        except (errors.ConfigError, errors.UnsupportedCodecError) as exc:  # headers; zstd
            trace.append(("magic 1", type(exc).__name__, str(exc)))
    return trace


def _ops(seed: int, n: int) -> list[tuple]:
    rng = random.Random(seed)
    ops = []
    for _ in range(n):
        topic = rng.choice(["a", "b"])
        partition = rng.choice([0, 1, 2])
        kind = rng.random()
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice([1, 16]))
        value = rng.randbytes(rng.choice([0, 10, 100, 900]))
        ts = None if rng.random() < 0.5 else 1_700_000_000_000 + rng.randrange(10_000)
        headers = None
        if kind < 0.1:
            headers = [("h", b"v"), ("n", None)]
        elif kind < 0.15:
            value = bytearray(value)  # not bytes: the full path
        elif kind < 0.2:
            value = None
        ops.append((topic, partition, key, value, ts, headers))
    return ops


@needs_compiled
@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("batch_size", [1, 200, 1000, 4096, 1 << 20])
def test_twins_make_identical_decisions_and_batches(batch_size: int, compression: int) -> None:
    ops = _ops(batch_size * 7 + compression, 400)
    py = _trace(_accumulate_py, ops, batch_size, compression)
    cy = _trace(_compiled, ops, batch_size, compression)
    assert py == cy
    assert any(t[0] == "batch" for t in py)
    if batch_size >= 1000:
        assert any(t[0] == "hot" for t in py)  # the hot path was taken


@pytest.mark.parametrize("impl", IMPLS)
def test_hot_path_boundaries(impl: Any) -> None:
    # The hot path appends only when the record leaves the batch below batch_size (the
    # record that fills it, or any other case, goes the full path).
    b = impl.Batch("t", 0, 0.0, 1.0, None)
    b.add(None, b"x", 1)
    b.size = 61 + RECORD_OVERHEAD + 1
    size = b.size
    batch_size = size + RECORD_OVERHEAD + 10
    app = impl.Appender({("t", 0): b}, batch_size, None, RecordFuture, lambda: 5_000_000)
    assert app.append("t", 0, None, b"0123456789", 7, None) is None  # would reach batch_size
    fut = app.append("t", 0, None, b"012345678", None, None)
    assert tuple(fut) == (b, 1, 5) and type(fut) is RecordFuture
    assert b.size == size + RECORD_OVERHEAD + 9
    for args in [("t", 1, None, b"v", 1, None),  # no open batch
                 ("t", 0, "k", b"v", 1, None),  # a str key
                 ("t", 0, None, "v", 1, None),  # a str value
                 ("t", 0, None, bytearray(b"v"), 1, None),
                 ("t", 0, None, b"v", 1, [("h", b"")]),  # headers
                 ("t", 0, None, b"v", 1.5, None),  # a float timestamp
                 ("t", 0, None, b"v", 2**63, None),  # out of int64
                 ("t", -1, None, b"v", 1, None),
                 ("t", True, None, b"v", 1, None),
                 ("t", "0", None, b"v", 1, None)]:
        assert app.append(*args) is None, args
    assert b.count() == 2
    b.full = True  # closed (being sent): never appended to again
    assert app.append("t", 0, None, b"", 1, None) is None


@pytest.mark.parametrize("impl", IMPLS)
def test_send_hands_the_rest_to_the_full_path(impl: Any) -> None:
    b = impl.Batch("t", 2, 0.0, 1.0, Future())
    b.add(None, b"x", 1)
    calls = []

    def full(*args: Any) -> str:
        calls.append(args)
        return "full"

    app = impl.Appender({("t", 2): b}, 1 << 20, None, RecordFuture, lambda: 9_000_000, full,
                        lambda topic: 2)
    fut = app.send("t", b"v")  # unkeyed, no partition: the sticky one (pick)
    assert tuple(fut) == (b, 1, 9)
    seen = []
    fut2 = app.send("t", b"w", partition=2, timestamp=3, callback=lambda m, e: seen.append((m, e)))
    assert tuple(fut2) == (b, 2, 3)
    assert app.send("t", b"v", key=b"k") == "full"  # keyed, no partition: the partitioner's
    assert app.send("t", b"v", partition=2, headers=[("h", b"")]) == "full"
    app.enabled = False
    assert app.send("t", b"v", partition=2) == "full"
    assert calls == [("t", b"v", b"k", None, None, None, None),
                     ("t", b"v", None, 2, None, [("h", b"")], None),
                     ("t", b"v", None, 2, None, None, None)]
    assert b.count() == 3
    b.future.set_result((100, -1))
    assert seen and seen[0][1] is None and seen[0][0].offset == 102 and seen[0][0].timestamp == 3
    assert fut.result(0).offset == 101


# Kafka's murmur2 on the Java client's own unit-test vectors (tests/client/test_partitioner.py).
JAVA_MURMUR2 = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
                b"a-little-bit-longer-string": -1486304829, b"abc": 479470107}


@pytest.mark.parametrize("impl", IMPLS)
def test_murmur2_equals_the_partitioners(impl: Any) -> None:
    from kafkawire.core.partitioner import murmur2

    rng = random.Random(23)
    keys = [rng.randbytes(n) for n in range(70) for _ in range(20)] + [b"\xff" * 9, b"\x80" * 4]
    assert [impl.murmur2(k) for k in keys] == [murmur2(k) for k in keys]
    assert {k: impl.murmur2(k) for k in JAVA_MURMUR2} == JAVA_MURMUR2
    assert impl.murmur2(memoryview(b"foobar")) == impl.murmur2(bytearray(b"foobar")) == -790332482


def _keyed_appender(impl: Any, counts: dict | None, partitions: int = 64) -> tuple[Any, list]:
    batches = [impl.Batch("t", p, 0.0, 1.0, None) for p in range(partitions)]
    full_calls: list = []
    app = impl.Appender({("t", p): b for p, b in enumerate(batches)}, 1 << 20, None, RecordFuture,
                        lambda: 5_000_000, lambda *args: full_calls.append(args), lambda topic: 0,
                        counts)
    return app, full_calls


@pytest.mark.parametrize("impl", IMPLS)
def test_keyed_records_take_the_default_partitioners_partition(impl: Any) -> None:
    # A bytes key sent without a partition: murmur2, positive, modulo the count the
    # shell keeps in ``counts`` (read at each send: a refresh changes it in place).
    from kafkawire.core.partitioner import partition_for_key

    rng = random.Random(5)
    counts = {"t": 7}
    app, full_calls = _keyed_appender(impl, counts)
    keys = [rng.randbytes(rng.randrange(0, 40)) for _ in range(500)]
    for n in (7, 1, 64, 13):
        counts["t"] = n
        got = [app.offer("t", b"v", k)[0].partition for k in keys]
        assert got == [partition_for_key(k, n) for k in keys]
        assert [app.send("t", b"v", k)[0].partition for k in keys[:50]] == got[:50]
    assert full_calls == []
    # The full path decides: no count yet (or none usable), a key that is not bytes, a
    # topic without its count, the hot path off.
    for counts["t"] in (0, -1, None, True):
        assert app.offer("t", b"v", b"k") is None
    counts["t"] = 7
    assert app.offer("t", b"v", bytearray(b"k")) is None
    assert app.offer("u", b"v", b"k") is None
    app.send("u", b"v", b"k")
    app.enabled = False
    assert app.offer("t", b"v", b"k") is None
    assert full_calls == [("u", b"v", b"k", None, None, None, None)]
    # Without counts (a user's partitioner): every keyed record without a partition.
    app, full_calls = _keyed_appender(impl, None)
    app.send("t", b"v", b"k")
    assert app.offer("t", b"v", b"k") is None and len(full_calls) == 1
    assert app.offer("t", b"v")[0].partition == 0  # unkeyed: pick's


@needs_compiled
def test_twins_route_keyed_records_alike() -> None:
    rng = random.Random(11)
    sends = [(rng.randbytes(rng.randrange(0, 24)) if rng.random() < 0.9 else None,
              rng.choice([None, None, rng.randrange(64)])) for _ in range(2000)]
    routes = []
    for impl in (_accumulate_py, _compiled):
        counts = {"t": 1}
        app, _full = _keyed_appender(impl, counts)
        route = []
        for i, (key, partition) in enumerate(sends):
            counts["t"] = 1 + i % 64
            fut = app.offer("t", b"v", key, partition)
            route.append((fut[0].partition, fut[1]))
        routes.append(route)
    assert routes[0] == routes[1]


@pytest.mark.parametrize("impl", IMPLS)
def test_clock_for_records_without_timestamp(impl: Any) -> None:
    import time

    b = impl.Batch("t", 0, 0.0, 1.0, None)
    b.add(None, b"x", 1)
    app = impl.Appender({("t", 0): b}, 1 << 20, None, RecordFuture, time.time_ns)
    before = time.time_ns() // 1_000_000
    fut = app.append("t", 0, None, b"v", None, None)
    after = time.time_ns() // 1_000_000
    assert before <= fut[2] <= after


@pytest.mark.parametrize("impl", IMPLS)
def test_appends_racing_the_sender_lose_nothing(impl: Any) -> None:
    # The sync producer's two threads: send() appending (compiled: without the lock, see
    # Appender) while the sender closes open batches under the lock and encodes them.
    # Every record must land in exactly one batch, in order.
    cfg = Config.producer(bootstrap_servers="h:1", batch_size=1 << 20, linger_ms=0,
                          buffer_memory=1 << 30, enable_idempotence=False)
    acc = Accumulator(cfg, Future)
    lock = threading.Lock()
    app = impl.Appender(acc.open, acc.batch_size, lock, RecordFuture, lambda: 0)
    n = 60_000
    done = threading.Event()
    sent: list[bytes] = []

    def sender() -> None:
        while not done.is_set() or any(acc.batches.values()):
            with lock:
                by_node, _e, _w, _l = acc.collect(1.0, lambda t, p: 1, flushing=True)
            for b in by_node.get(1, []):
                sent.append(b.encode_v2(0, None, -1, -1, -1, False))
                with lock:
                    acc.dequeue(b)
                    acc.release(b)

    t = threading.Thread(target=sender)
    t.start()
    try:
        for i in range(n):
            value = b"%d" % i
            if app.append("t", 0, None, value, i, None) is None:
                with lock:
                    size = RECORD_OVERHEAD + len(value)
                    reserve = acc.reservation(size) if acc.needs_new_batch(("t", 0), size) else 0
                    acc.append(("t", 0), (None, value, i), size, reserve, 0.0)
    finally:
        done.set()
        t.join(60)
    assert not t.is_alive()
    got = [int(r.value) for data in sent for (batch,) in [codec.decode_batches(data)] for r in batch.records]
    assert got == list(range(n))
    assert len(sent) > 1 and acc.used_memory == 0
