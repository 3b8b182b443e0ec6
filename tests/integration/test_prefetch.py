"""The fetch a consumer sends while it still has records buffered (the prefetch) brings
records on Tansu too, so fetching overlaps the caller's work there; and it goes out only
while the consumer is behind the log's end, since when caught up it would only wait at the
broker while its cost delayed the records poll() is about to return."""

from __future__ import annotations

import uuid

import pytest

from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer
from kafkawire.protocol.fetcher import Fetcher

pytestmark = pytest.mark.broker

RECORDS = [(f"k{i}".encode(), i.to_bytes(4, "big") * 250) for i in range(3000)]


def test_prefetch_brings_records_on_tansu(kafka_broker, monkeypatch):
    topic = f"prefetch-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=5, batch_size=16 * 1024) as p:
        p.send_batch(topic, 0, RECORDS).result(30)
        p.flush(30)
    answers: list[tuple[bool, int]] = []  # (sent with records buffered, record bytes in it)
    sent: dict[int, tuple[dict, bool]] = {}
    request, on_response = Fetcher.request, Fetcher.on_response

    def noting_request(self, tps, offsets, buffered, topics):
        req, positions = request(self, tps, offsets, buffered, topics)
        sent[id(positions)] = (positions, buffered)
        return req, positions

    def noting_response(self, resp, positions, *rest):
        size = sum(len(part.records or b"") for t in resp.responses for part in t.partitions)
        answers.append((sent.pop(id(positions))[1], size))
        return on_response(self, resp, positions, *rest)

    monkeypatch.setattr(Fetcher, "request", noting_request)
    monkeypatch.setattr(Fetcher, "on_response", noting_response)
    got = []
    # Small polls and small answers: many fetches, most of them sent with records buffered.
    with Consumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest",
                  max_poll_records=50, fetch_max_bytes=128 * 1024,
                  max_partition_fetch_bytes=64 * 1024) as c:
        c.assign([(topic, 0)])
        for _ in range(500):
            got += c.poll(1.0)
            if len(got) >= len(RECORDS):
                break
    assert [(r.key, r.value) for r in got] == RECORDS
    prefetched = [size for buffered, size in answers if buffered]
    assert prefetched, answers
    # Tansu answers max_wait_ms=0 with no partitions at all; the prefetch asks for 1 ms.
    assert sum(1 for size in prefetched if size > 0) >= len(prefetched) // 2, answers


def _first_records(c: Consumer) -> list:
    """What poll() returns first (30 s at most)."""
    for _ in range(30):
        got = c.poll(1.0)
        if got:
            return got
    return []


def test_a_caught_up_consumer_hands_records_out_before_fetching_again(modern_broker, monkeypatch):
    # The answer reached the end of the log: poll() returns the record with no fetch sent
    # yet (it would only wait at the broker), and the next poll() sends it as it would have
    # gone, waiting 1 ms at most (Tansu holds a longer wait even when records come).
    topic = f"caught-up-{uuid.uuid4().hex[:8]}"
    waits: list[int] = []
    request = Fetcher.request

    def noting_request(self, tps, offsets, buffered, topics):
        req, positions = request(self, tps, offsets, buffered, topics)
        waits.append(req.max_wait_ms)
        return req, positions

    monkeypatch.setattr(Fetcher, "request", noting_request)
    with Producer(bootstrap_servers=modern_broker.bootstrap) as p:
        p.send(topic, b"first", partition=0).result(30)
        with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([(topic, 0)])
            got = _first_records(c)
            assert [r.value for r in got] == [b"first"]
            assert c.metrics()["fetches_in_flight"] == 0
            sent = len(waits)
            p.send(topic, b"second", partition=0).result(30)
            more = _first_records(c)
            assert [(r.offset, r.value) for r in more] == [(1, b"second")]
            assert waits[sent] == 1, waits


def test_a_consumer_behind_fetches_ahead_before_it_returns(modern_broker):
    # More is waiting at the broker than one answer carries: the next fetch goes out before
    # poll() returns, so the broker works while the caller does.
    topic = f"behind-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=modern_broker.bootstrap, linger_ms=5, batch_size=16 * 1024) as p:
        p.send_batch(topic, 0, RECORDS).result(30)
    with Consumer(bootstrap_servers=modern_broker.bootstrap, auto_offset_reset="earliest",
                  max_partition_fetch_bytes=64 * 1024, fetch_max_bytes=64 * 1024) as c:
        c.assign([(topic, 0)])
        got = _first_records(c)
        assert got and len(got) < len(RECORDS)
        assert c.metrics()["fetches_in_flight"] == 1
