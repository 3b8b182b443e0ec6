"""One TCP connection to one broker, driven by ``selectors``: the I/O half of
:class:`kafkawire.protocol.connection.Connection`.

* :meth:`BrokerConnection.connect` opens a non-blocking socket, waits for it (and for the
  TLS handshake, given an ``ssl.SSLContext``) until a deadline, then negotiates API
  versions with ApiVersions before it returns.
* :meth:`BrokerConnection.send` writes a request and returns a :class:`Future`; any
  number of requests may be in flight (pipelining), answered in order.
* Waiting on a future, or calling :meth:`Poller.poll`, moves bytes.  No thread is needed.

Several connections share one :class:`Poller` (one selector), so a cluster can wait on
all of its brokers at once.  A request not answered within ``request_timeout`` fails
with :class:`RequestTimeoutError` and closes the connection (its stream position is
unknown after that), failing every other request in flight with it.
"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import ssl
import time
from collections import deque
from typing import Any

from kafkawire.client.errors import (
    BrokerConnectionRefusedError,
    BrokerConnectTimeoutError,
    BrokerResolutionError,
    ConnectionClosedError,
    KafkaConnectionError,
    RequestTimeoutError,
)
from kafkawire.client.future import Future
from kafkawire.protocol.api import Api
from kafkawire.protocol.connection import Connection, ProtocolError

__all__ = ["Poller", "BrokerConnection"]

_RECV_SIZE = 1 << 20
_MAX_IOV = 512

DISCONNECTED, CONNECTING, READY, CLOSED = "disconnected", "connecting", "ready", "closed"


class Poller:
    """One selector shared by many connections, plus a wake-up pipe for other threads."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.connections: set[BrokerConnection] = set()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False

    def wakeup(self) -> None:
        """Make a poll() blocked in another thread return now."""
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already pending, or closed

    def poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for I/O on any connection and process it."""
        if self._closed:
            return
        now = time.monotonic()
        # Wake up in time to expire the oldest request of any connection.
        for conn in self.connections:
            if conn._deadlines:
                timeout = min(timeout, max(0.0, conn._deadlines[0][0] - now))
        try:
            events = self.selector.select(max(0.0, timeout))
        except (OSError, ValueError):  # a socket closed under us by another path
            events = []
        for key, mask in events:
            conn = key.data
            if conn is None:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                continue
            if mask & selectors.EVENT_WRITE:
                conn._on_writable()
            if mask & selectors.EVENT_READ and conn.state == READY:
                conn._on_readable()
        now = time.monotonic()
        for conn in list(self.connections):
            conn._expire(now)

    def close(self) -> None:
        for conn in list(self.connections):
            conn.close()
        if not self._closed:
            self._closed = True
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()


def _describe(host: str, port: int, node_id: int | None) -> str:
    return f"broker {node_id} at {host}:{port}" if node_id is not None else f"broker {host}:{port}"


class BrokerConnection:
    """A connection to ``host:port``.  See the module docstring."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int | None = None,
        client_id: str = "kafkawire",
        request_timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        version_overrides: dict[Any, int] | None = None,
        max_in_flight: int = 5,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        poller: Poller | None = None,
    ):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.ssl_context = ssl_context
        self.version_overrides = dict(version_overrides or {})
        self.max_in_flight = max_in_flight
        self._sndbuf = send_buffer_bytes
        self._rcvbuf = receive_buffer_bytes
        self._own_poller = poller is None
        self.poller = poller or Poller()
        self.state = DISCONNECTED
        self.sock: socket.socket | None = None
        self.protocol: Connection | None = None
        self._out: deque[memoryview] = deque()
        self._futures: deque[Future] = deque()
        # (deadline, future) in send order; the oldest expires first.
        self._deadlines: deque[tuple[float, Future]] = deque()
        self._registered_mask = 0
        self.last_error: BaseException | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.host}:{self.port} node={self.node_id} {self.state}>"

    @property
    def name(self) -> str:
        return _describe(self.host, self.port, self.node_id)

    @property
    def ready(self) -> bool:
        return self.state == READY

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    def can_send(self) -> bool:
        return self.state == READY and len(self._futures) < self.max_in_flight

    # -- connecting -------------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        """Connect and negotiate versions within ``timeout`` seconds, or raise a
        :class:`KafkaConnectionError` subclass saying why."""
        if self.state == READY:
            return
        deadline = time.monotonic() + timeout
        self.state = CONNECTING
        try:
            self._connect_tcp(deadline)
            if self.ssl_context is not None:
                self._handshake(deadline)
            self._negotiate(deadline)
        except KafkaConnectionError as exc:
            self.close(exc)
            raise
        except ProtocolError as exc:
            err = ConnectionClosedError(f"{self.name}: {exc}", host=self.host, port=self.port)
            self.close(err)
            raise err from exc

    def _connect_tcp(self, deadline: float) -> None:
        try:
            infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise BrokerResolutionError(
                f"cannot resolve {self.name}: {exc.strerror or exc}; check the host name in "
                f"bootstrap_servers (or the broker's advertised listener)",
                host=self.host, port=self.port,
            ) from exc
        last: KafkaConnectionError | None = None
        for family, socktype, proto, _canon, addr in infos:
            sock = socket.socket(family, socktype, proto)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._sndbuf > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
            if self._rcvbuf > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._rcvbuf)
            code = sock.connect_ex(addr)
            if code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                sel = selectors.DefaultSelector()
                try:
                    sel.register(sock, selectors.EVENT_WRITE)
                    remaining = deadline - time.monotonic()
                    ready = sel.select(max(0.0, remaining)) if remaining > 0 else []
                finally:
                    sel.close()
                if not ready:
                    sock.close()
                    raise BrokerConnectTimeoutError(
                        f"connecting to {self.name} timed out (no answer to the TCP "
                        f"handshake); is the broker up and the address right?",
                        host=self.host, port=self.port,
                    )
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == 0:
                self.sock = sock
                return
            sock.close()
            if code == errno.ECONNREFUSED:
                last = BrokerConnectionRefusedError(
                    f"{self.name} refused the connection: nothing listens on {addr[0]}:{addr[1]}",
                    host=self.host, port=self.port,
                )
            else:
                last = ConnectionClosedError(
                    f"connecting to {self.name} failed: {os.strerror(code)}",
                    host=self.host, port=self.port,
                )
        assert last is not None
        raise last

    def _handshake(self, deadline: float) -> None:
        # Hook only: the context's own settings decide verification and protocols.
        assert self.sock is not None and self.ssl_context is not None
        self.sock = self.ssl_context.wrap_socket(
            self.sock, server_hostname=self.host, do_handshake_on_connect=False
        )
        sel = selectors.DefaultSelector()
        try:
            sel.register(self.sock, selectors.EVENT_READ)
            while True:
                try:
                    self.sock.do_handshake()
                    return
                except ssl.SSLWantReadError:
                    sel.modify(self.sock, selectors.EVENT_READ)
                except ssl.SSLWantWriteError:
                    sel.modify(self.sock, selectors.EVENT_WRITE)
                except (ssl.SSLError, OSError) as exc:
                    raise ConnectionClosedError(
                        f"TLS handshake with {self.name} failed: {exc}", host=self.host, port=self.port
                    ) from exc
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    raise BrokerConnectTimeoutError(
                        f"TLS handshake with {self.name} timed out", host=self.host, port=self.port
                    )
        finally:
            sel.close()

    def _negotiate(self, deadline: float) -> None:
        self.protocol = Connection(self.client_id, version_overrides=self.version_overrides)
        self.poller.selector.register(self.sock, selectors.EVENT_READ, self)
        self._registered_mask = selectors.EVENT_READ
        self.poller.connections.add(self)
        # The ApiVersions exchange goes through the normal request path, bounded by the
        # connect deadline rather than request_timeout.
        self.state = READY
        for _attempt in range(5):
            fut = self._send_raw(self.protocol.api_versions_request, deadline)
            while not fut.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerConnectTimeoutError(
                        f"{self.name} accepted the connection but did not answer ApiVersions "
                        f"in time", host=self.host, port=self.port,
                    )
                self.poller.poll(remaining)
            if fut.failed():
                exc = fut.exception()
                if isinstance(exc, RequestTimeoutError):
                    raise BrokerConnectTimeoutError(
                        f"{self.name} accepted the connection but did not answer ApiVersions "
                        f"in time", host=self.host, port=self.port,
                    ) from exc
                raise exc  # type: ignore[misc]
            if self.protocol.negotiated:
                return
            if not self.protocol.retry_api_versions:
                code = fut.result().error_code
                raise ConnectionClosedError(
                    f"{self.name} answered ApiVersions with error code {code}",
                    host=self.host, port=self.port,
                )
        raise ConnectionClosedError(
            f"{self.name}: ApiVersions negotiation did not converge", host=self.host, port=self.port
        )

    # -- requests ---------------------------------------------------------------------

    def version_for(self, api: Api | int | str) -> int:
        if self.protocol is None:
            raise ConnectionClosedError(f"{self.name} is not connected", host=self.host, port=self.port)
        return self.protocol.version_for(api)

    def send(
        self, api: Api, request: Any, version: int | None = None, *, expects_response: bool = True
    ) -> Future:
        """Send ``request``; the future resolves to the decoded response (or to None when
        ``expects_response`` is False, once the bytes are handed to the kernel)."""
        if self.state != READY or self.protocol is None:
            fut = Future()
            fut.set_exception(
                self.last_error
                if isinstance(self.last_error, KafkaConnectionError)
                else ConnectionClosedError(f"{self.name} is not connected", host=self.host, port=self.port)
            )
            return fut
        proto = self.protocol
        deadline = time.monotonic() + self.request_timeout
        return self._send_raw(
            lambda: proto.send(api, request, version, expects_response=expects_response),
            deadline,
            expects_response,
        )

    def _send_raw(self, make: Any, deadline: float, expects_response: bool = True) -> Future:
        fut = Future(self.poller.poll)
        _cid, chunks = make()
        for c in chunks:
            self._out.append(memoryview(c).cast("B"))
        if expects_response:
            self._futures.append(fut)
            self._deadlines.append((deadline, fut))
        self._flush()
        if not expects_response:
            if self.state == READY:
                fut.set_result(None)
            else:
                fut.set_exception(self.last_error or ConnectionClosedError(
                    f"{self.name} is not connected", host=self.host, port=self.port))
        return fut

    def _update_interest(self) -> None:
        if self.sock is None:
            return
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out else 0)
        if want != self._registered_mask:
            self.poller.selector.modify(self.sock, want, self)
            self._registered_mask = want

    def _flush(self) -> None:
        sock = self.sock
        out = self._out
        try:
            while out and sock is not None:
                if isinstance(sock, ssl.SSLSocket):
                    sent = sock.send(out[0])
                else:
                    sent = sock.sendmsg(list(out)[:_MAX_IOV] if len(out) > 1 else [out[0]])
                while sent:
                    head = out[0]
                    if sent >= len(head):
                        sent -= len(head)
                        out.popleft()
                    else:
                        out[0] = head[sent:]
                        sent = 0
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            pass
        except OSError as exc:
            self.close(ConnectionClosedError(
                f"writing to {self.name} failed: {exc}", host=self.host, port=self.port
            ))
            return
        self._update_interest()

    def _on_writable(self) -> None:
        self._flush()

    def _on_readable(self) -> None:
        sock = self.sock
        proto = self.protocol
        if sock is None or proto is None:
            return
        try:
            while True:
                data = sock.recv(_RECV_SIZE)
                if not data:
                    self.close(ConnectionClosedError(
                        f"{self.name} closed the connection"
                        + (f" with {len(self._futures)} request(s) in flight" if self._futures else ""),
                        host=self.host, port=self.port,
                    ))
                    return
                try:
                    events = proto.receive_data(data)
                except ProtocolError as exc:
                    self._dispatch(exc.events)
                    self.close(ConnectionClosedError(
                        f"{self.name} sent bytes kafkawire cannot follow: {exc}",
                        host=self.host, port=self.port,
                    ))
                    return
                self._dispatch(events)
                if len(data) < _RECV_SIZE or self.sock is None:
                    return
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as exc:
            self.close(ConnectionClosedError(
                f"reading from {self.name} failed: {exc}", host=self.host, port=self.port
            ))

    def _dispatch(self, events: list[Any]) -> None:
        for ev in events:
            fut = self._futures.popleft()
            self._deadlines.popleft()
            fut.set_result(ev.response)

    def _expire(self, now: float) -> None:
        if self._deadlines and self._deadlines[0][0] <= now:
            self.close(RequestTimeoutError(
                f"{self.name} did not answer a request within {self.request_timeout:g}s "
                f"(request_timeout_ms); the connection was closed",
                host=self.host, port=self.port,
            ))

    def close(self, error: BaseException | None = None) -> None:
        """Close the socket; every request in flight fails with ``error``."""
        if error is None:
            error = ConnectionClosedError(f"{self.name}: connection closed by the client",
                                          host=self.host, port=self.port)
        self.last_error = error
        self.state = CLOSED if self.state != DISCONNECTED else DISCONNECTED
        sock, self.sock = self.sock, None
        if sock is not None:
            if self._registered_mask:
                try:
                    self.poller.selector.unregister(sock)
                except (KeyError, ValueError, OSError):
                    pass
            self._registered_mask = 0
            sock.close()
        self.poller.connections.discard(self)
        self._out.clear()
        self.protocol = None
        futures, self._futures = self._futures, deque()
        self._deadlines.clear()
        for fut in futures:
            fut.set_exception(error)
        self.state = CLOSED

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._own_poller:
            self.poller.close()
