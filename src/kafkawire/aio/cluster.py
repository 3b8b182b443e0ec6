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
import random
from typing import Any

from kafkawire.aio.conn import AsyncBrokerConnection
from kafkawire.core import fork as _fork
from kafkawire.core.fork import ForkedClientError
from kafkawire.core.config import Config
from kafkawire.core.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError
from kafkawire.protocol import apis
from kafkawire.protocol.metadata import Backoff, ClusterMetadata, bootstrap_failure

__all__ = ["AsyncCluster"]

METADATA = apis.get("Metadata")


class AsyncCluster:
    def __init__(self, config: Config):
        self.config = config
        self.meta = ClusterMetadata(config.metadata_max_age_ms, config.retry_backoff_ms)
        self._conns: dict[Any, AsyncBrokerConnection] = {}
        self._connecting: dict[Any, asyncio.Task] = {}
        self._backoff: dict[tuple[str, int], Backoff] = {}
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

    leader_for = property(lambda self: self.meta.leader_for)
    topics = property(lambda self: self.meta.topics)
    brokers = property(lambda self: self.meta.brokers)
    interest = property(lambda self: self.meta.interest)

    @property
    def all_topics(self) -> bool:
        return self.meta.all_topics

    @all_topics.setter
    def all_topics(self, value: bool) -> None:
        self.meta.all_topics = value

    def request_refresh(self) -> None:
        self.meta.need_refresh = True

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    # -- connections ---------------------------------------------------------------------

    async def _connect(self, key: Any, host: str, port: int, node_id: int | None,
                       deadline: float) -> AsyncBrokerConnection:
        self.check_fork()
        conn = self._conns.get(key)
        if conn is not None and conn.ready:
            return conn
        task = self._connecting.get(key)
        if task is None:
            b = self._backoff.setdefault((host, port), Backoff())
            if b.next_attempt > self._now() and b.last_error is not None:
                raise b.last_error
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
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"connecting to {host}:{port} did not finish in time") from None

    async def _setup(self, conn: AsyncBrokerConnection, b: Backoff) -> AsyncBrokerConnection:
        key = next((k for k, v in self._conns.items() if v is conn), None)
        try:
            await conn.connect(self.config.socket_connection_setup_timeout_ms / 1000)
        except KafkaConnectionError as exc:
            b.failed(exc, self._now(), self.config.reconnect_backoff_ms,
                     self.config.reconnect_backoff_max_ms, random.uniform(0.8, 1.2))
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
        return conn if conn is not None and conn.ready else None

    async def connection(self, node_id: int, deadline: float) -> AsyncBrokerConnection:
        addr = self.meta.brokers.get(node_id)
        if addr is None:
            self.meta.need_refresh = True
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return await self._connect(node_id, addr[0], addr[1], node_id, deadline)

    async def any_connection(self, deadline: float) -> AsyncBrokerConnection:
        self.check_fork()
        for conn in self._conns.values():
            if conn.ready:
                return conn
        candidates = [(nid, h, p, nid) for nid, (h, p) in self.meta.brokers.items()]
        candidates += [(("bootstrap", h, p), h, p, None) for h, p in self.config.bootstrap_servers]
        tried = []
        final = bool(candidates)
        for key, host, port, node_id in candidates:
            try:
                return await self._connect(key, host, port, node_id, deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                tried.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
                final = final and not getattr(exc, "retriable", True)
        err = NoBrokersAvailableError("no broker could be reached; tried:\n  " + "\n  ".join(tried)
                                      + "\ncheck bootstrap_servers and that the brokers are running")
        # Every broker refused for a reason waiting does not fix (a TLS certificate or
        # protocol mismatch): not retried until the deadline, as the sync shell does not.
        err.retriable = not final
        raise err

    # -- metadata ------------------------------------------------------------------------

    async def bootstrap(self, timeout: float) -> None:
        """Fetch metadata through the first bootstrap address that takes a connection,
        within ``timeout``; as the sync shell's bootstrap, each address is tried once, so
        nothing listening fails at once (NoBrokersAvailableError) instead of at the limit."""
        self.check_fork()
        start = self._now()
        deadline = start + timeout
        failures: list[str] = []
        connected = False
        for host, port in self.config.bootstrap_servers:
            if self._now() >= deadline:
                break
            try:
                await self._connect(("bootstrap", host, port), host, port, None, deadline)
                connected = True
                break
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                failures.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
        if not connected:
            raise NoBrokersAvailableError(bootstrap_failure(failures, self._now() - start, timeout))
        await self.refresh(max(0.001, deadline - self._now()))

    async def refresh(self, timeout: float) -> None:
        """Fetch metadata now (one refresh at a time; callers share it), within ``timeout``."""
        self.check_fork()
        deadline = self._now() + timeout
        last: BaseException | None = None
        while True:
            remaining = deadline - self._now()
            if remaining <= 0:
                raise KafkaTimeoutError(f"cluster metadata not refreshed within {timeout:g}s"
                                        + (f"; last error: {last}" if last else ""))
            if self._refresh is None or self._refresh.done():
                self._refresh = asyncio.ensure_future(self._fetch_metadata(deadline))
                # A caller that stops waiting at its deadline leaves the task to fail
                # alone: retrieve its error, or asyncio logs "exception was never retrieved".
                self._refresh.add_done_callback(lambda t: t.cancelled() or t.exception())
            try:
                await asyncio.wait_for(asyncio.shield(self._refresh), remaining)
                return
            except asyncio.TimeoutError:
                continue
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                if not exc.retriable:
                    raise
                last = exc
                await asyncio.sleep(min(self.config.retry_backoff_ms / 1000, max(0.0, deadline - self._now())))

    async def _fetch_metadata(self, deadline: float) -> None:
        conn = await self.any_connection(deadline)
        request, _topics = self.meta.request(conn.protocol.version_for(METADATA))
        # The request's own timeout, not the caller's deadline: refresh() stops waiting at its
        # deadline while this task goes on, and a request timed out closes the connection
        # with every request in flight on it (a short poll() once did so, and a Metadata
        # request held behind a KIP-368 re-login missed such a deadline every few seconds).
        resp = await conn.request(METADATA, request)
        self.meta.apply(resp, self._now())
        for key in [k for k in self._conns if isinstance(k, tuple)]:
            if not self._connecting.get(key):
                self._conns.pop(key).close()  # bootstrap connections, now that node ids are known

    def maybe_refresh(self) -> None:
        """Start a refresh in the background when one is due (and allowed) and none runs."""
        self.check_fork()
        now = self._now()
        if (self._refresh is None or self._refresh.done()) and self.meta.refresh_due(now) \
                and self.meta.refresh_allowed(now):
            self._refresh = asyncio.ensure_future(self._fetch_metadata(now + self.config.request_timeout_ms / 1000))
            self._refresh.add_done_callback(lambda t: t.cancelled() or t.exception())  # seen later, if at all

    async def partitions_for(self, topic: str, timeout: float) -> list[int]:
        self.check_fork()
        asked = self._now()
        deadline = asked + timeout
        self.meta.interest.add(topic)
        while True:
            parts = self.meta.partitions(topic, asked)  # a permanent error in a new answer raises
            if parts is not None:
                return parts
            remaining = deadline - self._now()
            if remaining <= 0:
                raise KafkaTimeoutError(f"topic {topic!r} not available within {timeout:g}s: "
                                        f"{self.meta.why_unavailable(topic)}")
            if topic in self.meta.topics:
                await asyncio.sleep(min(self.config.retry_backoff_ms / 1000, remaining))
            self.meta.need_refresh = True
            try:
                await self.refresh(max(0.001, deadline - self._now()))
            except KafkaTimeoutError:
                continue  # out of time: the check above says what the topic lacks

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
