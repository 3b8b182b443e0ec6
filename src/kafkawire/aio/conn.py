"""One asyncio connection to one broker: an asyncio transport under the sans-IO
:class:`~kafkawire.protocol.connection.Connection` (framing, correlation ids, version
negotiation), which the sync shell's connection drives the same way.

The transport hands what it reads to a protocol object (:class:`_Stream`), and the
answers are framed and handed out right there, in the event loop's I/O callback: no
reading task, no stream buffer, and so no extra turn of the loop between an answer's
bytes and the code waiting for it (issue 23).  A large frame (a Fetch answer) is read
straight into its own buffer (``Connection.receive_buffer``).  During setup and a
re-login the bytes go to an inbox that the setup steps read instead.

With a SASL mechanism, :meth:`AsyncBrokerConnection.connect` logs in after the
negotiation: :class:`~kafkawire.protocol.sasl.SaslExchange` plans the conversation, as for
the sync shell, and this module only sends its steps and feeds back the answers.  When the
broker limits the session (KIP-368), the first request after the re-login time waits for
the requests in flight, logs in again on the same connection, and then goes out; requests
made meanwhile wait for that login too.

Connection setup runs the steps of the sync shell's, each bounded by the one setup
deadline: the TCP connect, the TLS handshake, ApiVersions, SASL.  A TLS failure is named by
the same :mod:`kafkawire.core.tls` helpers the sync shell calls at the same points, so
both raise the same :class:`~kafkawire.errors.BrokerTLSError` with the same message.

A request's bytes go to the transport in one write, so a cancelled caller never leaves
a request half-sent; its answer is still read (answers come in order) and dropped.  A
request not answered by its deadline closes the connection, as in the sync shell: the
answers after it could no longer be matched.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import ssl
from collections import deque
from typing import Any, Callable

from kafkawire.core import tls
from kafkawire.errors import (
    BrokerConnectionRefusedError,
    BrokerConnectTimeoutError,
    BrokerResolutionError,
    ConnectionClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kafkawire.protocol import apis
from kafkawire.protocol.connection import Connection, ProtocolError, first_due, idle_error, late_answer_error
from kafkawire.protocol.sasl import SaslMechanism, SaslResult
from kafkawire.protocol.setup import (ConnectionSetup, broker_name, closed_in_flight_error, dropped_without_login,
                                      relogin_holds)

_PRODUCE = apis.get("Produce")
# What one read takes at most into a connection's scratch buffer; the rest of a frame at
# least this large is read straight into the frame's own buffer instead.
_SCRATCH = 1 << 16

__all__ = ["AsyncBrokerConnection"]


class _Answer:
    """The place of a request among the answers awaited, for the framing and close()
    (done, set_result, set_exception): the answer goes straight to ``on_answer(*args,
    response, error)``, a send_nowait() caller's callback or, for request(), _fill with
    the future its caller awaits.  ``due``: (loop time it is due by, its timeout), as
    first_due takes them."""

    __slots__ = ("_on_answer", "_args", "_done", "_waiter", "due")

    def __init__(self, on_answer: Callable[..., Any], args: tuple, due: tuple[float, float]):
        self._on_answer = on_answer
        self._args = args
        self._done = False
        self._waiter: asyncio.Future | None = None
        self.due = due

    def done(self) -> bool:
        return self._done

    def set_result(self, response: Any) -> None:
        self._finish(response, None)

    def set_exception(self, exc: BaseException) -> None:
        self._finish(None, exc)

    def waiter(self) -> asyncio.Future:
        """A future done with this answer (a re-login waits for the last one)."""
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
            if self._done:
                self._waiter.set_result(None)
        return self._waiter

    def _finish(self, response: Any, exc: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        try:
            self._on_answer(*self._args, response, exc)
        except Exception as err:  # noqa: BLE001 - the other answers go on; the loop reports it
            asyncio.get_running_loop().call_exception_handler(
                {"message": "an answer callback failed", "exception": err})


def _fill(fut: asyncio.Future, response: Any, exc: BaseException | None) -> None:
    """request()'s answer into the future its caller awaits (unless that caller gave up)."""
    if fut.done():
        return
    if exc is None:
        fut.set_result(response)
    else:
        fut.set_exception(exc)
        fut.exception()  # the caller still sees it; no "never retrieved" noise without one


class _Stream(asyncio.BufferedProtocol):
    """The transport's side of one AsyncBrokerConnection: what is read goes to it as it
    arrives.  ``lost`` is done, with the transport's error or None, once the connection
    is gone."""

    def __init__(self, conn: AsyncBrokerConnection):
        self.conn = conn
        self.scratch = memoryview(bytearray(_SCRATCH))
        self.into = False  # the last get_buffer() lent the frame's own buffer
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        conn = self.conn
        if conn._inbox is None and conn.ready and conn.protocol is not None:
            view = conn.protocol.receive_buffer()
            if view is not None and len(view) >= _SCRATCH:
                self.into = True
                return view
        self.into = False
        return self.scratch

    def buffer_updated(self, nbytes: int) -> None:
        if self.into:
            self.into = False
            self.conn._received(None, nbytes)
        else:
            # bytes: whole small frames are decoded where they are (Connection.receive_data)
            self.conn._received(bytes(self.scratch[:nbytes]), nbytes)

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)
        self.conn._lost(exc)


class AsyncBrokerConnection:
    def __init__(self, host: str, port: int, *, node_id: int | None = None, client_id: str = "kafkawire",
                 request_timeout: float = 30.0, ssl_context: ssl.SSLContext | None = None,
                 version_overrides: dict[Any, int] | None = None, sasl: SaslMechanism | None = None):
        self.host = host
        self.port = port
        self.node_id = node_id
        #: How errors name this broker (protocol/setup.py's broker_name).
        self.name = broker_name(host, port, node_id)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.ssl_context = ssl_context
        self.version_overrides = dict(version_overrides or {})
        self.protocol: Connection | None = None
        self.ready = False
        self.last_error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.Transport | None = None
        self._stream: _Stream | None = None
        # Setup and re-login read the raw bytes from here (None: answers are framed as
        # they come); a setup step waiting for more waits on _inbox_waiter.
        self._inbox: bytearray | None = None
        self._inbox_waiter: asyncio.Future | None = None
        # The answers awaited, in request order.
        self._answers: deque[_Answer] = deque()
        # One timer for the answers' deadlines, at the earliest (a timer per request would
        # cost more than the rest of its way out).
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        # SASL: each login uses a fresh() copy of this mechanism.
        self.sasl = sasl
        self.sasl_result: SaslResult | None = None
        self._reauth_at: float | None = None  # loop time the next re-login is due (KIP-368)
        self._reauth: asyncio.Task | None = None
        #: How many times this connection finished its setup (1: a reconnect makes a new one).
        self.setups = 0
        #: KIP-368 re-authentications that succeeded on this connection.
        self.reauthentications = 0
        #: The loop's time when bytes last moved either way: each read, each write.
        self.last_io = 0.0

    def __repr__(self) -> str:
        return f"<AsyncBrokerConnection {self.name} {'ready' if self.ready else 'not ready'}>"

    async def connect(self, timeout: float) -> None:
        """Connect (TCP, TLS), negotiate API versions and log in (SASL) within ``timeout``
        seconds, or raise a KafkaConnectionError subclass (or a SASL error) saying why."""
        self._loop = loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            sock = await asyncio.wait_for(self._tcp_connect(), timeout)
        except asyncio.TimeoutError:
            raise BrokerConnectTimeoutError(
                f"connecting to {self.name} timed out (no answer to the TCP handshake); is the "
                f"broker up and the address right?", host=self.host, port=self.port) from None
        except ConnectionRefusedError:
            raise BrokerConnectionRefusedError(
                f"{self.name} refused the connection: nothing listens there",
                host=self.host, port=self.port) from None
        except (socket.gaierror, UnicodeError) as exc:  # UnicodeError: not a valid name (a label too long)
            raise BrokerResolutionError(
                f"cannot resolve {self.name}: {getattr(exc, 'strerror', None) or exc}; check the host name in "
                f"bootstrap_servers (or the broker's advertised listener)",
                host=self.host, port=self.port) from None
        except OSError as exc:
            raise ConnectionClosedError(f"connecting to {self.name} failed: {exc}",
                                        host=self.host, port=self.port) from None
        # The TLS handshake apart from the TCP connect, so that its failures and its timeout
        # are named as the sync shell names them.
        ctx = self.ssl_context
        self._inbox = bytearray()  # the setup reads first
        try:
            self._transport, self._stream = await asyncio.wait_for(loop.create_connection(
                lambda: _Stream(self), sock=sock, ssl=ctx, server_hostname=self.host if ctx is not None else None),
                max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            sock.close()
            raise tls.handshake_timeout_error(name=self.name, host=self.host, port=self.port,
                                              timeout=timeout) from None
        except (ssl.SSLError, OSError) as exc:  # SSLError is an OSError; both fail the handshake
            sock.close()
            raise tls.handshake_error(exc, name=self.name, host=self.host, port=self.port,
                                      ctx=ctx) from None
        except ValueError as exc:  # the context refused to start (e.g. no server_hostname)
            sock.close()
            raise tls.wrap_error(exc, name=self.name, host=self.host, port=self.port) from None
        self.protocol = Connection(self.client_id, version_overrides=self.version_overrides)
        await self._run_setup(ConnectionSetup(self.protocol, self.sasl, self.name, self.host, self.port),
                              deadline, timeout)
        self.ready = True
        self.setups += 1
        self._read_answers()

    async def _tcp_connect(self) -> socket.socket:
        """A connected non-blocking socket to the first of the host's addresses that
        accepts; raises the last address's error when none does."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        error: OSError = OSError(f"{self.host} resolved to no address")
        for family, type_, proto, _canon, addr in infos:
            sock = socket.socket(family, type_, proto)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, addr)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
            except BaseException:  # cancelled by the timeout: no socket left open
                sock.close()
                raise
        raise error

    async def _run_setup(self, setup: ConnectionSetup, deadline: float, budget: float) -> None:
        """Drive ``setup`` (protocol/setup.py) over the open connection by ``deadline``
        (loop time; ``budget`` seconds in all, for the message), its bytes read from the
        inbox, not framed: after SaslHandshake v0 the broker's tokens are raw, outside
        Kafka's framing.  Closes the connection and raises the typed error when the setup
        fails."""
        loop = asyncio.get_running_loop()
        try:
            self._write(setup.start())
            while not setup.done:
                cause: OSError | None = None
                try:
                    data = await asyncio.wait_for(self._inbox_read(), max(0.0, deadline - loop.time()))
                except asyncio.TimeoutError:
                    raise setup.timeout_error(budget) from None
                except OSError as exc:  # SSLError included; e.g. reset by a broker refusing the login
                    data, cause = b"", exc
                if not data:
                    raise setup.closed_error() or self._setup_closed_error(cause, setup) or ConnectionClosedError(
                        f"{self.name} closed the connection during setup" + (f": {cause}" if cause else ""),
                        host=self.host, port=self.port)
                if not setup.received_any and not setup.login_only:
                    mismatch = tls.plaintext_answer_error(
                        data, name=self.name, host=self.host, port=self.port, ctx=self.ssl_context)
                    if mismatch:
                        raise mismatch
                self._write(setup.receive(data))
        except BaseException as exc:
            self.close(exc if isinstance(exc, Exception) else None)
            raise
        if setup.result is not None:
            self.sasl_result = setup.result
            self._reauth_at = setup.reauthenticate_at(loop.time(), random.random())

    async def _inbox_read(self) -> bytes:
        """The bytes read since the last call, waiting for some; b"" once the broker
        closed the connection (its error raised, when there was one)."""
        inbox = self._inbox
        assert inbox is not None and self._stream is not None
        while not inbox:
            lost = self._stream.lost
            if lost.done():
                exc = lost.result()
                if exc is None:
                    return b""
                raise exc if isinstance(exc, OSError) else OSError(str(exc))
            self._inbox_waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._inbox_waiter = None
        data = bytes(inbox)
        inbox.clear()
        return data

    def _read_answers(self) -> None:
        """After a setup: frame what is read from now on (anything already read first)."""
        inbox, self._inbox = self._inbox, None
        if inbox:
            self._received(bytes(inbox), len(inbox))
        stream = self._stream
        if stream is not None and stream.lost.done():
            self._lost(stream.lost.result())

    def _received(self, data: bytes | None, nbytes: int) -> None:
        """What the transport read: ``data``, or ``nbytes`` written into the view
        Connection.receive_buffer() gave.  Each answer completed goes to its waiter now."""
        self.last_io = self._loop.time()  # type: ignore[union-attr]  # set by connect()
        inbox = self._inbox
        if inbox is not None:
            inbox += data  # type: ignore[operator]  # setup lends no frame buffer
            waiter = self._inbox_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        protocol = self.protocol
        if not self.ready or protocol is None:
            return  # closed: what still arrives is dropped
        try:
            events = protocol.receive_data(data) if data is not None else protocol.received_into(nbytes)
        except ProtocolError as exc:
            self.close(ConnectionClosedError(
                f"{self.name} sent bytes kafkawire cannot follow: {exc}", host=self.host, port=self.port))
            return
        answers = self._answers
        for event in events:
            if not answers:
                break  # an answer's callback closed the connection
            answers.popleft().set_result(event.response)

    def _lost(self, exc: BaseException | None) -> None:
        if self._inbox is not None:  # a setup step reading: it sees the end (_inbox_read)
            waiter = self._inbox_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            return
        if self.ready:
            facts = dict(name=self.name, host=self.host, port=self.port, sasl=self.sasl,
                         tls=self.ssl_context is not None)
            self.close(closed_in_flight_error(self.protocol, len(self._answers), **facts) if exc is None
                       else dropped_without_login(exc, self.protocol, len(self._answers), **facts)
                       or ConnectionClosedError(f"connection to {self.name} failed: {exc}",
                                                host=self.host, port=self.port))

    def version_for(self, api: Any) -> int:
        """The version to use for ``api`` on this connection (Connection.version_for, which
        remembers its choice: the producer asks on every request)."""
        assert self.protocol is not None
        return self.protocol.version_for(api)

    async def request(self, api: Any, request: Any, version: int | None = None, *,
                      timeout: float | None = None, wait: float | None = None,
                      expects_response: bool = True) -> Any:
        """Send ``request`` and return the decoded response (None when
        ``expects_response`` is False), due within ``timeout`` (default
        request_timeout_ms: a broker that does not answer by then has the connection
        closed).  ``wait`` ends only the caller's wait, with KafkaTimeoutError: the
        request keeps its own timeout and its late answer is dropped, so a short caller
        deadline does not close a connection other requests are in flight on."""
        if wait is not None:
            exchange = asyncio.ensure_future(self.request(api, request, version, timeout=timeout,
                                                          expects_response=expects_response))
            try:
                return await asyncio.wait_for(asyncio.shield(exchange), wait)
            except asyncio.TimeoutError:
                # Retrieved here, so that a timeout it ends with later is not logged as lost.
                exchange.add_done_callback(lambda t: t.cancelled() or t.exception())
                raise KafkaTimeoutError(f"{api.name} to {self.name}: no answer within {wait:g}s "
                                        f"(the request goes on; its answer will be dropped)") from None
        if relogin_holds(self._reauth, self._reauth_at, asyncio.get_running_loop().time()):
            await self._reauthenticate()
        if not self.ready or self.protocol is None:
            raise self.last_error if isinstance(self.last_error, KafkaConnectionError) else \
                ConnectionClosedError(f"{self.name} is not connected", host=self.host, port=self.port)
        frame = self.protocol.send(api, request, version, expects_response=expects_response)
        if not expects_response:
            self._write(frame[1])
            return None
        return await self._exchange(frame, self.request_timeout if timeout is None else timeout)

    def send_nowait(self, api: Any, request: Any, version: int | None = None, *,
                    expects_response: bool = True, on_answer: Callable[..., Any], args: tuple = (),
                    timeout: float | None = None) -> bool:
        """Write ``request`` now, without awaiting anything; ``on_answer(*args, response,
        None)`` or ``on_answer(*args, None, error)`` is called as soon as the answer is
        read, from the transport's read callback (no future, no turn of the event loop
        in between; soon, with None, when ``expects_response`` is False).  False, and
        nothing written, when it has to take :meth:`request` (not connected, or a
        KIP-368 re-login due).  The answer is due within ``timeout`` (default
        request_timeout); a late one closes the connection, as in :meth:`request`.  The
        producer's per-request path, and the consumer's fetches."""
        now = self._writable_at()
        if now is None:
            return False
        protocol = self.protocol
        if api is _PRODUCE and expects_response and version is not None:
            chunks = protocol.send_produce(request, version)  # the checks send() makes, spared
        else:
            _cid, chunks = protocol.send(api, request, version, expects_response=expects_response)
        if not expects_response:
            self._transport.writelines(chunks)
            self.last_io = now
            self._loop.call_soon(on_answer, *args, None, None)
            return True
        self._write_awaited(chunks, on_answer, args, now, timeout)
        return True

    def send_produce_one(self, fields: tuple, version: int, *, on_answer: Callable[..., Any], args: tuple = ()) -> bool:
        """:meth:`send_nowait` for a producer's Produce request of one partition's batch,
        given by its ``fields`` (Accumulator.lone_request's): framed from them in one call
        (protocol.Connection.send_produce_one).  False, and nothing written, as there."""
        now = self._writable_at()
        if now is None:
            return False
        self._write_awaited(self.protocol.send_produce_one(fields, version), on_answer, args, now, None)
        return True

    def _writable_at(self) -> float | None:
        """The loop's time if a request may be written now (connected, no KIP-368 re-login
        due); else None."""
        loop = self._loop
        if not self.ready or loop is None:
            return None
        now = loop.time()
        if relogin_holds(self._reauth, self._reauth_at, now):
            return None
        assert self.protocol is not None and self._transport is not None
        return now

    def _write_awaited(self, chunks: list[Any], on_answer: Callable[..., Any], args: tuple, now: float,
                       timeout: float | None) -> None:
        # Written first, the bookkeeping after: the answer cannot be read before this
        # returns to the loop, and the broker is at work meanwhile.
        self._transport.writelines(chunks)  # buffered whole by the transport: never half-sent
        self.last_io = now
        if timeout is None:
            timeout = self.request_timeout
        self._await(_Answer(on_answer, args, (now + timeout, timeout)))

    def _await(self, slot: _Answer) -> None:
        """``slot`` joins the answers awaited; the timer is brought forward to its due time
        if it is the earliest."""
        self._answers.append(slot)
        due = slot.due[0]
        if self._timer is None or due < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            assert self._loop is not None
            self._timer_at = due
            self._timer = self._loop.call_at(due, self._check_late)

    def _check_late(self) -> None:
        """The answer timer: close the connection if an answer is past its due time,
        else wait for the earliest one's."""
        self._timer = None
        if not self.ready or self._loop is None:
            return
        first = first_due([slot.due for slot in self._answers])
        if first is None:
            return
        if first[0] <= self._loop.time():
            self.close(late_answer_error(self.name, self.host, self.port, first[1]))
            return
        self._timer_at = first[0]
        self._timer = self._loop.call_at(first[0], self._check_late)

    async def _reauthenticate(self) -> None:
        """KIP-368: log in again once the requests in flight are answered (one login for
        every request that finds it due; they all wait for it)."""
        if self._reauth is None:
            self._reauth_at = None

            async def login() -> None:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.request_timeout
                while self._answers and self.ready:  # answers come in order: wait for the last
                    await asyncio.wait([self._answers[-1].waiter()], timeout=max(0.0, deadline - loop.time()))
                    if loop.time() >= deadline:
                        break
                if self.ready and self.protocol is not None:
                    # Nothing in flight: the login's bytes go to the inbox, unframed.
                    self._inbox = bytearray()
                    try:
                        await self._run_setup(ConnectionSetup(self.protocol, self.sasl, self.name, self.host,
                                                              self.port, login_only=True),
                                              deadline, self.request_timeout)
                    finally:
                        self._read_answers()
                    self.reauthentications += 1

            self._reauth = asyncio.ensure_future(login())
            self._reauth.add_done_callback(lambda t: setattr(self, "_reauth", None))
        await asyncio.shield(self._reauth)

    def _write(self, chunks: list[Any]) -> None:
        assert self._transport is not None and self._loop is not None
        self._transport.writelines(chunks)  # buffered whole by the transport: never half-sent
        self.last_io = self._loop.time()

    def close_if_idle(self, max_idle: float | None) -> bool:
        """Close this ready connection if nothing is in flight or unsent, no login is
        under way and it has been idle past ``max_idle`` (protocol.connection.idle_error;
        a request may be written before the loop has read the broker's close), and say
        whether it did."""
        loop, transport = self._loop, self._transport
        if (max_idle is None or not self.ready or self._answers or self._reauth is not None
                or self._inbox is not None or loop is None or transport is None
                or transport.get_write_buffer_size()):
            return False
        err = idle_error(self.name, self.host, self.port, loop.time() - self.last_io, max_idle)
        if err is not None:
            self.close(err)
        return err is not None

    async def _exchange(self, frame: tuple[int, list[Any]], timeout: float) -> Any:
        # The answer is awaited directly: the framing fills the future (the connection's
        # timer closes the connection, failing it, when the answer is late), no task or
        # timer of its own.  A cancelled caller leaves its slot to take the answer and
        # drop it.
        loop = self._loop
        assert loop is not None
        fut = loop.create_future()
        self._write(frame[1])
        self._await(_Answer(_fill, (fut,), (loop.time() + timeout, timeout)))
        return await fut

    def _setup_closed_error(self, exc: BaseException | None, setup: ConnectionSetup) -> KafkaConnectionError | None:
        """The TLS error for a connection that ended during setup before the broker sent a
        byte of its first answer (see tls.closed_before_answer_error), else None."""
        if setup.received_any or setup.login_only or setup.api_versions_sent != 1:
            return None
        return tls.closed_before_answer_error(exc, name=self.name, host=self.host, port=self.port,
                                              ctx=self.ssl_context)

    def _abandon_after_fork(self, error: BaseException) -> None:
        """In a forked child (kafkawire.core.fork): close this process's copy of the
        socket's descriptor and forget the connection, touching neither the parent's
        TCP connection (no shutdown; a descriptor closed while the parent holds another
        sends no FIN) nor its TLS session (no close_notify), nor the event loop: it is the
        parent's, its epoll instance and self-pipe are shared with the parent, and
        nothing may be scheduled on it from here."""
        transport, self._transport, self._stream = self._transport, None, None
        if transport is not None:
            sock = transport.get_extra_info("socket")
            raw = getattr(sock, "_sock", sock)  # asyncio's TransportSocket wraps the socket
            try:
                fd = raw.detach()  # the socket object forgets it: no second close later
                if fd >= 0:
                    os.close(fd)
            except (AttributeError, OSError):
                pass
        self.ready = False
        self.protocol = None
        self.last_error = error
        self._answers = deque()  # the old loop's answers: never settled from the child
        self._timer = None
        self._loop = None

    def close(self, error: BaseException | None = None) -> None:
        """Close the connection; every request in flight fails with ``error``."""
        self.ready = False
        self.last_error = error or ConnectionClosedError(f"{self.name} was closed", host=self.host,
                                                         port=self.port)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._answers:
            self._answers.popleft().set_exception(self.last_error)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    async def aclose(self) -> None:
        """close(), then wait (briefly) for the transport to let go of the socket."""
        self.close()
        stream = self._stream
        if stream is not None and not stream.lost.done():
            await asyncio.wait([stream.lost], timeout=1.0)
