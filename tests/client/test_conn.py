"""BrokerConnection and Cluster against real brokers on loopback."""

import socket
import re
import time

import pytest

from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.conn import BrokerConnection
from kafkawire.errors import (
    BrokerConnectionRefusedError,
    BrokerConnectTimeoutError,
    BrokerResolutionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    RequestTimeoutError,
)
from kafkawire.protocol import apis
from kafkawire.testing import free_port

METADATA = apis.get("Metadata")


def test_connect_negotiates_and_pipelines(tansu_broker):
    with BrokerConnection(tansu_broker.host, tansu_broker.port) as conn:
        conn.connect(5)
        assert conn.version_for(METADATA) >= 9  # Tansu speaks flexible Metadata
        futures = [conn.send(METADATA, METADATA.Request(topics=None)) for _ in range(10)]
        assert conn.in_flight == 10
        ports = {f.result(5).brokers[0].port for f in futures}
        assert ports == {tansu_broker.port} and conn.in_flight == 0


def test_an_answer_listed_after_a_failed_write_fails_at_once(kafka_broker):
    # write_produce, then expect_answer: a write that closed the connection fails the
    # answer when it is listed, with the connection's error, not at its deadline.
    produce = apis.get("Produce")
    with BrokerConnection(kafka_broker.host, kafka_broker.port) as conn:
        conn.connect(5)
        version = conn.version_for(produce)
        conn.sock.shutdown(socket.SHUT_WR)  # the next write fails (EPIPE)
        fields = (None, 1, 1000, "no-such-topic", 0, b"x" * 70)  # Accumulator.lone_request's
        assert conn.write_produce(fields, version)
        got = []
        conn.expect_answer(lambda resp, exc: got.append((resp, exc)))
        assert len(got) == 1 and got[0][0] is None
        assert "writing to" in str(got[0][1]) and not conn.ready
        assert not conn.write_produce(fields, version)  # closed: send_produce's to take


def test_refused_is_typed():
    with BrokerConnection("127.0.0.1", free_port()) as conn:
        with pytest.raises(BrokerConnectionRefusedError, match="refused"):
            conn.connect(2)


def test_dns_failure_is_typed(monkeypatch):
    def fail(*a, **k):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with BrokerConnection("no-such-host.invalid", 9092) as conn:
        with pytest.raises(BrokerResolutionError, match="cannot resolve"):
            conn.connect(2)


def test_silent_listener_times_out_by_the_deadline():
    # A socket that accepts (the kernel does, via the backlog) but never answers ApiVersions.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with BrokerConnection("127.0.0.1", listener.getsockname()[1]) as conn:
            start = time.monotonic()
            with pytest.raises(BrokerConnectTimeoutError, match="did not answer ApiVersions"):
                conn.connect(0.3)
            assert time.monotonic() - start < 1.5


def test_request_timeout_fails_every_request_in_flight(mock_cluster_factory):
    cluster = mock_cluster_factory(1)
    host, port = cluster.brokers[1]
    with BrokerConnection(host, port, request_timeout=0.3) as conn:
        conn.connect(5)
        cluster.broker_set_rtt(1, 2000)
        futures = [conn.send(METADATA, METADATA.Request(topics=None)) for _ in range(3)]
        start = time.monotonic()
        for f in futures:
            with pytest.raises(RequestTimeoutError, match="did not answer"):
                f.result(5)
        assert time.monotonic() - start < 1.5
        assert not conn.ready


def test_bootstrap_error_lists_every_broker_tried(tansu_broker):
    dead = [free_port(), free_port()]
    cfg = Config.client(bootstrap_servers=",".join(f"127.0.0.1:{p}" for p in dead))
    with Cluster(cfg) as cluster:
        with pytest.raises(NoBrokersAvailableError) as info:
            cluster.bootstrap(3)  # a refused address is tried again until the deadline
        for p in dead:
            assert re.search(rf"127.0.0.1:{p}: \d+ attempts, the last BrokerConnectionRefusedError",
                             str(info.value)), str(info.value)
        assert info.value.retriable  # given up at the deadline: a later call may succeed
    cfg = Config.client(bootstrap_servers=f"127.0.0.1:{dead[0]},{tansu_broker.bootstrap}")
    with Cluster(cfg) as cluster:
        cluster.bootstrap(5)
        assert list(cluster.brokers.values()) == [(tansu_broker.host, tansu_broker.port)]


def test_leader_moves_are_followed_after_refresh(mock_cluster_factory):
    mock = mock_cluster_factory(3)
    mock.create_topic("moves", partitions=1, replication_factor=3)
    mock.partition_set_leader("moves", 0, 1)
    with Cluster(Config.client(bootstrap_servers=mock.bootstrap)) as cluster:
        cluster.bootstrap(5)
        assert cluster.partitions_for("moves", 5) == [0]
        assert cluster.leader_for("moves", 0) == 1
        mock.partition_set_leader("moves", 0, 3)
        cluster.refresh(5)
        assert cluster.leader_for("moves", 0) == 3


def test_backoff_grows_and_does_not_spin():
    port = free_port()
    cfg = Config.client(bootstrap_servers=f"127.0.0.1:{port}", reconnect_backoff_ms=100,
                        reconnect_backoff_max_ms=400)
    with Cluster(cfg) as cluster:
        attempts = 0
        real = BrokerConnection.connect

        def counting(self, timeout):
            nonlocal attempts
            attempts += 1
            return real(self, timeout)

        BrokerConnection.connect = counting
        try:
            with pytest.raises(KafkaTimeoutError, match="not refreshed within"):
                cluster.refresh(1.0)
        finally:
            BrokerConnection.connect = real
        # 100, 200, 400, 400 ms (+-20%) fit in one second: a handful, not thousands.
        assert 2 <= attempts <= 6


def test_refresh_waits_for_the_refresh_in_flight(tansu_broker):
    cfg = Config.client(bootstrap_servers=tansu_broker.bootstrap, retry_backoff_ms=0)
    with Cluster(cfg) as cluster:
        cluster.bootstrap(5)
        (node,) = cluster.brokers
        cluster.connection(node, time.monotonic() + 5)
        sent = []
        real = cluster._send_metadata
        cluster._send_metadata = lambda conn: sent.append(conn) or real(conn)
        cluster.request_refresh()
        cluster.maybe_refresh()
        assert len(sent) == 1 and not cluster._refresh_future.done()
        cluster.refresh(5)  # asks for nothing more: waits for that one
        assert len(sent) == 1 and not cluster.refresh_due()
        cluster.refresh(5, topics=["refresh-new-topic"])  # asks for more: a request of its own
        assert len(sent) == 2 and "refresh-new-topic" in cluster.topics


def test_wakeups_before_a_poll_write_one_byte_and_each_poll_after_is_woken_again():
    # A busy producer calls wakeup() for each record: only the first of those before the
    # sender's poll costs a system call; a wakeup() after that poll drained must wake the next.
    from kafkawire.client.conn import Poller

    poller = Poller()
    try:
        for _ in range(3):
            poller.wakeup()
        time.sleep(0.05)
        assert len(poller._wake_r.recv(4096, socket.MSG_PEEK)) == 1
        for _ in range(3):  # each round: woken at once, then a wakeup() wakes the next poll
            start = time.monotonic()
            poller.poll(5.0)
            assert time.monotonic() - start < 1.0
            poller.wakeup()
        start = time.monotonic()
        poller.poll(0.2)
        poller.poll(0.2)  # nothing pending now: waits its time out
        assert time.monotonic() - start >= 0.15
    finally:
        poller.close()


class _WakeupDuringDrain:
    """The poller's wake-up socket, with another thread's wakeup() landing while the poll
    drains it (the interleaving a busy producer's callers meet)."""

    def __init__(self, poller, sock):
        self.poller, self.sock, self.fired = poller, sock, False

    def recv(self, n, *flags):
        if not self.fired:
            self.fired = True
            self.poller.wakeup()
        return self.sock.recv(n, *flags)

    def __getattr__(self, name):
        return getattr(self.sock, name)


def test_a_wakeup_during_the_drain_leaves_the_poller_wakeable():
    # A wakeup() whose byte the poll drains must not leave a pending mark that no byte
    # backs: every wakeup() after it would then write nothing, and every poll would run
    # to its timeout (a linger-0 producer's batches held up to 100 ms each).
    from kafkawire.client.conn import Poller

    poller = Poller()
    try:
        real = poller._wake_r
        poller._wake_r = _WakeupDuringDrain(poller, real)
        poller.wakeup()
        poller.poll(5.0)  # woken; drains both bytes, the second written during the drain
        poller._wake_r = real
        poller.wakeup()
        start = time.monotonic()
        poller.poll(2.0)
        assert time.monotonic() - start < 1.0, "wakeup() wrote nothing: the poll ran to its timeout"
    finally:
        poller.close()
