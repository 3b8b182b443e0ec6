"""The asyncio connection reads through its transport's protocol callback (issue 23):
each answer goes to its waiter as it is read, with no reading task; a large frame is read
straight into its own buffer; an answer that does not come closes the connection at
request_timeout_ms; a broker that goes away fails what is in flight at once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import pytest

from kafkawire.aio import AsyncConsumer, AsyncProducer
from kafkawire.client.admin import Admin, NewTopic
from kafkawire.client.producer import Producer
from kafkawire.errors import ClientClosedError, ConnectionClosedError, DeliveryTimeoutError, RequestTimeoutError
from kafkawire.protocol.connection import Connection

pytestmark = pytest.mark.broker


def _topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, -1)], timeout=30)
    return name


def _stop(pid: int) -> None:
    """SIGSTOP the broker this test started, and wait until it is stopped (the signal
    is delivered asynchronously)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")


def _ready_connection(producer: AsyncProducer):
    (conn,) = [c for c in producer.cluster._conns.values() if c.ready]
    return conn


def test_serial_records_and_no_reading_task(broker):
    # One record at a time, each awaited: the answers come through the transport's
    # callback, so the only task beside the caller's is the producer's sender.
    topic = _topic(broker.bootstrap, "aio-serial")

    async def main():
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            metas = [await (await p.send(topic, b"r%d" % i, partition=0)) for i in range(200)]
            others = [t.get_coro().__qualname__ for t in asyncio.all_tasks()
                      if not t.done() and t.get_coro().__qualname__ not in ("wait_for", main.__qualname__)]
            return metas, others

    metas, others = asyncio.run(asyncio.wait_for(main(), 60))
    assert [m.offset for m in metas] == list(range(200))
    assert others == ["AsyncProducer._run"], others


def test_a_fetch_answer_larger_than_one_read_is_read_into_its_frame(broker, monkeypatch):
    topic = _topic(broker.bootstrap, "aio-large")
    values = [os.urandom(40_000) for _ in range(75)]  # 3 MB
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=512 << 10) as p:
        for v in values:
            p.send(topic, v, partition=0)
        p.flush(30)
    into: list[int] = []
    received_into = Connection.received_into

    def counted(self, n):
        into.append(n)
        return received_into(self, n)

    monkeypatch.setattr(Connection, "received_into", counted)

    async def main():
        got = []
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 max_partition_fetch_bytes=8 << 20, fetch_max_bytes=8 << 20) as c:
            c.assign([(topic, 0)])
            while len(got) < len(values):
                got += [r.value for r in await c.poll(5)]
        return got

    got = asyncio.run(asyncio.wait_for(main(), 60))
    assert [bytes(v) for v in got] == values
    # Most of the 3 MB went straight into the frames' buffers, not through a scratch read.
    assert sum(into) > 2_000_000, (len(into), sum(into))


def test_an_unanswered_request_closes_the_connection_at_request_timeout(tansu_broker_factory):
    broker = tansu_broker_factory()
    topic = _topic(broker.bootstrap, "aio-late")

    async def main():
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, request_timeout_ms=1000,
                                 delivery_timeout_ms=2500, retry_backoff_ms=50,
                                 socket_connection_setup_timeout_ms=1000) as p:
            await (await p.send(topic, b"before", partition=0))
            conn = _ready_connection(p)
            _stop(broker.pid)
            try:
                start = time.monotonic()
                fut = await p.send(topic, b"after", partition=0)
                while conn.ready and time.monotonic() - start < 10:
                    await asyncio.sleep(0.01)
                closed_after = time.monotonic() - start
                with pytest.raises(DeliveryTimeoutError, match="did not answer a request within 1s"):
                    await asyncio.wait_for(fut, 10)
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            return conn, closed_after

    conn, closed_after = asyncio.run(main())
    assert isinstance(conn.last_error, RequestTimeoutError), conn.last_error
    assert 0.9 < closed_after < 2.5, closed_after


def test_a_broker_gone_fails_the_requests_in_flight_at_once(tansu_broker_factory):
    broker = tansu_broker_factory()
    topic = _topic(broker.bootstrap, "aio-gone")

    async def main():
        p = AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, request_timeout_ms=20000,
                          retry_backoff_ms=50)
        await p.start()
        try:
            await (await p.send(topic, b"before", partition=0))
            conn = _ready_connection(p)
            _stop(broker.pid)  # the request below stays in flight
            fut = await p.send(topic, b"after", partition=0)
            await asyncio.sleep(0.2)
            assert conn.ready
            start = time.monotonic()
            broker.kill()  # SIGKILL, by its pid: the kernel closes its sockets
            while conn.ready and time.monotonic() - start < 10:
                await asyncio.sleep(0.01)
            gone_after = time.monotonic() - start
        finally:
            await p.close(0.5)
        with pytest.raises(ClientClosedError):  # resent to no broker until the close
            await asyncio.wait_for(fut, 5)
        return conn, gone_after

    conn, gone_after = asyncio.run(main())
    # Closed on the transport's word, long before request_timeout_ms (20 s).
    assert gone_after < 2, gone_after
    assert isinstance(conn.last_error, ConnectionClosedError), conn.last_error
    assert not isinstance(conn.last_error, RequestTimeoutError)
