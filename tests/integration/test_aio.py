"""What only the asyncio shell has: async iteration, cancellation, deadlines on awaits.
(The consumer's behaviour itself is checked on both shells by the client suites.)"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kafkawire.aio import AsyncConsumer
from kafkawire.errors import KafkaTimeoutError
from kafkawire.client.producer import Producer
from kafkawire.protocol import apis
from kafkawire.testing.proxy import FaultProxy

pytestmark = pytest.mark.broker

LIST_OFFSETS = apis.get("ListOffsets")


def _fill(bootstrap: str, n: int) -> str:
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, partition=0)
        p.flush(20)
    return topic


def test_async_for_reads_everything(kafka_broker):
    topic = _fill(kafka_broker.bootstrap, 300)

    async def main():
        seen = []
        async with AsyncConsumer(bootstrap_servers=kafka_broker.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([(topic, 0)])
            async for record in c:
                seen.append((record.offset, record.value))
                if len(seen) == 300:
                    break
        return seen

    assert asyncio.run(asyncio.wait_for(main(), 30)) == [(i, b"v%d" % i) for i in range(300)]


def test_a_cancelled_poll_leaves_the_consumer_working_and_no_task_behind(kafka_broker):
    topic = _fill(kafka_broker.bootstrap, 50)

    async def main():
        before = asyncio.all_tasks()
        c = AsyncConsumer(bootstrap_servers=kafka_broker.bootstrap, fetch_max_wait_ms=2000)
        c.assign([(topic, 0)])
        c.seek((topic, 0), 50)
        poll = asyncio.ensure_future(c.poll(10))  # at the end of the log: a long poll in flight
        await asyncio.sleep(0.5)
        poll.cancel()
        with pytest.raises(asyncio.CancelledError):
            await poll
        c.seek((topic, 0), 10)
        got = []
        for _ in range(20):
            got += await c.poll(2)
            if len(got) >= 40:
                break
        await c.close()
        others = list(asyncio.all_tasks() - before)
        return [r.offset for r in got], others

    offsets, left = asyncio.run(asyncio.wait_for(main(), 40))
    assert offsets == list(range(10, 50))
    assert left == []


@pytest.mark.deadlines
def test_every_await_keeps_its_deadline_with_the_broker_gone(tansu_broker_factory):
    broker = tansu_broker_factory()
    topic = _fill(broker.bootstrap, 5)

    async def main():
        c = AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                          reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
        c.assign([(topic, 0)])
        assert len(await c.poll(10)) == 5
        broker.stop()
        timings = {}
        start = time.monotonic()
        assert await c.poll(0.5) == []
        timings["poll"] = time.monotonic() - start
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            await c.end_offsets([(topic, 0)], timeout=0.5)
        timings["end_offsets"] = time.monotonic() - start
        start = time.monotonic()
        await c.close()
        timings["close"] = time.monotonic() - start
        return timings

    timings = asyncio.run(asyncio.wait_for(main(), 30))
    assert timings["poll"] < 1.5 and timings["end_offsets"] < 1.5 and timings["close"] < 1.0, timings


def test_group_calls_need_a_group_and_a_start():
    c = AsyncConsumer(bootstrap_servers="127.0.0.1:9")
    with pytest.raises(ValueError, match="needs a consumer group"):
        c.subscribe(["t"])
    g = AsyncConsumer(bootstrap_servers="127.0.0.1:9", group_id="g")
    with pytest.raises(ValueError, match="await start"):
        g.subscribe(["t"])


def test_async_producer_keys_callbacks_and_send_and_wait(kafka_broker):
    from kafkawire.aio import AsyncProducer
    from kafkawire.client.partitioner import partition_for_key

    topic = f"aio-p-{uuid.uuid4().hex[:8]}"

    async def main():
        seen = []
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=2) as p:
            futures = []
            for i in range(40):
                f = await p.send(topic, b"v%d" % i, key=b"k%d" % (i % 5))
                f.add_callback(lambda meta, exc: seen.append((meta.partition, exc)))
                futures.append(f)
            last = await p.send_and_wait(topic, b"last", partition=0)
            metas = [await f for f in futures]
            n = len(await p.partitions_for(topic))
        assert p._acc.incomplete == set()
        return metas, last, seen, n

    metas, last, seen, n = asyncio.run(asyncio.wait_for(main(), 30))
    # Keys go where the Java client's murmur2 puts them; offsets count up per partition.
    assert [m.partition for m in metas] == [partition_for_key(b"k%d" % (i % 5), n) for i in range(40)]
    for part in {m.partition for m in metas}:
        offsets = [m.offset for m in metas if m.partition == part]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert last.partition == 0 and last.offset >= 0
    assert sorted(seen) == sorted((m.partition, None) for m in metas)


def test_a_short_offsets_call_abandons_its_answer_and_keeps_the_connection(kafka_cluster_factory):
    # ListOffsets keeps its own request timeout: a caller's deadline that passes while it is in
    # flight ends the wait only. (It used to time the request out, which closes the
    # connection with everything in flight on it: short polls reconnected again and again.)
    # The node advertises a relay, which holds the answers while the deadlines pass.
    with FaultProxy() as relay:
        cluster = kafka_cluster_factory(1, broker_config={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{relay.port}"})
        relay.start(cluster[0].ports["PLAINTEXT"])
        bootstrap = f"127.0.0.1:{relay.port}"
        topic = _fill(bootstrap, 10)
        tp = (topic, 0)

        async def main():
            c = AsyncConsumer(bootstrap_servers=bootstrap)
            await c.start()
            try:
                assert (await c.end_offsets([tp], timeout=10))[tp] == 10
                conns = dict(c.cluster._conns)
                with relay.holding_answers(LIST_OFFSETS.key):
                    for _ in range(3):
                        with pytest.raises(KafkaTimeoutError):
                            await c.end_offsets([tp], timeout=0.05)
                assert relay.peak[LIST_OFFSETS.key] >= 3  # abandoned, all in flight on one connection
                assert (await c.end_offsets([tp], timeout=10))[tp] == 10
                for key, conn in conns.items():
                    assert c.cluster._conns.get(key) is conn and conn.setups == 1, key
            finally:
                await c.close()

        asyncio.run(main())


def test_a_request_waited_for_briefly_keeps_its_connection(kafka_broker):
    # The caller's short wait ends with KafkaTimeoutError; the request keeps its own timeout,
    # so the connection (and whatever else is in flight on it) carries on.
    topic = _fill(kafka_broker.bootstrap, 1)
    fetch = apis.get("Fetch")

    def at_log_end(max_wait_ms: int):
        return fetch.Request(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                             isolation_level=0, topics=[fetch.Request.FetchTopic(topic=topic, partitions=[
                                 fetch.Request.FetchTopic.FetchPartition(partition=0, fetch_offset=1,
                                                                         partition_max_bytes=1 << 20)])])

    async def main():
        c = AsyncConsumer(bootstrap_servers=kafka_broker.bootstrap)
        await c.start()
        try:
            cluster = c.cluster
            await cluster.partitions_for(topic, 10)
            leader = cluster.leader_for(topic, 0)
            conn = await cluster.connection(leader, asyncio.get_running_loop().time() + 10)
            t0 = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="no answer within"):
                await cluster.request(leader, fetch, at_log_end(3000), 0.2, version=4)  # Kafka holds it 3 s
            assert time.monotonic() - t0 < 2
            resp = await cluster.request(leader, fetch, at_log_end(0), 10, version=4)
            assert resp.responses[0].partitions[0].error_code == 0
            assert conn.ready and conn.setups == 1 and conn in cluster._conns.values()
        finally:
            await c.close()

    asyncio.run(main())


def test_bootstrap_walks_its_addresses_as_the_sync_shell_does(kafka_broker):
    # Both shells run protocol/metadata.py's bootstrap_steps: each address in turn until
    # one answers Metadata; none answering is NoBrokersAvailableError naming each one.
    import socket

    from kafkawire.errors import NoBrokersAvailableError
    from kafkawire.testing import free_port

    silent = socket.socket()  # takes the connection, never answers a byte
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    hung, refused = f"127.0.0.1:{silent.getsockname()[1]}", f"127.0.0.1:{free_port()}"

    async def main():
        start = time.monotonic()
        c = AsyncConsumer(bootstrap_servers=f"{refused},{hung}")
        with pytest.raises(NoBrokersAvailableError, match=r"gave up after .* of the 0\.8 s allowed") as info:
            await c.start(timeout=0.8)
        assert time.monotonic() - start < 2.5
        assert refused in str(info.value) and hung in str(info.value)
        await c.close()
        async with AsyncConsumer(bootstrap_servers=f"{refused},{kafka_broker.bootstrap}") as c:
            assert c.cluster.brokers  # the refused address cost nothing: the next one answered
            assert await c.cluster.partitions_for(_fill(kafka_broker.bootstrap, 1), 10) == [0]

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        silent.close()

