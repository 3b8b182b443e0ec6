"""A small blocking-socket driver for a sans-IO Connection, for tests only.

It moves bytes between one TCP socket on 127.0.0.1 and a
:class:`kafkawire.protocol.connection.Connection`, with a deadline on every wait.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from kafkawire.protocol.connection import Connection, Response


class BrokerClosedError(ConnectionError):
    """The broker closed the connection while a response was awaited."""


class RawConnection:
    """``RawConnection(port)``: a socket to 127.0.0.1:port driving a Connection."""

    def __init__(self, port: int, *, timeout: float = 10.0, host: str = "127.0.0.1", **options: Any):
        if host != "127.0.0.1":
            raise ValueError("tests connect to 127.0.0.1 only")
        self.timeout = timeout
        self.conn = Connection(**options)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._ready: list[Response] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def write(self, chunks: list[Any]) -> None:
        for chunk in chunks:
            self.sock.sendall(chunk)

    def send(self, api: Any, request: Any, version: int | None = None, **kw: Any) -> int:
        correlation_id, chunks = self.conn.send(api, request, version, **kw)
        self.write(chunks)
        return correlation_id

    def _read_some(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no response within {self.timeout}s ({self.conn.in_flight} in flight)")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError(f"no response within {self.timeout}s ({self.conn.in_flight} in flight)") from None
        except ConnectionResetError as exc:
            raise BrokerClosedError(f"the broker reset the connection: {exc}") from None
        if not data:
            raise BrokerClosedError(
                f"the broker closed the connection with {self.conn.in_flight} request(s) in flight"
            )
        self._ready.extend(self.conn.receive_data(data))

    def next_response(self) -> Response:
        """The next response event, reading until one is complete or the deadline passes."""
        deadline = time.monotonic() + self.timeout
        while not self._ready:
            self._read_some(deadline)
        return self._ready.pop(0)

    def request(self, api: Any, request: Any, version: int | None = None) -> Response:
        """Send one request and return its response."""
        correlation_id = self.send(api, request, version)
        event = self.next_response()
        assert event.correlation_id == correlation_id
        return event

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """Run ApiVersions negotiation (with the UNSUPPORTED_VERSION retry)."""
        _cid, chunks = self.conn.api_versions_request()
        self.write(chunks)
        while not self.conn.negotiated:
            self.next_response()
            if self.conn.retry_api_versions:
                _cid, chunks = self.conn.api_versions_request()
                self.write(chunks)
            elif not self.conn.negotiated and self.conn.in_flight == 0:
                raise AssertionError("ApiVersions failed without UNSUPPORTED_VERSION")
        assert self.conn.broker_versions is not None
        return self.conn.broker_versions

    def expect_closed(self, wait: float = 5.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within ``wait`` seconds."""
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1 << 16) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
