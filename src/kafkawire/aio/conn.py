"""One asyncio connection to one broker: asyncio streams under the sans-IO
:class:`~kafkawire.protocol.connection.Connection` (framing, correlation ids, version
negotiation), which the sync shell's connection drives the same way.

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
    RequestTimeoutError,
)
from kafkawire.protocol import apis
from kafkawire.protocol.connection import Connection, ProtocolError
from kafkawire.protocol.sasl import SaslMechanism, SaslResult
from kafkawire.protocol.setup import ConnectionSetup, broker_name

_PRODUCE = apis.get("Produce")

__all__ = ["AsyncBrokerConnection"]


class _Answer:
    """The place of a send_nowait() request among the answers awaited: as a future for
    the reading task and close() (done, set_result, set_exception, exception), but the
    answer goes straight to ``on_answer``."""

    __slots__ = ("_on_answer", "_done", "_waiter", "timer")

    def __init__(self, on_answer: Callable[[Any, BaseException | None], Any]):
        self._on_answer = on_answer
        self._done = False
        self._waiter: asyncio.Future | None = None
        self.timer: asyncio.TimerHandle | None = None

    def done(self) -> bool:
        return self._done

    def set_result(self, response: Any) -> None:
        self._finish(response, None)

    def set_exception(self, exc: BaseException) -> None:
        self._finish(None, exc)

    def exception(self) -> None:
        return None

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
        if self.timer is not None:
            self.timer.cancel()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        try:
            self._on_answer(response, exc)
        except Exception as err:  # noqa: BLE001 - the reading task goes on; the loop reports it
            asyncio.get_running_loop().call_exception_handler(
                {"message": "a send_nowait() answer callback failed", "exception": err})


class AsyncBrokerConnection:
    def __init__(self, host: str, port: int, *, node_id: int | None = None, client_id: str = "kafkawire",
                 request_timeout: float = 30.0, ssl_context: ssl.SSLContext | None = None,
                 version_overrides: dict[Any, int] | None = None, sasl: SaslMechanism | None = None):
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.ssl_context = ssl_context
        self.version_overrides = dict(version_overrides or {})
        self.protocol: Connection | None = None
        self.ready = False
        self.last_error: BaseException | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        # The answers awaited, in request order: futures (request()) or _Answer slots
        # (send_nowait()).
        self._futures: deque[Any] = deque()
        self._read_task: asyncio.Task | None = None
        self._closing: asyncio.Task | None = None  # the read task close() cancelled
        # SASL: each login uses a fresh() copy of this mechanism.
        self.sasl = sasl
        self.sasl_result: SaslResult | None = None
        self._reauth_at: float | None = None  # loop time the next re-login is due (KIP-368)
        self._reauth: asyncio.Task | None = None
        #: How many times this connection finished its setup (1: a reconnect makes a new one).
        self.setups = 0
        #: KIP-368 re-authentications that succeeded on this connection.
        self.reauthentications = 0

    @property
    def name(self) -> str:
        return broker_name(self.host, self.port, self.node_id)

    def __repr__(self) -> str:
        return f"<AsyncBrokerConnection {self.name} {'ready' if self.ready else 'not ready'}>"

    async def connect(self, timeout: float) -> None:
        """Connect (TCP, TLS), negotiate API versions and log in (SASL) within ``timeout``
        seconds, or raise a KafkaConnectionError subclass (or a SASL error) saying why."""
        loop = asyncio.get_running_loop()
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
        except socket.gaierror as exc:
            raise BrokerResolutionError(
                f"cannot resolve {self.name}: {exc.strerror or exc}; check the host name in "
                f"bootstrap_servers (or the broker's advertised listener)",
                host=self.host, port=self.port) from None
        except OSError as exc:
            raise ConnectionClosedError(f"connecting to {self.name} failed: {exc}",
                                        host=self.host, port=self.port) from None
        # The TLS handshake apart from the TCP connect, so that its failures and its timeout
        # are named as the sync shell names them.
        ctx = self.ssl_context
        try:
            self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(
                sock=sock, ssl=ctx, server_hostname=self.host if ctx is not None else None),
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
        self._read_task = asyncio.ensure_future(self._read_loop())

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
        """Drive ``setup`` (protocol/setup.py) over the open stream by ``deadline`` (loop
        time; ``budget`` seconds in all, for the message), the read loop not running: after
        SaslHandshake v0 the broker's tokens are raw, outside Kafka's framing.  Closes the
        connection and raises the typed error when the setup fails."""
        assert self._reader is not None
        loop = asyncio.get_running_loop()
        reader = self._reader
        try:
            self._write(setup.start())
            while not setup.done:
                cause: OSError | None = None
                try:
                    data = await asyncio.wait_for(reader.read(1 << 16), max(0.0, deadline - loop.time()))
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
        if self._reauth is not None or (
                self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at):
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
                    expects_response: bool = True,
                    on_answer: Callable[[Any, BaseException | None], Any]) -> bool:
        """Write ``request`` now, without awaiting anything; ``on_answer(response, None)``
        or ``on_answer(None, error)`` is called from the reading task as soon as the
        answer is read (no future, no turn of the event loop in between; soon, with
        None, when ``expects_response`` is False).  False, and nothing written, when it
        has to take :meth:`request` (not connected, or a KIP-368 re-login due).  The
        answer is due within request_timeout; a late one closes the connection, as in
        :meth:`request`.  The producer's per-request path."""
        loop = asyncio.get_running_loop()
        if (not self.ready or self.protocol is None or self._reauth is not None
                or (self._reauth_at is not None and loop.time() >= self._reauth_at)):
            return False
        if api is _PRODUCE and expects_response and version is not None:
            chunks = self.protocol.send_produce(request, version)  # the checks send() makes, spared
        else:
            _cid, chunks = self.protocol.send(api, request, version, expects_response=expects_response)
        if not expects_response:
            self._write(chunks)
            loop.call_soon(on_answer, None, None)
            return True
        slot = _Answer(on_answer)
        self._futures.append(slot)
        self._write(chunks)
        slot.timer = loop.call_later(self.request_timeout, self._answer_late, slot)
        return True

    def _answer_late(self, slot: _Answer) -> None:
        if not slot.done():
            self.close(RequestTimeoutError(
                f"{self.name} did not answer a request within {self.request_timeout:g}s; the "
                f"connection was closed", host=self.host, port=self.port))

    async def _reauthenticate(self) -> None:
        """KIP-368: log in again once the requests in flight are answered (one login for
        every request that finds it due; they all wait for it)."""
        if self._reauth is None:
            self._reauth_at = None

            async def login() -> None:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + self.request_timeout
                while self._futures and self.ready:  # answers come in order: wait for the last
                    last = self._futures[-1]
                    await asyncio.wait([last.waiter() if isinstance(last, _Answer) else last],
                                       timeout=max(0.0, deadline - loop.time()))
                    if loop.time() >= deadline:
                        break
                if self.ready and self.protocol is not None:
                    task, self._read_task = self._read_task, None
                    if task is not None:  # idle in read(): cancelling it leaves any bytes in the reader
                        task.cancel()
                        await asyncio.wait([task])
                    await self._run_setup(ConnectionSetup(self.protocol, self.sasl, self.name, self.host,
                                                          self.port, login_only=True),
                                          deadline, self.request_timeout)
                    self.reauthentications += 1
                    self._read_task = asyncio.ensure_future(self._read_loop())

            self._reauth = asyncio.ensure_future(login())
            self._reauth.add_done_callback(lambda t: setattr(self, "_reauth", None))
        await asyncio.shield(self._reauth)

    def _write(self, chunks: list[Any]) -> None:
        assert self._writer is not None
        self._writer.writelines(chunks)  # buffered whole by the transport: never half-sent

    async def _exchange(self, frame: tuple[int, list[Any]], timeout: float) -> Any:
        fut = asyncio.get_running_loop().create_future()
        self._futures.append(fut)
        self._write(frame[1])
        try:
            # shield: a cancelled caller must not cancel the slot its answer will fill.
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            err = RequestTimeoutError(
                f"{self.name} did not answer a request within {timeout:g}s; the connection was closed",
                host=self.host, port=self.port)
            self.close(err)
            raise err from None

    async def _read_loop(self) -> None:
        assert self._reader is not None and self.protocol is not None
        try:
            while True:
                data = await self._reader.read(1 << 18)
                if not data:
                    raise ConnectionClosedError(
                        f"{self.name} closed the connection with {len(self._futures)} request(s) in flight",
                        host=self.host, port=self.port)
                for event in self.protocol.receive_data(data):
                    fut = self._futures.popleft()
                    if not fut.done():
                        fut.set_result(event.response)
        except asyncio.CancelledError:
            raise
        except ProtocolError as exc:
            self.close(ConnectionClosedError(
                f"{self.name} sent bytes kafkawire cannot follow: {exc}", host=self.host, port=self.port))
        except (OSError, KafkaConnectionError) as exc:
            self.close(exc if isinstance(exc, KafkaConnectionError) else ConnectionClosedError(
                f"connection to {self.name} failed: {exc}", host=self.host, port=self.port))

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
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            sock = writer.transport.get_extra_info("socket")
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
        self._futures = deque()  # the old loop's futures: never resolved from the child
        self._read_task = None
        self._closing = None

    def close(self, error: BaseException | None = None) -> None:
        """Close the connection; every request in flight fails with ``error``."""
        self.ready = False
        self.last_error = error or ConnectionClosedError(f"{self.name} was closed", host=self.host,
                                                         port=self.port)
        while self._futures:
            fut = self._futures.popleft()
            if not fut.done():
                fut.set_exception(self.last_error)
                fut.exception()  # a waiter (if any) still sees it; no "never retrieved" noise
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        task, self._read_task = self._read_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            self._closing = task

    async def aclose(self) -> None:
        """close(), then wait (briefly) for the reading task to end: no task outlives it."""
        self.close()
        task, self._closing = self._closing, None
        if task is not None:
            await asyncio.wait([task], timeout=1.0)
