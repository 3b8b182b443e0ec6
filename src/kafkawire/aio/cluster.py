"""The asyncio shell's cluster: one :class:`AsyncBrokerConnection` per broker, over the
same I/O-free :class:`~kafkawire.protocol.metadata.ClusterMetadata` (brokers, leaders,
when to refresh) and reconnect backoff as the sync :class:`~kafkawire.client.cluster.Cluster`.

After ``os.fork()`` an asyncio client made before the fork cannot go on in the child: it
belongs to its event loop, whose epoll instance and self-pipe the child shares with the
parent, and whose tasks did not come along.  Right after the fork the child closes its
copies of the sockets (the parent's connections go on untouched, see
:mod:`kafkawire.core.fork`); then every call that needs the cluster raises
:class:`~kafkawire.core.fork.ForkedClientError`, and ``close()`` only lets go of the
copy.  Create the client again in the child, inside the child's own event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generator

from kafkawire.aio.conn import AsyncBrokerConnection
from kafkawire.core import fork as _fork
from kafkawire.core.fork import ForkedClientError
from kafkawire.core.config import Config
from kafkawire.errors import KafkaConnectionError, KafkaTimeoutError
from kafkawire.protocol import apis
from kafkawire.protocol.connection import max_idle
from kafkawire.protocol.metadata import (
    Backoff,
    Backoffs,
    BrokerAttempts,
    ClusterMetadata,
    ClusterView,
    bootstrap_steps,
    candidates,
    partitions_steps,
    refresh_steps,
)
from kafkawire.protocol.steps import Await, Late, Prepare, Refresh, Request, Sleep, drive_async

__all__ = ["AsyncCluster"]

METADATA = apis.get("Metadata")


class AsyncCluster(ClusterView):
    def __init__(self, config: Config):
        self.config = config
        self.meta = ClusterMetadata(config.metadata_max_age_ms, config.retry_backoff_ms,
                                    config.metadata_recovery_strategy,
                                    config.metadata_recovery_rebootstrap_trigger_ms)
        self._conns: dict[Any, AsyncBrokerConnection] = {}
        self._connecting: dict[Any, asyncio.Task] = {}
        self.backoffs = Backoffs(config.reconnect_backoff_ms, config.reconnect_backoff_max_ms)
        # connections_max_idle_ms in seconds, None for -1: as the sync Cluster's, a
        # connection idle longer is closed when next picked and a new one made.
        self._max_idle = max_idle(config.connections_max_idle_ms)
        self._refresh: asyncio.Task | None = None
        self.closed = False
        self.forked = False  # this is a forked child's copy: see the module docstring
        _fork.register(self)

    def _after_fork_in_child(self) -> None:
        self.forked = True
        err = ForkedClientError(self._forked_message())
        for conn in self._conns.values():
            conn._abandon_after_fork(err)
        # The parent loop's tasks: never cancelled from here (that would schedule on it).
        self._connecting = {}
        self._refresh = None

    @staticmethod
    def _forked_message() -> str:
        return ("this asyncio client was made before os.fork(): it belongs to the parent "
                "process's event loop and connections, so it cannot be used in the child; "
                "create a new client in the child, inside its own event loop")

    def check_fork(self) -> None:
        """Raise ForkedClientError in a forked child (see the module docstring)."""
        if self.forked:
            raise ForkedClientError(self._forked_message())

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    # -- connections ---------------------------------------------------------------------

    async def _connect(self, key: Any, host: str, port: int, node_id: int | None,
                       deadline: float) -> AsyncBrokerConnection:
        self.check_fork()
        conn = self._conns.get(key)
        if conn is not None and conn.ready and not conn.close_if_idle(self._max_idle):
            return conn
        task = self._connecting.get(key)
        if task is None:
            refused = self.backoffs.refusal(host, port, self._now())
            if refused is not None:
                raise refused
            b = self.backoffs.get(host, port)
            c = self.config
            conn = AsyncBrokerConnection(
                host, port, node_id=node_id, client_id=c.client_id,
                request_timeout=c.request_timeout_ms / 1000, ssl_context=c.ssl_context, sasl=c.sasl,
                version_overrides=c.api_version_overrides)
            self._conns[key] = conn
            # One setup per broker however many callers wait; it outlives a caller's
            # cancellation, and its own timeout bounds it.
            task = asyncio.ensure_future(self._setup(conn, b))
            self._connecting[key] = task
        remaining = deadline - self._now()
        if remaining <= 0:
            raise KafkaTimeoutError(f"no time left to connect to {host}:{port}")
        try:
            return await asyncio.wait_for(asyncio.shield(task), remaining)
        except asyncio.TimeoutError as exc:
            if _ended(task, exc):
                raise  # the setup's own error (a KafkaTimeoutError is a TimeoutError too)
            raise KafkaTimeoutError(f"connecting to {host}:{port} did not finish in time") from None

    async def _setup(self, conn: AsyncBrokerConnection, b: Backoff) -> AsyncBrokerConnection:
        key = next((k for k, v in self._conns.items() if v is conn), None)
        try:
            await conn.connect(self.config.socket_connection_setup_timeout_ms / 1000)
        except KafkaConnectionError as exc:
            self.backoffs.failed(b, exc, self._now())
            self.meta.need_refresh = True  # the broker may have left the cluster
            raise
        finally:
            self._connecting.pop(key, None)
        b.succeeded()
        return conn

    def ready_connection(self, node_id: int) -> AsyncBrokerConnection | None:
        """The connection to ``node_id`` if it is ready, else None, never waiting."""
        self.check_fork()
        conn = self._conns.get(node_id)
        return conn if conn is not None and conn.ready and not conn.close_if_idle(self._max_idle) else None

    async def connection(self, node_id: int, deadline: float) -> AsyncBrokerConnection:
        addr = self.meta.brokers.get(node_id)
        if addr is None:
            self.meta.need_refresh = True
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return await self._connect(node_id, addr[0], addr[1], node_id, deadline)

    def next_connect_delay(self) -> float:
        """Seconds until some broker leaves its backoff (for sleeping when all are down)."""
        return self.backoffs.next_delay(self._now())

    async def any_connection(self, deadline: float) -> AsyncBrokerConnection:
        """As the sync Cluster.any_connection: known brokers first, then bootstrap
        addresses, least recently failed first."""
        self.check_fork()
        if self.meta.maybe_rebootstrap(self.backoffs, self._now()):
            # KIP-1102: the known brokers are gone (or one said REBOOTSTRAP_REQUIRED, and may
            # still hold a ready connection): their connections go with them, and the
            # bootstrap addresses are asked.
            for key in [k for k in self._conns if not isinstance(k, tuple)]:
                if key not in self._connecting:
                    self._conns.pop(key).close()
        for conn in self._conns.values():
            if conn.ready and not conn.close_if_idle(self._max_idle):
                return conn
        attempts = BrokerAttempts()
        for key, host, port, node_id in candidates(self.meta.brokers, self.config.bootstrap_servers,
                                                   self.backoffs, self._now(), self.meta.recovery):
            try:
                return await self._connect(key, host, port, node_id, deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                attempts.failed(host, port, exc)
        raise attempts.error()

    # -- running step generators (protocol/steps.py) --------------------------------------

    async def run(self, steps: Generator[Any, Any, Any], deadline: float | None, what: str, *,
                  prepare: Prepare | None = None, late: Late | None = None) -> Any:
        """Run ``steps`` to its end by ``deadline`` (the loop's clock): requests go to
        their broker, Refresh fetches the metadata, answers are awaited.  One not in by
        the deadline has KafkaTimeoutError ("``what``: no answer in time") thrown in, or,
        given ``late``, what ``late(step, conn)`` says (see protocol/steps.py's Late: the
        connection may be closed; the request is given up, not left to its own
        timeout).  ``prepare(step, conn)`` gives a request's (version, request) where
        the step's own do not do.  With no ``deadline`` (the transactions' exchanges,
        which go on in the background), a connection is waited for up to
        request_timeout_ms, a request has its own timeout and an Await waits for its
        answer."""
        async def do_step(step: Any) -> Any:
            return await self.do_step(step, deadline, what, prepare, late)

        return await drive_async(steps, do_step, self._now)

    async def do_step(self, step: Any, deadline: float | None, what: str,
                      prepare: Prepare | None = None, late: Late | None = None) -> Any:
        """One step of a generator :meth:`run` runs."""
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Refresh):
            return await self.refresh(step.timeout)
        if isinstance(step, Await):
            if deadline is None:
                return await asyncio.shield(step.answer)
            try:
                return await asyncio.wait_for(asyncio.shield(step.answer), max(0.0, deadline - self._now()))
            except asyncio.TimeoutError as exc:
                if _ended(step.answer, exc):
                    raise  # the answer's own error, e.g. a refresh's KafkaTimeoutError
                raise KafkaTimeoutError(f"{what}: no answer in time") from None
        assert isinstance(step, Request), step
        own = deadline is None  # the request's own timeout is the only one
        if deadline is None:
            deadline = self._now() + self.config.request_timeout_ms / 1000
        conn = await (self.any_connection(deadline) if step.node is None else self.connection(step.node, deadline))
        if prepare is not None:
            version, request = prepare(step, conn)
        else:
            version = step.version(conn.protocol.version_for(step.api), conn.protocol.finalized_features)
            request = step.build(version)
        if own:
            return await conn.request(step.api, request, version)
        if late is None:
            # The caller's deadline ends only its wait: the request keeps request_timeout_ms
            # (see conn.request), so a short one does not close a busy connection.
            return await conn.request(step.api, request, version, wait=max(0.001, deadline - self._now()))
        exchange = asyncio.ensure_future(conn.request(step.api, request, version))
        try:
            return await asyncio.wait_for(exchange, max(0.0, deadline - self._now()))
        except asyncio.TimeoutError as exc:
            if _ended(exchange, exc):
                raise
            abandon, err = late(step, conn)
            if abandon is not None:
                conn.close(abandon)
            raise err from None

    # -- metadata ------------------------------------------------------------------------

    async def bootstrap(self, timeout: float) -> None:
        """Fetch metadata from the first bootstrap address that answers, within
        ``timeout``: a refused or reset connection is tried again after its reconnect
        backoff until then; an address that cannot be resolved, or refuses for good,
        ends it at once (NoBrokersAvailableError, see protocol.metadata.bootstrap_steps)."""
        self.check_fork()

        def attempt(host: str, port: int, deadline: float) -> asyncio.Future:
            return _background(self._fetch_metadata(deadline, ("bootstrap", host, port)))

        failed = await self.run(bootstrap_steps(self.config.bootstrap_servers, timeout, attempt, self.backoffs),
                                self._now() + timeout, "Metadata")
        if failed is not None:
            raise failed

    def _refresh_attempt(self, deadline: float) -> asyncio.Future:
        """The refresh in flight (one at a time; callers share it), or a new one."""
        if self._refresh is None or self._refresh.done():
            self._refresh = _background(self._fetch_metadata(deadline))
        return self._refresh

    async def refresh(self, timeout: float) -> None:
        """Fetch metadata now, within ``timeout``."""
        self.check_fork()
        steps = refresh_steps(timeout, self.config.retry_backoff_ms / 1000, self._refresh_attempt,
                              self.next_connect_delay)
        await self.run(steps, self._now() + timeout, "Metadata")

    async def _fetch_metadata(self, deadline: float, bootstrap: tuple[str, str, int] | None = None) -> None:
        if bootstrap is None:
            conn = await self.any_connection(deadline)
        else:
            conn = await self._connect(bootstrap, bootstrap[1], bootstrap[2], None, deadline)
        request, asked = self.meta.request(conn.protocol.version_for(METADATA))
        # The request's own timeout, not the caller's deadline: refresh() stops waiting at its
        # deadline while this task goes on, and a request timed out closes the connection
        # with every request in flight on it: a short poll(), or a Metadata request held
        # behind a KIP-368 re-login, would close a healthy connection.
        try:
            resp = await conn.request(METADATA, request)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.meta.need_refresh = True
            raise
        self.meta.apply(resp, self._now())
        self.meta.answered(asked)  # a topic wanted meanwhile is asked for next
        for key in [k for k in self._conns if isinstance(k, tuple)]:
            if not self._connecting.get(key):
                self._conns.pop(key).close()  # bootstrap connections, now that node ids are known

    def maybe_refresh(self) -> None:
        """Start a refresh in the background when one is due (and allowed) and none runs."""
        self.check_fork()
        now = self._now()
        if (self._refresh is None or self._refresh.done()) and self.meta.refresh_due(now) \
                and self.meta.refresh_allowed(now):
            self._refresh = _background(self._fetch_metadata(now + self.config.request_timeout_ms / 1000))

    def refreshing(self) -> asyncio.Future | None:
        """The metadata refresh under way, if any (a poll waits for its answer too)."""
        fut = self._refresh
        return fut if fut is not None and not fut.done() else None

    async def partitions_for(self, topic: str, timeout: float) -> list[int]:
        """As the sync Cluster.partitions_for."""
        self.check_fork()
        steps = partitions_steps(self.meta, topic, timeout, self.config.retry_backoff_ms / 1000)
        return await self.run(steps, self._now() + timeout, "Metadata")

    async def request(self, node_id: int | None, api: Any, request: Any, timeout: float,
                      version: int | None = None) -> Any:
        """Send one request (to ``node_id``, or any broker) and wait up to ``timeout`` for
        its response; the request itself keeps request_timeout_ms (see conn.request)."""
        self.check_fork()
        deadline = self._now() + timeout
        conn = await (self.any_connection(deadline) if node_id is None else self.connection(node_id, deadline))
        return await conn.request(api, request, version, wait=max(0.001, deadline - self._now()))

    async def close(self) -> None:
        self.closed = True
        if self.forked:  # a forked child's copy: its sockets are let go of already
            self._conns.clear()
            return
        tasks = list(self._connecting.values()) + ([self._refresh] if self._refresh else [])
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        await asyncio.gather(*(conn.aclose() for conn in self._conns.values()))
        self._conns.clear()


def _background(coro: Any) -> asyncio.Future:
    """``coro`` as a task whose waiter may stop waiting at its deadline: its error is
    retrieved here, or asyncio logs "exception was never retrieved"."""
    task = asyncio.ensure_future(coro)
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return task


def _ended(fut: Any, exc: BaseException) -> bool:
    """Whether ``exc``, a TimeoutError out of asyncio.wait_for(``fut``), is ``fut``'s own
    (KafkaTimeoutError is a TimeoutError), not the wait's: then it keeps its class.  The
    object itself is compared, as ``fut`` may end while the wait, timed out, cancels."""
    return (isinstance(fut, asyncio.Future) and fut.done() and not fut.cancelled()
            and fut.exception() is exc)
