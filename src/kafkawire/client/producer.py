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
"""

from __future__ import annotations

import threading
import time
from collections import deque
from time import monotonic as _monotonic, time as _time, time_ns as _time_ns
from typing import Any, Callable, Iterable

from kafkawire import codec, errors
from kafkawire._columnar import Columns
from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.errors import (
    BufferExhaustedError,
    ClientClosedError,
    ConfigError,
    DeliveryTimeoutError,
    KafkaConnectionError,
    KafkaTimeoutError,
    RecordTooLargeError,
    REFRESH_METADATA_CODES,
    broker_error,
)
from kafkawire.client.future import Future
from kafkawire.client.partitioner import StickyPartitioner, partition_for_key
from kafkawire.protocol import apis

__all__ = ["Producer", "RecordMetadata", "RecordFuture", "BatchMetadata"]

PRODUCE = apis.get("Produce")
_TopicData = PRODUCE.Request.TopicProduceData
_PartitionData = _TopicData.PartitionProduceData

# Per-record bytes counted against buffer_memory and batch_size beyond key and value
# (record framing in the worst case; the same estimate the Java client makes).
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = 61
# Produce request bytes outside the record batches, per partition and per topic.
_PARTITION_OVERHEAD = 8
_TOPIC_OVERHEAD = 4


class RecordMetadata:
    """Where a record landed: topic, partition, offset (-1 with acks=0) and timestamp."""

    __slots__ = ("topic", "partition", "offset", "timestamp")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp})")


class BatchMetadata:
    """Where a batch from send_batch landed: its first offset and its record count."""

    __slots__ = ("topic", "partition", "base_offset", "count")

    def __init__(self, topic: str, partition: int, base_offset: int, count: int):
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.count = count

    def __repr__(self) -> str:
        return (f"BatchMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"base_offset={self.base_offset}, count={self.count})")


class _Batch:
    __slots__ = (
        "topic", "partition", "records", "columns", "size", "created", "future", "attempts",
        "deadline", "retry_at", "encoded", "reserved", "full", "in_flight", "default_ts",
    )

    def __init__(self, topic: str, partition: int, now: float, deadline: float):
        self.topic = topic
        self.partition = partition
        self.records: list[tuple] = []
        self.columns: Columns | None = None
        self.size = _BATCH_OVERHEAD
        self.created = now
        # Resolves to (base_offset, log_append_time_ms) for the whole batch.
        self.future = Future()
        self.attempts = 0
        self.deadline = deadline
        self.retry_at = 0.0
        self.encoded: tuple[int, int, bytes] | None = None  # (magic, codec, bytes)
        # buffer_memory bytes this batch holds (taken when it is made).
        self.reserved = 0
        self.full = False
        self.in_flight = False
        # Timestamp for records that carry none (send_batch sequences), -1: the encoder's.
        self.default_ts = -1

    def count(self) -> int:
        return len(self.columns) if self.columns is not None else len(self.records)


class RecordFuture(tuple):
    """The future of one record: ``result(timeout)`` gives its :class:`RecordMetadata`.

    Lean on purpose, as one is made per send(): a tuple (batch, index in the batch,
    timestamp), the batch's one future resolving every record of the batch."""

    __slots__ = ()

    @property
    def _batch_future(self) -> Future:
        return self[0].future

    @property
    def _topic(self) -> str:
        return self[0].topic

    @property
    def _partition(self) -> int:
        return self[0].partition

    @property
    def _index(self) -> int:
        return self[1]

    def _metadata(self, value: tuple[int, int]) -> RecordMetadata:
        batch, index, timestamp = self
        base, append_time = value
        offset = -1 if base < 0 else base + index
        ts = append_time if append_time is not None and append_time >= 0 else timestamp
        return RecordMetadata(batch.topic, batch.partition, offset, ts)

    def done(self) -> bool:
        return self._batch_future.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        return self._metadata(self._batch_future.result(timeout))

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._batch_future.exception(timeout)

    def add_callback(self, fn: Callable[[RecordMetadata | None, BaseException | None], Any]) -> None:
        """Call ``fn(metadata, None)`` on success or ``fn(None, exception)`` on failure,
        on the sender thread (keep it short)."""

        def done(f: Future) -> None:
            exc = f.exception()
            if exc is not None:
                fn(None, exc)
            else:
                fn(self._metadata(f.result()), None)

        self._batch_future.add_done_callback(done)

    def __repr__(self) -> str:
        return f"<RecordFuture {self._topic}[{self._partition}] #{self._index} {self._batch_future!r}>"


def _as_bytes(what: str, value: Any) -> Any:
    if value is None or isinstance(value, (bytes, bytearray, memoryview)):
        return value
    if isinstance(value, str):
        raise TypeError(f"{what} must be bytes or None, got str; encode it (e.g. {what}.encode()) "
                        f"or set {what}_serializer")
    try:
        return memoryview(value)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like or None, got {type(value).__name__}; "
                        f"set {what}_serializer to convert it") from None


class Producer:
    """A Kafka producer.  See the module docstring; options are the Java client's in
    snake_case (``bootstrap_servers``, ``acks``, ``linger_ms``, ``batch_size``, ...)."""

    def __init__(self, **config: Any):
        self.config = c = Config.producer(**config)
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
        self._meta_cond = threading.Condition()
        self._batches: dict[tuple[str, int], deque[_Batch]] = {}
        # The batch of each partition that send() appends to (always the last of its queue).
        self._open: dict[tuple[str, int], _Batch] = {}
        self._buffer_memory = c.buffer_memory
        # send()'s hot path is allowed: no serializers, batches smaller than the largest
        # record (so a record that fits a batch fits a request), not closing.
        self._fast = (self._key_ser is None and self._value_ser is None
                      and self._batch_size <= self._max_request - _BATCH_OVERHEAD - 64)
        self._max_record_size = self._max_request - _BATCH_OVERHEAD - 64
        self._incomplete: set[_Batch] = set()
        self._used_memory = 0
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._partition_counts: dict[str, int] = {}
        self._wanted_topics: set[str] = set()
        self._fatal: BaseException | None = None
        # When the sender's next poll ends at the latest (monotonic; set with self._lock
        # held as it looks at the batches): a batch made later that must go out sooner
        # wakes it, one that may wait does not (a wakeup costs a system call).
        self._sender_wakes_at = 0.0
        self.cluster = Cluster(c)
        # Fail fast on a bad address: bootstrap before the caller's first send.
        self.cluster.bootstrap(c.max_block_ms / 1000.0)
        self._poller = self.cluster.poller
        self._thread = threading.Thread(target=self._run, name="kafkawire-producer", daemon=True)
        self._thread.start()

    # -- the caller's side ----------------------------------------------------------------

    def _num_partitions(self, topic: str, deadline: float) -> int:
        n = self._partition_counts.get(topic)
        if n is not None:
            return n
        with self._meta_cond:
            self._wanted_topics.add(topic)
            self._poller.wakeup()
            while True:
                n = self._partition_counts.get(topic)
                if n is not None:
                    return n
                remaining = deadline - time.monotonic()
                if self._closed:
                    raise ClientClosedError("the producer is closed")
                if remaining <= 0:
                    meta = self.cluster.topics.get(topic)
                    why = ("it does not exist (and was not auto-created)" if meta is None or meta.error_code == 3
                           else f"metadata error code {meta.error_code}")
                    raise KafkaTimeoutError(
                        f"topic {topic!r} not found in metadata within max_block_ms="
                        f"{self.config.max_block_ms}: {why}"
                    )
                self._meta_cond.wait(min(remaining, 0.1))

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """Partition ids of ``topic``, waiting up to ``timeout`` seconds (default
        ``max_block_ms``) for its metadata."""
        wait = self.config.max_block_ms / 1000.0 if timeout is None else timeout
        return list(range(self._num_partitions(topic, time.monotonic() + wait)))

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
        # The hot path: bytes (or None), no headers, an explicit partition (or an unkeyed
        # record's sticky one) whose open batch has room, no serializers.  Everything
        # else, and the record that fills or opens a batch, takes _send() below.
        p = partition
        if p is None and key is None and self._partitioner is None:
            n = self._partition_counts.get(topic)
            if n:
                p = self._sticky.partition(topic, n)
        if (self._fast and headers is None and type(value) is bytes and type(p) is int
                and (key is None or type(key) is bytes) and p >= 0):
            size = _RECORD_OVERHEAD + len(value) + (0 if key is None else len(key))
            if timestamp is None:
                timestamp = _time_ns() // 1_000_000
            fut = None
            lock = self._lock
            lock.acquire()  # acquire/release costs half of `with` here
            try:
                b = self._open.get((topic, p))
                if b is not None and b.size + size < self._batch_size:
                    records = b.records
                    fut = RecordFuture((b, len(records), timestamp))
                    records.append((key, value, timestamp))
                    b.size += size
            finally:
                lock.release()
            if fut is not None:
                if callback is not None:
                    fut.add_callback(callback)
                return fut
        return self._send(topic, value, key, partition, timestamp, headers, callback)

    def _send(self, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None,
              headers: Any, callback: Any) -> RecordFuture:
        if self._closing:
            raise ClientClosedError("send() after close(): the producer is closed")
        if self._key_ser is not None:
            key = self._key_ser(key)
        if self._value_ser is not None:
            value = self._value_ser(value)
        if key is None:
            size = _RECORD_OVERHEAD
        else:
            if type(key) is not bytes:
                key = _as_bytes("key", key)
            size = _RECORD_OVERHEAD + len(key)
        if value is not None:
            if type(value) is not bytes:
                value = _as_bytes("value", value)
            size += len(value)
        if headers is not None:
            headers = tuple(headers)
            size += sum(len(k) + (len(v) if v is not None else 0) + 10 for k, v in headers)
        if size > self._max_record_size:
            raise RecordTooLargeError(
                f"record of about {size} bytes is larger than max_request_size="
                f"{self._max_request}; raise max_request_size (and the broker's message.max.bytes)"
            )
        if timestamp is None:
            timestamp = int(_time() * 1000)
        sticky = False
        if partition is None:
            n = self._partition_counts.get(topic) or self._num_partitions(
                topic, _monotonic() + self.config.max_block_ms / 1000.0)
            if self._partitioner is not None:
                partition = self._partitioner(key, n)
            elif key is not None:
                partition = partition_for_key(key, n)
            else:
                partition = self._sticky.partition(topic, n)
                sticky = True
        elif type(partition) is not int or partition < 0:
            if not isinstance(partition, int) or partition < 0:
                raise ValueError(f"partition must be an int >= 0 or None, got {partition!r}")
            partition = int(partition)
        record = (key, value, timestamp, headers) if headers else (key, value, timestamp)
        tp = (topic, partition)
        wake = kick = False
        with self._lock:
            batch = self._open.get(tp)
            if batch is None or (batch.size + size > self._batch_size and batch.records):
                # buffer_memory is taken a batch at a time, as the Java client does, so
                # appending a record to a batch needs no accounting.
                reserve = max(self._batch_size, _BATCH_OVERHEAD + size)
                if self._used_memory + reserve > self._buffer_memory and self._used_memory > 0:
                    self._reserve(reserve, _monotonic() + self.config.max_block_ms / 1000.0)
                else:
                    self._used_memory += reserve
                batch = self._open.get(tp)  # _reserve may have waited, releasing the lock
                if batch is not None:
                    self._close_open(batch)
                    wake = True
                batch = self._new_batch(topic, partition)
                batch.reserved = reserve
                if self._linger == 0:
                    wake = True
                elif batch.created + self._linger < self._sender_wakes_at:
                    kick = True  # an idle sender would hold it past linger_ms
            index = len(batch.records)
            batch.records.append(record)
            batch.size += size
            if batch.size >= self._batch_size:
                self._close_open(batch)
                wake = True
        if wake:
            if sticky:
                n = self._partition_counts.get(topic)
                if n:
                    self._sticky.batch_done(topic, partition, n)
            self._poller.wakeup()
        elif kick:
            self._poller.wakeup()
        fut = RecordFuture((batch, index, timestamp))
        if callback is not None:
            fut.add_callback(callback)
        return fut

    def _new_batch(self, topic: str, partition: int) -> _Batch:
        # Called with self._lock held: a new batch open for appends, last in its queue.
        now = _monotonic()
        batch = _Batch(topic, partition, now, now + self._delivery_timeout)
        q = self._batches.get((topic, partition))
        if q is None:
            q = self._batches[(topic, partition)] = deque()
        q.append(batch)
        self._incomplete.add(batch)
        self._open[(topic, partition)] = batch
        return batch

    def _close_open(self, batch: _Batch) -> None:
        # Called with self._lock held: no record is appended to ``batch`` from now on (its
        # encoding may be cached before it is sent; a record added after that would be lost).
        batch.full = True
        tp = (batch.topic, batch.partition)
        if self._open.get(tp) is batch:
            del self._open[tp]

    def _reserve(self, size: int, deadline: float) -> None:
        # Called with self._lock held.
        limit = self._buffer_memory
        while self._used_memory + size > limit and self._used_memory > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BufferExhaustedError(
                    f"buffer_memory={limit} bytes is full ({self._used_memory} in use) and no "
                    f"room was freed within max_block_ms={self.config.max_block_ms}; the "
                    f"brokers are slower than the producer, or unreachable"
                )
            if self._fatal is not None:
                raise self._fatal
            self._space.wait(min(remaining, 0.1))
        self._used_memory += size

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
        now_ms = int(time.time() * 1000)
        deadline = time.monotonic() + self.config.max_block_ms / 1000.0
        if partition is None:
            partition = self._sticky.partition(topic, self._num_partitions(topic, deadline))
        # Each piece: (Columns, None) or (record list, its magic-2 encoding).
        pieces: list[tuple[Any, bytes | None]] = []
        if isinstance(data, Columns):
            pieces.append((data, None))
        elif type(data).__module__.startswith("pyarrow"):
            batches = data.to_batches() if hasattr(data, "to_batches") else [data]
            pieces.extend((Columns.from_arrow(b), None) for b in batches)
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
                size = int(piece.data.nbytes) + _RECORD_OVERHEAD * len(piece) + _BATCH_OVERHEAD
            if size > self._max_request:
                raise RecordTooLargeError(
                    f"send_batch: {len(piece)} records of {size} bytes exceed max_request_size="
                    f"{self._max_request}; pass smaller pieces or a sequence (split automatically)"
                )
            sizes.append(size)
        with self._lock:
            # Records sent after this call go after these batches, never into a batch
            # before them.
            current = self._open.get((topic, partition))
            if current is not None:
                self._close_open(current)
            for (piece, encoded), size in zip(pieces, sizes):
                self._reserve(size, deadline)
                now = time.monotonic()
                b = _Batch(topic, partition, now, now + self._delivery_timeout)
                if encoded is not None:
                    b.records = piece
                    b.encoded = (2, self._codec, encoded)
                    b.default_ts = now_ms
                else:
                    b.columns = piece
                b.size = b.reserved = size
                b.full = True
                self._batches.setdefault((topic, partition), deque()).append(b)
                self._incomplete.add(b)
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
        self._poller.wakeup()
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
        return self._encode_records(records, now_ms)

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

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is acknowledged or has
        failed.  Raises KafkaTimeoutError if that takes longer than ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            pending = list(self._incomplete)
            self._flushing += 1
        self._poller.wakeup()
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
        self._closing = True
        try:
            self.flush(timeout)
        except KafkaTimeoutError:
            pass
        finally:
            self._closed = True
            self._poller.wakeup()
            self._thread.join(None if timeout is None else max(timeout, 1.0))
            err = ClientClosedError("the producer was closed before this record was delivered")
            with self._lock:
                leftovers = list(self._incomplete)
                self._incomplete.clear()
                self._batches.clear()
                self._open.clear()
            for b in leftovers:
                b.future.set_exception(err)
            if not self._thread.is_alive():
                self.cluster.close()
            with self._meta_cond:
                self._meta_cond.notify_all()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[str, int]:
        with self._lock:
            return {
                "buffered_bytes": self._used_memory,
                "incomplete_batches": len(self._incomplete),
            }

    # -- the sender thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closed:
                self._run_once()
        except BaseException as exc:  # noqa: BLE001 - every pending record must learn of it
            self._fatal = exc
            with self._lock:
                leftovers = list(self._incomplete)
                self._incomplete.clear()
            for b in leftovers:
                b.future.set_exception(exc)
            raise

    def _update_metadata_waiters(self) -> None:
        cluster = self.cluster
        if self._wanted_topics - cluster.interest:
            cluster.interest.update(self._wanted_topics)
            cluster.request_refresh()
        changed = False
        for topic in list(self._wanted_topics):
            meta = cluster.topics.get(topic)
            if meta is not None and meta.error_code == 0 and meta.partitions:
                n = len(meta.partitions)
                if self._partition_counts.get(topic) != n:
                    self._partition_counts[topic] = n
                    changed = True
            elif meta is not None:
                cluster.request_refresh()  # unknown topic / no leader yet: ask again
        if changed:
            with self._meta_cond:
                self._meta_cond.notify_all()

    def _run_once(self) -> None:
        cluster = self.cluster
        self._update_metadata_waiters()
        cluster.maybe_refresh()
        now = time.monotonic()
        wait = 0.1
        by_node: dict[int, list[_Batch]] = {}
        expired: list[_Batch] = []
        flushing = self._flushing > 0 or self._closing
        with self._lock:
            for (topic, partition), q in self._batches.items():
                if not q:
                    continue
                b = q[0]
                if b.in_flight:
                    continue
                if now >= b.deadline:
                    self._close_open(b)
                    expired.append(q.popleft())
                    continue
                if b.retry_at > now:
                    wait = min(wait, b.retry_at - now)
                    continue
                if not (b.full or len(q) > 1 or flushing or now - b.created >= self._linger):
                    wait = min(wait, b.created + self._linger - now)
                    continue
                leader = cluster.leader_for(topic, partition)
                if leader is None:
                    cluster.interest.add(topic)
                    cluster.request_refresh()
                    wait = min(wait, b.deadline - now)
                    continue
                self._close_open(b)
                by_node.setdefault(leader, []).append(b)
            # Batches made from here on compare their linger deadline with this; the
            # waits below only shorten the poll.
            self._sender_wakes_at = now + wait
        for b in expired:
            self._complete(b, DeliveryTimeoutError(
                f"{b.count()} record(s) for {b.topic}[{b.partition}] not acknowledged within "
                f"delivery_timeout_ms={self.config.delivery_timeout_ms}"
                + (f" (after {b.attempts} attempt(s))" if b.attempts else
                   " (the partition's leader could not be reached)")
            ))
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
        self._poller.poll(max(wait, 0.0))

    def _encode(self, b: _Batch, magic: int) -> bytes:
        if b.encoded is not None and b.encoded[0] == magic:
            return b.encoded[2]
        level = self.config.compression_level
        if b.columns is not None:
            data = codec.encode_columnar(b.columns, magic=magic, compression=self._codec,
                                         compression_level=level)
        elif magic == 2:
            data = codec.encode_record_batch(b.records, compression=self._codec,
                                             compression_level=level, timestamp=b.default_ts)
        else:
            if any(len(r) > 3 and r[3] for r in b.records):
                raise ConfigError(
                    f"records with headers need Produce v3+ (magic 2); the broker for "
                    f"{b.topic}[{b.partition}] speaks an older version"
                )
            recs = [r[:3] for r in b.records] if magic == 1 else [r[:2] for r in b.records]
            data = codec.encode_message_set(recs, magic=magic, compression=self._codec,
                                            compression_level=level, timestamp=b.default_ts)
        b.encoded = (magic, self._codec, data)
        return data

    def _send_produce(self, conn: Any, batches: list[_Batch]) -> list[_Batch]:
        """Send one Produce request with as many of ``batches`` as fit; returns the rest."""
        try:
            version = conn.version_for(PRODUCE)
        except Exception as exc:  # noqa: BLE001 - no version in common: every batch fails
            for b in batches:
                self._dequeue(b)
                self._complete(b, exc)
            return []
        magic = 2 if version >= 3 else 1 if version == 2 else 0
        topics: dict[str, list[Any]] = {}
        sent: list[_Batch] = []
        total = 64
        rest: list[_Batch] = []
        for b in batches:
            try:
                data = self._encode(b, magic)
            except Exception as exc:  # noqa: BLE001 - codec errors belong to this batch only
                self._dequeue(b)
                self._complete(b, exc)
                continue
            extra = len(data) + _PARTITION_OVERHEAD + (0 if b.topic in topics else len(b.topic) + _TOPIC_OVERHEAD)
            if sent and total + extra > self._max_request:
                rest.append(b)
                continue
            total += extra
            topics.setdefault(b.topic, []).append(_PartitionData(index=b.partition, records=data))
            sent.append(b)
        if not sent:
            return rest
        request = PRODUCE.Request(
            acks=self._acks, timeout_ms=self.config.request_timeout_ms,
            topic_data=[_TopicData(name=t, partition_data=p) for t, p in topics.items()],
        )
        for b in sent:
            b.in_flight = True
            b.attempts += 1
        fut = conn.send(PRODUCE, request, version, expects_response=self._acks != 0)
        fut.add_done_callback(lambda f: self._on_response(f, sent, conn.name))
        return rest

    def _dequeue(self, b: _Batch) -> None:
        with self._lock:
            q = self._batches.get((b.topic, b.partition))
            if q and q[0] is b:
                q.popleft()
            elif q and b in q:
                q.remove(b)

    def _complete(self, b: _Batch, result: Any) -> None:
        with self._lock:
            self._incomplete.discard(b)
            self._used_memory -= b.reserved
            b.reserved = 0
            self._space.notify_all()
        if isinstance(result, BaseException):
            b.future.set_exception(result)
        else:
            b.future.set_result(result)

    def _retry_or_fail(self, b: _Batch, exc: BaseException, retriable: bool) -> None:
        now = time.monotonic()
        if retriable and b.attempts <= self.config.retries and now < b.deadline and not self._closed:
            backoff = min(self.config.retry_backoff_ms * 2 ** (b.attempts - 1),
                          self.config.retry_backoff_max_ms) / 1000.0
            b.retry_at = now + backoff
            b.in_flight = False
            return
        self._dequeue(b)
        self._complete(b, exc)

    def _on_response(self, f: Future, sent: list[_Batch], broker: str) -> None:
        exc = f.exception()
        if exc is not None:
            self.cluster.request_refresh()
            for b in sent:
                self._retry_or_fail(b, exc, isinstance(exc, KafkaConnectionError))
            return
        resp = f.result()
        if resp is None:  # acks=0: nothing comes back
            for b in sent:
                self._dequeue(b)
                self._complete(b, (-1, -1))
            return
        results: dict[tuple[str, int], Any] = {}
        for t in resp.responses:
            for p in t.partition_responses:
                results[(t.name, p.index)] = p
        for b in sent:
            p = results.get((b.topic, b.partition))
            if p is None:
                self._retry_or_fail(b, KafkaConnectionError(
                    f"{broker} did not answer for {b.topic}[{b.partition}] in its Produce response"), True)
                continue
            code = p.error_code
            if code == 0:
                self._dequeue(b)
                self._complete(b, (p.base_offset, getattr(p, "log_append_time_ms", -1)))
                continue
            if code in REFRESH_METADATA_CODES:
                self.cluster.request_refresh()
            err = broker_error(code, f"producing {b.count()} record(s) to {b.topic}[{b.partition}] "
                                     f"on {broker}", getattr(p, "error_message", None))
            self._retry_or_fail(b, err, err.retriable)
