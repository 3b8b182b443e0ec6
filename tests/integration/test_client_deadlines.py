"""With the broker stopped, every blocking call returns by its timeout with a typed error."""

import time
import uuid

import pytest

from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.consumer import Consumer
from kafkawire.errors import (
    DeliveryTimeoutError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
)
from kafkawire.client.producer import Producer

pytestmark = pytest.mark.deadlines


class _Clock:
    def __enter__(self):
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.monotonic() - self.start


@pytest.mark.broker
def test_deadlines_with_the_broker_stopped(tansu_broker_factory):
    broker = tansu_broker_factory()
    bootstrap = broker.bootstrap
    topic = f"dl-{uuid.uuid4().hex[:6]}"
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=0, request_timeout_ms=1000,
                        delivery_timeout_ms=2000, max_block_ms=1000)
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                        request_timeout_ms=1000, fetch_max_wait_ms=100)
    try:
        producer.send(topic, b"before", partition=0).result(10)
        consumer.assign([(topic, 0)])
        assert [r.value for r in consumer.poll(5)] == [b"before"]
        broker.stop()

        fut = producer.send(topic, b"after", partition=0)
        with _Clock() as clock, pytest.raises(KafkaTimeoutError, match="flush"):
            producer.flush(0.5)
        assert clock.elapsed < 1.5
        with _Clock() as clock, pytest.raises(DeliveryTimeoutError, match="delivery_timeout_ms"):
            fut.result(10)
        assert clock.elapsed < 4

        with _Clock() as clock:
            with pytest.raises(KafkaTimeoutError, match="not found in metadata"):
                producer.send(f"{topic}-new", b"x")  # needs metadata: max_block_ms
        assert clock.elapsed < 2.5

        with _Clock() as clock:
            assert consumer.poll(0.5) == []
        assert clock.elapsed < 1.5
        with _Clock() as clock, pytest.raises(KafkaTimeoutError):
            consumer.end_offsets([(topic, 0)], timeout=0.5)
        assert clock.elapsed < 1.5

        with _Clock() as clock:
            late = Producer(bootstrap_servers=bootstrap, max_block_ms=500)  # asks no broker
        assert clock.elapsed < 0.2
        try:
            with _Clock() as clock, pytest.raises(NoBrokersAvailableError, match=bootstrap):
                late.send(topic, b"x")  # a refused broker is retried, up to max_block_ms
            assert 0.4 < clock.elapsed < 1.5
        finally:
            late.close(1)
    finally:
        with _Clock() as clock:
            producer.close(1)
            consumer.close()
        assert clock.elapsed < 3


def test_refresh_with_every_broker_down_sleeps_between_attempts():
    from kafkawire.testing import free_port

    cfg = Config.client(bootstrap_servers=f"127.0.0.1:{free_port()}", reconnect_backoff_ms=50,
                        reconnect_backoff_max_ms=200)
    with Cluster(cfg) as cluster, _Clock() as clock:
        with pytest.raises(KafkaTimeoutError, match="refused"):
            cluster.refresh(0.6)
    assert 0.5 < clock.elapsed < 1.2



# -- every blocking call, with every broker stopped -----------------------------------------
#
# A broker is started and used (so the clients hold metadata, connections and a group
# generation), then stopped: each call must return by its deadline, within SLACK, with a
# KafkaTimeoutError (BufferExhaustedError is one).  A client made against an address where
# nothing answers raises NoBrokersAvailableError (a KafkaConnectionError, documented by
# Cluster.bootstrap) by its bootstrap deadline.

SLACK = 1.0  # scheduling on a shared 2-core machine: no call may wait past timeout + this
T = 0.8  # the timeout each call is given


def _timed(fn, expected=(KafkaTimeoutError,)):
    """(fn()'s result or the ``expected`` exception it raised, seconds taken)."""
    with _Clock() as clock:
        try:
            out = fn()
        except expected as exc:
            out = exc
    return out, clock.elapsed


def _check_raises(name, fn, limit, expected=(KafkaTimeoutError,)):
    out, took = _timed(fn, expected)
    print(f"{name}: {type(out).__name__} after {took:.2f}s (deadline {limit}s)")
    assert isinstance(out, expected), f"{name}: returned {out!r} instead of raising {expected}"
    assert took < limit + SLACK, f"{name}: took {took:.2f}s with a {limit}s deadline"
    return out


def _check_returns(name, fn, limit):
    out, took = _timed(fn, ())
    print(f"{name}: returned after {took:.2f}s (deadline {limit}s)")
    assert took < limit + SLACK, f"{name}: took {took:.2f}s with a {limit}s deadline"
    return out


def _fill(bootstrap, topic, partitions=4, n=5):
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for part in range(partitions):
            for i in range(n):
                p.send(topic, f"{part}-{i}".encode(), partition=part)
        p.flush(10)


@pytest.mark.broker
def test_consumer_calls_with_every_broker_stopped(tansu_broker_factory):
    broker = tansu_broker_factory()
    boot = broker.bootstrap
    topic = f"dlc-{uuid.uuid4().hex[:6]}"
    _fill(boot, topic)
    common = dict(bootstrap_servers=boot, auto_offset_reset="earliest", request_timeout_ms=1000,
                  fetch_max_wait_ms=100, reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    manual = Consumer(**common)
    group = dict(session_timeout_ms=2000, heartbeat_interval_ms=300, enable_auto_commit=True, **common)
    member = Consumer(group_id=f"dlg-{uuid.uuid4().hex[:6]}", **group)
    leaver = Consumer(group_id=f"dlg-{uuid.uuid4().hex[:6]}", **group)  # for unsubscribe()
    try:
        manual.assign([(topic, 0), (topic, 1)])
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 10 and time.monotonic() < deadline:
            got += manual.poll(0.5)
        assert len(got) == 10
        member.subscribe([topic])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 20 and time.monotonic() < deadline:
            got += member.poll(0.5)
        assert len(got) == 20 and member.group_state()["state"] == "stable"
        member.commit(timeout=5)
        leaver.subscribe([topic])
        deadline = time.monotonic() + 15
        while len(leaver.poll(0.5)) == 0 and time.monotonic() < deadline:
            pass
        assert leaver.group_state()["state"] == "stable" and leaver.assignment()

        broker.stop()

        tp0, tp2 = (topic, 0), (topic, 2)
        manual.assign([tp0, tp2])  # tp2 has no position yet: position() must ask the broker
        checks = [
            ("poll", lambda: manual.poll(T), T),
            ("poll_batch", lambda: manual.poll_batch(T), T),
            ("position", lambda: manual.position(tp2, timeout=T), T),
            ("beginning_offsets", lambda: manual.beginning_offsets([tp0], timeout=T), T),
            ("end_offsets", lambda: manual.end_offsets([tp0], timeout=T), T),
            ("offsets_for_times", lambda: manual.offsets_for_times({tp0: 0}, timeout=T), T),
            ("seek_to_beginning", lambda: manual.seek_to_beginning([tp0], timeout=T), T),
            ("seek_to_end", lambda: manual.seek_to_end([tp0], timeout=T), T),
            ("high_watermarks", lambda: manual.high_watermarks([tp0], timeout=T), T),
            ("group poll", lambda: member.poll(T), T),
            ("group commit", lambda: member.commit({tp0: 3}, timeout=T), T),
            ("group committed", lambda: member.committed([tp0], timeout=T), T),
        ]
        for name, fn, limit in checks:
            if name.endswith("poll") or name == "poll_batch":
                assert _check_returns(name, fn, limit) == [], name
            else:
                _check_raises(name, fn, limit)
        # commit_async never blocks; its callback hears of the failure in a later poll.
        heard = []
        _check_returns("commit_async", lambda: member.commit_async({tp0: 4}, lambda o, e: heard.append(e)), 0)
        with _Clock() as clock:
            while not heard and clock.start + 10 > time.monotonic():
                member.poll(0.2)
        # Held for want of a coordinator at most request_timeout_ms (1 s), then failed.
        assert heard and heard[0] is not None
        print(f"commit_async callback: {type(heard[0]).__name__} after {time.monotonic() - clock.start:.2f}s")
        assert time.monotonic() - clock.start < 1.0 + 2 * SLACK
        # Subscribing again and unsubscribing (which commits and leaves) keep their deadlines.
        _check_returns("subscribe", lambda: member.subscribe([topic, f"{topic}-x"]), 0)
        _check_returns("poll after subscribe", lambda: member.poll(T), T)
        _check_returns("unsubscribe", lambda: leaver.unsubscribe(timeout=T), T)
        leaver.subscribe([topic])
        leaver.poll(0.1)
        # No timeout: request_timeout_ms (1 s here) bounds it.
        _check_returns("close (no timeout)", leaver.close, 1.0)
        _check_returns("close (group member)", lambda: member.close(timeout=T), T)
        _check_returns("close", lambda: manual.close(timeout=T), T)
    finally:
        manual.close(timeout=1)
        member.close(timeout=1)
        leaver.close(timeout=1)


@pytest.mark.broker
def test_admin_calls_with_every_broker_stopped(tansu_broker_factory):
    from kafkawire.client.admin import Admin, NewTopic

    broker = tansu_broker_factory()
    boot = broker.bootstrap
    topic = f"dla-{uuid.uuid4().hex[:6]}"
    group = f"dla-g-{uuid.uuid4().hex[:6]}"
    _fill(boot, topic, partitions=1)
    admin = Admin(bootstrap_servers=boot, request_timeout_ms=1000, reconnect_backoff_ms=50,
                  reconnect_backoff_max_ms=200)
    try:
        admin.alter_group_offsets(group, {(topic, 0): 2}, timeout=10)
        assert admin.describe_cluster(timeout=10).brokers
        broker.stop()
        tp = (topic, 0)
        checks = [
            ("describe_cluster", lambda: admin.describe_cluster(timeout=T)),
            ("list_topics", lambda: admin.list_topics(timeout=T)),
            ("describe_topics", lambda: admin.describe_topics([topic], timeout=T)),
            ("create_topics", lambda: admin.create_topics([NewTopic(f"{topic}-n", 1)], timeout=T)),
            ("delete_topics", lambda: admin.delete_topics([topic], timeout=T)),
            ("create_partitions", lambda: admin.create_partitions({topic: 3}, timeout=T)),
            ("list_offsets", lambda: admin.list_offsets({tp: "latest"}, timeout=T)),
            ("delete_records", lambda: admin.delete_records({tp: 1}, timeout=T)),
            ("list_groups", lambda: admin.list_groups(timeout=T)),
            ("describe_groups", lambda: admin.describe_groups([group], timeout=T)),
            ("delete_groups", lambda: admin.delete_groups([group], timeout=T)),
            ("list_group_offsets", lambda: admin.list_group_offsets(group, timeout=T)),
            ("alter_group_offsets", lambda: admin.alter_group_offsets(group, {tp: 1}, timeout=T)),
            ("delete_group_offsets", lambda: admin.delete_group_offsets(group, [tp], timeout=T)),
            ("group_lag", lambda: admin.group_lag(group, timeout=T)),
            ("describe_configs", lambda: admin.describe_configs([("topic", topic)], timeout=T)),
            ("alter_configs", lambda: admin.alter_configs({("topic", topic): {"retention.ms": "1000"}}, timeout=T)),
        ]
        for name, fn in checks:
            _check_raises(name, fn, T)
        _check_returns("close", admin.close, 0)
    finally:
        admin.close()


@pytest.mark.broker
def test_producer_calls_with_every_broker_stopped(tansu_broker_factory):
    from kafkawire.errors import BufferExhaustedError

    broker = tansu_broker_factory()
    boot = broker.bootstrap
    topic = f"dlp-{uuid.uuid4().hex[:6]}"
    p = Producer(bootstrap_servers=boot, linger_ms=0, request_timeout_ms=1000, delivery_timeout_ms=3000,
                 max_block_ms=int(T * 1000), buffer_memory=64 * 1024, batch_size=16 * 1024,
                 reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    # close() without a timeout waits for delivery, which delivery_timeout_ms bounds.
    p2 = Producer(bootstrap_servers=boot, linger_ms=0, request_timeout_ms=1000, delivery_timeout_ms=2000,
                  reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)
    try:
        p.send(topic, b"x", partition=0).result(10)
        p2.send(topic, b"x", partition=0).result(10)
        broker.stop()
        p2.send(topic, b"lost", partition=0)
        _check_returns("close (no timeout)", p2.close, 2.0)
        _check_raises("send, unknown topic", lambda: p.send(f"{topic}-new", b"x"), T)
        _check_raises("partitions_for, unknown topic", lambda: p.partitions_for(f"{topic}-new2", timeout=T), T)
        p.send(topic, b"y" * 100, partition=1)
        _check_raises("flush", lambda: p.flush(T), T)

        def fill():
            while True:
                p.send(topic, b"z" * 1000, partition=2)

        _check_raises("send, buffer full", fill, T, (BufferExhaustedError,))
        assert p.metrics()["buffered_bytes"] <= 64 * 1024
        _check_returns("close", lambda: p.close(T), T)
        # The sender thread, no longer waited for, stops on its next pass and closes the
        # connections itself.
        p._thread.join(5)
        assert not p._thread.is_alive() and p.cluster.closed
    finally:
        p.close(1)
        p2.close(1)


def _silent_listener():
    """A socket on 127.0.0.1 that accepts TCP connections (the kernel does, into the
    backlog) and never answers a byte: a broker that hangs."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


@pytest.mark.parametrize("where", ["refused", "silent"])
def test_clients_with_a_bootstrap_that_never_answers(where):
    from kafkawire.client.admin import Admin
    from kafkawire.testing import free_port

    listener = _silent_listener() if where == "silent" else None
    port = listener.getsockname()[1] if listener else free_port()
    boot = f"127.0.0.1:{port}"
    try:
        # A constructor asks no broker: nothing listening (refused) or a listener that never
        # answers does not hold it.  Each first call that needs the cluster then retries a
        # refused connection (or waits for an answer) up to its own deadline, and says
        # what it tried.
        limit = 0.1 - SLACK
        consumer = _check_returns("Consumer()", lambda: Consumer(bootstrap_servers=boot,
                                                                 request_timeout_ms=int(T * 1000)), limit)
        admin = _check_returns("Admin()", lambda: Admin(bootstrap_servers=boot, request_timeout_ms=int(T * 1000)),
                               limit)
        producer = _check_returns("Producer()", lambda: Producer(bootstrap_servers=boot, max_block_ms=int(T * 1000)),
                                  limit)
        try:
            for name, call in (("Consumer.end_offsets", lambda: consumer.end_offsets([("t", 0)], timeout=T)),
                               ("Admin.list_topics", lambda: admin.list_topics(timeout=T)),
                               ("Producer.send", lambda: producer.send("t", b"v"))):
                err = _check_raises(name, call, T, (NoBrokersAvailableError,))
                assert boot in str(err) and f"of the {T:g} s allowed" in str(err) and err.retriable
                assert _timed(call, (NoBrokersAvailableError,))[1] > T * 0.8  # waited, each time
        finally:
            consumer.close()
            admin.close()
            producer.close(1)
        err = _check_raises("Cluster.refresh", lambda: Cluster(Config.client(bootstrap_servers=boot)).refresh(T), T)
        assert boot in str(err) or "timed out" in str(err) or "refused" in str(err)
    finally:
        if listener is not None:
            listener.close()
