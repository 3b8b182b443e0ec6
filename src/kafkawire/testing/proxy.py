"""A TCP relay on 127.0.0.1 in front of a real broker, for the failures a test needs.

It passes bytes through unchanged and reads only frame sizes and request headers (api
key, correlation id), except where a fault is asked for:

- :meth:`FaultProxy.lose_answer` drops the answer to the next request of one API and cuts
  the client's connection there, after the broker acted on the request: was the record
  written or not?  The failure a retry cannot see through without idempotence.
- :meth:`FaultProxy.refuse` keeps the next Produce request from the broker and answers it
  with an error for each of its partitions, in its turn among the connection's answers
  and only once ``hold`` more Produce requests followed it: a batch that was not written,
  with the batches sent after it reaching the broker.
- :meth:`FaultProxy.holding_answers` keeps the broker's answers to one API from the
  clients within a block: a slow broker, so a client's requests pile up in flight as far
  as it lets them, whatever the machine's load.

:attr:`FaultProxy.peak` shows how many requests of an API a client had in flight at once
on one connection, :attr:`FaultProxy.produce_errors` the error codes in the broker's
Produce answers.  The broker must advertise the relay's address (see
:attr:`FaultProxy.port`, bound as the relay is made, before the broker starts) so every
connection passes it.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import struct
import threading
import time
from typing import Iterator

from kafkawire.protocol import apis
from kafkawire.protocol.headers import (
    decode_request_header,
    decode_response_header,
    encode_response_header,
)
from kafkawire.testing.brokers import LOOPBACK

__all__ = ["FaultProxy"]

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_PRODUCE = apis.get("Produce")


class _Awaited:
    """A request's answer, awaited by the client: the broker's, or the relay's own after
    ``hold`` more requests of the same API."""

    __slots__ = ("correlation", "api_key", "version", "own", "frame", "hold")

    def __init__(self, correlation: int, api_key: int, version: int, own: bytes | None, hold: int):
        self.correlation, self.api_key, self.version = correlation, api_key, version
        self.own, self.frame, self.hold = own, own, hold


class _Link:
    """One client connection: its two sockets and the answers it awaits, in order."""

    def __init__(self, client: socket.socket, broker: socket.socket):
        self.client = client
        self.broker = broker
        self.lock = threading.Lock()
        self.awaited: collections.deque[_Awaited] = collections.deque()
        self.doomed: set[int] = set()  # correlation ids whose answers are to be lost

    def flush(self, held_api: int | None) -> None:
        """Send the answers that are next in turn and ready (the lock is held).  An
        answer to ``held_api`` stops the flow: the answers after it keep their turn."""
        while self.awaited:
            a = self.awaited[0]
            if a.frame is None or a.hold > 0 or a.api_key == held_api:
                return
            self.client.sendall(self.awaited.popleft().frame)


class FaultProxy:
    """Relay ``127.0.0.1:port`` to ``target_port``; a context manager."""

    def __init__(self, target_port: int | None = None):
        # Bound now, not at start(): the broker behind it starts first (it advertises this
        # port), and a port only chosen could be taken meanwhile by another process.
        self._server: socket.socket = socket.create_server((LOOPBACK, 0))
        self.port: int = self._server.getsockname()[1]
        self.target_port = target_port
        self._lock = threading.Lock()
        self._lose_api: int | None = None
        self._refuse_code: int | None = None
        self._refuse_hold = 0
        self._held_api: int | None = None
        self._links: list[_Link] = []
        self.lost = 0  # answers dropped so far
        self.refused = 0  # Produce requests answered with an error instead of relayed
        self.produce_errors: collections.Counter[int] = collections.Counter()  # in the broker's answers
        # api key -> the most of its requests awaiting answers on one connection at once
        self.peak: dict[int, int] = {}
        self._socks: list[socket.socket] = []
        self._closed = False

    def start(self, target_port: int | None = None) -> FaultProxy:
        if target_port is not None:
            self.target_port = target_port
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()
        return self

    def lose_answer(self, api_key: int) -> None:
        """Drop the answer to the next request with ``api_key`` and close that client
        connection (the request itself reaches the broker)."""
        with self._lock:
            self._lose_api = api_key

    def refuse(self, error_code: int, hold: int = 0) -> None:
        """Answer the next Produce request (one with acks) with ``error_code`` for every
        partition in it, once ``hold`` more Produce requests followed it on its
        connection; the broker never sees it."""
        with self._lock:
            self._refuse_code = error_code
            self._refuse_hold = hold

    @contextlib.contextmanager
    def holding_answers(self, api_key: int) -> Iterator[None]:
        """Within the block, keep the broker's answers to ``api_key`` requests, and every
        answer after one on its connection, from the clients; on leaving it, let them go
        in order."""
        with self._lock:
            self._held_api = api_key
        try:
            yield
        finally:
            with self._lock:
                self._held_api = None
                links = list(self._links)
            for link in links:
                with link.lock:
                    try:
                        link.flush(None)
                    except OSError:
                        pass  # that client is gone; its relay threads end on their own

    def await_in_flight(self, api_key: int, count: int, timeout: float) -> int:
        """Wait until ``count`` requests of ``api_key`` await answers on one connection
        at once, or ``timeout`` seconds passed; the most seen so far (:attr:`peak`)."""
        deadline = time.monotonic() + timeout
        while self.peak.get(api_key, 0) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.peak.get(api_key, 0)

    def close(self) -> None:
        self._closed = True
        for s in [self._server, *self._socks]:
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- relaying -------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
                broker = socket.create_connection((LOOPBACK, self.target_port), timeout=10)
            except OSError:
                return
            broker.settimeout(None)
            self._socks += [client, broker]
            link = _Link(client, broker)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._answers, args=(link,), daemon=True).start()

    @staticmethod
    def _frames(src: socket.socket):
        buf = b""
        while True:
            try:
                chunk = src.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 4:
                (size,) = _SIZE.unpack_from(buf)
                if len(buf) < 4 + size:
                    break
                yield buf[:4 + size]
                buf = buf[4 + size:]

    def _requests(self, link: _Link) -> None:
        for frame in self._frames(link.client):
            api_key, version, correlation = _HEADER.unpack_from(frame, 4)
            own, hold, answered = None, 0, True
            if api_key == _PRODUCE.key:
                own, hold, answered = self._produce(frame, version, correlation)
            try:
                with link.lock:
                    with self._lock:
                        if api_key == self._lose_api:
                            self._lose_api = None
                            link.doomed.add(correlation)
                        if answered:
                            n = 1 + sum(1 for a in link.awaited if a.api_key == api_key)
                            self.peak[api_key] = max(self.peak.get(api_key, 0), n)
                        held = self._held_api
                    for a in link.awaited:
                        if a.own is not None and a.api_key == api_key:
                            a.hold -= 1
                    if answered:
                        link.awaited.append(_Awaited(correlation, api_key, version, own, hold))
                    if own is None:
                        link.broker.sendall(frame)
                    link.flush(held)
            except OSError:
                break
        self._shut(link.client, link.broker)

    def _produce(self, frame: bytes, version: int, correlation: int) -> tuple[bytes | None, int, bool]:
        """For a Produce request: the relay's own error answer if it is to be refused
        (and how many requests it waits for), and whether any answer is due (acks=0 gets
        none)."""
        _key, _v, _c, _client, pos = decode_request_header(
            memoryview(frame)[4:], _PRODUCE.request_header_version(version))
        request = _PRODUCE.decode_request(memoryview(frame)[4 + pos:], version)
        if request.acks == 0:
            return None, 0, False
        with self._lock:
            code, self._refuse_code = self._refuse_code, None
            hold = self._refuse_hold
            if code is not None:
                self.refused += 1
        if code is None:
            return None, 0, True
        tpr = _PRODUCE.Response.TopicProduceResponse
        ppr = tpr.PartitionProduceResponse
        response = _PRODUCE.Response(responses=[
            tpr(name=t.name, partition_responses=[
                ppr(index=p.index, error_code=code, base_offset=-1) for p in t.partition_data])
            for t in request.topic_data])
        body = (encode_response_header(correlation, _PRODUCE.response_header_version(version))
                + _PRODUCE.encode_response(response, version).getvalue())
        return _SIZE.pack(len(body)) + body, hold, True

    def _answers(self, link: _Link) -> None:
        for frame in self._frames(link.broker):
            (correlation,) = _SIZE.unpack_from(frame, 4)
            try:
                with link.lock:
                    if correlation in link.doomed:
                        self.lost += 1
                        break  # the broker acted; the client never hears of it
                    for a in link.awaited:
                        if a.correlation == correlation:
                            a.frame = frame
                            if a.api_key == _PRODUCE.key:
                                self._count_errors(frame, a.version)
                            break
                    link.flush(self._held_api)
            except OSError:
                break
        self._shut(link.client, link.broker)

    def _count_errors(self, frame: bytes, version: int) -> None:
        body = memoryview(frame)[4:]
        _correlation, pos = decode_response_header(body, _PRODUCE.response_header_version(version))
        response = _PRODUCE.decode_response(body[pos:], version)
        with self._lock:
            for t in response.responses:
                for p in t.partition_responses:
                    if p.error_code:
                        self.produce_errors[p.error_code] += 1

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
