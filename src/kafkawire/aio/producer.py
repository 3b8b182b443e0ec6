"""The asyncio producer, driving the same I/O-free
:class:`~kafkawire.protocol.accumulator.Accumulator` as the sync :class:`~kafkawire.Producer`:
batching, linger, memory accounting, which batches go to which broker, the Produce
request, and retries or failures from its answer are decided there once.

::

    async with AsyncProducer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as p:
        fut = await p.send("events", b"value", key=b"k")   # queued; fut resolves when acknowledged
        meta = await fut                                     # RecordMetadata
        meta = await p.send_and_wait("events", b"v2")

``send()`` waits only for metadata of a new topic and for buffer space, both bounded by
``max_block_ms``; ``flush(timeout)`` and ``close(timeout)`` by theirs.  One event loop
drives a producer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterable, Mapping

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.core import fork as _fork
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import (
    ConfigError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from kafkawire.core.partitioner import StickyPartitioner, check_partition, choose_partition
from kafkawire.core.records import RecordFuture, RecordMetadata
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import Accumulator, Appender, Batch
from kafkawire.protocol.idempotence import INIT_PRODUCER_ID
from kafkawire.protocol.metadata import check_topic_name, list_topics_steps
from kafkawire.protocol.producer import NEED_COUNT, lone_produce_request, partition_check
from kafkawire.protocol.transactions import TransactionAbortedError, TransactionManager

__all__ = ["AsyncProducer", "AsyncRecordFuture"]

PRODUCE = apis.get("Produce")


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class AsyncRecordFuture(RecordFuture):
    """The future of one record: ``await`` it for its RecordMetadata.

    As lean as the sync producer's (a tuple over the batch's one future): making an
    asyncio future and a callback per record would cost more than the send itself."""

    __slots__ = ()

    def __await__(self) -> Any:
        value = yield from self[0].future.__await__()
        return self._metadata(value)

    def result(self, timeout: float | None = None) -> RecordMetadata:  # noqa: ARG002 - no waiting here
        """The metadata, once done (raises asyncio.InvalidStateError before)."""
        return self._metadata(self[0].future.result())

    def exception(self, timeout: float | None = None) -> BaseException | None:  # noqa: ARG002
        return self[0].future.exception() or self._part_error(self[0].future.result())

    def add_callback(self, fn: Any) -> None:
        """Call ``fn(metadata, None)`` or ``fn(None, exception)`` when the record is done."""

        def done(f: asyncio.Future) -> None:
            exc = None if f.cancelled() else f.exception() or self._part_error(f.result())
            if f.cancelled():
                fn(None, asyncio.CancelledError())
            elif exc is not None:
                fn(None, exc)
            else:
                fn(self._metadata(f.result()), None)

        self[0].future.add_done_callback(done)


class AsyncProducer:
    """An asyncio Kafka producer; options as :class:`kafkawire.Producer`'s."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        self.config = c = Config.producer(**merge_options("AsyncProducer", config, options))
        self.cluster = AsyncCluster(c)
        self._acc = Accumulator(c, self._new_future)
        # Transactions: coordinator exchanges (protocol/transactions.py generators) run one
        # at a time under _txn_lock, as tasks a caller's timeout does not cancel.
        self._txn: TransactionManager | None = None
        if c.transactional_id is not None:
            self._txn = self._acc.txn = TransactionManager(self._acc.identity, c.retry_backoff_ms)
        self._txn_lock: asyncio.Lock | None = None
        self._txn_adding: asyncio.Task | None = None
        self._sticky = StickyPartitioner()
        self._max_record_size = self._acc.max_record_size
        self._batch_size = self._acc.batch_size
        # {topic: partition count} from the Metadata answers (the cluster's, updated in
        # place): the Appender's sticky and murmur2 partitions for records sent without one.
        self._counts = self.cluster.meta.partition_counts
        # send()'s one call (Appender.offer); no lock: one event loop thread.  A user's
        # partitioner runs only on send()'s full path.
        default = c.partitioner is None
        self._offer = Appender(self._acc.open, self._batch_size, None, AsyncRecordFuture, time.time_ns, None,
                               self._sticky_partition if default else None,
                               self._counts if default else None).offer
        # send()'s hot path is allowed: no serializers, batches smaller than the largest
        # record, started and not closing.
        self._fast = False  # set by start()
        self._linger = c.linger_ms / 1000
        self._expects_answer = c.acks != 0
        self._max_in_flight = c.max_in_flight_requests_per_connection
        # The sender task sleeps on _wake_fut until its next timer or a _kick(); _kicked
        # keeps a kick that came while it was busy.
        self._wake_fut: asyncio.Future | None = None
        self._kicked = False
        self._space: asyncio.Event | None = None
        self._sender: asyncio.Task | None = None
        self._requests: set[asyncio.Task] = set()
        self._in_flight: dict[int, int] = {}
        self._batches_in_flight = 0
        self._connecting: dict[int, asyncio.Task] = {}
        self._flushing = 0
        self._closing = False
        self._closed = False
        _fork.register(self)

    def _after_fork_in_child(self) -> None:
        # The child's copy cannot run the parent's event loop tasks: send() must take
        # its full path, which raises ForkedClientError (aio/cluster.py).
        self._fast = False

    @staticmethod
    def _new_future() -> asyncio.Future:
        return asyncio.get_running_loop().create_future()

    def _now(self) -> float:
        # start() binds the loop's own clock here instead: one call, no loop lookup.
        return asyncio.get_running_loop().time()

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, timeout: float | None = None) -> None:
        """Bootstrap (within ``timeout``, default max_block_ms) and start sending."""
        if self._sender is None:
            if self._closing:
                raise ClientClosedError("the producer is closed")
            c = self.config
            await self.cluster.bootstrap(c.max_block_ms / 1000 if timeout is None else timeout)
            self._now = asyncio.get_running_loop().time  # type: ignore[method-assign]
            self._space = asyncio.Event()
            self._sender = asyncio.ensure_future(self._run())
            self._fast = (c.key_serializer is None and c.value_serializer is None and self._txn is None
                          and self._batch_size <= self._max_record_size)

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is acknowledged or has
        failed; KafkaTimeoutError after ``timeout`` seconds."""
        self.cluster.check_fork()
        pending = [b.future for b in self._acc.incomplete]
        if not pending:
            return
        self._flushing += 1
        self._kick()
        try:
            done, not_done = await asyncio.wait(pending, timeout=timeout)
            if not_done:
                raise KafkaTimeoutError(f"flush: {len(not_done)} batch(es) still unacknowledged after {timeout:g}s")
        finally:
            self._flushing -= 1

    def metrics(self) -> dict[str, Any]:
        """As :meth:`kafkawire.Producer.metrics`."""
        return self._acc.metrics()

    async def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``), stop sending and close the connections; records still
        unsent fail with ClientClosedError."""
        if self._closed:
            return
        self._fast = False
        if self.cluster.forked:  # a forked child's copy: the parent's loop owns the tasks
            self._closed = self._closing = True
            await self.cluster.close()
            return
        self._closing = True
        try:
            if self._sender is not None:
                await self.flush(timeout)
        except KafkaTimeoutError:
            pass
        finally:
            self._closed = True
            tasks = [t for t in [self._sender, self._txn_adding, *self._requests, *self._connecting.values()]
                     if t is not None]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=1.0)
            err = ClientClosedError("the producer was closed before this record was delivered")
            for b in self._acc.drop_all():
                if not b.future.done():
                    b.future.set_exception(err)
            await self.cluster.close()

    # -- sending -----------------------------------------------------------------------------

    async def _num_partitions(self, topic: str) -> int:
        # An error from an earlier answer is not raised here: partitions_for asks again.
        parts = self.cluster.meta.partitions(topic, self._now())
        if parts is None:
            check_topic_name(topic)
            parts = await self.cluster.partitions_for(topic, self.config.max_block_ms / 1000)
        return len(parts)

    async def partitions_for(self, topic: str) -> list[int]:
        return list(range(await self._num_partitions(topic)))

    async def list_topics(self, timeout: float | None = None, include_internal: bool = False
                          ) -> dict[str, list[int]]:
        """Every topic of the cluster and its partition ids (internal ones only with
        ``include_internal``), as the consumer's, within ``timeout`` seconds (default
        max_block_ms)."""
        if self._closing:
            raise ClientClosedError("the producer is closed")
        wait = self.config.max_block_ms / 1000 if timeout is None else timeout
        return await self.cluster.run(list_topics_steps(include_internal), self._now() + wait, "Metadata")

    async def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                   timestamp: int | None = None, headers: Iterable[tuple[str, Any]] | None = None
                   ) -> AsyncRecordFuture:
        """Queue one record; returns a future to ``await`` for its RecordMetadata once
        the broker acknowledges it (per ``acks``)."""
        # The hot path, as the sync producer's (one call into the accumulator): bytes, no
        # headers, a partition (explicit, sticky or the key's) whose open batch has room,
        # no serializers.  Everything else takes the rest of this coroutine (not another:
        # a record sent one at a time makes a new batch, every time).
        if self._fast:
            fut = self._offer(topic, value, key, partition, timestamp, headers)
            if fut is not None:
                return fut
        if self._closing:
            raise ClientClosedError("send() after close(): the producer is closed")
        cluster = self.cluster
        cluster.check_fork()
        if self._sender is None:
            await self.start()
        acc = self._acc
        key, value, headers, timestamp, size = acc.prepare(key, value, headers, timestamp,
                                                           time.time_ns() // 1_000_000)
        sticky = False
        meta = cluster.meta
        if partition is None:
            n = await self._num_partitions(topic)
            partition, sticky = choose_partition(topic, key, n, self.config.partitioner, self._sticky)
        else:
            if type(partition) is not int or partition < 0:
                partition = check_partition(partition)
            n = self._counts.get(topic)
            if n is None or partition >= n:  # else the partition exists as of the latest answer
                await self._check_partition(topic, partition)
        meta.interest.add(topic)
        record = (key, value, timestamp, headers) if headers else (key, value, timestamp)
        if acc.takes_lone():
            fut = self._send_lone(topic, partition, record, size)
            if fut is not None:
                if sticky:
                    self._sticky.batch_done(topic, partition, await self._num_partitions(topic))
                return fut
        tp = (topic, partition)
        reserve = acc.admit(tp, size)
        if reserve and not acc.has_room(reserve):
            await self._wait_for_room(reserve)
        now = self._now()
        batch, index, made, closed = acc.append(tp, record, size, reserve, now)
        if closed or (made and self._linger == 0):
            if sticky:
                self._sticky.batch_done(topic, partition, await self._num_partitions(topic))
            # Written here and now, not on the sender task's next turn (issue 23): what
            # this pass cannot send is the sender's.
            if not self._send_alone(batch, now) and self._dispatch(now)[1]:
                self._kick()
        elif made:
            self._kick()  # the sender's wait may end after this batch's linger
        return AsyncRecordFuture((batch, index, timestamp))

    def _sticky_partition(self, topic: str) -> int | None:
        # An unkeyed record's partition on the hot path (KIP-480), once the count is known.
        n = self._counts.get(topic)
        return self._sticky.partition(topic, n) if n else None

    async def send_and_wait(self, *args: Any, **kwargs: Any) -> RecordMetadata:
        """send(), then wait for the acknowledgement."""
        return await (await self.send(*args, **kwargs))

    async def _check_partition(self, topic: str, partition: int) -> None:
        """Refuse an explicit partition the topic lacks (protocol/producer.py decides)."""
        count = fresh = None
        while True:
            need = partition_check(topic, partition, count, fresh)
            if need is None:
                return
            if need is NEED_COUNT:
                count = await self._num_partitions(topic)
            else:
                await self.cluster.refresh(self.config.max_block_ms / 1000)
                fresh = len(self.cluster.meta.partitions(topic) or ())

    async def _wait_for_room(self, size: int) -> None:
        deadline = self._now() + self.config.max_block_ms / 1000
        while wait := self._acc.room_wait(size, self._now(), deadline):
            assert self._space is not None
            self._space.clear()
            try:
                await asyncio.wait_for(self._space.wait(), wait)
            except asyncio.TimeoutError:
                pass

    # -- transactions -------------------------------------------------------------------

    def _transactions(self, call: str) -> TransactionManager:
        self.cluster.check_fork()
        if self._txn is None:
            raise ConfigError(f"{call} needs a transactional producer: set transactional_id")
        return self._txn

    async def _txn_steps(self, steps: Any) -> Any:
        """Run a protocol/transactions.py generator to its end, one at a time."""
        if self._txn_lock is None:
            self._txn_lock = asyncio.Lock()
        async with self._txn_lock:
            # No deadline of the run's: each request has its own timeout (see AsyncCluster.run).
            return await self.cluster.run(steps, None, "transactions")

    async def _txn_call(self, steps: Any, timeout: float | None, call: str) -> Any:
        task = asyncio.ensure_future(self._txn_steps(steps))
        try:
            return await asyncio.wait_for(asyncio.shield(task), self._block(timeout))
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"{call} not done in time; it goes on in the background: "
                                    f"call it again to wait for it") from None

    def _block(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000 if timeout is None else timeout

    async def init_transactions(self, timeout: float | None = None) -> None:
        """As :meth:`kafkawire.Producer.init_transactions`."""
        txn = self._transactions("init_transactions()")
        await self.start()
        await self._txn_call(txn.init_steps(), timeout, "init_transactions()")

    def begin_transaction(self) -> None:
        """As :meth:`kafkawire.Producer.begin_transaction`."""
        self._transactions("begin_transaction()").begin()

    async def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: Any,
                                          timeout: float | None = None) -> None:
        """As :meth:`kafkawire.Producer.send_offsets_to_transaction`."""
        txn = self._transactions("send_offsets_to_transaction()")
        norm = {(tp[0], tp[1]): int(getattr(off, "offset", off)) for tp, off in offsets.items()}
        await self._txn_call(txn.send_offsets_steps(norm, group), timeout, "send_offsets_to_transaction()")

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """As :meth:`kafkawire.Producer.commit_transaction`."""
        txn = self._transactions("commit_transaction()")
        deadline = self._now() + self._block(timeout)
        txn.commit_or_abort(True)
        while True:  # flushed, or a failed record makes the commit impossible
            try:
                await self.flush(min(0.2, max(0.0, deadline - self._now())))
                break
            except KafkaTimeoutError:
                if self._now() >= deadline:
                    raise
                if txn.state != "COMMITTING":
                    break
        await self._txn_call(txn.end_steps(True), max(0.0, deadline - self._now()), "commit_transaction()")

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """As :meth:`kafkawire.Producer.abort_transaction`."""
        txn = self._transactions("abort_transaction()")
        deadline = self._now() + self._block(timeout)
        txn.commit_or_abort(False)
        err = TransactionAbortedError("the transaction was aborted before this record was sent")
        for b in self._acc.drop_unsent():
            self._complete(b, err)
        await self.flush(max(0.0, deadline - self._now()))
        await self._txn_call(txn.end_steps(False), max(0.0, deadline - self._now()), "abort_transaction()")

    def _kick(self) -> None:
        self._kicked = True
        fut = self._wake_fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def _sleep(self, seconds: float) -> None:
        """Until ``seconds`` pass or _kick() (one future and one timer: no task)."""
        if self._kicked:
            return
        fut = self._wake_fut = asyncio.get_running_loop().create_future()
        timer = asyncio.get_running_loop().call_later(max(seconds, 0.0), _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._wake_fut = None

    # -- the sender task ----------------------------------------------------------------------

    async def _run(self) -> None:
        acc = self._acc
        cluster = self.cluster
        while not self._closed:
            self._kicked = False
            cluster.maybe_refresh()
            now = self._now()
            if acc.init_wanted(now):
                self._spawn(self._init_producer_id())
            if self._txn is not None and self._txn.wants_add() and (
                    self._txn_adding is None or self._txn_adding.done()):
                unknown = self._txn.topics_to_look_up(cluster.leader_for)
                if unknown:
                    cluster.meta.interest.update(unknown)
                    cluster.meta.need_refresh = True
                self._txn_adding = asyncio.ensure_future(self._txn_steps(self._txn.add_partitions_steps()))
                self._txn_adding.add_done_callback(lambda t: (t.cancelled() or t.exception(), self._kick()))
            wait, _left = self._dispatch(now)
            await self._sleep(wait)

    def _dispatch(self, now: float) -> tuple[float, bool]:
        """Send the batches due: how long until something else is due, and whether a
        batch is left that only the sender task moves on (no leader or connection yet,
        too many requests in flight)."""
        acc = self._acc
        cluster = self.cluster
        by_node, expired, wait, leaderless = acc.collect(
            now, cluster.leader_for, self._flushing > 0 or self._closing)
        self._space_freed()
        if leaderless:
            cluster.meta.interest.update(leaderless)
            cluster.meta.need_refresh = True
        for b in expired:
            self._complete(b, acc.expired_error(b, cluster.meta))
        left = bool(leaderless)
        for node, batches in by_node.items():
            conn = cluster.ready_connection(node)
            if conn is None:
                self._connect(node)
                wait = min(wait, 0.05)
                left = True
                continue
            while batches and self._in_flight.get(node, 0) < self._max_in_flight:
                batches = self._send_produce(node, conn, batches, now)
            left = left or bool(batches)
        return wait, left

    def _send_alone(self, b: Batch, now: float) -> bool:
        """Send ``b``, the only batch not done, by itself if it is due and its leader's
        connection is ready (Accumulator.due_alone); whether it went."""
        node = self._acc.due_alone(b, now, self.cluster.leader_for)
        if node is None:
            return False
        conn = self.cluster.ready_connection(node)
        if conn is None or self._in_flight.get(node, 0) >= self._max_in_flight:
            return False
        self._acc.close_open(b)
        self._space_freed()
        self._send_produce(node, conn, [b], now)
        return True

    def _send_lone(self, topic: str, partition: int, record: tuple, size: int) -> AsyncRecordFuture | None:
        """Send ``record`` as a batch of its own, when Accumulator.takes_lone (one record at
        a time): its request is written first and the batch booked after, as the sync
        producer's _send_lone does
        (here nothing can read the answer before send() returns to the loop).  None: the
        general path's (append, then _send_alone or the sender task)."""
        cluster = self.cluster
        node = cluster.leader_for(topic, partition)
        conn = None if node is None else cluster.ready_connection(node)
        if conn is None or self._in_flight.get(node, 0) >= self._max_in_flight:
            return None
        acc = self._acc
        made = acc.lone_request(topic, partition, record, size, self._now(), conn.protocol)
        if made is None:
            return None
        b, fields, version = made
        sent = [b]
        written = conn.send_produce_one(fields, version, on_answer=self._settle, args=(node, conn, sent))
        acc.book_lone(b)
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        self._batches_in_flight += 1
        if not written:  # a re-login due: the awaited way
            self._spawn(self._exchange(node, conn, lone_produce_request(fields), version, sent))
        return AsyncRecordFuture((b, 0, record[2]))

    def _space_freed(self) -> None:
        # Wake the send() calls waiting for room if closing batches for sending gave
        # memory back.
        if self._acc.freed:
            self._acc.freed = False
            if self._space is not None:
                self._space.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _init_producer_id(self) -> None:
        """Ask for a producer id (or a bumped epoch); the held batches go once it is here."""
        ident = self._acc.identity
        ident.requesting = True  # one at a time, even before a connection is ready
        resp = exc = None
        name = "a broker"
        try:
            conn = await self.cluster.any_connection(self._now() + self.config.request_timeout_ms / 1000)
            name = conn.name
            try:
                version = conn.protocol.version_for(INIT_PRODUCER_ID)
            except Exception as err:  # noqa: BLE001 - no InitProducerId in common
                ident.requesting = False
                ident.unsupported(f"{name} does not offer InitProducerId ({err})")
                return
            resp = await conn.request(INIT_PRODUCER_ID, ident.init_request(version), version)
        except Exception as err:  # noqa: BLE001 - recorded; retried after a backoff
            exc = err
        finally:
            self._kick()
        ident.apply_init(resp, exc, self._now(), name)

    def _connect(self, node: int) -> None:
        if node in self._connecting:
            return

        async def connect() -> None:
            try:
                await self.cluster.connection(node, self._now() + self.config.request_timeout_ms / 1000)
            except (KafkaConnectionError, KafkaTimeoutError):
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            finally:
                self._connecting.pop(node, None)
                self._kick()

        self._connecting[node] = asyncio.ensure_future(connect())

    def _send_produce(self, node: int, conn: Any, batches: list[Batch], now: float) -> list[Batch]:
        try:
            version = conn.version_for(PRODUCE)
        except Exception as exc:  # noqa: BLE001 - no version in common: every batch fails
            for b in batches:
                self._acc.dequeue(b)
                self._complete(b, exc)
            return []
        request, sent, rest, failed = self._acc.produce_request(batches, version, now)
        for b, exc in failed:
            self._acc.dequeue(b)
            self._complete(b, exc)
        if request is not None:
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
            self._batches_in_flight += len(sent)
            # Written now, its answer handed to _settle from the transport's read callback
            # (no task, no future per request); a connection re-authenticating takes the
            # awaited way.
            if not conn.send_nowait(PRODUCE, request, version, expects_response=self._expects_answer,
                                    on_answer=self._settle, args=(node, conn, sent)):
                self._spawn(self._exchange(node, conn, request, version, sent))
        return rest

    async def _exchange(self, node: int, conn: Any, request: Any, version: int, sent: list[Batch]) -> None:
        try:
            resp = await conn.request(PRODUCE, request, version, expects_response=self._expects_answer)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self._settle(node, conn, sent, None, exc)
            return
        except BaseException:
            self._in_flight[node] -= 1
            self._batches_in_flight -= len(sent)
            self._kick()
            raise
        self._settle(node, conn, sent, resp, None)

    def _settle(self, node: int, conn: Any, sent: list[Batch], resp: Any, exc: BaseException | None) -> None:
        """A Produce request's outcome: its answer, or why there is none."""
        self._in_flight[node] -= 1
        self._batches_in_flight -= len(sent)
        done, refresh = self._acc.settle(sent, resp, exc, conn.name, self._now(), self._closed)
        if refresh:
            self.cluster.meta.need_refresh = True
        failed = len(done) < len(sent)
        for b, result in done:
            failed = failed or isinstance(result, BaseException)
            self._complete(b, result)
        # The sender task looks again only when there is something for it: batches
        # waiting (for this request's slot, or to be resent), a failure, a refresh; a
        # look on every answer would run before the caller awaiting this one.
        if failed or refresh or len(self._acc.incomplete) > self._batches_in_flight:
            self._kick()

    def _complete(self, b: Batch, result: Any) -> None:
        self._acc.release(b)
        if self._txn is not None and isinstance(result, BaseException):
            self._txn.batch_failed(result)
        if self._space is not None:
            self._space.set()
        if b.future.done():
            return
        if isinstance(result, BaseException):
            b.future.set_exception(result)
        else:
            b.future.set_result(result)
