"""The test brokers of kafkawire.testing, checked through an independent client.

confluent-kafka (librdkafka) produces and consumes against each broker; a few raw
ApiVersions v0 requests, encoded here by hand, observe what the mock's hooks change.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time

import pytest

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.testing import BrokerStartError, MockCluster, MockClusterError, TansuBroker
from kafkawire.testing.brokers import port_accepts

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

API_VERSIONS = 18
PRODUCE = 0


# -- helpers ----------------------------------------------------------------------------


def api_versions_v0(host: str, port: int, timeout: float = 5.0) -> tuple[int, dict[int, tuple[int, int]]]:
    """Send ApiVersions v0 and return (error_code, {api_key: (min, max)})."""
    client_id = b"kw-test"
    # request header v1: api_key, api_version, correlation_id, client_id; v0 has no body
    request = struct.pack(">hhih", API_VERSIONS, 0, 42, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        body = _recv_exactly(sock, size)
    correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
    assert correlation_id == 42
    ranges = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", body, 10 + 6 * i)
        ranges[key] = (lo, hi)
    return error_code, ranges


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def produce(bootstrap: str, topic: str, values: list[bytes], timeout_ms: int = 10000) -> list:
    """Produce ``values`` to partition 0; return [(error, offset)] from the delivery reports."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": timeout_ms,
            "socket.timeout.ms": min(timeout_ms, 10000),
            "log_level": 0,
        }
    )
    reports: list = []
    for value in values:
        producer.produce(
            topic,
            value=value,
            key=b"k",
            partition=0,
            on_delivery=lambda err, msg: reports.append((err, msg.offset())),
        )
    remaining = producer.flush(timeout_ms / 1000 + 5)
    assert remaining == 0, f"{remaining} messages still queued"
    return reports


def consume(bootstrap: str, topic: str, count: int, timeout: float = 10.0) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kw-testing",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            got.append((msg.offset(), msg.value()))
        return got
    finally:
        consumer.close()


def listening_addresses(pid: int) -> list[str]:
    """Local addresses (hex, as in /proc/net) of the TCP sockets ``pid`` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                # TCP state 0A is LISTEN; every bound UDP socket counts
                if inode in inodes and (state == "0A" or table.startswith("udp")):
                    found.append(f"{table} {local}")
    return found


# -- Tansu ------------------------------------------------------------------------------


def test_tansu_produce_and_consume(tansu_broker: TansuBroker) -> None:
    assert tansu_broker.bootstrap == f"127.0.0.1:{tansu_broker.port}"
    admin = AdminClient({"bootstrap.servers": tansu_broker.bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic("kw-tansu-pc", 1, 1)]).values():
        future.result(10)
    values = [b"alpha", b"beta", b"gamma"]
    reports = produce(tansu_broker.bootstrap, "kw-tansu-pc", values)
    assert [err for err, _ in reports] == [None, None, None]
    assert [offset for _, offset in reports] == [0, 1, 2]
    assert consume(tansu_broker.bootstrap, "kw-tansu-pc", 3) == list(enumerate(values))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_tansu_listens_on_loopback_only(tansu_broker: TansuBroker) -> None:
    assert tansu_broker.pid is not None
    addresses = listening_addresses(tansu_broker.pid)
    # /proc/net shows 127.0.0.1:PORT as 0100007F:<port in hex>
    assert addresses == [f"tcp 0100007F:{tansu_broker.port:04X}"]


def test_tansu_stop_ends_process_and_frees_port(tansu_broker_factory) -> None:
    broker = tansu_broker_factory()
    pid, port = broker.pid, broker.port
    assert broker.running and port_accepts("127.0.0.1", port)
    started = time.monotonic()
    broker.stop()
    assert time.monotonic() - started < broker.stop_timeout + 1
    assert not broker.running and broker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped by stop(), so the pid no longer exists
    assert not port_accepts("127.0.0.1", port)
    with socket.socket() as s:
        # SO_REUSEADDR: a connection in TIME_WAIT (the broker may close port_accepts'
        # probe first) must not count; Linux still refuses the bind while anything listens.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # the port is free again
    assert broker.stop() is None  # idempotent


def test_tansu_port_in_use_is_a_clear_error(tansu_broker: TansuBroker) -> None:
    # Another listener on the port accepts connections, but this tansu never binds it.
    clash = TansuBroker(port=tansu_broker.port, start_timeout=10)
    with pytest.raises(BrokerStartError, match="address in use"):
        clash.start()
    assert not clash.running
    clash.close()
    assert tansu_broker.running


def test_tansu_dead_on_start_reports_output(tmp_path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'cannot open storage' >&2\nexit 3\n")
    fake.chmod(0o755)
    broker = TansuBroker(binary=str(fake), start_timeout=5)
    with pytest.raises(BrokerStartError, match=r"status 3(.|\n)*cannot open storage"):
        broker.start()
    broker.close()


# -- librdkafka's mock cluster ----------------------------------------------------------


def test_mock_brokers_are_on_loopback_and_match_metadata(mock_cluster: MockCluster) -> None:
    brokers = mock_cluster.brokers
    assert sorted(brokers) == [1, 2, 3]
    assert all(host == "127.0.0.1" for host, _ in brokers.values())
    admin = AdminClient({"bootstrap.servers": mock_cluster.bootstrap, "log_level": 0})
    metadata = admin.list_topics(timeout=10)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == brokers


def test_mock_produce_and_consume(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("kw-mock-pc", partitions=2, replication_factor=3)
    values = [b"one", b"two", b"three"]
    reports = produce(mock_cluster.bootstrap, "kw-mock-pc", values)
    assert reports == [(None, 0), (None, 1), (None, 2)]
    assert consume(mock_cluster.bootstrap, "kw-mock-pc", 3) == list(enumerate(values))


def test_mock_broker_down_fails_produce_until_up(mock_cluster_factory) -> None:
    cluster = mock_cluster_factory(3)
    cluster.create_topic("kw-down", partitions=1, replication_factor=1)
    cluster.partition_set_leader("kw-down", 0, 2)
    cluster.broker_set_down(2)
    host, port = cluster.brokers[2]
    assert not port_accepts(host, port)
    reports = produce(cluster.bootstrap, "kw-down", [b"lost"], timeout_ms=1500)
    assert len(reports) == 1 and reports[0][0] is not None
    assert reports[0][0].code() == KafkaError._MSG_TIMED_OUT
    cluster.broker_set_up(2)
    assert produce(cluster.bootstrap, "kw-down", [b"kept"], timeout_ms=5000) == [(None, 0)]


def test_mock_set_apiversion_narrows_and_removes(mock_cluster_factory) -> None:
    cluster = mock_cluster_factory(1)
    host, port = cluster.brokers[1]
    error, ranges = api_versions_v0(host, port)
    assert error == 0 and ranges[PRODUCE][1] >= 3
    cluster.set_apiversion(PRODUCE, 0, 2)
    assert api_versions_v0(host, port)[1][PRODUCE] == (0, 2)
    cluster.set_apiversion(PRODUCE, -1, -1)
    assert PRODUCE not in api_versions_v0(host, port)[1]


def test_mock_pushed_errors_are_answered_in_order(mock_cluster_factory) -> None:
    cluster = mock_cluster_factory(1)
    host, port = cluster.brokers[1]
    cluster.push_request_errors(API_VERSIONS, [35, 33])
    assert api_versions_v0(host, port)[0] == 35
    assert api_versions_v0(host, port)[0] == 33
    assert api_versions_v0(host, port)[0] == 0
    cluster.push_request_errors(API_VERSIONS, [35])
    cluster.clear_request_errors(API_VERSIONS)
    assert api_versions_v0(host, port)[0] == 0


def test_mock_rtt_delays_responses(mock_cluster_factory) -> None:
    cluster = mock_cluster_factory(1)
    host, port = cluster.brokers[1]
    cluster.broker_set_rtt(1, 300)
    started = time.monotonic()
    api_versions_v0(host, port)
    assert time.monotonic() - started >= 0.29
    cluster.broker_set_rtt(1, 0)


def test_mock_coordinator_set_and_errors(mock_cluster_factory) -> None:
    cluster = mock_cluster_factory(2)
    cluster.coordinator_set("group", "kw-group", 2)
    with pytest.raises(ValueError, match="key_type"):
        cluster.coordinator_set("groups", "kw-group", 2)
    with pytest.raises(MockClusterError, match=r"broker_set_down\(9\) failed"):
        cluster.broker_set_down(9)


def test_mock_close_stops_brokers() -> None:
    cluster = MockCluster(2)
    ports = [port for _, port in cluster.brokers.values()]
    assert all(port_accepts("127.0.0.1", p) for p in ports)
    cluster.close()
    assert cluster.closed
    assert not any(port_accepts("127.0.0.1", p) for p in ports)
    with pytest.raises(MockClusterError, match="closed"):
        cluster.create_topic("after-close")
    cluster.close()  # idempotent
    with pytest.raises(ValueError, match="num_brokers"):
        MockCluster(0)
