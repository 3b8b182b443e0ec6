"""One consumer assigned 1,000 partitions on Apache Kafka, in both shells: every record is
read once, in order per partition, through a fetch session (KIP-227), and once the
partitions are drained a Fetch lists only the partitions that got new records."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kafkawire import Consumer, Producer
from kafkawire.aio.consumer import AsyncConsumer
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.protocol.fetcher import Fetcher

pytestmark = pytest.mark.kafka

N = 1000
PER_PARTITION = 3


def _topic(bootstrap: str) -> str:
    topic = f"many-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, N, 1)], timeout=120)
    return topic


def _produce(bootstrap: str, topic: str, partitions: range, tag: bytes) -> dict[int, list[bytes]]:
    sent: dict[int, list[bytes]] = {}
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(PER_PARTITION):
            for part in partitions:
                value = b"%s-%d-%d" % (tag, part, i)
                p.send(topic, value, partition=part)
                sent.setdefault(part, []).append(value)
        p.flush(60)
    return sent


@pytest.fixture
def listed(monkeypatch) -> list[tuple[int, int, int]]:
    """(session epoch, partitions listed, partitions forgotten) of every Fetch request."""
    seen: list[tuple[int, int, int]] = []
    request = Fetcher.request

    def noting(self, *args, **kwargs):
        req, positions = request(self, *args, **kwargs)
        seen.append((req.session_epoch, sum(len(t.partitions) for t in req.topics),
                     sum(len(t.partitions) for t in req.forgotten_topics_data)))
        return req, positions

    monkeypatch.setattr(Fetcher, "request", noting)
    return seen


def _check(got: dict[int, list[tuple[int, bytes]]], sent: dict[int, list[bytes]], start: int = 0) -> None:
    """Each partition's records, once each, at consecutive offsets.  (The values are
    compared as sets: the order the producer's retries leave in a new topic is not the
    consumer's business.)"""
    assert len(got) == len(sent)
    want = list(range(start, start + PER_PARTITION))
    bad = [p for p in sent if [o for o, _ in got.get(p, [])] != want or sorted(v for _, v in got[p]) != sent[p]]
    assert not bad, {p: (got.get(p), sent[p]) for p in bad[:3]}


def _sync_read(c: Consumer, want: int, deadline: float) -> dict[int, list[tuple[int, bytes]]]:
    got: dict[int, list[tuple[int, bytes]]] = {}
    n = 0
    while n < want and time.monotonic() < deadline:
        for r in c.poll(1.0):
            got.setdefault(r.partition, []).append((r.offset, r.value))
            n += 1
    return got


def test_a_consumer_of_1000_partitions_fetches_through_a_session(kafka_broker, listed):
    bs = kafka_broker.bootstrap
    topic = _topic(bs)
    sent = _produce(bs, topic, range(N), b"a")
    with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(N)])
        _check(_sync_read(c, N * PER_PARTITION, time.monotonic() + 120), sent)
        (session,) = c._fetcher.sessions.values()
        assert session.id != 0 and session.epoch >= 1  # Kafka keeps a session for the consumer
        first = listed[0]
        assert first[0] == 0 and first[1] == N  # the full request opening it
        # Everything read: a poll with nothing new sends requests that list nothing.
        assert c.poll(0.5) == []
        listed.clear()
        more = _produce(bs, topic, range(10, 20), b"b")
        _check(_sync_read(c, 10 * PER_PARTITION, time.monotonic() + 60), more, PER_PARTITION)
        assert c.poll(0.5) == []
        assert listed and all(epoch > 0 for epoch, _, _ in listed), listed
        # Only partitions with new records moved; none was forgotten.
        assert max(n for _, n, _ in listed) <= 10 and sum(f for _, _, f in listed) == 0, listed


def test_the_asyncio_consumer_reads_1000_partitions_through_a_session(kafka_broker, listed):
    bs = kafka_broker.bootstrap
    topic = _topic(bs)
    sent = _produce(bs, topic, range(N), b"c")

    async def main() -> dict[int, list[tuple[int, bytes]]]:
        got: dict[int, list[tuple[int, bytes]]] = {}
        async with AsyncConsumer(bootstrap_servers=bs, auto_offset_reset="earliest") as c:
            c.assign([(topic, p) for p in range(N)])
            n, deadline = 0, time.monotonic() + 120
            while n < N * PER_PARTITION and time.monotonic() < deadline:
                for r in await c.poll(1.0):
                    got.setdefault(r.partition, []).append((r.offset, r.value))
                    n += 1
            (session,) = c._fetcher.sessions.values()
            assert session.id != 0 and session.epoch >= 1
        return got

    _check(asyncio.run(main()), sent)
    assert listed[0][:2] == (0, N)
