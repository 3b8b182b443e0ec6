"""Fetching from the closest replica (KIP-392) on Apache Kafka: three KRaft nodes, each
in its own rack (``broker.rack``), with Kafka's RackAwareReplicaSelector.  A consumer
whose ``client_rack`` is a follower's rack reads every record from that follower (the
leader only names it); once that follower's broker is stopped it reads on from the leader
with no gap and no duplicate.  A consumer without a rack reads from the leader.  Both
shells.  Which broker served the records is what the consumer's metrics() counts per
broker: the bytes of records data each broker's Fetch answers carried.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkawire import errors
from kafkawire.aio import AsyncConsumer
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.consumer import Consumer, TopicPartition
from kafkawire.client.producer import Producer
from kafkawire.testing import KafkaCluster
from topics import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.failover, pytest.mark.kafka]

PHASE = 90.0
BROKER = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500,
          "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
CLIENT = dict(request_timeout_ms=10000, retry_backoff_ms=100, reconnect_backoff_ms=50,
              reconnect_backoff_max_ms=500)
BEFORE, AFTER = 300, 200


@pytest.fixture(scope="module")
def cluster():
    racks = {n: {"broker.rack": f"rack-{n}"} for n in (1, 2, 3)}
    with KafkaCluster(3, broker_config=BROKER, node_config=racks) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster):
    with Admin(bootstrap_servers=cluster.bootstrap, **CLIENT) as a:
        yield a


def _healthy(admin: Admin, topic: str) -> tuple[int, list[int]]:
    """Until the topic's partition has a leader and three replicas in sync: (leader, isr)."""
    deadline = time.monotonic() + PHASE
    while True:
        try:
            p = admin.describe_topics([topic], timeout=10)[topic].partitions[0]
            if p.leader >= 0 and len(p.isr) == 3:
                return p.leader, list(p.isr)
            why = (p.leader, p.isr)
        except errors.KafkaWireError as exc:
            why = repr(exc)
        assert time.monotonic() < deadline, f"{topic} not in sync within {PHASE}s: {why}"
        time.sleep(0.2)


def _setup(cluster: KafkaCluster, admin: Admin) -> tuple[str, int, int]:
    """A new one-partition topic on all three nodes with BEFORE records, every node running:
    (topic, leader, a follower)."""
    for i in range(cluster.size):
        if i not in cluster.running():
            cluster.restart(i)
    topic = unique_name("rack")
    admin.create_topics([NewTopic(topic, 1, 3)], timeout=PHASE)
    leader, isr = _healthy(admin, topic)
    _produce(cluster, topic, range(BEFORE))
    return topic, leader, next(n for n in sorted(isr) if n != leader)


def _produce(cluster: KafkaCluster, topic: str, numbers: range) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=5, **CLIENT) as p:
        futures = [p.send(topic, value=b"%06d" % i + b"." * 200, partition=0) for i in numbers]
        p.flush(PHASE)
        for f in futures:
            f.result(0)


def _values(records: list) -> list[int]:
    return [int(r.value[:6]) for r in records]


def test_a_consumer_reads_from_the_replica_in_its_rack_and_falls_back_to_the_leader(cluster, admin):
    topic, leader, follower = _setup(cluster, admin)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=cluster.bootstrap, client_rack=f"rack-{follower}",
                  auto_offset_reset="earliest", **CLIENT) as c:
        c.assign([tp])
        got = _poll_until(c, BEFORE)
        m = c.metrics()
        # The leader named the follower and sent no records itself; the follower sent them all.
        assert m["preferred_read_replicas"] == {tp: follower}, m
        assert m["fetched_bytes_by_node"].get(follower, 0) > BEFORE * 200, m
        assert m["fetched_bytes_by_node"].get(leader, 0) == 0, m

        cluster.stop_node(follower - 1)
        stopped = time.monotonic()
        _produce(cluster, topic, range(BEFORE, BEFORE + AFTER))
        got += _poll_until(c, AFTER)
        print(f"\nsync: {AFTER} records written and read through the leader "
              f"{time.monotonic() - stopped:.2f}s after the follower stopped")
        assert _values(got) == list(range(BEFORE + AFTER))  # no gap, no duplicate, in order
        m = c.metrics()
        assert m["preferred_read_replicas"] == {}, m  # no other replica in the follower's rack
        assert m["fetched_bytes_by_node"].get(leader, 0) > AFTER * 200, m

    # Without a rack: the leader serves (the selector names no replica).
    with Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", **CLIENT) as c:
        c.assign([tp])
        assert _values(_poll_until(c, BEFORE + AFTER)) == list(range(BEFORE + AFTER))
        m = c.metrics()
        assert m["preferred_read_replicas"] == {} and set(m["fetched_bytes_by_node"]) == {leader}, m


def test_the_asyncio_consumer_reads_from_the_replica_in_its_rack_and_falls_back(cluster, admin):
    topic, leader, follower = _setup(cluster, admin)
    tp = TopicPartition(topic, 0)

    async def run() -> None:
        async with AsyncConsumer(bootstrap_servers=cluster.bootstrap, client_rack=f"rack-{follower}",
                                 auto_offset_reset="earliest", **CLIENT) as c:
            c.assign([tp])
            got = await _apoll_until(c, BEFORE)
            m = c.metrics()
            assert m["preferred_read_replicas"] == {tp: follower}, m
            assert m["fetched_bytes_by_node"].get(follower, 0) > BEFORE * 200, m
            assert m["fetched_bytes_by_node"].get(leader, 0) == 0, m

            await asyncio.to_thread(cluster.stop_node, follower - 1)
            stopped = time.monotonic()
            await asyncio.to_thread(_produce, cluster, topic, range(BEFORE, BEFORE + AFTER))
            got += await _apoll_until(c, AFTER)
            print(f"\nasyncio: {AFTER} records written and read through the leader "
                  f"{time.monotonic() - stopped:.2f}s after the follower stopped")
            assert _values(got) == list(range(BEFORE + AFTER))
            m = c.metrics()
            assert m["preferred_read_replicas"] == {}, m
            assert m["fetched_bytes_by_node"].get(leader, 0) > AFTER * 200, m

    asyncio.run(run())


def _poll_until(c: Consumer, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + PHASE
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records within {PHASE}s: {c.metrics()}"
        got += c.poll(1.0)
    assert len(got) == n
    return got


async def _apoll_until(c: AsyncConsumer, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + PHASE
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records within {PHASE}s: {c.metrics()}"
        got += await c.poll(1.0)
    assert len(got) == n
    return got
