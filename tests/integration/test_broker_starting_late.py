"""A client started before its broker (docker-compose, a pod whose sidecar is not up
yet) waits for it: a refused connection during bootstrap and metadata waits is tried
again after reconnect_backoff_ms (doubling up to reconnect_backoff_max_ms) until the
call's deadline, and the constructors never wait for a broker.  A host name that does
not resolve still ends the call at once.  On Apache Kafka, started on a port the
clients were already given, in both shells."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kafkawire.client.admin import Admin
from kafkawire.errors import NoBrokersAvailableError
from kafkawire.testing import KafkaCluster, free_port
from shells import ADMINS, shell  # noqa: F401 - the fixture

pytestmark = [pytest.mark.kafka, pytest.mark.alone]

LATE = 2.0  # seconds between the clients' first calls and the broker's start


class _LateBroker:
    """Apache Kafka started LATE seconds from now on ``port``, in a thread."""

    def __init__(self, port: int):
        self.cluster = KafkaCluster(1, plaintext_port=port)
        self.error: BaseException | None = None
        self.up_at: float | None = None
        self._thread = threading.Thread(target=self._start, daemon=True)
        self._thread.start()

    def _start(self) -> None:
        time.sleep(LATE)
        try:
            self.cluster.start()
            self.up_at = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc

    def close(self) -> None:
        self._thread.join(180)
        self.cluster.close()


@pytest.fixture
def late_broker():
    port = free_port()
    broker = _LateBroker(port)
    try:
        yield f"127.0.0.1:{port}", broker
    finally:
        broker.close()


def test_the_clients_wait_for_a_broker_that_starts_after_them(late_broker, shell):
    boot, broker = late_broker
    topic = f"late-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    if shell.Producer.__module__ == "kafkawire.client.producer":
        # The sync constructors ask no broker: they return at once.
        p = shell.Producer(bootstrap_servers=boot, max_block_ms=120000)
        c = shell.Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", request_timeout_ms=120000)
        a = Admin(bootstrap_servers=boot, request_timeout_ms=120000)
        assert time.monotonic() - began < 0.5
    else:
        # The asyncio clients' start() (which the shell calls) waits, up to its deadline.
        p = shell.Producer(bootstrap_servers=boot, max_block_ms=120000)
        c = shell.Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", request_timeout_ms=120000)
        a = ADMINS["asyncio"](bootstrap_servers=boot, request_timeout_ms=120000)
    try:
        md = p.send(topic, b"late", partition=0).result(120)
        assert broker.error is None and broker.up_at is not None
        assert md.offset == 0
        assert topic in a.list_topics()
        c.assign([(topic, 0)])
        got: list = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = c.poll(1)
        assert [r.value for r in got] == [b"late"]
    finally:
        c.close()
        p.close()
        a.close()


def test_a_poll_before_the_broker_is_up_is_empty_not_an_error(late_broker, shell):
    boot, broker = late_broker
    from shells import _shared_loop
    from kafkawire.aio import AsyncConsumer
    from kafkawire.client.consumer import Consumer

    topic = f"late-{uuid.uuid4().hex[:6]}"
    if shell.Consumer.__module__ == "kafkawire.client.consumer":
        c = Consumer(bootstrap_servers=boot, auto_offset_reset="earliest", request_timeout_ms=500)
        c.assign([(topic, 0)])  # unanswered within its 0.5 s: poll() keeps trying
        poll = c.poll
        close = c.close
    else:
        loop = _shared_loop()
        ac = AsyncConsumer(bootstrap_servers=boot, auto_offset_reset="earliest")
        ac.assign([(topic, 0)])
        poll = lambda t: loop.run_until_complete(ac.poll(t))  # noqa: E731
        close = lambda: loop.run_until_complete(ac.close())  # noqa: E731
    try:
        assert poll(0.5) == []  # nothing listens yet: an empty poll, no error
        with Admin(bootstrap_servers=boot, request_timeout_ms=120000) as admin:
            admin.create_topics([topic], num_partitions=1)
        from kafkawire import Producer

        with Producer(bootstrap_servers=boot) as p:
            p.send(topic, b"v", partition=0).result(30)
        got: list = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = poll(1)
        assert [r.value for r in got] == [b"v"]
    finally:
        close()


@pytest.mark.parametrize("client", ["Producer", "Consumer", "Admin"])
def test_a_host_name_that_does_not_resolve_ends_the_call_at_once(client, shell):
    boot = "no-such-broker.invalid:9092"
    start = time.monotonic()
    with pytest.raises(NoBrokersAvailableError, match="cannot resolve") as info:
        if client == "Producer":
            p = shell.Producer(bootstrap_servers=boot, max_block_ms=60000)
            try:
                p.send("t", b"v")
            finally:
                p.close()
        elif client == "Consumer":
            c = shell.Consumer(bootstrap_servers=boot, request_timeout_ms=60000)
            try:
                c.end_offsets([("t", 0)])
            finally:
                c.close()
        else:
            with ADMINS["sync" if shell.Consumer.__module__ == "kafkawire.client.consumer" else "asyncio"](
                    bootstrap_servers=boot, request_timeout_ms=60000) as a:
                a.list_topics()
    assert time.monotonic() - start < 5
    assert not info.value.retriable
