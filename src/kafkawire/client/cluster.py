"""Cluster metadata and the connections to every broker: bootstrap, leader routing,
refresh, reconnect backoff.

:class:`Cluster` keeps one :class:`~kafkawire.client.conn.BrokerConnection` per broker on
a shared :class:`~kafkawire.client.conn.Poller`.  It bootstraps from
``bootstrap_servers`` (each address in turn until one answers Metadata), routes by
partition leader, and refreshes its metadata when asked (after NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE or a connection error) and every
``metadata_max_age_ms``.  The loop that polls sets connections up without waiting for
them (:meth:`Cluster.ready_connection`, :meth:`Cluster.maybe_refresh`); calls with a
deadline of their own (bootstrap, refresh, request) wait for them up to it.  A broker
that fails to connect is not tried again before its
backoff passes: ``reconnect_backoff_ms`` doubling per failure up to
``reconnect_backoff_max_ms``, with +-20% jitter, so a cluster that is down costs a few
attempts a second, never a busy loop.

A broker closes a connection idle longer than its ``connections.max.idle.ms`` (10
minutes) without a word, and a request written on it then fails.  So a connection with
nothing in flight and no bytes moved for longer than ``connections_max_idle_ms`` (9
minutes) is closed when a call next picks it, and connected again as any closed one is;
no timer watches it meanwhile.

Not thread-safe: one thread drives a Cluster (the producer's sender thread, or the
consumer's caller).

After ``os.fork()`` the child's copy of a Cluster keeps its metadata, while its
:class:`~kafkawire.client.conn.Poller` lets go of the parent's sockets, epoll instance and
wake-up pipe (see :mod:`kafkawire.core.fork`): each broker is connected again, by the
child's own sockets, on next use.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Generator

from kafkawire.core.config import Config
from kafkawire.client.conn import BrokerConnection, Poller
from kafkawire.errors import BrokerResolutionError, KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError
from kafkawire.core.future import Future
from kafkawire.client.steps import run_blocking
from kafkawire.protocol import apis
from kafkawire.protocol.connection import max_idle
from kafkawire.protocol.metadata import (
    Backoff,
    Backoffs,
    BrokerAttempts,
    ClusterMetadata,
    ClusterView,
    PartitionMetadata,
    TopicMetadata,
    bootstrap_steps,
    candidates,
    ends_at_once,
    partitions_steps,
    refresh_steps,
    unreached,
)
from kafkawire.protocol.steps import Late, Prepare, Refresh, Request

__all__ = ["Cluster", "TopicMetadata", "PartitionMetadata"]

METADATA = apis.get("Metadata")


class Cluster(ClusterView):
    def __init__(self, config: Config, poller: Poller | None = None):
        self.config = config
        self.poller = poller or Poller()
        self._own_poller = poller is None
        self.bootstrap_addresses: list[tuple[str, int]] = list(config.bootstrap_servers)
        #: Brokers, topics and leaders, and when to refresh them (I/O-free).
        self.meta = ClusterMetadata(config.metadata_max_age_ms, config.retry_backoff_ms,
                                    config.metadata_recovery_strategy,
                                    config.metadata_recovery_rebootstrap_trigger_ms)
        self._conns: dict[Any, BrokerConnection] = {}  # node id, or ("bootstrap", host, port)
        self.backoffs = Backoffs(config.reconnect_backoff_ms, config.reconnect_backoff_max_ms)
        # connections_max_idle_ms in seconds, None for -1: a connection idle longer is
        # closed when next picked (BrokerConnection.close_if_idle) and connected again.
        self._max_idle = max_idle(config.connections_max_idle_ms)
        self._refresh_future: Future | None = None
        self._refresh_topics: frozenset[str] = frozenset()  # what that refresh asked for
        self.closed = False

    # -- connections --------------------------------------------------------------------

    def _new_conn(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        c = self.config
        return BrokerConnection(
            host, port, node_id=node_id, client_id=c.client_id,
            request_timeout=c.request_timeout_ms / 1000.0, ssl_context=c.ssl_context, sasl=c.sasl,
            version_overrides=c.api_version_overrides,
            max_in_flight=c.max_in_flight_requests_per_connection,
            send_buffer_bytes=c.send_buffer_bytes, receive_buffer_bytes=c.receive_buffer_bytes,
            poller=self.poller,
        )

    def backoff_remaining(self, host: str, port: int) -> float:
        return self.backoffs.remaining(host, port, time.monotonic())

    def _on_setup(self, b: Backoff, setup: Future) -> None:
        exc = setup.exception(0)
        if exc is None:
            b.succeeded()
            return
        self.backoffs.failed(b, exc, time.monotonic())
        self.meta.need_refresh = True  # the broker may have left the cluster

    def _conn_at(self, key: Any, host: str, port: int, node_id: int | None) -> BrokerConnection:
        """The (not ready) connection object for ``key`` at host:port: a new one when there
        is none or the metadata moved the node id to another address (a broker restarted
        elsewhere; Tansu brokers on shared storage all call themselves node 111)."""
        conn = self._conns.get(key)
        if conn is None or (conn.host, conn.port) != (host, port):
            if conn is not None:
                conn.close()
            conn = self._conns[key] = self._new_conn(host, port, node_id)
        return conn

    def _start(self, key: Any, host: str, port: int, node_id: int | None) -> BrokerConnection | None:
        """The connection for ``key`` if ready or connecting; else start connecting it,
        without waiting, if its backoff allows (None when it does not)."""
        conn = self._conns.get(key)
        if conn is not None and (conn.ready or conn.connecting):
            return conn
        b = self.backoffs.get(host, port)
        if b.next_attempt > time.monotonic():
            return None
        conn = self._conn_at(key, host, port, node_id)
        setup = conn.start_connect(self.config.socket_connection_setup_timeout_ms / 1000.0)
        setup.add_done_callback(lambda f: self._on_setup(b, f))
        return conn

    def _connect(self, key: Any, host: str, port: int, node_id: int | None,
                 deadline: float | None) -> BrokerConnection:
        """The ready connection for ``key``, connecting and waiting for it (up to
        ``deadline``, and socket_connection_setup_timeout_ms) if needed."""
        conn = self._conns.get(key)
        if conn is not None and conn.ready and not conn.close_if_idle(self._max_idle):
            return conn
        now = time.monotonic()
        if conn is not None and conn.connecting:
            # Started without waiting (ready_connection, maybe_refresh): wait for it.
            assert conn.setup is not None
            setup = conn.setup
            if not setup.wait(None if deadline is None else max(0.0, deadline - now)):
                raise KafkaTimeoutError(f"no time left to finish connecting to {conn.name}")
            return setup.result(0)
        refused = self.backoffs.refusal(host, port, now)
        if refused is not None:
            raise refused
        b = self.backoffs.get(host, port)
        conn = self._conn_at(key, host, port, node_id)
        timeout = self.config.socket_connection_setup_timeout_ms / 1000.0
        if deadline is not None:
            timeout = min(timeout, deadline - now)
            if timeout <= 0:
                raise KafkaTimeoutError(f"no time left to connect to {conn.name}")
        try:
            conn.connect(timeout)
        except KafkaConnectionError as exc:
            self.backoffs.failed(b, exc, time.monotonic())
            raise
        b.succeeded()
        return conn

    def connection(self, node_id: int, deadline: float | None = None) -> BrokerConnection:
        """The ready connection to broker ``node_id``, connecting and waiting if needed
        (may raise)."""
        addr = self.brokers.get(node_id)
        if addr is None:
            self.meta.need_refresh = True
            raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return self._connect(node_id, addr[0], addr[1], node_id, deadline)

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The connection to ``node_id`` if it is ready, else None, never waiting.

        A missing connection is started (if its backoff allows) and finishes inside
        later polls; callers keep their requests queued until then.  A broker in
        backoff, or not in the metadata, also requests a metadata refresh."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.ready and not conn.close_if_idle(self._max_idle):
            return conn
        addr = self.brokers.get(node_id)
        if addr is None:
            self.meta.need_refresh = True
            return None
        conn = self._start(node_id, addr[0], addr[1], node_id)
        if conn is None:
            self.meta.need_refresh = True
            return None
        return conn if conn.ready else None

    def connecting(self, node_id: int) -> bool:
        """True while the connection to ``node_id`` is being set up."""
        conn = self._conns.get(node_id)
        return conn is not None and conn.connecting

    def next_connect_delay(self) -> float:
        """Seconds until some broker leaves its backoff (for sleeping when all are down)."""
        return self.backoffs.next_delay(time.monotonic())

    def _candidates(self) -> list[tuple[Any, str, int, int | None]]:
        return candidates(self.brokers, self.bootstrap_addresses, self.backoffs, time.monotonic(),
                          self.meta.recovery)

    def _recover(self) -> None:
        """KIP-1102: the known brokers all gone for metadata_recovery_rebootstrap_trigger_ms
        (or a REBOOTSTRAP_REQUIRED answer): forget them and close their connections, so
        that what comes next asks the bootstrap addresses (see ClusterMetadata.maybe_rebootstrap).
        Asked before any ready connection is taken: a broker that answered
        REBOOTSTRAP_REQUIRED may still hold one."""
        if self.meta.maybe_rebootstrap(self.backoffs, time.monotonic()):
            for key in [k for k in self._conns if not isinstance(k, tuple)]:
                self._conns.pop(key).close()

    def any_ready_connection(self) -> BrokerConnection | None:
        """A ready connection to any broker, never waiting; None while there is none,
        after starting a connection to one more broker (not yet connecting, not in
        backoff), which finishes inside later polls."""
        self._recover()
        for conn in self._conns.values():
            if conn.ready and not conn.close_if_idle(self._max_idle):
                return conn
        busy = {(c.host, c.port) for c in self._conns.values() if c.connecting}
        for key, host, port, node_id in self._candidates():
            if (host, port) in busy or self.backoff_remaining(host, port) > 0:
                continue
            self._start(key, host, port, node_id)
            break
        return None

    def any_connection(self, deadline: float | None = None) -> BrokerConnection:
        """A ready connection to any broker: known brokers first, then bootstrap addresses.
        NoBrokersAvailableError when none connects; not retriable when every one refused
        for a reason waiting does not fix (a TLS certificate, a protocol mismatch)."""
        self._recover()
        for conn in self._conns.values():
            if conn.ready and not conn.close_if_idle(self._max_idle):
                return conn
        attempts = BrokerAttempts()
        for key, host, port, node_id in self._candidates():
            try:
                return self._connect(key, host, port, node_id, deadline)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                attempts.failed(host, port, exc)
        raise attempts.error()

    # -- running step generators (protocol/steps.py) --------------------------------------

    def run(self, steps: Generator[Any, Any, Any], deadline: float, what: str, *,
            prepare: Prepare | None = None, late: Late | None = None, bootstrap: bool = True) -> Any:
        """Run ``steps`` here, blocking, by ``deadline`` (time.monotonic()): requests go
        to their broker (connecting and waiting for it), Refresh fetches the metadata,
        sleeps poll the connections.  An answer not in by the deadline has
        KafkaTimeoutError ("``what``: no answer in time") thrown in, or, given ``late``,
        what ``late(step, conn)`` says of the request waited for (see protocol/steps.py's
        Late: its connection may be closed).  ``prepare(step, conn)`` gives a request's
        (version, request) where the step's own version and build do not do.  Until a
        Metadata answer has come, the cluster bootstraps first (unless not ``bootstrap``),
        within the same deadline (the clients' constructors ask no broker: see
        :meth:`check_addresses`)."""
        if bootstrap and not self.meta.brokers:
            self.bootstrap(max(0.0, deadline - time.monotonic()))
        sent: list[Any] = []  # the Request step and connection last sent

        def on_late() -> BaseException:
            if late is None or not sent:
                return KafkaTimeoutError(f"{what}: no answer in time")
            abandon, err = late(*sent)
            if abandon is not None:
                sent[1].close(abandon)
            return err

        return run_blocking(steps, deadline, on_late, lambda step: self.start_step(step, deadline, prepare, sent),
                            sleep=self.poll)

    def start_step(self, step: Any, deadline: float, prepare: Prepare | None = None,
                   sent: list[Any] | None = None) -> Future:
        """Begin a Request step (connecting to its broker, waiting up to ``deadline``)
        and return its answer's future (``sent`` gets the step and its connection); a
        Refresh step is done here, blocking."""
        if isinstance(step, Refresh):
            self.refresh(step.timeout)
            done = Future()
            done.set_result(None)
            return done
        assert isinstance(step, Request)
        conn = self.any_connection(deadline) if step.node is None else self.connection(step.node, deadline)
        if sent is not None:
            sent[:] = [step, conn]
        return _send_step(conn, step, prepare)

    def try_step(self, step: Any) -> Future | None:
        """Begin a step without waiting, for a loop that moves a StepRun on between its
        polls (the producer's sender thread): a Request on a ready connection, a Refresh
        as a Metadata request (or the one in flight); None while no connection is ready
        (one is started and finishes inside later polls; StepRun asks again)."""
        if isinstance(step, Refresh):
            fut = self._refresh_future
            if fut is not None and not fut.done() and self.interest <= self._refresh_topics:
                return fut
            conn = self.any_ready_connection()
            return None if conn is None else self._send_metadata(conn)
        assert isinstance(step, Request)
        conn = self.any_ready_connection() if step.node is None else self.ready_connection(step.node)
        return None if conn is None else _send_step(conn, step)

    # -- metadata -----------------------------------------------------------------------

    def bootstrap(self, timeout: float) -> None:
        """Fetch metadata from the first bootstrap address that answers, within ``timeout``:
        a refused or reset connection is tried again after its reconnect backoff until
        then; an address that cannot be resolved, or
        refuses for good, ends it at once (NoBrokersAvailableError, or the login's error;
        see protocol.metadata.bootstrap_steps)."""
        def attempt(host: str, port: int, deadline: float) -> Future:
            return self._send_metadata(self._connect(("bootstrap", host, port), host, port, None, deadline))

        steps = bootstrap_steps(self.bootstrap_addresses, timeout, attempt, self.backoffs)
        failed = self.run(steps, time.monotonic() + timeout, "Metadata", bootstrap=False)
        if failed is not None:
            raise failed

    def check_addresses(self) -> None:
        """A client constructor's check of ``bootstrap_servers``, which opens no
        connection and waits for no broker: when not one of the addresses' host names
        resolves, that is a configuration error, raised now (NoBrokersAvailableError,
        also a BrokerResolutionError; not retriable), as the Java client refuses
        bootstrap.servers that resolve nowhere.  Anything else (nothing listening yet, a
        listener that never answers, a certificate, a login) is met by the first call
        that needs the cluster: it retries what waiting may fix up to its own deadline,
        and raises what no wait fixes at once."""
        failed = []
        for host, port in dict.fromkeys(self.bootstrap_addresses):
            try:
                socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
                return
            except (socket.gaierror, UnicodeError) as exc:  # UnicodeError: no valid name (a label too long)
                why = exc.strerror or exc if isinstance(exc, socket.gaierror) else f"not a valid host name ({exc})"
                failed.append(BrokerResolutionError(
                    f"cannot resolve broker {host}:{port}: {why}; check the host name in bootstrap_servers",
                    host=host, port=port))
        if failed:
            raise NoBrokersAvailableError.summing(
                "no address in bootstrap_servers resolves; tried:\n  "
                + "\n  ".join(f"BrokerResolutionError: {e}" for e in failed), failed, final=True)

    def refused_for_good(self, started: float, timeout: float) -> BaseException | None:
        """While no broker has answered yet: the error of a bootstrap that no wait can
        fix (every address refused for good, or a login was refused), found by the
        connections set up without waiting (any_ready_connection, maybe_refresh), for a
        call begun at ``started`` with ``timeout`` seconds to raise at once; else None.
        A refusal counts until its address leaves its reconnect backoff: the caller's
        polls then try again, and that attempt decides."""
        if self.meta.brokers:
            return None
        now = time.monotonic()
        return unreached(self.backoffs, self.bootstrap_addresses, now - started, timeout, False, now)

    def _send_metadata(self, conn: BrokerConnection) -> Future:
        version = conn.version_for(METADATA)
        request, asked = self.meta.request(version)
        self._refresh_topics = asked
        inner = conn.send(METADATA, request, version)
        out = Future(self.poller.poll)

        def done(f: Future) -> None:
            if f.failed():
                self.meta.need_refresh = True
                exc = f.exception()
                if isinstance(exc, KafkaConnectionError) and ends_at_once(exc):
                    # Refused for good on a connection already set up (a SASL listener
                    # dropping a client that did not log in): kept as the address's
                    # failure, so that a caller waiting for the sender thread's bootstrap
                    # (see unreached) is told at once, and the address is not asked
                    # again before its backoff.
                    self.backoffs.failed(self.backoffs.get(conn.host, conn.port), exc, time.monotonic())
                out.set_exception(exc)
            else:
                self._apply_metadata(f.result())
                self.meta.answered(asked)
                out.set_result(self)

        inner.add_done_callback(done)
        self._refresh_future = out
        return out

    def _apply_metadata(self, resp: Any) -> None:
        self.meta.apply(resp, time.monotonic())
        # Connections keyed by a bootstrap address are kept only until the real ids are known.
        for key in [k for k in self._conns if isinstance(k, tuple)]:
            conn = self._conns[key]
            if not conn.in_flight and not conn.connecting:
                conn.close()
                del self._conns[key]

    def refresh_due(self) -> bool:
        return self.meta.refresh_due(time.monotonic())

    def maybe_refresh(self) -> None:
        """Start a metadata refresh (without waiting) when one is due and none is running."""
        if self._refresh_future is not None and not self._refresh_future.done():
            return
        if not self.refresh_due():
            return
        if not self.meta.refresh_allowed(time.monotonic()):
            return
        # Never waits for a connection: the refresh goes out from a later call, once
        # one is ready (its progress ends the poll that the caller waits in).
        conn = self.any_ready_connection()
        if conn is not None:
            self._send_metadata(conn)

    def _refresh_attempt(self, deadline: float) -> Future:
        fut = self._refresh_future
        if fut is None or fut.done() or not self.interest <= self._refresh_topics:
            # No refresh in flight (maybe_refresh's) that asks for these topics.
            fut = self._send_metadata(self.any_connection(deadline))
        return fut

    def refresh(self, timeout: float, topics: Any = ()) -> None:
        """Fetch metadata now (for ``topics`` too), waiting up to ``timeout`` seconds."""
        self.interest.update(topics)
        steps = refresh_steps(timeout, self.config.retry_backoff_ms / 1000, self._refresh_attempt,
                              self.next_connect_delay)
        # Any broker will do, the bootstrap addresses too: no bootstrap of its own first.
        self.run(steps, time.monotonic() + timeout, "Metadata", bootstrap=False)

    def partitions_for(self, topic: str, timeout: float) -> list[int]:
        """Partition ids of ``topic``, fetching its metadata (and waiting for a leaderless
        new topic to settle) within ``timeout`` seconds."""
        steps = partitions_steps(self.meta, topic, timeout, self.config.retry_backoff_ms / 1000)
        return self.run(steps, time.monotonic() + timeout, "Metadata")

    # -- requests -----------------------------------------------------------------------

    def request(self, node_id: int | None, api: Any, request: Any, timeout: float,
                version: int | None = None) -> Any:
        """Send one request (to ``node_id``, or any broker) and wait for its response."""
        deadline = time.monotonic() + timeout
        conn = self.any_connection(deadline) if node_id is None else self.connection(node_id, deadline)
        fut = conn.send(api, request, version)
        if not fut.wait(max(0.0, deadline - time.monotonic())):
            raise KafkaTimeoutError(f"{api.name} to {conn.name}: no response within {timeout:g}s")
        return fut.result()

    def poll(self, timeout: float) -> None:
        self.poller.poll(timeout)

    def close(self) -> None:
        self.closed = True
        for conn in list(self._conns.values()):
            conn.close()
        self._conns.clear()
        if self._own_poller:
            self.poller.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _send_step(conn: BrokerConnection, step: Request, prepare: Prepare | None = None) -> Future:
    if prepare is not None:
        version, request = prepare(step, conn)
    else:
        version = step.version(conn.version_for(step.api), conn.protocol.finalized_features)
        request = step.build(version)
    return conn.send(step.api, request, version)
