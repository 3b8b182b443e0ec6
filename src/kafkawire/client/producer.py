"""The producer: ``Producer(**config).send(topic, value, key=...)`` returns a future.

Records are gathered per partition into batches (``batch_size``, ``linger_ms``), and a
background sender thread sends, per broker, one Produce request carrying the ready batch of
every partition that broker leads (up to ``max_request_size``).  The message format
follows the Produce version negotiated with that broker: RecordBatch (magic 2) from v3,
MessageSet magic 1 for v2 and magic 0 for v0-v1.  Retriable errors are retried (after a
metadata refresh when leadership may have moved) until ``retries`` or
``delivery_timeout_ms`` run out; every other outcome reaches the caller through the
record's future and its callback.

Keyed records go to ``murmur2(key) % partitions`` exactly like the Java client; unkeyed
records stick to one partition until its batch is sent (KIP-480).

One record at a time (issue 23): while the sender thread has nothing to watch (no batch
queued, no request in flight) it parks instead of polling, and a batch due at once
(``linger_ms=0``, or full) is written by the caller's own send(); a caller waiting on its
record then reads the answer itself.  No hand-off between threads, no wake-up through a
pipe.  A record alone (nothing else pending) goes out before its batch is even booked:
that bookkeeping runs while the broker works (_send_lone).  A callback added, a second caller, or anything the caller cannot send now goes
back to the sender thread, which then does as it always does.

After ``os.fork()`` (see :mod:`kafkawire.core.fork`), the child's copy of a producer
starts afresh on its first call: the records queued before the fork stay the parent's to
deliver (their futures fail in the child with ForkedClientError), a new sender thread and
its own connections start, and an idempotent producer asks for a producer id of its own.
A transactional producer raises ForkedClientError instead (a second InitProducerId with
its transactional_id would fence the parent); closing the copy is allowed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from time import monotonic as _monotonic, time as _time, time_ns as _time_ns
from typing import Any, Callable, Iterable, Mapping

from kafkawire import codec, errors
from kafkawire._columnar import Columns
from kafkawire.core import fork as _fork
from kafkawire.core.fork import ForkedClientError
from kafkawire.client.cluster import Cluster
from kafkawire.core.config import Config, merge_options
from kafkawire.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from kafkawire.core.future import _PENDING, Future
from kafkawire.core.records import BatchMetadata, RecordFuture, RecordMetadata
from kafkawire.core.partitioner import StickyPartitioner, check_partition, choose_partition
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD,
    Accumulator,
    Appender,
    Batch,
)
from kafkawire.protocol.idempotence import INIT_PRODUCER_ID
from kafkawire.protocol.metadata import check_topic_name, list_topics_steps, unreached
from kafkawire.protocol.producer import NEED_COUNT, lone_produce_request, partition_check
from kafkawire.protocol.steps import StepRun
from kafkawire.protocol.transactions import TransactionAbortedError, TransactionManager

__all__ = ["Producer", "RecordMetadata", "RecordFuture", "BatchMetadata"]

PRODUCE = apis.get("Produce")
_RECORD_OVERHEAD = RECORD_OVERHEAD
_BATCH_OVERHEAD = BATCH_OVERHEAD


class _BatchFuture(Future):
    """A batch's future.  A thread that waits on it while the sender thread is parked
    reads the answer itself (Producer._drive): no hand-off between threads.  A callback
    added while it is pending wakes the sender, which then reads the answer."""

    __slots__ = ("_producer",)

    def __init__(self, producer: Producer):
        Future.__init__(self)
        self._producer = producer

    def wait(self, timeout: float | None = None) -> bool:
        if self._value is not _PENDING or self._exception is not None:
            return True
        if self._producer._parked:
            start = _monotonic()
            if self._producer._drive(self, timeout):
                return True
            if timeout is not None:
                timeout = max(0.0, timeout - (_monotonic() - start))
        return Future.wait(self, timeout)

    def add_done_callback(self, fn: Callable[[Future], Any]) -> None:
        Future.add_done_callback(self, fn)
        if self._producer._parked and not self.done():
            self._producer._wake_sender()


class Producer:
    """A Kafka producer.  See the module docstring; options are the Java client's in
    snake_case (``bootstrap_servers``, ``acks``, ``linger_ms``, ``batch_size``, ...).

    The constructor waits for no broker (it refuses only bootstrap host names that
    resolve nowhere); the sender thread connects in the background, and a refusal no
    wait fixes (TLS, a login, a protocol mismatch) is raised by the first call that
    needs the cluster (send(), list_topics(), init_transactions() ...), at once."""

    def __init__(self, config: Mapping[str, Any] | None = None, /, **options: Any):
        self.config = c = Config.producer(**merge_options("Producer", config, options))
        self._acks = c.acks
        self._codec = c.compression_type
        self._batch_size = max(c.batch_size, 1)
        self._linger = c.linger_ms / 1000.0
        self._max_request = c.max_request_size
        self._delivery_timeout = c.delivery_timeout_ms / 1000.0
        self._key_ser = c.key_serializer
        self._value_ser = c.value_serializer
        self._partitioner = c.partitioner
        self._sticky = StickyPartitioner()
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._room_waiters = 0  # callers in _wait_for_room: only then is _space notified
        self._meta_cond = threading.Condition()
        # Whoever holds _io does the I/O of this producer's cluster (its poller and
        # connections): the sender thread, or, while the sender is parked (nothing in
        # flight, nothing queued), a caller writing its request and reading the answer
        # itself, with no hand-off between threads (_dispatch_direct, _drive).
        self._io = threading.Lock()
        self._park = threading.Lock()  # the parked sender waits on it (_park_for)
        self._parked = False
        # Batching decisions and memory accounting (I/O-free; guarded by self._lock).
        self._acc = acc = Accumulator(c, self._batch_future)
        # The accumulator's dicts, never rebound: send()'s hot path reads them directly.
        self._batches = acc.batches
        self._open = acc.open
        self._incomplete = acc.incomplete
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._wanted_topics: set[str] = set()
        self._errors_told: dict[str, float | None] = {}  # sender thread: see _update_metadata_waiters
        self._answers_seen = 0.0  # the same, for the Metadata answers themselves
        self._failures_seen = 0  # the same, for failed connection attempts (cluster.backoffs)
        self._fatal: BaseException | None = None
        # When the sender's next poll ends at the latest (monotonic; set with self._lock
        # held as it looks at the batches): a batch made later that must go out sooner
        # wakes it, one that may wait does not (a wakeup costs a system call).
        self._sender_wakes_at = 0.0
        # The exchanges a caller's call needs (a transaction's with its coordinator,
        # list_topics()'s Metadata) run on the sender thread, over its connections, one at
        # a time (a StepRun each); the caller queues its steps and waits for their future.
        self._txn: TransactionManager | None = None
        if c.transactional_id is not None:
            self._txn = acc.txn = TransactionManager(acc.identity, c.retry_backoff_ms)
        # Each with (when asked, its timeout) for a caller's call, None for the sender's own.
        self._calls: deque[tuple[Any, Future, tuple[float, float] | None]] = deque()
        self._call_run: tuple[StepRun, Future | None, tuple[float, float] | None] | None = None
        self.cluster = Cluster(c)
        # {topic: partition count} from the Metadata answers (updated in place by the
        # sender thread); the Appender reads it for keyed and sticky records.
        self._partition_counts = self.cluster.meta.partition_counts
        # send()'s one call (Appender.send), bound as this instance's send unless a
        # subclass overrides send().  A user's partitioner runs only in _send().
        default = self._partitioner is None
        self._appender = Appender(acc.open, acc.batch_size, self._lock, RecordFuture, _time_ns, self._send,
                                  self._sticky_partition if default else None,
                                  self._partition_counts if default else None)
        if type(self).send is Producer.send:
            self.send = self._appender.send  # type: ignore[method-assign]
        # send()'s hot path is allowed: no serializers, batches smaller than the largest
        # record (so a record that fits a batch fits a request), not closing.
        self._fast = (self._key_ser is None and self._value_ser is None and c.transactional_id is None
                      and self._batch_size <= self._max_request - _BATCH_OVERHEAD - 64)
        # No broker is asked here: the sender thread connects in the background,
        # retrying what waiting may fix, and a call that needs the cluster waits for it
        # up to its deadline (one refused for good is told at once: see unreached).
        try:
            self.cluster.check_addresses()
        except BaseException:
            self.cluster.close()
            raise
        self._poller = self.cluster.poller
        self._fork_generation = _fork.generation
        _fork.register(self)
        self._thread = threading.Thread(target=self._run, name="kafkawire-producer", daemon=True)
        self._thread.start()

    # -- fork ---------------------------------------------------------------------------

    def _after_fork_in_child(self) -> None:
        # Right after the fork, in the child: no I/O, no callbacks (kafkawire.core.fork).
        # The sender thread did not come along, and a lock it held stays held.
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._room_waiters = 0
        self._meta_cond = threading.Condition()
        self._io = threading.Lock()
        self._park = threading.Lock()
        self._parked = False
        self._appender.lock = self._lock
        self._fast = False  # send() must take _send(), which finishes the job

    def _check_fork(self) -> None:
        if self._fork_generation == _fork.generation:
            return
        if self._txn is not None:
            raise ForkedClientError(
                "this transactional producer was made before os.fork(): the parent owns its "
                "transactional_id; make a new Producer with another transactional_id in the child")
        self._fork_generation = _fork.generation
        # The parent's requests in flight must not be retried here: the parent does.
        self._poller.forget_orphans()
        err = ForkedClientError("queued before os.fork(): the parent process delivers it")
        for b in self._acc.drop_all():
            b.future.set_exception(err)
        if self._acc.identity is not None:
            self._acc.identity.reset()
        self._flushing = 0
        self._fatal = None
        self._sender_wakes_at = 0.0
        self._calls.clear()
        self._call_run = None
        self._thread = threading.Thread(target=self._run, name="kafkawire-producer", daemon=True)
        self._thread.start()
        c = self.config
        self._fast = (self._key_ser is None and self._value_ser is None and c.transactional_id is None
                      and self._batch_size <= self._max_request - _BATCH_OVERHEAD - 64 and not self._closing)

    # -- the caller's side ----------------------------------------------------------------

    def _num_partitions(self, topic: str, deadline: float) -> int:
        self._check_fork()
        n = self._partition_counts.get(topic)
        if n is not None:
            return n
        check_topic_name(topic)
        asked = time.monotonic()
        meta = self.cluster.meta
        with self._meta_cond:
            self._wanted_topics.add(topic)
            if topic in meta.topics:
                meta.need_refresh = True  # an error known from before may be out of date
            self._wake_sender()
            while True:
                n = self._partition_counts.get(topic)
                if n is not None:
                    return n
                # A permanent error (invalid name, not authorized) ends the wait at once.
                exc = meta.topic_error(topic, asked)
                if exc is not None:
                    raise exc
                remaining = deadline - time.monotonic()
                if self._closed:
                    raise ClientClosedError("the producer is closed")
                if not meta.brokers:  # no Metadata answer yet: is any broker reachable?
                    exc = unreached(self.cluster.backoffs, self.cluster.bootstrap_addresses,
                                    time.monotonic() - asked, self.config.max_block_ms / 1000, remaining <= 0)
                    if exc is not None:
                        raise exc
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"topic {topic!r} not found in metadata within max_block_ms="
                        f"{self.config.max_block_ms}: {meta.why_unavailable(topic)}"
                    )
                self._meta_cond.wait(remaining)

    def _fresh_partition_count(self, topic: str, deadline: float) -> int:
        """``topic``'s partition count from a Metadata answer received from now on (the
        count known may predate partitions added since), or the known one at ``deadline``."""
        asked = time.monotonic()
        meta = self.cluster.meta
        with self._meta_cond:
            meta.need_refresh = True
            self._wake_sender()
            while meta.topic_seen.get(topic, asked - 1) < asked and time.monotonic() < deadline \
                    and not self._closed:
                self._meta_cond.wait(max(0.0, deadline - time.monotonic()))
        parts = meta.partitions(topic)
        return len(parts) if parts else self._partition_counts.get(topic, 0)

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """Partition ids of ``topic``, waiting up to ``timeout`` seconds (default
        ``max_block_ms``) for its metadata."""
        wait = self.config.max_block_ms / 1000.0 if timeout is None else timeout
        return list(range(self._num_partitions(topic, time.monotonic() + wait)))

    def list_topics(self, timeout: float | None = None, include_internal: bool = False) -> dict[str, list[int]]:
        """Every topic of the cluster and its partition ids (internal ones such as
        __consumer_offsets only with ``include_internal``), as the consumer's, within
        ``timeout`` seconds (default ``max_block_ms``)."""
        if self._closing:
            raise ClientClosedError("the producer is closed")
        self._check_fork()
        deadline = self._deadline(timeout, self.config.max_block_ms)
        return self._sender_call(list_topics_steps(include_internal), deadline, "list_topics()", abandon=True)

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, Any]] | None = None,
        callback: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None,
    ) -> RecordFuture:
        """Queue one record; the returned future resolves once the broker acknowledges it
        (per ``acks``).  Blocks up to ``max_block_ms`` for metadata or buffer space."""
        # One call: the accumulator's Appender.send (compiled when the codec is) appends a
        # plain record (bytes or None, no headers, an explicit partition, an unkeyed
        # record's sticky one or a bytes key's murmur2 one, no serializers, the default
        # partitioner) to its partition's open batch if that has
        # room, and hands everything else, and the record that fills or opens a batch, to
        # _send() below.  __init__ makes it this producer's own send, skipping this frame.
        return self._appender.send(topic, value, key, partition, timestamp, headers, callback)

    @property
    def _fast(self) -> bool:
        """send()'s hot path is allowed (Appender.enabled)."""
        return self._appender.enabled

    @_fast.setter
    def _fast(self, on: bool) -> None:
        self._appender.enabled = on

    def _sticky_partition(self, topic: str) -> int | None:
        # An unkeyed record's partition on the hot path (KIP-480), once the count is known.
        n = self._partition_counts.get(topic)
        return self._sticky.partition(topic, n) if n else None

    def _sticky_batch_done(self, topic: str, partition: int) -> None:
        # An unkeyed record's batch went out: the next one sticks to another partition (KIP-480).
        n = self._partition_counts.get(topic)
        if n:
            self._sticky.batch_done(topic, partition, n)

    def _send(self, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None,
              headers: Any, callback: Any) -> RecordFuture:
        if self._closing:
            raise ClientClosedError("send() after close(): the producer is closed")
        self._check_fork()
        key, value, headers, timestamp, size = self._acc.prepare(key, value, headers, timestamp, int(_time() * 1000))
        sticky = False
        if partition is None:
            n = self._partition_counts.get(topic) or self._num_partitions(
                topic, _monotonic() + self.config.max_block_ms / 1000.0)
            partition, sticky = choose_partition(topic, key, n, self._partitioner, self._sticky)
        else:
            if type(partition) is not int or partition < 0:
                partition = check_partition(partition)
            n = self._partition_counts.get(topic)
            if n is None or partition >= n:
                self._check_partition(topic, partition, n, _monotonic() + self.config.max_block_ms / 1000.0)
        record = (key, value, timestamp, headers) if headers else (key, value, timestamp)
        if self._parked and self._acc.takes_lone():
            fut = self._send_lone(topic, partition, record, size)
            if fut is not None:
                if sticky:
                    self._sticky_batch_done(topic, partition)
                if callback is not None:
                    fut.add_callback(callback)
                return fut
        tp = (topic, partition)
        wake = kick = False
        acc = self._acc
        with self._lock:
            reserve = acc.admit(tp, size)
            if reserve and not acc.has_room(reserve):
                self._wait_for_room(reserve, _monotonic() + self.config.max_block_ms / 1000.0)
            batch, index, made, wake = acc.append(tp, record, size, reserve, _monotonic())
            if made:
                if self._linger == 0:
                    wake = True
                elif batch.created + self._linger < self._sender_wakes_at:
                    kick = True  # an idle sender would hold it past linger_ms
                    # Woken now, it looks by then: the batches made until its next pass
                    # need no wake-up of their own (a system call each).
                    self._sender_wakes_at = batch.created + self._linger
        if wake:
            if sticky:
                self._sticky_batch_done(topic, partition)
            if self._parked and self._io.acquire(False):
                try:
                    self._dispatch_direct(batch)
                finally:
                    self._io.release()
            else:
                self._wake_sender()
        elif kick:
            self._wake_sender()
        fut = RecordFuture((batch, index, timestamp))
        if callback is not None:
            fut.add_callback(callback)
        return fut

    def _send_lone(self, topic: str, partition: int, record: tuple, size: int) -> RecordFuture | None:
        """Send ``record`` as a batch of its own from the caller's thread, with the sender
        parked and Accumulator.takes_lone (one record at a time): its request is written
        first, and the batch booked after, while the request is on its way (the
        Accumulator's lone_request and book_lone).  None: the general path's (append,
        then _dispatch_direct or the sender)."""
        if not self._io.acquire(False):
            return None
        try:
            if not self._parked or self._closing or not self._acc.takes_lone():
                return None  # the sender woke, or another thread's batch came first
            cluster = self.cluster
            leader = cluster.leader_for(topic, partition)
            conn = None if leader is None else cluster.ready_connection(leader)
            if conn is None or not conn.can_send():
                return None
            acc = self._acc
            made = acc.lone_request(topic, partition, record, size, _monotonic(), conn.protocol)
            if made is None:
                return None
            b, fields, version = made
            written = conn.write_produce(fields, version)
            with self._lock:
                acc.book_lone(b)
            sent, name = [b], conn.name

            def on_answer(resp: Any, exc: BaseException | None) -> None:
                self._on_response(resp, exc, sent, name)

            if written:
                conn.expect_answer(on_answer)
            else:  # held for a re-authentication: sent, as any request, once it ends
                conn.send_produce(lone_produce_request(fields), version, on_answer)
        finally:
            self._io.release()
        return RecordFuture((b, 0, record[2]))

    def _check_partition(self, topic: str, partition: int, count: int | None, deadline: float) -> None:
        """Refuse an explicit partition the topic lacks (protocol/producer.py decides),
        finding its partition count, or a fresh one, by ``deadline``."""
        fresh = None
        while True:
            need = partition_check(topic, partition, count, fresh)
            if need is None:
                return
            if need is NEED_COUNT:
                count = self._num_partitions(topic, deadline)
            else:
                fresh = self._fresh_partition_count(topic, deadline)

    def _wait_for_room(self, size: int, deadline: float) -> None:
        # Called with self._lock held: wait until buffer_memory has room for ``size``.
        while wait := self._acc.room_wait(size, _monotonic(), deadline):
            if self._fatal is not None:
                raise self._fatal
            self._room_waiters += 1
            try:
                self._space.wait(wait)
            finally:
                self._room_waiters -= 1

    def send_batch(self, topic: str, partition: int | None, data: Any) -> Future:
        """Produce many records at once to one partition.

        ``data`` is a :class:`kafkawire.codec.Columns`, a pyarrow RecordBatch/Table with
        Spark's Kafka columns (key, value, timestamp?, headers?), or a sequence of values
        (bytes) or record tuples ``(key, value[, timestamp[, headers]])``.  Sequences are
        split into batches of at most ``max_request_size``.  The future resolves to a list
        of :class:`BatchMetadata`, one per batch sent.
        """
        if self._closing:
            raise ClientClosedError("send_batch() after close(): the producer is closed")
        self._check_fork()
        now_ms = int(time.time() * 1000)
        deadline = time.monotonic() + self.config.max_block_ms / 1000.0
        n = self._num_partitions(topic, deadline)
        if partition is None:
            partition = self._sticky.partition(topic, n)
        else:
            self._check_partition(topic, check_partition(partition), n, deadline)
        # Each piece: (Columns, None) or (record list, its magic-2 encoding).
        pieces: list[tuple[Any, bytes | None]] = []
        if isinstance(data, Columns):
            pieces.append((data, None))
        elif type(data).__module__.startswith("pyarrow"):
            batches = data.to_batches() if hasattr(data, "to_batches") else [data]
            pieces.extend((Columns.from_arrow(b), None) for b in batches)
        elif isinstance(data, (bytes, bytearray, memoryview, str)):
            raise errors.EncodeError(f"send_batch: data is one {type(data).__name__} value; pass a "
                                     f"sequence of values or records, e.g. [value]")
        else:
            pieces = self._encode_pieces(data, now_ms)
        out = Future()
        if not pieces:
            out.set_result([])
            return out
        results: list[Any] = [None] * len(pieces)
        remaining = [len(pieces)]
        created = []
        sizes = []
        for piece, encoded in pieces:  # all checked before any is queued
            if encoded is not None:
                size = len(encoded)
            else:
                size = piece.payload_size + _RECORD_OVERHEAD * len(piece) + _BATCH_OVERHEAD
            if size > self._max_request:
                raise RecordTooLargeError(
                    f"send_batch: {len(piece)} records of {size} bytes exceed max_request_size="
                    f"{self._max_request}; pass smaller pieces or a sequence (split automatically)"
                )
            sizes.append(size)
        with self._lock:
            acc = self._acc
            acc.admit((topic, partition), 0)  # the transaction's checks
            # Records sent after this call go after these batches, never into a batch
            # before them.
            current = self._open.get((topic, partition))
            if current is not None:
                acc.close_open(current)
            for (piece, encoded), size in zip(pieces, sizes):
                self._wait_for_room(size, deadline)
                acc.used_memory += size
                now = time.monotonic()
                b = Batch(topic, partition, now, now + self._delivery_timeout, Future())
                if encoded is not None:
                    b.records = piece
                    b.encoded = (2, self._codec, encoded, (-1, -1, -1))
                    b.default_ts = now_ms
                else:
                    b.columns = piece
                b.size = b.reserved = size
                acc.add_full(b)
                created.append(b)

        def make_cb(i: int, n: int) -> Callable[[Future], None]:
            def cb(f: Future) -> None:
                if out.done():
                    return
                exc = f.exception()
                if exc is not None:
                    out.set_exception(exc)
                    return
                results[i] = BatchMetadata(topic, partition, f.result()[0], n)
                remaining[0] -= 1
                if remaining[0] == 0:
                    out.set_result(results)
            return cb

        for i, b in enumerate(created):
            b.future.add_done_callback(make_cb(i, b.count()))
        self._wake_sender()
        return out

    def _encode_pieces(self, data: Any, now_ms: int) -> list[tuple[list, bytes]]:
        """Split a sequence of records into pieces that each encode (magic 2, with the
        producer's compression) to at most max_request_size, encoding each piece once.

        The piece length comes from the bytes per record seen so far; a piece that
        encodes too large is halved and encoded again, so one pass is the usual cost."""
        records = data if type(data) is list else list(data)
        if not records:
            return []
        if type(records[0]) is tuple and type(records[-1]) is tuple:
            try:
                return self._encode_records(records, now_ms)
            except (TypeError, ValueError, errors.EncodeError):
                pass  # values (bytes) among the tuples: normalized below, then encoded again
        records = [(None, r) if r is None or isinstance(r, (bytes, bytearray, memoryview)) else r
                   for r in records]
        try:
            return self._encode_records(records, now_ms)
        except errors.EncodeError as exc:
            bad = next((i for i, r in enumerate(records)
                        if not isinstance(r, (tuple, codec.Record))), None)
            if bad is None:
                raise
            # The encoder knows only tuples; the caller may have passed values too.
            raise errors.EncodeError(
                f"send_batch: item {bad} is {type(records[bad]).__name__} {records[bad]!r:.60}; each item "
                f"must be a value (bytes, bytearray, memoryview or None) or a (key, value"
                f"[, timestamp[, headers]]) tuple of bytes (send_batch does not apply "
                f"value_serializer: encode str values first)") from exc

    def _encode_records(self, records: list, now_ms: int) -> list[tuple[list, bytes]]:
        limit = self._max_request - _BATCH_OVERHEAD - 512
        level = self.config.compression_level
        pieces: list[tuple[list, bytes]] = []
        # First guess from a sample's raw size; refined by every encoding.
        sample = records[:64]
        try:
            per = max(1.0, sum(_RECORD_OVERHEAD + sum(len(x) for x in r[:2] if x is not None)
                               for r in sample) / len(sample))
        except TypeError:
            per = 128.0  # not bytes-like: the encoder reports which record and why
        i, n = 0, len(records)
        while i < n:
            count = max(1, min(n - i, int(limit / per * 0.95)))
            while True:
                chunk = records[i:i + count]
                encoded = codec.encode_record_batch(chunk, compression=self._codec,
                                                    compression_level=level, timestamp=now_ms)
                if len(encoded) <= limit or count == 1:
                    break
                count = max(1, count // 2)
            pieces.append((chunk, encoded))
            per = max(1.0, len(encoded) / count)
            i += count
        return pieces

    # -- transactions -------------------------------------------------------------------

    def _transactions(self, call: str) -> TransactionManager:
        self._check_fork()
        if self._txn is None:
            raise errors.ConfigError(f"{call} needs a transactional producer: set transactional_id")
        return self._txn

    def _sender_call(self, steps: Any, deadline: float, call: str, abandon: bool = False) -> Any:
        """Run ``steps`` on the sender thread and wait for their result by ``deadline``.
        Past it they go on in the background (a transaction's exchange: the next call
        waits for it), or, with ``abandon``, are dropped: KafkaTimeoutError, or the
        NoBrokersAvailableError naming each address's failures while no broker has
        answered yet.  One refused for good (a certificate, a login) while no broker has
        answered ends it at once (see _drive_calls)."""
        fut = Future()
        asked = time.monotonic()
        entry = (steps, fut, (asked, deadline - asked))
        with self._lock:
            self._calls.append(entry)
        self._wake_sender()
        if fut.wait(max(0.0, deadline - time.monotonic())):
            return fut.result(0)
        if not abandon:
            raise KafkaTimeoutError(f"{call} not done in time; it goes on in the background: "
                                    f"call it again to wait for it")
        err = None
        if not self.cluster.meta.brokers:
            err = unreached(self.cluster.backoffs, self.cluster.bootstrap_addresses, time.monotonic() - asked,
                            deadline - asked, True)
        err = err or KafkaTimeoutError(f"{call}: no answer in time")
        with self._lock:
            if entry in self._calls:
                self._calls.remove(entry)
            elif self._call_run is not None and self._call_run[1] is fut:
                self._call_run[0].fail(err, time.monotonic())
        if fut.done():  # its answer came meanwhile
            return fut.result(0)
        raise err

    @staticmethod
    def _deadline(timeout: float | None, default_ms: int) -> float:
        return time.monotonic() + (default_ms / 1000.0 if timeout is None else timeout)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register transactional_id with its coordinator (fencing any earlier producer
        with it and ending its open transaction); once, before the first transaction."""
        txn = self._transactions("init_transactions()")
        self._sender_call(txn.init_steps(), self._deadline(timeout, self.config.max_block_ms), "init_transactions()")

    def begin_transaction(self) -> None:
        """Start a transaction: records sent from now on commit or abort together."""
        with self._lock:
            self._transactions("begin_transaction()").begin()

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: Any,
                                    timeout: float | None = None) -> None:
        """Commit a consumer group's ``offsets`` ({(topic, partition): next offset}) with
        this transaction (consume-transform-produce).  ``group``: the group id, or the
        consumer's ``group_metadata()`` so a zombie member's offsets are refused."""
        txn = self._transactions("send_offsets_to_transaction()")
        norm = {(tp[0], tp[1]): int(getattr(off, "offset", off)) for tp, off in offsets.items()}
        self._sender_call(txn.send_offsets_steps(norm, group), self._deadline(timeout, self.config.max_block_ms),
                       "send_offsets_to_transaction()")

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it.  A record that failed
        makes this raise TransactionStateError: abort_transaction() then."""
        txn = self._transactions("commit_transaction()")
        deadline = self._deadline(timeout, self.config.max_block_ms)
        with self._lock:
            txn.commit_or_abort(True)
        while True:  # flushed, or a failed record makes the commit impossible
            try:
                self.flush(min(0.2, max(0.0, deadline - time.monotonic())))
                break
            except KafkaTimeoutError:
                if txn.state != "COMMITTING" or time.monotonic() >= deadline:
                    if time.monotonic() >= deadline:
                        raise
                    break
        self._sender_call(txn.end_steps(True), deadline, "commit_transaction()")

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with TransactionAbortedError,
        those on the way are waited for, and read_committed consumers skip them all."""
        txn = self._transactions("abort_transaction()")
        deadline = self._deadline(timeout, self.config.max_block_ms)
        with self._lock:
            txn.commit_or_abort(False)
            dropped = self._acc.drop_unsent()
        err = TransactionAbortedError("the transaction was aborted before this record was sent")
        for b in dropped:
            self._complete(b, err)
        self.flush(max(0.0, deadline - time.monotonic()))
        self._sender_call(txn.end_steps(False), deadline, "abort_transaction()")

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is acknowledged or has
        failed.  Raises KafkaTimeoutError if that takes longer than ``timeout`` seconds."""
        self._check_fork()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            pending = list(self._incomplete)
            self._flushing += 1
        self._wake_sender()
        try:
            for b in pending:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not b.future.wait(remaining):
                    left = sum(1 for x in pending if not x.future.done())
                    raise KafkaTimeoutError(
                        f"flush: {left} batch(es) still unacknowledged after {timeout:g}s"
                    )
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout`` seconds), stop the sender thread and close connections.
        Records still unsent after that fail with ClientClosedError."""
        if self._closed:
            return
        self._fast = False
        if self._fork_generation != _fork.generation and self._txn is not None:
            self._closed = self._closing = True  # the parent's to close; let go of the copy
            self.cluster.close()
            return
        self._closing = True
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.flush(timeout)
        except KafkaTimeoutError:
            pass
        finally:
            self._closed = True
            self._wake_sender()
            # The sender thread closes the connections as it stops (it owns them); it is
            # waited for only as long as the timeout allows.
            self._thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            err = ClientClosedError("the producer was closed before this record was delivered")
            with self._lock:
                leftovers = self._acc.drop_all()
            for b in leftovers:
                b.future.set_exception(err)
            with self._meta_cond:
                self._meta_cond.notify_all()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[str, Any]:
        """buffered_bytes, incomplete_batches, and the idempotent producer's
        producer_id, producer_epoch and epoch_bumps."""
        with self._lock:
            return self._acc.metrics()

    # -- the sender thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closed:
                if not self._io.acquire(False):
                    self._poller.wakeup()  # a caller reads answers (_drive): it hands over
                    self._io.acquire()
                try:
                    park = self._run_once()
                finally:
                    self._io.release()
                if park is not None:
                    self._park_for(park)
        except BaseException as exc:  # noqa: BLE001 - every pending record must learn of it
            self._fatal = exc
            with self._lock:
                leftovers = list(self._incomplete)
                self._incomplete.clear()
            for b in leftovers:
                b.future.set_exception(exc)
            raise
        finally:
            self.cluster.close()

    def _update_metadata_waiters(self) -> None:
        cluster = self.cluster
        if self._wanted_topics - cluster.interest:
            cluster.interest.update(self._wanted_topics)
            cluster.request_refresh()
        # Every new answer wakes the callers waiting for one (_fresh_partition_count), and
        # every failed attempt the callers waiting for a first answer (one may be final).
        changed = (self._answers_seen != cluster.meta.last_refresh
                   or self._failures_seen != cluster.backoffs.failures)
        self._answers_seen = cluster.meta.last_refresh
        self._failures_seen = cluster.backoffs.failures
        for topic in list(self._wanted_topics):
            meta = cluster.topics.get(topic)
            if meta is not None and topic not in self._partition_counts:
                if cluster.meta.topic_error(topic) is None:
                    cluster.request_refresh()  # unknown topic / no leader yet: ask again
                elif self._errors_told.get(topic) != cluster.meta.topic_seen.get(topic):
                    # A new answer with a permanent error: the callers waiting raise it.
                    self._errors_told[topic] = cluster.meta.topic_seen.get(topic)
                    changed = True
        if changed:
            with self._meta_cond:
                self._meta_cond.notify_all()

    def _run_once(self) -> float | None:
        """One pass of the sender (with _io held): metadata, producer id, transactions,
        the batches due, then a poll; or, with nothing to watch, no poll: it returns how
        long to park instead (see _idle)."""
        cluster = self.cluster
        self._update_metadata_waiters()
        cluster.maybe_refresh()
        now = time.monotonic()
        if self._acc.identity is not None:
            self._maybe_init_producer_id(now)
        txn_wait = self._drive_calls(now)
        wait = self._dispatch(now, txn_wait)
        with self._lock:
            if self._idle():
                self._parked = True
                self._park.acquire(False)  # free: only _park_for and _wake_sender touch it
                return max(wait, 0.0)
        self._poller.poll(max(wait, 0.0))
        return None

    def _dispatch(self, now: float, txn_wait: float | None) -> float:
        """Send the batches due (with _io held); how long until something else is due.
        ``txn_wait`` None: a caller's pass (_dispatch_direct), which leaves the sender's
        own timing alone."""
        cluster = self.cluster
        with self._lock:
            by_node, expired, wait, leaderless = self._acc.collect(
                now, cluster.leader_for, self._flushing > 0 or self._closing)
            self._space_freed()
            if txn_wait is not None:
                # Batches made from here on compare their linger deadline with this; the
                # waits below only shorten the poll.
                wait = min(wait, txn_wait)
                self._sender_wakes_at = now + wait
        for topic in leaderless:
            cluster.interest.add(topic)
            cluster.request_refresh()
        for b in expired:
            self._complete(b, self._acc.expired_error(b, cluster.meta))
        for node, batches in by_node.items():
            # Never waits for a connection: one being set up finishes inside the polls
            # below (its progress ends them), and these batches stay queued until then,
            # their delivery deadlines checked on every pass.
            conn = cluster.ready_connection(node)
            if conn is None:
                wait = min(wait, min(b.deadline for b in batches) - now)
                if not cluster.connecting(node):  # in backoff: try again when it ends
                    wait = min(wait, max(cluster.next_connect_delay(), 0.005))
                continue
            while batches and conn.can_send():
                batches = self._send_produce(conn, batches)
        return wait

    def _space_freed(self) -> None:
        # With self._lock held: wake the send() calls waiting for room if closing
        # batches for sending gave memory back.
        if self._acc.freed:
            self._acc.freed = False
            if self._room_waiters:
                self._space.notify_all()

    def _idle(self) -> bool:
        """Nothing for the sender to watch (self._lock held): no batch incomplete, no
        request in flight, no connection being set up, no caller waiting for it.  It
        then parks instead of polling, and a caller may do its own I/O meanwhile."""
        return (not self._incomplete and not self._closing and not self._closed and not self._flushing
                and not self._calls and self._call_run is None and not self._poller.busy()
                and self._wanted_topics <= self.cluster.interest)

    def _park_for(self, wait: float) -> None:
        """Wait, parked, until ``wait`` seconds pass or _wake_sender."""
        got = self._park.acquire(timeout=wait)
        with self._lock:
            # Leave _park free: held since _run_once (timed out, not woken) or taken here
            # (woken); free if a wake-up came after the time-out.
            if self._parked or got:
                self._park.release()
            self._parked = False

    def _wake_sender(self) -> None:
        """Make the sender thread look now: unpark it, or end its poll."""
        if self._parked:
            with self._lock:
                if self._parked:
                    self._parked = False
                    self._park.release()
                    return
        self._poller.wakeup()

    def _batch_future(self) -> Future:
        return _BatchFuture(self)

    def _dispatch_direct(self, batch: Batch | None = None) -> None:
        """A new batch is due and the sender is parked (_io held): write its Produce
        request from the caller's thread, sparing the sender's wake-up; what this pass
        cannot send is left to the sender, woken.  ``batch``: the one due, if known."""
        if not self._parked:
            return  # woken meanwhile: it waits for _io and sends the batch
        if batch is not None and self._send_alone(batch):
            return
        self._dispatch(_monotonic(), None)
        with self._lock:
            # Not sent (lingering, backing off, no leader or connection, a producer id
            # to wait for, too many in flight): the sender's, on its own timing.
            left = any(not b.in_flight for b in self._incomplete)
        if left:
            self._wake_sender()

    def _send_alone(self, b: Batch) -> bool:
        """Send ``b``, the only batch not done, by itself if it is due and its leader's
        connection is ready (_io held); whether it went."""
        with self._lock:
            leader = self._acc.due_alone(b, _monotonic(), self.cluster.leader_for)
        if leader is None:
            return False
        conn = self.cluster.ready_connection(leader)
        if conn is None or not conn.can_send():
            return False
        with self._lock:
            self._acc.close_open(b)
            self._space_freed()
        self._send_produce(conn, [b])
        return True

    def _drive(self, fut: Future, timeout: float | None) -> bool:
        """Read the answers in the calling thread until ``fut`` is done, as long as the
        sender stays parked (nobody else reads them); whether ``fut`` is done.  Another
        caller's record, or a retry, left behind is the sender's, woken."""
        if not self._io.acquire(False):
            # Another caller does I/O: the parked sender takes this answer in hand.
            if self._parked:
                self._wake_sender()
            return False
        deadline = None if timeout is None else _monotonic() + timeout
        try:
            while self._parked and not fut.done() and not self._closed:
                left = 1.0 if deadline is None else min(1.0, deadline - _monotonic())
                if left <= 0:
                    break
                self._poller.poll(left)
        finally:
            self._io.release()
        if self._incomplete and self._parked:
            self._wake_sender()
        return fut.done()

    def _drive_calls(self, now: float) -> float:
        """Advance the exchange in progress (or start the next: a caller's, or adding
        partitions that have batches waiting to the transaction); how long until it needs
        a look."""
        txn = self._txn
        cluster = self.cluster
        with self._lock:
            if self._call_run is None:
                if self._calls:
                    steps, fut, budget = self._calls.popleft()
                elif txn is not None and txn.wants_add():
                    unknown = txn.topics_to_look_up(cluster.leader_for)
                    if unknown:
                        cluster.interest.update(unknown)
                        cluster.request_refresh()
                    steps, fut, budget = txn.add_partitions_steps(), None, None
                else:
                    return 0.1
                self._call_run = (StepRun(steps), fut, budget)
            run, fut, budget = self._call_run
            if budget is not None and not cluster.meta.brokers and not run.finished:
                # Every bootstrap address refused for good (a certificate, a login): a
                # caller's call ends now, as the callers' waits for metadata do.
                exc = unreached(cluster.backoffs, cluster.bootstrap_addresses, now - budget[0], budget[1], False)
                if exc is not None:
                    run.fail(exc, now)
            wait = run.advance(now, cluster.try_step)
            if wait is None:
                self._call_run = None
                if fut is not None:
                    if run.error is not None:
                        fut.set_exception(run.error)
                    else:
                        fut.set_result(run.value)
                return 0.0
            return wait

    def _maybe_init_producer_id(self, now: float) -> None:
        """Ask for a producer id (or a bumped epoch) when the accumulator wants one; the
        answer, inside a later poll, lets the held batches go."""
        if not self._acc.init_wanted(now):
            return
        ident = self._acc.identity
        conn = self.cluster.any_ready_connection()
        if conn is None:
            return  # one is being set up; its progress ends a poll
        try:
            version = conn.version_for(INIT_PRODUCER_ID)
        except Exception as exc:  # noqa: BLE001 - no InitProducerId in common
            ident.unsupported(f"{conn.name} does not offer InitProducerId ({exc})")
            return
        fut = conn.send(INIT_PRODUCER_ID, ident.init_request(version), version)
        name = conn.name

        def done(f: Future) -> None:
            exc = f.exception()
            ident.apply_init(None if exc else f.result(), exc, time.monotonic(), name)

        fut.add_done_callback(done)

    def _send_produce(self, conn: Any, batches: list[Batch]) -> list[Batch]:
        """Send one Produce request with as many of ``batches`` as fit; returns the rest."""
        try:
            version = conn.version_for(PRODUCE)
        except Exception as exc:  # noqa: BLE001 - no version in common: every batch fails
            for b in batches:
                self._dequeue(b)
                self._complete(b, exc)
            return []
        request, sent, rest, failed = self._acc.produce_request(batches, version, time.monotonic())
        for b, exc in failed:
            self._dequeue(b)
            self._complete(b, exc)
        if request is not None:
            name = conn.name
            if self._acks != 0:
                conn.send_produce(request, version, lambda resp, exc: self._on_response(resp, exc, sent, name))
            else:  # no answer comes: the future resolves once the bytes are written
                fut = conn.send(PRODUCE, request, version, expects_response=False)
                fut.add_done_callback(lambda f: self._on_response(None, f.exception(), sent, name))
        return rest

    def _dequeue(self, b: Batch) -> None:
        with self._lock:
            self._acc.dequeue(b)

    def _complete(self, b: Batch, result: Any) -> None:
        with self._lock:
            self._release(b, result)
        self._resolve(b, result)

    def _release(self, b: Batch, result: Any) -> None:
        # With self._lock held: ``b`` is done; its memory goes back.
        self._acc.release(b)
        if self._room_waiters:
            self._space.notify_all()
        if self._txn is not None and isinstance(result, BaseException):
            self._txn.batch_failed(result)

    @staticmethod
    def _resolve(b: Batch, result: Any) -> None:
        if isinstance(result, BaseException):
            b.future.set_exception(result)
        else:
            b.future.set_result(result)

    def _on_response(self, resp: Any, exc: BaseException | None, sent: list[Batch], broker: str) -> None:
        # A Produce request's answer ``resp``, or ``exc``: why none came.
        with self._lock:
            done, refresh = self._acc.settle(sent, resp, exc, broker, _monotonic(), self._closed)
            for b, result in done:
                self._release(b, result)
        if refresh:
            self.cluster.request_refresh()
        for b, result in done:
            self._resolve(b, result)
