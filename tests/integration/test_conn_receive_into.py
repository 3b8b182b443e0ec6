"""The sync client reads the bulk of a large response straight into the frame's buffer
(Connection.receive_buffer / received_into with socket.recv_into), in plaintext and
through TLS (stunnel in front of Tansu), and a broker gone in the middle of such a frame
fails the request in flight as it always did."""

from __future__ import annotations

import socket
import struct
import threading
import uuid

import pytest

from kafkawire.client.conn import BrokerConnection
from kafkawire.client.consumer import Consumer
from kafkawire.errors import ConnectionClosedError
from kafkawire.client.producer import Producer
from kafkawire.protocol import apis
from kafkawire.protocol.connection import Connection
from kafkawire.protocol.fetcher import Fetcher, TopicPartition

# The TLS fixtures: tls_broker (stunnel in front of Tansu, for the session) and its certificates.
from kafkawire.testing.tls import tls_broker, tls_certificates  # noqa: F401

pytestmark = pytest.mark.broker

FETCH = apis.get("Fetch")
# 3000 records of about 1 KB in one partition: several fetch responses of about 1 MiB
# (max_partition_fetch_bytes), each far larger than what one read brings.
RECORDS = [(f"k{i}".encode(), bytes([i % 251]) * (900 + i % 200)) for i in range(3000)]


def _fill(bootstrap: str, options: dict) -> str:
    topic = f"into-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, **options) as p:
        p.send_batch(topic, 0, RECORDS).result(30)
        p.flush(30)
    return topic


class _Counts:
    """How many bytes reached the protocol through each of the two receive ways."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.into = self.data = self.into_calls = 0
        received_into, receive_data = Connection.received_into, Connection.receive_data

        def counting_into(conn: Connection, n: int) -> list:
            self.into += n
            self.into_calls += 1
            return received_into(conn, n)

        def counting_data(conn: Connection, data: object) -> list:
            self.data += memoryview(data).nbytes  # type: ignore[arg-type]
            return receive_data(conn, data)

        monkeypatch.setattr(Connection, "received_into", counting_into)
        monkeypatch.setattr(Connection, "receive_data", counting_data)


def _read_all(bootstrap: str, topic: str, options: dict) -> list:
    got: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **options) as c:
        c.assign([(topic, 0)])
        for _ in range(60):
            got += c.poll(1.0)
            if len(got) >= len(RECORDS):
                break
    return [(r.key, r.value) for r in got]


@pytest.mark.parametrize("rcvbuf", [-1, 8192])
def test_large_fetch_responses_are_read_into_the_frame(kafka_broker, monkeypatch, rcvbuf):
    topic = _fill(kafka_broker.bootstrap, {})
    counts = _Counts(monkeypatch)
    # A small socket receive buffer makes the kernel hand the frame over in many pieces.
    assert _read_all(kafka_broker.bootstrap, topic, {"receive_buffer_bytes": rcvbuf}) == RECORDS
    value_bytes = sum(len(v) for _k, v in RECORDS)
    # The bulk of the record data went straight into the frames; the rest (the first
    # read of each frame, and the small responses) through receive_data.
    assert counts.into > value_bytes // 2, (counts.into, counts.data)
    assert counts.data > 0
    if rcvbuf > 0:
        assert counts.into_calls > 10


def test_large_fetch_responses_through_tls(tls_broker, tls_certificates, monkeypatch):  # noqa: F811
    options = {"security_protocol": "SSL", "ssl_cafile": tls_certificates.cafile}
    topic = _fill(tls_broker.bootstrap, options)
    counts = _Counts(monkeypatch)
    assert _read_all(tls_broker.bootstrap, topic, options) == RECORDS
    # TLS hands over one record (16 KB at most) per read: many reads into each frame.
    assert counts.into > sum(len(v) for _k, v in RECORDS) // 2
    assert counts.into_calls > 100


class _CuttingRelay:
    """A TCP relay on 127.0.0.1 in front of a real broker that passes the broker's bytes
    through unchanged until a response frame larger than ``cut_above`` bytes: of that one
    it passes the size prefix and half the frame, then closes both connections."""

    def __init__(self, broker_port: int, cut_above: int):
        self.broker_port = broker_port
        self.cut_above = cut_above
        self.cut = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._run, daemon=True, name="cutting-relay").start()

    def _run(self) -> None:
        try:
            client, _ = self.server.accept()
            broker = socket.create_connection(("127.0.0.1", self.broker_port), timeout=10)
        except OSError:
            return
        self.socks += [client, broker]
        threading.Thread(target=self._pipe, args=(client, broker), daemon=True).start()
        try:
            self._answers(broker, client)
        except OSError:
            pass
        finally:
            self.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    @staticmethod
    def _exactly(sock: socket.socket, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise OSError("the broker closed the connection")
            out += chunk
        return bytes(out)

    def _answers(self, broker: socket.socket, client: socket.socket) -> None:
        while True:
            prefix = self._exactly(broker, 4)
            (size,) = struct.unpack(">i", prefix)
            if size > self.cut_above:
                client.sendall(prefix + self._exactly(broker, size // 2))
                self.cut.set()
                return
            client.sendall(prefix + self._exactly(broker, size))

    def close(self) -> None:
        for s in [self.server, *self.socks]:
            try:
                # shutdown() first: close() alone neither sends FIN while the other
                # relay thread is blocked reading the socket, nor wakes that thread.
                if s is not self.server:
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass


def test_broker_gone_in_the_middle_of_a_large_frame(kafka_broker, monkeypatch):
    topic = _fill(kafka_broker.bootstrap, {})
    relay = _CuttingRelay(kafka_broker.port, cut_above=256 * 1024)
    tails: list[int] = []
    on_closed = BrokerConnection._on_closed_by_broker

    def noting_tail(conn: BrokerConnection) -> None:
        view = conn.protocol.receive_buffer() if conn.protocol is not None else None
        tails.append(-1 if view is None else len(view))
        on_closed(conn)

    monkeypatch.setattr(BrokerConnection, "_on_closed_by_broker", noting_tail)
    try:
        # Fetch v11 names topics (v13+ would need the topic id from Metadata first).
        with BrokerConnection("127.0.0.1", relay.port, version_overrides={"Fetch": 11}) as conn:
            conn.connect(5)
            req = FETCH.Request(
                replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=4 << 20, isolation_level=0,
                session_id=0, session_epoch=-1,
                topics=Fetcher.fetch_topics({TopicPartition(topic, 0): 0}, 2 << 20, {}))
            fut = conn.send(FETCH, req)
            with pytest.raises(ConnectionClosedError, match=r"closed the connection with 1 request\(s\) in flight"):
                fut.result(10)
            assert relay.cut.is_set()
            assert conn.state == "closed"
    finally:
        relay.close()
    # The end of the stream was seen by a read into the frame (at least 128 KiB of it left).
    assert len(tails) == 1 and tails[0] >= 128 * 1024
