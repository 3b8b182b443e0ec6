"""The floor under a Python producer's one-at-a-time latency: how much of kafkawire's
produce -> acknowledgement time is the interpreter, and how much its own machinery.

Five rows, one broker, interleaved slices (the order reversed each slice), one at a time
(send, wait for the acknowledgement, next), acks=1, 100-byte values:

    floor          the least a Python client does per record: the compiled codec encodes
                   a one-record batch, the Produce request is the bytes kafkawire's
                   sans-IO Connection framed once with a new correlation id patched in,
                   one sendmsg, one epoll wait, one recv, the answer decoded by
                   kafkawire's Produce decoder and its error code checked.  No
                   accumulator, no futures, no connection state.
    +sans-io       the floor with kafkawire's sans-IO Connection doing its part: a Produce
                   request object per record, framed by Connection.send_produce, the
                   answer through Connection.receive_data.
    +connection    the same through kafkawire's client shell: BrokerConnection.send_produce
                   with a callback, the Poller polled until it ran.
    kafkawire      Producer(linger_ms=0).send(...).result()
    confluent-kafka  produce(), then poll() until the delivery report

kafkawire's p50 minus the floor's is what its batching, framing, futures and answer
handling cost per record where it runs (caches cold from the wait for the broker), the
part a faster kafkawire can take away, and the rows between say which layer costs what;
the floor minus confluent-kafka's says whether the interpreter alone keeps a Python
client behind.

    .venv/bin/python bench/latency_floor.py [--broker kafka|tansu | --bootstrap HOST:PORT]
        [--slices 8] [--records 500] [--warmup 30] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import select
import socket
import statistics
import struct
import time
from typing import Any, Callable

import compare_latency as cl
from report import finish

VALUE = b"x" * cl.VALUE_SIZE
_CORRELATION = struct.Struct(">i")  # at byte 8 of a request frame (after size, key, version)
ANSWER_WITHIN = 30.0  # seconds: a broker that does not answer ends the run


def _connect(bootstrap: str):
    """A socket to ``bootstrap`` and the sans-IO Connection over it, versions negotiated."""
    from kafkawire.protocol.connection import Connection

    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    proto = Connection(client_id="floor")
    _cid, chunks = proto.api_versions_request()
    sock.sendall(b"".join(bytes(c) for c in chunks))
    while not proto.negotiated:
        proto.receive_data(sock.recv(65536))
    return sock, proto


class FloorProducer:
    """A raw socket producing one record at a time (see the module docstring)."""

    def __init__(self, bootstrap: str, topic: str):
        from kafkawire.protocol import apis
        from kafkawire.protocol.producer import decode_produce_response, produce_request

        self.sock, proto = _connect(bootstrap)
        self.produce_request = produce_request
        produce = apis.get("Produce")
        self.version = proto.version_for(produce)
        # The answer's body starts after the correlation id (and a tag byte from v9).
        self.body_at = 8 + (produce.response_header_version(self.version) >= 1)
        self.decode = decode_produce_response
        self.topic = topic
        self.magic = 2 if self.version >= 3 else 1 if self.version == 2 else 0
        # The request around a placeholder batch of the same size: the batch's bytes are
        # its last ones but for the tagged fields after them (flexible versions).
        batch = self._batch()
        req = produce_request(None, 1, 30000, {topic: [(0, batch)]})
        frame = b"".join(bytes(c) for c in proto.send_produce(req, self.version))
        at = frame.rindex(batch)
        self.head, self.tail = bytearray(frame[:at]), frame[at + len(batch):]
        self.cid = 0
        self._watch()

    def _watch(self) -> None:
        self.sock.setblocking(False)
        self.epoll = select.epoll()
        self.epoll.register(self.sock.fileno(), select.EPOLLIN)

    def _batch(self) -> bytes:
        from kafkawire import codec

        ts = int(time.time() * 1000)
        if self.magic == 2:
            return codec.encode_record_batch([(None, VALUE, ts)], timestamp=ts)
        return codec.encode_message_set([(None, VALUE, ts) if self.magic else (None, VALUE)],
                                        magic=self.magic)

    def send_and_wait(self) -> None:
        batch = self._batch()  # the same size as the placeholder: the frame's size holds
        self.cid = cid = (self.cid + 1) & 0x7FFFFFFF
        _CORRELATION.pack_into(self.head, 8, cid)
        self.sock.sendmsg([self.head, batch, self.tail])
        deadline = time.monotonic() + ANSWER_WITHIN
        got = self._read(b"", 8, deadline)
        size, answered = struct.unpack_from(">ii", got)
        if answered != cid:
            raise AssertionError(f"answer to correlation id {answered}, expected {cid}")
        got = self._read(got, 4 + size, deadline)  # the rest of a split answer
        resp = self.decode(memoryview(got)[self.body_at:4 + size], self.version)
        code = resp.responses[0].partition_responses[0].error_code if resp is not None else None
        if code != 0:
            raise AssertionError(f"the broker refused the floor's record: error code {code}")

    def _read(self, got: bytes, want: int, deadline: float) -> bytes:
        """``got`` and what the socket has next, until ``want`` bytes."""
        while len(got) < want:
            self._wait_readable(deadline)
            try:
                got += self.sock.recv(65536)
            except BlockingIOError:
                continue
        return got

    def _wait_readable(self, deadline: float) -> None:
        """Until the socket may have bytes; TimeoutError once ``deadline`` has passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer from the broker within {ANSWER_WITHIN} s")
        self.epoll.poll(left)

    def close(self) -> None:
        self.epoll.close()
        self.sock.close()


class SansIOProducer(FloorProducer):
    """The floor with the sans-IO Connection's framing and answer handling."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(bootstrap, topic)
        self.close()  # a connection of its own: the floor's framed a request it never sent
        self.sock, self.proto = _connect(bootstrap)
        self._watch()

    def send_and_wait(self) -> None:
        req = self.produce_request(None, 1, 30000, {self.topic: [(0, self._batch())]})
        self.sock.sendmsg(self.proto.send_produce(req, self.version))
        deadline = time.monotonic() + ANSWER_WITHIN
        while True:
            self._wait_readable(deadline)
            try:
                events = self.proto.receive_data(self.sock.recv(65536))
            except BlockingIOError:
                continue
            if events:
                code = events[0].response.responses[0].partition_responses[0].error_code
                if code != 0:
                    raise AssertionError(f"the broker refused a record: error code {code}")
                return


class ConnectionProducer(FloorProducer):
    """The floor through the client shell: BrokerConnection and its Poller."""

    def __init__(self, bootstrap: str, topic: str):
        from kafkawire.client.cluster import Cluster
        from kafkawire.core.config import Config

        super().__init__(bootstrap, topic)
        self.cluster = cluster = Cluster(Config.producer(bootstrap_servers=bootstrap))
        cluster.bootstrap(10)
        cluster.interest.add(topic)
        deadline = time.monotonic() + 30
        self.conn = None
        while self.conn is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ready connection to the leader of {topic}[0] within 30 s")
            node = cluster.leader_for(topic, 0)
            if node is None:
                cluster.request_refresh()
                cluster.maybe_refresh()
            else:
                self.conn = cluster.ready_connection(node)
            cluster.poller.poll(0.05)

    def send_and_wait(self) -> None:
        req = self.produce_request(None, 1, 30000, {self.topic: [(0, self._batch())]})
        box: list = []
        # The connection fails the request after its request_timeout_ms: the wait ends.
        self.conn.send_produce(req, self.version, lambda resp, exc: box.append((resp, exc)))
        poll = self.cluster.poller.poll
        while not box:
            poll(1.0)
        resp, exc = box[0]
        if exc is not None:
            raise exc
        code = resp.responses[0].partition_responses[0].error_code
        if code != 0:
            raise AssertionError(f"the broker refused a record: error code {code}")

    def close(self) -> None:
        super().close()
        self.cluster.close()


def rows(bootstrap: str, topic: str):
    """name -> (send one record and wait, close)."""
    from kafkawire import Producer

    floor = FloorProducer(bootstrap, topic)
    sans_io = SansIOProducer(bootstrap, topic)
    shell = ConnectionProducer(bootstrap, topic)
    kw = Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    return {
        "floor": (floor.send_and_wait, floor.close),
        "+sans-io": (sans_io.send_and_wait, sans_io.close),
        "+connection": (shell.send_and_wait, shell.close),
        "kafkawire": (lambda: kw.send(topic, VALUE, partition=0).result(30), lambda: kw.close(10)),
        "confluent-kafka": confluent_one_at_a_time(bootstrap, topic),
    }


def timed(send: Callable[[], Any]) -> Callable[[int], list[float]]:
    """``send`` (one record, waited for) as a slice: ``n`` records, their latencies (s)."""
    perf = time.perf_counter

    def run(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t = perf()
            send()
            out.append(perf() - t)
        return out

    return run


def interleave(runs: dict[str, Callable[[int], list[float]]], slices: int, per_slice: int,
               warmup: float) -> dict[str, list[float]]:
    """Each of ``runs`` (name -> run(n), n latencies) in turn, ``slices`` times
    ``per_slice`` records, the order reversed every slice; first ``warmup`` seconds of them
    all taking turns (a broker started moments ago answers several times slower until its
    JIT has compiled the produce path)."""
    end = time.perf_counter() + warmup
    while True:
        for run in runs.values():
            run(cl.WARMUP * 10)
        if time.perf_counter() >= end:
            break
    lat: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for s in range(slices):
        for name in names if s % 2 == 0 else names[::-1]:
            lat[name] += runs[name](per_slice)
    return lat


def measure(bootstrap: str, slices: int, per_slice: int, warmup: float) -> dict[str, list[float]]:
    from kafkawire import Admin

    admin = Admin(bootstrap_servers=bootstrap)
    topic = cl.new_topic(admin)
    clients = rows(bootstrap, topic)
    try:
        return interleave({name: timed(send) for name, (send, _close) in clients.items()},
                          slices, per_slice, warmup)
    finally:
        for _send, close in clients.values():
            close()
        cl.drop_topic(admin, topic)
        admin.close()


def table(lat: dict[str, list[float]], title: str, floor: str | None = "floor") -> str:
    """p50, p99 (µs) and x (the p50 over confluent-kafka's) of each row of ``lat``; with
    ``floor``, each p50 minus that row's too."""
    base = statistics.median(lat["confluent-kafka"])
    low = statistics.median(lat[floor]) if floor else None
    extra = f"; over {floor}: the p50 minus the {floor}'s" if floor else ""
    out = [f"{title}, p50 and p99 in µs; x: the p50 over confluent-kafka's{extra}.", "",
           "| producer | p50 | p99 | x |" + (f" over {floor} |" if floor else ""),
           "|---|---|---|---|" + ("---|" if floor else "")]
    for name, xs in lat.items():
        xs = sorted(xs)
        p50, p99 = statistics.median(xs), xs[min(len(xs) - 1, int(0.99 * len(xs)))]
        row = f"| {name} | {p50 * 1e6:.0f} | {p99 * 1e6:.0f} | {p50 / base:.2f}x |"
        out.append(row + (f" {(p50 - low) * 1e6:+.0f} |" if low is not None else ""))
    return "\n".join(out) + "\n"


def confluent_one_at_a_time(bootstrap: str, topic: str) -> tuple[Any, Any]:
    """(send one record and wait for its delivery report, close): confluent-kafka's row."""
    import confluent_kafka

    cf = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})

    def send() -> None:
        delivered: list = []
        cf.produce(topic, VALUE, partition=0, on_delivery=lambda *_a: delivered.append(1))
        cf.poll(1.0)
        if delivered:
            return
        deadline = time.monotonic() + ANSWER_WITHIN  # read only off the usual path
        while not delivered:
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent-kafka: no delivery report within {ANSWER_WITHIN} s")
            cf.poll(1.0)

    return send, lambda: cf.flush(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="kafka", choices=("kafka", "tansu"))
    parser.add_argument("--slices", type=int, default=8)
    parser.add_argument("--records", type=int, default=500, help="records per slice per producer")
    parser.add_argument("--bootstrap", help="a broker already running (else one is started)")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of sends before measuring")
    parser.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    args = parser.parse_args()
    started = time.monotonic()
    if args.bootstrap:
        lat = measure(args.bootstrap, args.slices, args.records, args.warmup)
    else:
        with cl.start_broker(args.broker) as broker:
            lat = measure(broker.bootstrap, args.slices, args.records, args.warmup)
    title = f"One at a time on {args.broker}, {args.slices} interleaved slices of {args.records} records each"
    finish(table(lat, title), started, args.markdown)


if __name__ == "__main__":
    main()
