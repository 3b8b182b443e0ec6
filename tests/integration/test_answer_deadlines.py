"""Each request on a connection is due by its own timeout, in both shells (the decision is
kafkawire.protocol.connection.first_due): a short request sent behind one the broker holds
on purpose (here a Fetch waiting for data) closes the connection at its own deadline, not
at the held one's."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from shells import shell  # noqa: F401 - the fixture

from kafkawire.aio.conn import AsyncBrokerConnection
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.conn import BrokerConnection
from kafkawire.errors import RequestTimeoutError
from kafkawire.protocol import apis

pytestmark = pytest.mark.broker

FETCH = apis.get("Fetch")
METADATA = apis.get("Metadata")


def _held_fetch(topic: str, wait_ms: int = 4000) -> object:
    """A Fetch at the end of an empty partition, which the broker holds for ``wait_ms``."""
    part = FETCH.Request.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    return FETCH.Request(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                         topics=[FETCH.Request.FetchTopic(topic=topic, partitions=[part])])


@pytest.fixture
def empty_topic(kafka_broker):
    name = f"held-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=kafka_broker.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, -1)], timeout=30)
    # Until its leader serves it: a Fetch for a partition not ready yet is answered at once.
    host, port = kafka_broker.bootstrap.split(",")[0].rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        conn.connect(10)
        deadline = time.monotonic() + 30
        while conn.send(FETCH, _held_fetch(name, 0), 4).result(10).responses[0].partitions[0].error_code:
            assert time.monotonic() < deadline, f"{name} not served"
            time.sleep(0.1)
    return kafka_broker, name


def test_sync_a_later_shorter_request_is_due_by_its_own_timeout(empty_topic):
    broker, topic = empty_topic
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    with BrokerConnection(host, int(port)) as conn:
        conn.connect(10)
        held = conn.send(FETCH, _held_fetch(topic), 4, timeout=20)
        start = time.monotonic()
        short = conn.send(METADATA, METADATA.Request(topics=None), timeout=0.5)
        with pytest.raises(RequestTimeoutError, match=r"within 0\.5s"):
            short.result(10)
        assert time.monotonic() - start < 2.5  # not after the Fetch's 4 s
        with pytest.raises(RequestTimeoutError):
            held.result(1)  # the connection is closed: every request in flight fails


def test_asyncio_a_later_shorter_request_is_due_by_its_own_timeout(empty_topic):
    broker, topic = empty_topic
    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)

    async def main():
        conn = AsyncBrokerConnection(host, int(port))
        await conn.connect(10)
        try:
            held = asyncio.ensure_future(conn.request(FETCH, _held_fetch(topic), 4, timeout=20))
            await asyncio.sleep(0.05)  # written first
            start = time.monotonic()
            with pytest.raises(RequestTimeoutError, match=r"within 0\.5s"):
                await conn.request(METADATA, METADATA.Request(topics=None), timeout=0.5)
            took = time.monotonic() - start
            with pytest.raises(RequestTimeoutError):
                await held
            return took
        finally:
            await conn.aclose()

    assert asyncio.run(main()) < 2.5


def test_a_consumers_long_poll_is_due_after_request_timeout_plus_its_wait(empty_topic, shell):
    # Kafka holds the consumer's fetch at the end of the log for fetch_max_wait_ms, here
    # longer than request_timeout_ms: its answer is due within their sum, not late.
    broker, topic = empty_topic
    with shell.Consumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=1000,
                        fetch_max_wait_ms=1800) as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), 0)
        c.poll(0.2)  # connected, a fetch in flight
        conns = list(c.cluster._conns.values())
        start = time.monotonic()
        for _ in range(3):
            assert c.poll(1.5) == []
        assert time.monotonic() - start >= 4
        assert all(conn.ready and conn.setups == 1 for conn in conns)
        assert list(c.cluster._conns.values()) == conns
