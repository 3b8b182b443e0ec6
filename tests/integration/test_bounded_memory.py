"""Memory stays bounded by the configured limits, measured on a real broker.

* A consumer that cannot keep up (slow polls, small max_poll_records, a topic 32 times
  larger than fetch_max_bytes, lag monitoring between polls that reads the fetch answers
  early) buffers at most two fetch answers per partition: its metrics() and the memory
  Python traces (tracemalloc) stay within the limits below, whatever the backlog.  (With
  no cap, on the mock: 1.5 MB buffered and 5.7 MB of answers retained, and growing with
  the topic.)
* A producer whose broker is down fills buffer_memory and then blocks: send() raises
  BufferExhaustedError after max_block_ms, and neither metrics()['buffered_bytes'] nor
  the traced memory grow past buffer_memory (with the slack stated).

Figures are printed (pytest -s) for the record.
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
import uuid

import pytest
from topics import ensure_topic

from kafkawire.client.consumer import Consumer
from kafkawire.errors import BufferExhaustedError
from kafkawire.client.producer import Producer

pytestmark = pytest.mark.broker

PARTITIONS = 4
PER_PARTITION = 2 * 1024 * 1024  # bytes of values per partition (8 MB in all)
VALUE = 1000
MAX_PARTITION_FETCH = 64 * 1024
FETCH_MAX = 256 * 1024


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fill(bootstrap: str, topic: str) -> int:
    n = PER_PARTITION // VALUE
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=16 * 1024) as p:
        for i in range(n):
            for part in range(PARTITIONS):
                p.send(topic, i.to_bytes(4, "big") * (VALUE // 4), partition=part)
        p.flush(60)
    return n


@pytest.mark.parametrize("which", [pytest.param("kafka", marks=pytest.mark.kafka),
                                   pytest.param("mock", marks=pytest.mark.mock),
                                   pytest.param("tansu", marks=pytest.mark.tansu)])
def test_slow_consumer_buffers_at_most_two_fetches_per_partition(which, request):
    # Tansu ignores max_partition_fetch_bytes: one partition's answer runs up to
    # fetch_max_bytes (and past it by the batch that crosses it), so there each answer is
    # bounded by that instead; Kafka and the librdkafka mock keep both limits.
    topic = f"mem-c-{uuid.uuid4().hex[:6]}"
    broker = request.getfixturevalue(f"{which}_broker" if which != "mock" else "mock_cluster")
    if which == "mock":
        broker.create_topic(topic, PARTITIONS)
    elif which == "kafka":
        ensure_topic(broker.bootstrap, topic, PARTITIONS)
    n = _fill(broker.bootstrap, topic)
    c = Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                 max_poll_records=10, max_partition_fetch_bytes=MAX_PARTITION_FETCH,
                 fetch_max_bytes=FETCH_MAX, fetch_max_wait_ms=100)
    seen = {p: 0 for p in range(PARTITIONS)}
    peak = {"buffered_bytes": 0, "retained_bytes": 0, "buffered_records": 0}
    try:
        tps = [(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        # Warm up (connections, metadata, first answers), then measure from there.
        for r in c.poll(10):
            assert r.offset == seen[r.partition]
            seen[r.partition] += 1
        gc.collect()
        tracemalloc.start()
        traced_start = tracemalloc.get_traced_memory()[0]
        rss_start = _rss()
        deadline = time.monotonic() + 240
        polls = 0
        while sum(seen.values()) < n * PARTITIONS and time.monotonic() < deadline:
            records = c.poll(5)
            polls += 1
            for r in records:
                assert r.offset == seen[r.partition], (r.partition, r.offset)
                seen[r.partition] += 1
            del records
            m = c.metrics()
            for k in peak:
                peak[k] = max(peak[k], m[k])
            time.sleep(0.002)  # a slow caller: the broker could send far more meanwhile
            if polls % 5 == 0:
                # Lag monitoring between polls: its I/O also reads the fetch answers that
                # arrived, so they are buffered now, not when poll() runs dry.
                c.end_offsets(tps, timeout=10)
        traced_now, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss_growth = _rss() - rss_start
    finally:
        c.close()
    assert seen == {p: n for p in range(PARTITIONS)}  # every record, in order, once
    print(f"\nslow consumer ({which}): {polls} polls of <= 10 records over {PARTITIONS * PER_PARTITION >> 20} MB; "
          f"peak buffered_bytes={peak['buffered_bytes']} retained_bytes={peak['retained_bytes']} "
          f"buffered_records={peak['buffered_records']}; traced peak growth="
          f"{traced_peak - traced_start} bytes, end growth={traced_now - traced_start}; "
          f"RSS growth={rss_growth}")
    # Two undecoded answers per partition, each <= max_partition_fetch_bytes (Tansu: the
    # fetch_max_bytes and a batch over), plus the decoded rest of one record batch (<= 16 KB
    # here) per partition.
    answer = MAX_PARTITION_FETCH if which != "tansu" else FETCH_MAX + 16 * 1024
    assert peak["buffered_bytes"] <= PARTITIONS * (2 * answer + 16 * 1024)
    # The answers that data keeps alive: each <= fetch_max_bytes (Tansu: and a batch over),
    # at most two per partition.
    assert peak["retained_bytes"] <= 2 * PARTITIONS * (FETCH_MAX + (0 if which != "tansu" else 16 * 1024))
    assert peak["buffered_records"] <= PARTITIONS * 16  # one batch's rest: 16 records of 1 KB
    # What Python allocated on top, at its peak: the retained answers, one answer being
    # read (and a 64 KB receive buffer) and the records of one poll, with 2 MB of slack;
    # 8 MB were consumed, so a buffer that grew with the backlog would exceed this.
    assert traced_peak - traced_start <= 2 * PARTITIONS * FETCH_MAX + (1 << 20) + (2 << 20)
    assert traced_now - traced_start <= 2 * PARTITIONS * FETCH_MAX + (2 << 20)


@pytest.mark.broker
def test_producer_with_its_broker_down_keeps_to_buffer_memory(tansu_broker_factory):
    broker = tansu_broker_factory()
    topic = f"mem-p-{uuid.uuid4().hex[:6]}"
    buffer_memory = 512 * 1024
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=16 * 1024,
                 buffer_memory=buffer_memory, max_block_ms=500, request_timeout_ms=1000,
                 delivery_timeout_ms=120_000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    try:
        p.send(topic, b"warm", partition=0).result(10)
        p.partitions_for(topic, timeout=10)
        broker.stop()
        gc.collect()
        tracemalloc.start()
        traced_start = tracemalloc.get_traced_memory()[0]
        peak_buffered = 0
        sent = 0
        t0 = time.monotonic()
        with pytest.raises(BufferExhaustedError, match="buffer_memory"):
            while time.monotonic() - t0 < 60:
                p.send(topic, sent.to_bytes(4, "big") * (VALUE // 4))  # a new object each
                sent += 1
                peak_buffered = max(peak_buffered, p.metrics()["buffered_bytes"])
        blocked = time.monotonic() - t0
        # Again, now that it is full: blocks max_block_ms, then the same error.
        t1 = time.monotonic()
        with pytest.raises(BufferExhaustedError):
            p.send(topic, b"v" * VALUE)
        second = time.monotonic() - t1
        peak_buffered = max(peak_buffered, p.metrics()["buffered_bytes"])
        traced_now, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        p.close(1)
    print(f"\nproducer, broker down: {sent} records of {VALUE} B accepted in {blocked:.2f}s, "
          f"peak buffered_bytes={peak_buffered} (buffer_memory={buffer_memory}); full send "
          f"blocked {second:.2f}s; traced growth={traced_now - traced_start}, peak="
          f"{traced_peak - traced_start}")
    assert peak_buffered <= buffer_memory
    assert sent * VALUE <= buffer_memory  # nothing accepted beyond the budget
    assert sent * VALUE >= buffer_memory // 2  # and the budget was really used
    assert 0.45 <= second  # it did wait (max_block_ms=500) before giving up
    # Python's view: the records' bytes plus their tuples and batch bookkeeping
    # (about 100 bytes a record), with 1 MB of slack.
    assert traced_peak - traced_start <= buffer_memory + sent * 200 + (1 << 20)
