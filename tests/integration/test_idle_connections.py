"""connections_max_idle_ms, in both shells, on an Apache Kafka node of its own whose
connections.max.idle.ms is 2 s (Kafka's default is 10 minutes; the broker closes a
connection idle that long without a word).

Each test makes a call, lets the connection sit idle for 3 s and waits until the broker's
close has reached the client's socket (its end of stream is readable; nothing of the
client reads it: a sync client reads only inside its calls, and the asyncio tests block
their loop meanwhile, as a busy loop would).  Then it calls again: with the client's own
limit (1 s) below the broker's, the stale connection is closed by the client when the call
picks it, and the call goes out on a new one; with the limit off (-1), the request is
written on the connection the broker has closed, which is how a long-lived client met
"closed the connection with 1 request(s) in flight".
"""

from __future__ import annotations

import asyncio
import select
import socket
import time
from typing import Any

import pytest
from topics import create_topic

from kafkawire import Admin, Consumer, Producer
from kafkawire.aio import AsyncAdmin, AsyncProducer
from kafkawire.errors import ConnectionClosedError
from kafkawire.protocol import apis
from kafkawire.testing import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

BROKER_IDLE_MS = 2000
CLIENT_IDLE_MS = 1000
IDLE_S = 3.0
METADATA = apis.get("Metadata")


@pytest.fixture(scope="module")
def kafka():
    with KafkaCluster(1, broker_config={"connections.max.idle.ms": BROKER_IDLE_MS}) as cluster:
        yield cluster


def _ready(cluster: Any) -> list[Any]:
    return [c for c in cluster._conns.values() if c.ready]


def _socket_of(conn: Any) -> socket.socket:
    sock = getattr(conn, "sock", None)  # the sync shell's
    if sock is None:
        sock = conn._transport.get_extra_info("socket")  # the asyncio shell's
        sock = getattr(sock, "_sock", sock)  # asyncio's TransportSocket wraps it
    return sock


def _idle_until_broker_closed(conns: list[Any], started: float) -> None:
    """Wait (blocking, reading nothing) until IDLE_S have passed since ``started`` and the
    broker has closed each of ``conns``: its end of stream waits unread on the socket."""
    assert conns, "the first call left no ready connection to watch"
    deadline = started + 30
    for conn in conns:
        sock = _socket_of(conn)
        readable, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        assert readable, f"the broker did not close {conn} within 30 s of idleness"
        assert sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"", "bytes, not the broker's close"
    time.sleep(max(0.0, started + IDLE_S - time.monotonic()))
    assert all(c.ready for c in conns), "the client noticed the close by itself: the test proves nothing"


def _metadata(consumer: Consumer, topic: str) -> Any:
    # The Spark source's call (spark/_io.py): one Metadata request through Cluster.request.
    req = METADATA.Request(topics=[METADATA.Request.MetadataRequestTopic(name=topic)],
                           allow_auto_topic_creation=False)
    return consumer.cluster.request(None, METADATA, req, 10.0)


def _closed_by_client(conn: Any) -> bool:
    return not conn.ready and "closed by the client" in str(conn.last_error)


def _record_closes(conns: list[Any]) -> list[BaseException | None]:
    """The errors ``conns`` are closed with from now on (a sync connection object is
    reused when it connects again, which forgets its last_error)."""
    seen: list[BaseException | None] = []
    for conn in conns:
        def close(error: BaseException | None = None, _real: Any = conn.close) -> None:
            seen.append(error)
            _real(error)
        conn.close = close
    return seen


def test_sync_request_after_idle_goes_out_on_a_new_connection(kafka: KafkaCluster):
    topic = create_topic(kafka.bootstrap, "idle-sync")
    with Consumer(bootstrap_servers=kafka.bootstrap, connections_max_idle_ms=CLIENT_IDLE_MS) as c:
        assert [t.name for t in _metadata(c, topic).topics] == [topic]
        old = _ready(c.cluster)
        old_socks = [conn.sock for conn in old]
        closes = _record_closes(old)
        _idle_until_broker_closed(old, time.monotonic())
        assert [t.name for t in _metadata(c, topic).topics] == [topic]
        assert len(closes) == len(old) and all("closed by the client" in str(e) for e in closes), closes
        now = _ready(c.cluster)
        assert now and all(conn.sock not in old_socks for conn in now)
        assert sum(conn.setups for conn in c.cluster._conns.values()) >= 2


def test_sync_admin_and_consumer_fetch_after_idle(kafka: KafkaCluster):
    """Admin.list_topics (any_connection) and a consumer's fetch (ready_connection)."""
    topic = create_topic(kafka.bootstrap, "idle-fetch")
    with Admin(bootstrap_servers=kafka.bootstrap, connections_max_idle_ms=CLIENT_IDLE_MS) as admin:
        assert topic in admin.list_topics(10)
        old = _ready(admin.cluster)
        closes = _record_closes(old)
        _idle_until_broker_closed(old, time.monotonic())
        assert topic in admin.list_topics(10)
        assert closes and all("closed by the client" in str(e) for e in closes), closes
        assert any(conn.ready and conn.setups == 2 for conn in old)


    with Producer(bootstrap_servers=kafka.bootstrap) as p:
        p.send(topic, b"first").result(10)
    with Consumer(bootstrap_servers=kafka.bootstrap, connections_max_idle_ms=CLIENT_IDLE_MS,
                  auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
        assert got == [b"first"]
        leader = c.cluster._conns[c.cluster.leader_for(topic, 0)]
        sock = leader.sock
        # Nothing in flight while idle: the fetch long-polling when the last poll ended
        # is answered within fetch_max_wait_ms (500 ms); its answer is read here.
        deadline = time.monotonic() + 15
        while leader.in_flight and time.monotonic() < deadline:
            c.cluster.poll(0.5)
        assert not leader.in_flight
        closes = _record_closes([leader])
        _idle_until_broker_closed([leader], time.monotonic())
        with Producer(bootstrap_servers=kafka.bootstrap) as p:
            p.send(topic, b"second").result(10)
        deadline = time.monotonic() + 15
        got = []
        while not got and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
        assert got == [b"second"]
        assert leader.sock is not sock and leader.setups == 2
        assert len(closes) == 1 and "closed by the client" in str(closes[0]), closes


def test_sync_without_the_client_limit_the_request_meets_the_closed_connection(kafka: KafkaCluster):
    topic = create_topic(kafka.bootstrap, "idle-off")
    with Consumer(bootstrap_servers=kafka.bootstrap, connections_max_idle_ms=-1) as c:
        _metadata(c, topic)
        old = _ready(c.cluster)
        _idle_until_broker_closed(old, time.monotonic())
        with pytest.raises(ConnectionClosedError, match=r"closed the connection with 1 request\(s\) in flight"):
            _metadata(c, topic)
        # The connection is closed now, so the next call connects again and succeeds.
        assert [t.name for t in _metadata(c, topic).topics] == [topic]


async def _aio_admin_after_idle(boot: str, topic: str, max_idle_ms: int) -> tuple[list[Any], Any]:
    """list_topics, idle (the loop blocked, as by a long callback) until the broker has
    closed the connection, list_topics again: (the connections ready before, the second
    call's result or its error)."""
    admin = AsyncAdmin(bootstrap_servers=boot, connections_max_idle_ms=max_idle_ms)
    await admin.start()
    try:
        assert topic in await admin.list_topics(10)
        old = _ready(admin.cluster)
        _idle_until_broker_closed(old, time.monotonic())  # blocks the loop: nothing reads
        try:
            result: Any = await admin.list_topics(10)
        except Exception as exc:  # noqa: BLE001 - returned for the test to judge
            result = exc
        assert all(conn not in _ready(admin.cluster) for conn in old)
        return old, result
    finally:
        await admin.close()


def test_aio_admin_after_idle_goes_out_on_a_new_connection(kafka: KafkaCluster):
    topic = create_topic(kafka.bootstrap, "idle-aio")
    old, result = asyncio.run(_aio_admin_after_idle(kafka.bootstrap, topic, CLIENT_IDLE_MS))
    assert not isinstance(result, Exception), result
    assert topic in result
    assert all(_closed_by_client(conn) for conn in old)


def test_aio_without_the_client_limit_meets_the_closed_connection(kafka: KafkaCluster):
    topic = create_topic(kafka.bootstrap, "idle-aio-off")
    old, result = asyncio.run(_aio_admin_after_idle(kafka.bootstrap, topic, -1))
    # Admin retries a request whose connection closed under it: the call still succeeds,
    # on a new connection, after its first request met the broker's close.
    assert not isinstance(result, Exception), result
    assert topic in result
    assert [type(conn.last_error) for conn in old] == [ConnectionClosedError] * len(old)
    assert all("closed the connection with 1 request(s) in flight" in str(conn.last_error) for conn in old)


async def _aio_produce_after_idle(boot: str, topic: str, max_idle_ms: int) -> tuple[list[Any], Any, Any]:
    """send, idle (the loop blocked) until the broker has closed the connection, send
    again: (the connections ready before, the second record's metadata, the cluster)."""
    producer = AsyncProducer(bootstrap_servers=boot, connections_max_idle_ms=max_idle_ms, linger_ms=0)
    await producer.start()
    try:
        first = await asyncio.wait_for(await producer.send(topic, b"first", partition=0), 15)
        old = _ready(producer.cluster)
        _idle_until_broker_closed(old, time.monotonic())  # blocks the loop: nothing reads
        second = await asyncio.wait_for(await producer.send(topic, b"second", partition=0), 15)
        assert second.offset == first.offset + 1
        assert all(conn not in _ready(producer.cluster) for conn in old)
        return old, second, producer.cluster
    finally:
        await producer.close()


def test_aio_produce_after_idle_goes_out_on_a_new_connection(kafka: KafkaCluster):
    """The producer takes the leader's connection with ready_connection (and connects
    with connection() when it is not ready)."""
    topic = create_topic(kafka.bootstrap, "idle-aio-produce")
    old, _second, _cluster = asyncio.run(_aio_produce_after_idle(kafka.bootstrap, topic, CLIENT_IDLE_MS))
    assert all(_closed_by_client(conn) for conn in old)
