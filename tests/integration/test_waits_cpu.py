"""No blocking wait spins: each call that waits (a poll with nothing to read, metadata
of a missing topic, offsets, a coordinator, room in the buffer, a flush) sleeps on a
selector, a condition or a timer, so the process uses under 5% of one CPU while it
waits.  Process CPU time (every thread's, the producer's sender too) is measured around
each wait on Apache Kafka, in both shells."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import pytest

from kafkawire.errors import KafkaTimeoutError, KafkaWireError
from kafkawire.testing import KafkaCluster
from shells import shell  # noqa: F401 - the fixture

pytestmark = [pytest.mark.alone]

# A waiting call may use this share of one CPU (its own set-up, a few wake-ups a second).
BUDGET = 0.05
WAIT = 2.0


def _cpu_share(call: Callable[[], Any], expect: type[BaseException] | None) -> tuple[float, float]:
    """(CPU seconds / wall seconds, wall seconds) of ``call``, which raises ``expect``
    (None: returns)."""
    cpu, wall = time.process_time(), time.monotonic()
    if expect is None:
        call()
    else:
        with pytest.raises(expect):
            call()
    wall = time.monotonic() - wall
    return (time.process_time() - cpu) / wall, wall


def _check(what: str, call: Callable[[], Any], expect: type[BaseException] | None = None,
           at_least: float = WAIT * 0.8) -> None:
    share, wall = _cpu_share(call, expect)
    assert wall >= at_least, f"{what} returned after {wall:.2f}s: it did not wait"
    assert share < BUDGET, f"{what} used {share:.0%} of a CPU while it waited {wall:.2f}s"


@pytest.fixture(scope="module")
def no_autocreate():
    """Apache Kafka that does not create topics on a Metadata request, so a missing
    topic stays missing while a client waits for it."""
    with KafkaCluster(1, broker_config={"auto.create.topics.enable": "false"}) as cluster:
        yield cluster


def _topic(cluster: KafkaCluster, partitions: int = 1) -> str:
    from kafkawire import Admin

    name = f"cpu-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def test_consumer_waits_do_not_spin(no_autocreate, shell):
    topic = _topic(no_autocreate)
    c = shell.Consumer(bootstrap_servers=no_autocreate.bootstrap, auto_offset_reset="earliest",
                       group_id=f"g-{uuid.uuid4().hex[:6]}", enable_auto_commit=False)
    try:
        c.assign([(topic, 0)])
        c.poll(1)  # the position is looked up and the first fetch made
        _check("poll() with nothing to read", lambda: c.poll(WAIT))
        missing = f"{topic}-missing"
        _check("end_offsets() of a missing topic", lambda: c.end_offsets([(missing, 0)], timeout=WAIT),
               KafkaTimeoutError)
        _check("beginning_offsets() of a missing topic",
               lambda: c.beginning_offsets([(missing, 0)], timeout=WAIT), KafkaTimeoutError)
        c.assign([(missing, 0)])
        _check("poll() of a missing topic's partition", lambda: c.poll(WAIT))
    finally:
        c.close()


def test_producer_waits_for_a_missing_topic_without_spinning(no_autocreate, shell):
    p = shell.Producer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=int(WAIT * 1000))
    try:
        _check("send() to a missing topic", lambda: p.send(f"cpu-missing-{uuid.uuid4().hex[:6]}", b"x"),
               KafkaTimeoutError)
    finally:
        p.close()


def test_waits_on_a_stopped_broker_do_not_spin(kafka_cluster_factory, shell):
    """A coordinator, room in the buffer and a flush, with the only broker stopped."""
    cluster = kafka_cluster_factory(1)
    topic = _topic(cluster)
    p = shell.Producer(bootstrap_servers=cluster.bootstrap, buffer_memory=4096, batch_size=1024,
                       linger_ms=0, max_block_ms=int(WAIT * 1000), delivery_timeout_ms=60000,
                       request_timeout_ms=30000)
    c = shell.Consumer(bootstrap_servers=cluster.bootstrap, group_id=f"g-{uuid.uuid4().hex[:6]}",
                       enable_auto_commit=False)
    try:
        p.send(topic, b"before", partition=0).result(30)
        assert c.committed([(topic, 0)], timeout=30) == {(topic, 0): None}
        cluster.stop_node(0)
        _check("committed() with the coordinator down",
               lambda: c.committed([(topic, 0)], timeout=WAIT), KafkaWireError)

        def fill() -> None:
            while True:  # until send() finds no room for max_block_ms
                p.send(topic, b"v" * 900, partition=0)

        share, wall = _cpu_share(fill, KafkaTimeoutError)
        assert share < BUDGET, f"send() waiting for buffer room used {share:.0%} of a CPU ({wall:.2f}s)"
        assert wall >= WAIT * 0.8
        _check("flush() with the broker down", lambda: p.flush(WAIT), KafkaTimeoutError)
    finally:
        c.close(1)
        p.close(1)


def test_waits_for_a_broker_not_up_yet_do_not_spin(shell):
    """Refused connections retried with backoff until the deadline: a sleep between
    attempts, not a loop (nothing listens on the port; no broker is needed)."""
    from kafkawire.errors import NoBrokersAvailableError
    from kafkawire.testing import free_port

    boot = f"127.0.0.1:{free_port()}"
    options = {"reconnect_backoff_ms": 10, "reconnect_backoff_max_ms": 100}
    p = shell.Producer(bootstrap_servers=boot, max_block_ms=int(WAIT * 1000), **options) \
        if shell.Producer.__module__ == "kafkawire.client.producer" else None
    if p is not None:
        try:
            _check("send() before the broker is up", lambda: p.send("t", b"v"), NoBrokersAvailableError)
        finally:
            p.close(1)
        c = shell.Consumer(bootstrap_servers=boot, request_timeout_ms=int(WAIT * 1000), **options)
        try:
            _check("end_offsets() before the broker is up", lambda: c.end_offsets([("t", 0)]),
                   NoBrokersAvailableError)
        finally:
            c.close()
    else:  # the asyncio shell bootstraps in start(), which its constructor here runs
        _check("AsyncProducer.start() before the broker is up",
               lambda: shell.Producer(bootstrap_servers=boot, max_block_ms=int(WAIT * 1000), **options),
               NoBrokersAvailableError)
        _check("AsyncConsumer.start() before the broker is up",
               lambda: shell.Consumer(bootstrap_servers=boot, request_timeout_ms=int(WAIT * 1000), **options),
               NoBrokersAvailableError)
