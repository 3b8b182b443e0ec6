"""One TCP connection to one broker, driven by ``selectors``: the I/O half of
:class:`kafkawire.protocol.connection.Connection`.

* :meth:`BrokerConnection.start_connect` opens a non-blocking socket and returns at once;
  the TCP connect, the TLS handshake (given an ``ssl.SSLContext``), the ApiVersions
  exchange and the SASL authentication (given a mechanism) then advance inside
  :meth:`Poller.poll`, with the requests of every other connection, until the setup
  deadline.  :meth:`BrokerConnection.connect` does the same and waits for the outcome.
* ApiVersions and SASL: :class:`~kafkawire.protocol.setup.ConnectionSetup` decides
  (the asyncio shell drives the same machine); this module writes what it returns and
  feeds it what is read.  A broker that sets a session lifetime (KIP-368) gets a fresh
  login on the same connection before it runs out: new requests are held until nothing
  is in flight, then sent once it succeeds.
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
import random
import selectors
import socket
import ssl
import time
from collections import deque
from itertools import islice
from typing import Any, Callable

from kafkawire.core import fork as _fork
from kafkawire.core import tls
from kafkawire.errors import (
    BrokerConnectionRefusedError,
    BrokerConnectTimeoutError,
    BrokerResolutionError,
    ConnectionClosedError,
    KafkaConnectionError,
)
from kafkawire.core.future import Future
from kafkawire.protocol import apis
from kafkawire.protocol.api import Api
from kafkawire.protocol.connection import Connection, ProtocolError, first_due, idle_error, late_answer_error
from kafkawire.protocol.sasl import SaslMechanism, SaslResult
from kafkawire.protocol.setup import (ConnectionSetup, broker_name, closed_in_flight_error, dropped_without_login,
                                      relogin_holds)

_PRODUCE = apis.get("Produce")

__all__ = ["Poller", "BrokerConnection"]

# Reads between frames, and of a frame's last few bytes, take up to this much (several
# small responses at once); the rest of a frame at least this large is read straight
# into the frame's buffer instead (recv_into: one copy, not two).
_RECV_SIZE = 1 << 16
_MAX_IOV = 512

DISCONNECTED, CONNECTING, HANDSHAKING, NEGOTIATING, AUTHENTICATING, READY, CLOSED = (
    "disconnected", "connecting", "handshaking", "negotiating", "authenticating", "ready", "closed")
# Connection setup: TCP connect, then TLS handshake (with an ssl_context), then ApiVersions,
# then SASL (with a mechanism).
_SETTING_UP = frozenset({CONNECTING, HANDSHAKING, NEGOTIATING, AUTHENTICATING})
# Re-authentication (KIP-368) of a READY connection: due, waiting for the requests in
# flight to be answered, then the exchange itself.
_REAUTH_WAITING, _REAUTH_RUNNING = "waiting", "running"


class Poller:
    """One selector shared by many connections, plus a wake-up pipe for other threads."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.connections: set[BrokerConnection] = set()
        self._open_wake_pipe()
        self._closed = False
        # Requests in flight when the process forked, failed at the child's next poll
        # (see _after_fork_in_child): (future, error).
        self._orphans: list[tuple[Future, BaseException]] = []
        _fork.register(self)

    def _open_wake_pipe(self) -> None:
        # A byte written and not yet drained: a poll about to end, so another wakeup()
        # has nothing to add (a send() per record woke a busy sender with a system call each).
        self._wake_pending = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)

    def _after_fork_in_child(self) -> None:
        """In a child process (kafkawire.core.fork): let go of the parent's epoll
        instance, wake-up pipe and sockets without touching them for the parent.

        The epoll instance is shared with the parent, so no socket is unregistered from
        it (EPOLL_CTL_DEL would remove the parent's registration too): the child just
        closes its descriptor and makes a selector of its own.  Each connection closes
        its socket descriptor (the parent's copy keeps the TCP connection, and its TLS
        session, alive) and reconnects on next use; what it had in flight fails with
        ConnectionClosedError at the child's next poll(), where callbacks may run."""
        if self._closed:
            return
        old = self.selector
        self.selector = selectors.DefaultSelector()
        for obj in (old, self._wake_r, self._wake_w):
            try:
                obj.close()  # the child's descriptor only
            except OSError:
                pass
        self._open_wake_pipe()
        for conn in list(self.connections):
            self._orphans.extend(conn._abandon_after_fork())
        self.connections.clear()

    def _fail_orphans(self) -> None:
        orphans, self._orphans = self._orphans, []
        for fut, exc in orphans:
            fut.set_exception(exc)

    def forget_orphans(self) -> None:
        """Drop the requests that were in flight at a fork without failing them (their
        callbacks never run), for an owner that resets its own state in the child
        instead (the producer: the batches in them are the parent's to deliver, and a
        failed request would make the child retry them)."""
        self._orphans = []

    def wakeup(self) -> None:
        """Make a poll() blocked in another thread return now."""
        if self._wake_pending:
            return
        self._wake_pending = True
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already pending, or closed

    def poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for I/O on any connection and process it."""
        if self._orphans:
            self._fail_orphans()
            timeout = 0.0  # their callbacks may have work for the caller
        if self._closed:
            return
        now = time.monotonic()
        # Wake up in time to expire the oldest request, or a setup, of any connection.
        for conn in self.connections:
            if conn._deadlines:
                timeout = min(timeout, max(0.0, first_due(conn._deadlines)[0] - now))
            if conn.state in _SETTING_UP:
                timeout = min(timeout, max(0.0, conn._setup_deadline - now))
            elif conn._reauth_at is not None:
                timeout = min(timeout, max(0.0, conn._reauth_at - now))
        try:
            events = self.selector.select(max(0.0, timeout))
        except (OSError, ValueError):  # a socket closed under us by another path
            events = []
        # A socket's event means bytes move on it (its write interest is set only while
        # bytes wait to go): one clock reading stamps them all (close_if_idle).
        now = time.monotonic() if events else now
        for key, mask in events:
            conn = key.data
            if conn is None:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                # Cleared after draining: a wakeup() that found it set came before this
                # line and is answered by the pass that follows this poll; one after it
                # writes a byte again.  (Cleared before, a wakeup() whose byte the drain
                # took would leave it set with no byte behind it: no wakeup() would write
                # again, and every poll would run to its timeout.)
                self._wake_pending = False
                continue
            conn.last_io = now
            conn._on_event(mask)
        now = time.monotonic()
        for conn in list(self.connections):
            conn._expire(now)

    def busy(self) -> bool:
        """Something needs a poll to move on: a connection is busy
        (:attr:`BrokerConnection.busy`), or requests orphaned by a fork are to fail."""
        return bool(self._orphans) or any(c.busy for c in self.connections)

    def close(self) -> None:
        for conn in list(self.connections):
            conn.close()
        if self._orphans:
            self._fail_orphans()
        if not self._closed:
            self._closed = True
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()


class _Answer:
    """Where an answer goes on the per-request paths (BrokerConnection.send_nowait and
    send_produce): what the connection does with a request's Future (set_result,
    set_exception), as one call of ``on_answer(response, error)``."""

    __slots__ = ("_on_answer",)

    def __init__(self, on_answer: Callable[[Any, BaseException | None], Any]):
        self._on_answer: Any = on_answer

    def set_result(self, response: Any) -> None:
        on_answer, self._on_answer = self._on_answer, None
        if on_answer is not None:
            on_answer(response, None)

    def set_exception(self, exc: BaseException) -> None:
        on_answer, self._on_answer = self._on_answer, None
        if on_answer is not None:
            on_answer(None, exc)


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
        sasl: SaslMechanism | None = None,
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
        self._out: deque[bytes | memoryview] = deque()
        self._futures: deque[Future] = deque()
        # (deadline, timeout) of each answer awaited, in send order (see first_due).
        self._deadlines: deque[tuple[float, float]] = deque()
        self._registered_mask = 0
        self.last_error: BaseException | None = None
        # The current (or last) setup: resolves to self when ready; see start_connect.
        self.setup: Future | None = None
        self._setup_deadline = 0.0
        self._setup_started = 0.0
        self._addrs: list[Any] = []
        self._addr: Any = None
        self._addr_error: KafkaConnectionError | None = None
        # SASL: each login (and re-login) uses a fresh() copy of this mechanism.
        self.sasl = sasl
        self.sasl_result: SaslResult | None = None
        # The setup (ApiVersions, SASL) or KIP-368 re-login under way: every byte read
        # goes to it (protocol/setup.py).
        self._login: ConnectionSetup | None = None
        self._login_deadline = 0.0  # a re-login's; the setup's is _setup_deadline
        self._reauth_at: float | None = None  # monotonic time the next re-login is due
        self._reauth: str | None = None  # _REAUTH_WAITING / _REAUTH_RUNNING
        # Requests held while re-authenticating: (make, (deadline, timeout),
        # expects_response, future).
        self._held: deque[tuple[Any, tuple[float, float], bool, Future]] = deque()
        #: How many times this connection finished its setup (1 unless it reconnected).
        self.setups = 0
        #: KIP-368 re-authentications that succeeded on this connection (all its setups).
        self.reauthentications = 0
        #: time.monotonic() when bytes last moved either way (or the setup began): set
        #: by the Poller for each socket event, and by a write that awaits no answer.
        self.last_io = 0.0

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.host}:{self.port} node={self.node_id} {self.state}>"

    @property
    def name(self) -> str:
        return broker_name(self.host, self.port, self.node_id)

    @property
    def ready(self) -> bool:
        return self.state == READY

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    @property
    def busy(self) -> bool:
        """Requests in flight or held, bytes not written yet, a setup under way or a
        re-authentication scheduled: only a poll moves these on."""
        return bool(self._futures or self._held or self._out or self.state in _SETTING_UP
                    or self._reauth is not None or self._reauth_at is not None)

    def can_send(self) -> bool:
        return self.state == READY and self._reauth is None and len(self._futures) < self.max_in_flight

    def close_if_idle(self, max_idle: float | None) -> bool:
        """Close this ready connection if nothing is in flight, held or unsent and it has
        been idle past ``max_idle`` (protocol.connection.idle_error), and say whether it did."""
        if (max_idle is None or self.state != READY or self._futures or self._held or self._out
                or self._login is not None):
            return False
        err = idle_error(self.name, self.host, self.port, time.monotonic() - self.last_io, max_idle)
        if err is not None:
            self.close(err)
        return err is not None

    # -- connecting -------------------------------------------------------------------

    @property
    def connecting(self) -> bool:
        """True while the TCP connect, TLS handshake, ApiVersions exchange or SASL
        authentication is under way."""
        return self.state in _SETTING_UP

    def start_connect(self, timeout: float) -> Future:
        """Begin connecting without waiting; returns the setup future.

        The TCP connect, the TLS handshake, the ApiVersions exchange and the SASL
        authentication then advance inside :meth:`Poller.poll`, like any request.  The future resolves to this
        connection once it is ready, or fails with a :class:`KafkaConnectionError`
        subclass (refused, unresolvable, setup not done within ``timeout`` seconds), or
        with the typed SASL error of a failed login (kafkawire.protocol.sasl).
        Calling it again while a setup is under way returns the same future."""
        if self.state == READY or self.state in _SETTING_UP:
            assert self.setup is not None
            return self.setup
        self.setup = Future(self.poller.poll)
        self._setup_started = self.last_io = time.monotonic()
        self._setup_deadline = self._setup_started + timeout
        self.last_error = None
        self.state = CONNECTING
        # getaddrinfo blocks; for the numeric addresses and /etc/hosts names brokers
        # usually advertise it answers at once.
        try:
            self._addrs = list(socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM))
        except (socket.gaierror, UnicodeError) as exc:  # UnicodeError: not a valid name (a label too long)
            self.close(BrokerResolutionError(
                f"cannot resolve {self.name}: {getattr(exc, 'strerror', None) or exc}; check the host name in "
                f"bootstrap_servers (or the broker's advertised listener)",
                host=self.host, port=self.port,
            ))
            return self.setup
        self._addr_error = None
        self._next_address()
        return self.setup

    def connect(self, timeout: float) -> None:
        """Connect, negotiate versions and log in within ``timeout`` seconds, or raise a
        :class:`KafkaConnectionError` subclass (or a SASL error) saying why."""
        if self.state == READY:
            return
        setup = self.start_connect(timeout)
        # A setup started earlier with a later deadline must still finish by this one.
        self._setup_deadline = min(self._setup_deadline, time.monotonic() + timeout)
        if not setup.wait(max(0.0, self._setup_deadline - time.monotonic())):
            self.close(self._setup_timeout_error())
        exc = setup.exception(0)
        if exc is not None:
            raise exc

    def _connect_error(self, code: int, addr: Any) -> KafkaConnectionError:
        if code == errno.ECONNREFUSED:
            return BrokerConnectionRefusedError(
                f"{self.name} refused the connection: nothing listens on {addr[0]}:{addr[1]}",
                host=self.host, port=self.port,
            )
        return ConnectionClosedError(
            f"connecting to {self.name} failed: {os.strerror(code)}", host=self.host, port=self.port,
        )

    def _next_address(self) -> None:
        """Start a non-blocking TCP connect to the next resolved address; when none is
        left, fail the setup with the last address's error."""
        while self._addrs:
            family, socktype, proto, _canon, addr = self._addrs.pop(0)
            try:
                sock = socket.socket(family, socktype, proto)
            except OSError as exc:
                self._addr_error = ConnectionClosedError(
                    f"connecting to {self.name} failed: {exc}", host=self.host, port=self.port)
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._sndbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
                if self._rcvbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._rcvbuf)
                code = sock.connect_ex(addr)
            except OSError as exc:
                code = exc.errno or errno.EIO
            if code in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                self.sock = sock
                self._addr = addr
                self.poller.selector.register(sock, selectors.EVENT_WRITE, self)
                self._registered_mask = selectors.EVENT_WRITE
                self.poller.connections.add(self)
                if code == 0:
                    self._on_tcp_connected()
                return
            sock.close()
            self._addr_error = self._connect_error(code, addr)
        self.close(self._addr_error or ConnectionClosedError(
            f"{self.name}: the host name resolved to no address", host=self.host, port=self.port))

    def _drop_socket(self) -> None:
        sock, self.sock = self.sock, None
        if sock is None:
            return
        if self._registered_mask:
            try:
                self.poller.selector.unregister(sock)
            except (KeyError, ValueError, OSError):
                pass
            self._registered_mask = 0
        sock.close()

    def _set_interest(self, mask: int) -> None:
        if self.sock is not None and mask != self._registered_mask:
            self.poller.selector.modify(self.sock, mask, self)
            self._registered_mask = mask

    def _on_tcp_writable(self) -> None:
        # A non-blocking connect is done when the socket turns writable; SO_ERROR says how.
        assert self.sock is not None
        try:
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError as exc:
            code = exc.errno or errno.EIO
        if code == 0:
            try:
                self.sock.getpeername()
            except OSError as exc:
                if exc.errno == errno.ENOTCONN:
                    return  # a stale event: this connect is still under way
                code = exc.errno or errno.EIO
        if code == 0:
            self._on_tcp_connected()
            return
        self._drop_socket()
        self._addr_error = self._connect_error(code, self._addr)
        self._next_address()

    def _on_tcp_connected(self) -> None:
        if self.ssl_context is None:
            self._start_negotiation()
            return
        # The context's own settings decide verification and protocols (built from the
        # ssl_* options by kafkawire.core.tls, unless the user gave one).
        sock = self.sock
        assert sock is not None
        self.poller.selector.unregister(sock)
        self._registered_mask = 0
        try:
            self.sock = self.ssl_context.wrap_socket(
                sock, server_hostname=self.host, do_handshake_on_connect=False)
        except (ssl.SSLError, OSError, ValueError) as exc:
            self.sock = sock
            self.close(tls.wrap_error(exc, name=self.name, host=self.host, port=self.port))
            return
        self.poller.selector.register(self.sock, selectors.EVENT_READ, self)
        self._registered_mask = selectors.EVENT_READ
        self.state = HANDSHAKING
        self._step_handshake()

    def _step_handshake(self) -> None:
        assert isinstance(self.sock, ssl.SSLSocket)
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_interest(selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._set_interest(selectors.EVENT_WRITE)
            return
        except (ssl.SSLError, OSError) as exc:
            self.close(tls.handshake_error(
                exc, name=self.name, host=self.host, port=self.port, ctx=self.ssl_context))
            return
        self._start_negotiation()

    def _start_negotiation(self) -> None:
        self.protocol = Connection(self.client_id, version_overrides=self.version_overrides)
        self.state = NEGOTIATING
        self._set_interest(selectors.EVENT_READ)
        self._start_login(ConnectionSetup(self.protocol, self.sasl, self.name, self.host, self.port))

    def _start_login(self, setup: ConnectionSetup) -> None:
        """Drive ``setup`` (protocol/setup.py): ApiVersions and SASL at setup, or a KIP-368
        re-authentication of a READY connection; every byte read goes to it until done."""
        self._login = setup
        self._write(setup.start())

    def _write(self, chunks: list[Any]) -> None:
        out = self._out
        for c in chunks:
            # bytes as they are (their len() is their size); anything else as a flat view
            out.append(c if type(c) is bytes else memoryview(c).cast("B"))
        self._flush()

    def _feed_login(self, data: bytes) -> None:
        setup = self._login
        assert setup is not None
        if not setup.received_any and not setup.login_only:
            mismatch = tls.plaintext_answer_error(
                data, name=self.name, host=self.host, port=self.port, ctx=self.ssl_context)
            if mismatch:
                self.close(mismatch)
                return
        try:
            out = setup.receive(data)
        except Exception as exc:  # noqa: BLE001 - the typed setup errors, or a token provider's own
            self.close(exc)
            return
        if self.state in (NEGOTIATING, AUTHENTICATING):
            self.state = NEGOTIATING if setup.phase == NEGOTIATING else AUTHENTICATING
        if out:
            self._write(out)
        if setup.done and self._login is setup:
            self._login = None
            self._on_login_done(setup)

    def _on_login_done(self, setup: ConnectionSetup) -> None:
        if setup.result is not None:
            self.sasl_result = setup.result
            self._reauth_at = setup.reauthenticate_at(time.monotonic(), random.random())
        if not setup.login_only:
            self._on_ready()
            return
        # A re-authentication succeeded: send what was held, in order.
        self._reauth = None
        self.reauthentications += 1
        held, self._held = self._held, deque()
        for make, due, expects_response, fut in held:
            if self.state != READY:
                fut.set_exception(self.last_error or ConnectionClosedError(
                    f"{self.name} is not connected", host=self.host, port=self.port))
                continue
            self._send_raw(make, due, expects_response, fut)

    def _on_ready(self) -> None:
        self.state = READY
        self.setups += 1
        self._update_interest()
        assert self.setup is not None
        self.setup.set_result(self)

    def _reauth_due(self, now: float) -> None:
        """KIP-368: once the session nears its end, hold new requests, and log in again
        as soon as nothing is in flight."""
        if self._reauth is None:
            if self._reauth_at is None or now < self._reauth_at:
                return
            self._reauth_at = None
            self._reauth = _REAUTH_WAITING
        if self._reauth == _REAUTH_WAITING and not self._futures and self.state == READY:
            assert self.protocol is not None
            self._reauth = _REAUTH_RUNNING
            self._login_deadline = now + self.request_timeout
            self._start_login(ConnectionSetup(self.protocol, self.sasl, self.name, self.host, self.port,
                                              login_only=True))

    def _setup_timeout_error(self) -> BrokerConnectTimeoutError:
        if self.state == CONNECTING:
            what = (f"connecting to {self.name} timed out (no answer to the TCP handshake); is "
                    f"the broker up and the address right?")
        elif self.state == HANDSHAKING:
            return tls.handshake_timeout_error(name=self.name, host=self.host, port=self.port,
                                               timeout=self._setup_deadline - self._setup_started)
        elif self._login is not None:
            return self._login.timeout_error(self._setup_deadline - self._setup_started)
        else:
            what = f"{self.name} accepted the connection but did not answer ApiVersions in time"
        return BrokerConnectTimeoutError(what, host=self.host, port=self.port)

    # -- requests ---------------------------------------------------------------------

    def version_for(self, api: Api | int | str) -> int:
        if self.protocol is None:
            raise ConnectionClosedError(f"{self.name} is not connected", host=self.host, port=self.port)
        return self.protocol.version_for(api)

    def send(
        self, api: Api, request: Any, version: int | None = None, *, expects_response: bool = True,
        timeout: float | None = None,
    ) -> Future:
        """Send ``request``; the future resolves to the decoded response (or to None when
        ``expects_response`` is False, once the bytes are handed to the kernel).  The
        answer is due within ``timeout`` seconds (default: request_timeout_ms): a broker
        that holds a request longer on purpose (JoinGroup) gets a longer one."""
        if self.state != READY or self.protocol is None:
            fut = Future()
            fut.set_exception(
                self.last_error
                if isinstance(self.last_error, KafkaConnectionError)
                else ConnectionClosedError(f"{self.name} is not connected", host=self.host, port=self.port)
            )
            return fut
        proto = self.protocol
        now = time.monotonic()
        if timeout is None:
            timeout = self.request_timeout
        due = (now + timeout, timeout)

        def make() -> tuple[int, list[Any]]:
            return proto.send(api, request, version, expects_response=expects_response)

        if relogin_holds(self._reauth, self._reauth_at, now):
            fut = Future(self.poller.poll)
            self._held.append((make, due, expects_response, fut))
            self._reauth_due(now)
            return fut
        return self._send_raw(make, due, expects_response)

    def send_produce(self, request: Any, version: int,
                     on_answer: Callable[[Any, BaseException | None], Any]) -> None:
        """Send a producer's Produce ``request`` that gets an answer (acks 1 or all) at a
        version :meth:`version_for` chose, as :meth:`send_nowait` does.  The producer's
        per-request path: no per-call checks of the API and version either (issue 23)."""
        self._send_answered(_PRODUCE, request, version, on_answer, None)

    def send_nowait(self, api: Api, request: Any, version: int,
                    on_answer: Callable[[Any, BaseException | None], Any], timeout: float | None = None) -> None:
        """Send ``request`` (one that gets an answer) at ``version``; ``on_answer(response,
        None)``, or ``on_answer(None, error)`` if none comes within ``timeout`` seconds
        (default request_timeout_ms), runs once, in the thread that reads it or fails the
        connection: maybe before this returns.  No Future, no callback list: the
        consumer's fetches (issue 23)."""
        self._send_answered(api, request, version, on_answer, timeout)

    def write_produce(self, fields: tuple, version: int) -> bool:
        """Write a producer's Produce request (one that gets an answer) of one partition's
        batch, given by its ``fields`` (Accumulator.lone_request's), at ``version`` now,
        and nothing else: :meth:`expect_answer` lists its answer next, before anything
        polls this connection.  What the caller does in between runs while the request is
        on its way (a producer books its batch there: issue 23).  False, with nothing
        written, when the connection is not ready for it (being set up, or holding
        requests for a re-authentication): :meth:`send_produce` then takes it."""
        proto = self.protocol
        if self.state != READY or proto is None or relogin_holds(self._reauth, self._reauth_at, time.monotonic()):
            return False
        self._write(proto.send_produce_one(fields, version))
        return True

    def expect_answer(self, on_answer: Callable[[Any, BaseException | None], Any],
                      timeout: float | None = None) -> None:
        """List the answer to the request just written (:meth:`write_produce`):
        ``on_answer`` runs as for :meth:`send_nowait`, now if that write failed (it closed
        the connection)."""
        if timeout is None:
            timeout = self.request_timeout
        if self.state != READY:  # the write failed and closed the connection
            on_answer(None, self.last_error or ConnectionClosedError(
                f"writing to {self.name} failed", host=self.host, port=self.port))
            return
        self._futures.append(_Answer(on_answer))
        self._deadlines.append((time.monotonic() + timeout, timeout))

    def _send_answered(self, api: Api, request: Any, version: int,
                       on_answer: Callable[[Any, BaseException | None], Any], timeout: float | None) -> None:
        proto = self.protocol
        if self.state != READY or proto is None or relogin_holds(self._reauth, self._reauth_at, time.monotonic()):
            fut = self.send(api, request, version, timeout=timeout)
            fut.add_done_callback(lambda f: on_answer(None, f.exception()) if f.failed()
                                  else on_answer(f.result(), None))
            return
        # Written first, listed after: the answer cannot come before this thread polls.
        # (send()'s way, without its Future and the closure that frames the request.)
        self._write(proto.send_produce(request, version) if api is _PRODUCE else proto.send(api, request, version)[1])
        self.expect_answer(on_answer, timeout)

    def _send_raw(self, make: Any, due: tuple[float, float], expects_response: bool = True,
                  fut: Any = None) -> Future:
        if fut is None:
            fut = Future(self.poller.poll)
        _cid, chunks = make()
        if expects_response:  # listed first: a failed write fails it with the connection
            self._futures.append(fut)
            self._deadlines.append(due)
        self._write(chunks)
        if not expects_response:
            # No answer will stamp it (an acks=0 producer's connection is busy, not idle).
            self.last_io = due[0] - due[1]
            if self.state == READY:
                fut.set_result(None)
            else:
                fut.set_exception(self.last_error or ConnectionClosedError(
                    f"{self.name} is not connected", host=self.host, port=self.port))
        return fut

    def _update_interest(self) -> None:
        if self.sock is None or self.state in (CONNECTING, HANDSHAKING):
            return  # setup steps choose their own interest
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
                    sent = sock.sendmsg(out if len(out) <= _MAX_IOV else islice(out, _MAX_IOV))
                while sent:
                    head = out[0]
                    if sent >= len(head):
                        sent -= len(head)
                        out.popleft()
                    else:
                        out[0] = memoryview(head)[sent:]  # no copy of a large bytes' rest
                        sent = 0
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            pass
        except OSError as exc:
            self.close(self._setup_closed_error(exc) or self._dropped(exc) or ConnectionClosedError(
                f"writing to {self.name} failed: {exc}", host=self.host, port=self.port
            ))
            return
        self._update_interest()

    def _on_event(self, mask: int) -> None:
        state = self.state
        if state == CONNECTING:
            self._on_tcp_writable()
        elif state == HANDSHAKING:
            self._step_handshake()
        else:
            if mask & selectors.EVENT_WRITE:
                self._flush()
            if mask & selectors.EVENT_READ and self.state in (NEGOTIATING, AUTHENTICATING, READY):
                self._on_readable()

    def _on_readable(self) -> None:
        sock = self.sock
        proto = self.protocol
        if sock is None or proto is None:
            return
        plain = not isinstance(sock, ssl.SSLSocket)
        try:
            while True:
                # The bulk of a large frame goes straight from the kernel into the frame
                # (data None); anything else is read into a new bytes.  Not during setup
                # or a re-login: raw SASL tokens bypass the protocol's framing.
                view = proto.receive_buffer() if self._login is None else None
                if view is not None and len(view) >= _RECV_SIZE:
                    data, asked = None, len(view)
                    n = sock.recv_into(view)
                else:
                    data, asked = sock.recv(_RECV_SIZE), _RECV_SIZE
                    n = len(data)
                if not n:
                    self._on_closed_by_broker()
                    return
                if self._login is not None:
                    assert data is not None
                    self._feed_login(data)
                    if self.sock is None:
                        return
                    continue
                try:
                    events = proto.receive_data(data) if data is not None else proto.received_into(n)
                except ProtocolError as exc:
                    self._dispatch(exc.events)
                    self.close(ConnectionClosedError(
                        f"{self.name} sent bytes kafkawire cannot follow: {exc}",
                        host=self.host, port=self.port,
                    ))
                    return
                self._dispatch(events)
                if self.sock is None:
                    return
                # A short read drains a plain socket; TLS hands over one record (16 KB at
                # most) per call, so read on until it wants more from the kernel.
                if n < asked and plain:
                    return
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except OSError as exc:  # e.g. reset by a broker refusing the login
            self.close(self._setup_closed_error(exc) or self._dropped(exc) or ConnectionClosedError(
                f"reading from {self.name} failed: {exc}", host=self.host, port=self.port
            ))

    def _on_closed_by_broker(self) -> None:
        """The read returned no bytes: the broker closed the connection."""
        self.close(self._setup_closed_error(None) or closed_in_flight_error(
            self.protocol, len(self._futures), name=self.name, host=self.host, port=self.port,
            sasl=self.sasl, tls=self.ssl_context is not None))

    def _dropped(self, exc: BaseException) -> KafkaConnectionError | None:
        return dropped_without_login(exc, self.protocol, len(self._futures), name=self.name, host=self.host,
                                     port=self.port, sasl=self.sasl, tls=self.ssl_context is not None)

    def _setup_closed_error(self, exc: BaseException | None) -> KafkaConnectionError | None:
        """The error for a connection that broke after connecting (or the TLS handshake)
        but before the broker sent a byte of its first ApiVersions answer, else None.

        Over TLS that is how a broker rejects a missing or untrusted client certificate
        (TLS 1.3 checks it after the client's side of the handshake is done).  In
        plaintext it is how a TLS listener drops a client that did not speak TLS."""
        setup = self._login
        if setup is None:
            return None
        if setup.received_any or setup.login_only or setup.api_versions_sent != 1:
            return setup.closed_error()  # the SASL exchange's reading, if one is under way
        return tls.closed_before_answer_error(
            exc, name=self.name, host=self.host, port=self.port, ctx=self.ssl_context)

    def _dispatch(self, events: list[Any]) -> None:
        for ev in events:
            if not self._futures:
                return  # a callback closed the connection
            fut = self._futures.popleft()
            self._deadlines.popleft()
            fut.set_result(ev.response)

    def _expire(self, now: float) -> None:
        if self.state in _SETTING_UP:
            if now >= self._setup_deadline:
                self.close(self._setup_timeout_error())
            return
        if self._reauth is not None or self._reauth_at is not None:
            self._reauth_due(now)
        if self._login is not None and now >= self._login_deadline:
            self.close(self._login.timeout_error(self.request_timeout))
            return
        if self._deadlines:
            first = first_due(self._deadlines)
            if first[0] <= now:
                self.close(late_answer_error(self.name, self.host, self.port, first[1]))

    def _abandon_after_fork(self) -> list[tuple[Future, BaseException]]:
        """In a forked child (Poller._after_fork_in_child): close this process's copy of
        the socket, with no shutdown(), no TLS close_notify and no selector change, so
        the parent's connection goes on; forget the parent's requests in flight and
        return them, with their error, to be failed at the next poll.  The connection
        is CLOSED afterwards: the next use connects again."""
        error = ConnectionClosedError(
            f"{self.name}: the connection belongs to the parent process (os.fork()); this "
            f"request was in flight at the fork, and the child reconnects on next use",
            host=self.host, port=self.port)
        sock, self.sock = self.sock, None
        self._registered_mask = 0
        if sock is not None:
            try:
                # socket.close() releases the descriptor only (the kernel sends FIN when the
                # last one closes, and the parent holds one); an SSLSocket frees its TLS
                # state without a close_notify (only unwrap() sends one).
                sock.close()
            except OSError:
                pass
        orphans = list(self._futures) + [h[3] for h in self._held]
        self._futures, self._held = deque(), deque()
        self._deadlines.clear()
        self._forget_session()
        # A setup under way at the fork is the parent's: nobody in the child waits on it,
        # and failing it would count against the broker's reconnect backoff.
        self.setup = None
        self.state = CLOSED
        self.last_error = error
        for fut in orphans:
            fut._after_fork()
        return [(fut, error) for fut in orphans]

    def _forget_session(self) -> None:
        """Drop what belonged to the connection's session: unsent bytes, the addresses
        left to try, the negotiated versions, the SASL login and its re-login time."""
        self._out.clear()
        self._addrs = []
        self.protocol = None
        self._login = None
        self._reauth = None
        self._reauth_at = None

    def close(self, error: BaseException | None = None) -> None:
        """Close the socket; every request in flight fails with ``error``."""
        if error is None:
            error = ConnectionClosedError(f"{self.name}: connection closed by the client",
                                          host=self.host, port=self.port)
        self.last_error = error
        self.state = CLOSED
        self._drop_socket()
        self.poller.connections.discard(self)
        self._forget_session()
        futures, self._futures = self._futures, deque()
        held, self._held = self._held, deque()
        futures.extend(h[3] for h in held)
        self._deadlines.clear()
        for fut in futures:
            fut.set_exception(error)
        if self.setup is not None:
            self.setup.set_exception(error)  # no-op once it has resolved

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._own_poller:
            self.poller.close()
