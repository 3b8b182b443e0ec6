"""KIP-1102 rebootstrap on Apache Kafka: the cluster under a working producer and consumer
(both shells) is replaced by a new one on the same bootstrap address (the old stopped, a
new cluster, with another cluster id and none of the old topics, started on its port).
Every known broker unreachable for longer than metadata_recovery_rebootstrap_trigger_ms,
the clients forget the old cluster's brokers, bootstrap again, and go on: the producer's
records reach the new cluster, the consumer reads them there.

A broker answering REBOOTSTRAP_REQUIRED cannot be made to on demand (Kafka sends it from
no request path a test can drive); that answer is tested on the fake clock in
tests/protocol/test_rebootstrap_steps.py."""

from __future__ import annotations

import time
import uuid

import pytest
from shells import SHELLS

from kafkawire.errors import KafkaConnectionError
from kafkawire.testing import KafkaCluster, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.alone]

TRIGGER_MS = 1000


def _poll(consumer, seconds: float) -> list:
    got: list = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            got += consumer.poll(0.5)
        except KafkaConnectionError as exc:  # the broker is gone: retriable, the next poll asks again
            assert exc.retriable, exc
    return got


def test_clients_rebootstrap_onto_a_new_cluster_on_the_same_address():
    port = free_port()
    boot = f"127.0.0.1:{port}"
    options = dict(bootstrap_servers=boot, metadata_recovery_rebootstrap_trigger_ms=TRIGGER_MS,
                   reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
    old = KafkaCluster(1, plaintext_port=port).start()
    new = None
    clients: dict[str, tuple] = {}
    try:
        for name, shell in SHELLS.items():
            topic = f"rebootstrap-{name}-{uuid.uuid4().hex[:6]}"
            p = shell.Producer(linger_ms=1, max_block_ms=120000, delivery_timeout_ms=180000, **options)
            c = shell.Consumer(auto_offset_reset="earliest", request_timeout_ms=30000, **options)
            clients[name] = (topic, p, c)
            assert p.send(topic, b"before", partition=0).result(60).offset == 0
            c.assign([(topic, 0)])
            got = []
            for _ in range(40):
                got += c.poll(0.5)
                if got:
                    break
            assert [r.value for r in got] == [b"before"]
            assert p.cluster.meta.cluster_id == c.cluster.meta.cluster_id == old.cluster_id

        old.close()  # every broker of the metadata gone
        during = {}
        for name, (topic, p, c) in clients.items():
            during[name] = p.send(topic, b"during", partition=0)  # waits for a broker
            _poll(c, 2.5 * TRIGGER_MS / 1000)  # the clients try, and fail, past the trigger

        new = KafkaCluster(1, plaintext_port=port)
        assert new.cluster_id != old.cluster_id
        new.start()
        for name, (topic, p, c) in clients.items():
            assert during[name].result(120).offset == 0, name  # the topic is the new cluster's
            assert p.send(topic, b"after", partition=0).result(60).offset == 1, name
            got = []
            for _ in range(120):
                got += _poll(c, 0.5)
                if b"after" in [r.value for r in got]:
                    break
            assert b"after" in [r.value for r in got], (name, got)
            for client in (p, c):
                meta = client.cluster.meta
                assert meta.rebootstraps >= 1, (name, client)
                assert meta.cluster_id == new.cluster_id, (name, client)
    finally:
        for _topic, p, c in clients.values():
            c.close()
            p.close()
        old.close()
        if new is not None:
            new.close()


def _rebootstrap_required():
    """A Metadata answer carrying REBOOTSTRAP_REQUIRED (129), as a broker would send it."""
    from kafkawire.protocol import apis
    from kafkawire.protocol.metadata import REBOOTSTRAP_REQUIRED

    return apis.get("Metadata").Response(error_code=REBOOTSTRAP_REQUIRED, brokers=[], cluster_id=None,
                                         controller_id=-1, topics=[])


def test_rebootstrap_required_closes_a_ready_connection_and_asks_the_bootstrap_address(kafka_broker):
    """The answer came from a broker whose connection is still ready: the next request
    for any broker still forgets it and goes to the bootstrap address first, in both
    shells (the Metadata answer is put in by hand: see the module docstring)."""
    import asyncio

    from kafkawire.aio.cluster import AsyncCluster
    from kafkawire.client.cluster import Cluster
    from kafkawire.core.config import Config

    config = Config.client(bootstrap_servers=kafka_broker.bootstrap)
    cluster = Cluster(config)
    try:
        cluster.bootstrap(30)
        (node,) = cluster.meta.brokers
        conn = cluster.connection(node, time.monotonic() + 30)
        assert conn.ready
        cluster.meta.apply(_rebootstrap_required(), time.monotonic())
        cluster.refresh(30)
        assert cluster.meta.rebootstraps == 1 and not cluster.meta.rebootstrap_required
        assert not conn.ready and cluster.meta.brokers and cluster.meta.cluster_id == kafka_broker.cluster_id
    finally:
        cluster.close()

    async def main() -> None:
        acluster = AsyncCluster(config)
        try:
            await acluster.bootstrap(30)
            (anode,) = acluster.meta.brokers
            aconn = await acluster.connection(anode, acluster._now() + 30)
            assert aconn.ready
            acluster.meta.apply(_rebootstrap_required(), acluster._now())
            await acluster.refresh(30)
            assert acluster.meta.rebootstraps == 1 and not acluster.meta.rebootstrap_required
            assert not aconn.ready and acluster.meta.brokers
            assert acluster.meta.cluster_id == kafka_broker.cluster_id
        finally:
            await acluster.close()

    asyncio.run(main())
