"""A TCP relay on 127.0.0.1 in front of a real broker that can lose one answer.

It passes bytes through unchanged; it reads only the frame sizes and the request header
(api key, correlation id) so that :meth:`FaultProxy.lose_answer` can drop the answer to
the next request of one API and cut the client's connection there, after the broker has
acted on the request, and so that :attr:`FaultProxy.peak` shows how many requests of an
API a client had in flight at once on one connection.  That is the failure a retry cannot see through without idempotence:
was the record written or not?  The broker must advertise the relay's address (see
:meth:`FaultProxy.port`, chosen before the broker starts) so every connection passes it.
"""

from __future__ import annotations

import socket
import struct
import threading

from kafkawire.testing.brokers import LOOPBACK, free_port

__all__ = ["FaultProxy"]

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id


class FaultProxy:
    """Relay ``127.0.0.1:port`` to ``target_port``; a context manager."""

    def __init__(self, target_port: int | None = None):
        self.port = free_port(LOOPBACK)
        self.target_port = target_port
        self._lock = threading.Lock()
        self._lose_api: int | None = None
        self.lost = 0  # answers dropped so far
        # api key -> the most of its requests awaiting answers on one connection at once
        self.peak: dict[int, int] = {}
        self._server: socket.socket | None = None
        self._socks: list[socket.socket] = []
        self._closed = False

    def start(self, target_port: int | None = None) -> FaultProxy:
        if target_port is not None:
            self.target_port = target_port
        self._server = socket.create_server((LOOPBACK, self.port))
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()
        return self

    def lose_answer(self, api_key: int) -> None:
        """Drop the answer to the next request with ``api_key`` and close that client
        connection (the request itself reaches the broker)."""
        with self._lock:
            self._lose_api = api_key

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
        assert self._server is not None
        while not self._closed:
            try:
                client, _ = self._server.accept()
                broker = socket.create_connection((LOOPBACK, self.target_port), timeout=10)
            except OSError:
                return
            broker.settimeout(None)
            self._socks += [client, broker]
            doomed: set[int] = set()  # correlation ids whose answers are to be lost
            waiting: dict[int, int] = {}  # correlation id -> api key, until answered
            threading.Thread(target=self._requests, args=(client, broker, doomed, waiting),
                             daemon=True).start()
            threading.Thread(target=self._answers, args=(broker, client, doomed, waiting),
                             daemon=True).start()

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

    def _requests(self, client: socket.socket, broker: socket.socket, doomed: set[int],
                  waiting: dict[int, int]) -> None:
        for frame in self._frames(client):
            api_key, _version, correlation = _HEADER.unpack_from(frame, 4)
            with self._lock:
                if api_key == self._lose_api:
                    self._lose_api = None
                    doomed.add(correlation)
                waiting[correlation] = api_key
                n = sum(1 for a in waiting.values() if a == api_key)
                self.peak[api_key] = max(self.peak.get(api_key, 0), n)
            try:
                broker.sendall(frame)
            except OSError:
                break
        self._shut(client, broker)

    def _answers(self, broker: socket.socket, client: socket.socket, doomed: set[int],
                 waiting: dict[int, int]) -> None:
        for frame in self._frames(broker):
            (correlation,) = _SIZE.unpack_from(frame, 4)
            with self._lock:
                waiting.pop(correlation, None)
            if correlation in doomed:
                self.lost += 1
                break  # the broker acted; the client never hears of it
            try:
                client.sendall(frame)
            except OSError:
                break
        self._shut(client, broker)

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
