"""The sync clients' constructors never wait on a broker: against a listener that accepts
connections and never answers a byte (a broker that hangs), Producer, Consumer, Admin and
ShareConsumer return at once, and the first call that needs the cluster is the one that
connects and ends at its own deadline with its usual timeout error.  The constructors do
resolve the bootstrap host names: none resolving is a configuration error, raised at once."""

from __future__ import annotations

import socket
import time

import pytest

from kafkawire.client.admin import Admin
from kafkawire.client.consumer import Consumer
from kafkawire.client.producer import Producer
from kafkawire.client.share_consumer import ShareConsumer
from kafkawire.errors import BrokerResolutionError, NoBrokersAvailableError

pytestmark = pytest.mark.deadlines

T = 1.0  # each first call's deadline (seconds)
QUICK = 0.5  # a constructor that asks no broker returns well within this, even on a loaded machine
SLACK = 1.5  # scheduling on a shared 2-core machine: no call may end later than its deadline + this
# A name the resolver refuses before asking any name server (a DNS label has at most 63
# characters): no traffic leaves the machine.
UNRESOLVABLE = "a" * 64 + ".example"


@pytest.fixture
def silent():
    """A socket the test owns on 127.0.0.1 that accepts TCP connections (the kernel does,
    into the backlog) and never answers; yields (bootstrap, listener)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    s.setblocking(False)
    try:
        yield f"127.0.0.1:{s.getsockname()[1]}", s
    finally:
        s.close()


def _connections(listener: socket.socket) -> int:
    """How many connections reached the listener since last asked (each closed at once)."""
    n = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


def _timed(fn):
    start = time.monotonic()
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - the caller checks what it is
        out = exc
    return out, time.monotonic() - start


def _made(make):
    client, took = _timed(make)
    assert not isinstance(client, Exception), client
    assert took < QUICK, f"{type(client).__name__}() took {took:.2f}s against a listener that never answers"
    return client


@pytest.mark.parametrize("kind", ["Consumer", "Admin"])
def test_consumer_and_admin_connect_at_their_first_call_and_end_at_its_deadline(silent, kind):
    boot, listener = silent
    make, call = {
        "Consumer": (lambda: Consumer(bootstrap_servers=boot, request_timeout_ms=60000),
                     lambda c: c.list_topics(timeout=T)),
        "Admin": (lambda: Admin(bootstrap_servers=boot, request_timeout_ms=60000),
                  lambda a: a.list_topics(timeout=T)),
    }[kind]
    client = _made(make)
    try:
        time.sleep(0.2)  # a connection the constructor began would be in the backlog by now
        assert _connections(listener) == 0, f"{kind}() connected to the broker"
        err, took = _timed(lambda: call(client))
        assert _connections(listener) >= 1  # the first call is the one that connects
        assert isinstance(err, NoBrokersAvailableError), err
        assert T * 0.9 < took < T + SLACK, took  # waited for an answer, up to its own deadline
        assert err.retriable  # a broker that hangs may come back
        text = str(err)
        assert f"of the {T:g} s allowed" in text and boot in text, text
        assert "did not answer ApiVersions in time" in text, text
    finally:
        client.close()


def test_producer_returns_at_once_and_send_ends_at_max_block_ms(silent):
    boot, listener = silent
    # The sender thread may connect in the background at once (as the Java client's does);
    # the constructor does not wait for it.
    producer = _made(lambda: Producer(bootstrap_servers=boot, max_block_ms=int(T * 1000)))
    try:
        for name, call in (("send", lambda: producer.send("t", b"v")),
                           ("list_topics", lambda: producer.list_topics(timeout=T))):
            err, took = _timed(call)
            assert isinstance(err, NoBrokersAvailableError), (name, err)
            assert T * 0.9 < took < T + SLACK, (name, took)
            assert err.retriable and f"of the {T:g} s allowed" in str(err) and boot in str(err), (name, err)
        assert _connections(listener) >= 1
    finally:
        _, took = _timed(lambda: producer.close(1))
        assert took < 1 + SLACK


def test_share_consumer_connects_at_its_first_poll(silent):
    boot, listener = silent
    consumer = _made(lambda: ShareConsumer(bootstrap_servers=boot, group_id="g", request_timeout_ms=60000))
    try:
        time.sleep(0.2)
        assert _connections(listener) == 0, "ShareConsumer() connected to the broker"
        consumer.subscribe(["t"])
        got, took = _timed(lambda: consumer.poll(T))
        assert got == []  # poll's own contract: nothing by its timeout is an empty poll
        assert T * 0.9 < took < T + SLACK, took
        assert _connections(listener) >= 1
    finally:
        consumer.close(1)


@pytest.mark.parametrize("kind", ["Producer", "Consumer", "Admin", "ShareConsumer"])
def test_bootstrap_servers_that_resolve_nowhere_are_refused_by_the_constructor(kind):
    make = {"Producer": Producer, "Consumer": Consumer, "Admin": Admin,
            "ShareConsumer": lambda **o: ShareConsumer(group_id="g", **o)}[kind]
    err, took = _timed(lambda: make(bootstrap_servers=f"{UNRESOLVABLE}:9092"))
    assert took < QUICK
    assert isinstance(err, NoBrokersAvailableError) and isinstance(err, BrokerResolutionError), err
    assert not err.retriable
    assert all(isinstance(e, BrokerResolutionError) for e in err.errors) and err.errors
    assert (err.host, err.port) == (UNRESOLVABLE, 9092)
    text = str(err)
    assert f"cannot resolve broker {UNRESOLVABLE}:9092: not a valid host name" in text, text
    assert "check the host name in bootstrap_servers" in text


def test_one_address_that_resolves_is_enough_for_the_constructor(silent):
    boot, _listener = silent
    # As the Java client: only bootstrap_servers that resolve nowhere are a configuration
    # error; the first call skips the name that does not resolve and asks the other.
    with Admin(bootstrap_servers=f"{UNRESOLVABLE}:9092,{boot}", request_timeout_ms=60000) as admin:
        err, took = _timed(lambda: admin.list_topics(timeout=T))
    assert isinstance(err, NoBrokersAvailableError) and err.retriable, err
    assert f"cannot resolve broker {UNRESOLVABLE}:9092" in str(err) and boot in str(err)
    assert T * 0.9 < took < T + SLACK
