"""The producer's batching and sending decisions, with no I/O: which batch a record joins,
which batches are ready for which broker (linger, fullness, backoff, delivery deadlines),
the Produce request that carries them, and what its answer means for each batch
(acknowledged, retried after a backoff, or failed).  Memory accounting (buffer_memory)
is kept here; waiting for room is the shell's.

The sync producer (a sender thread, a lock around this state) and the asyncio producer
drive the same :class:`Accumulator`.  Time is passed in (monotonic seconds); each batch's
future comes from the shell's ``new_future`` and is resolved by the shell.

A record appended one by one is encoded into its batch right away (RecordBatch v2
framing), so sending a batch costs its header and CRC only.  send()'s common case is one
call: ``Appender.send`` (the sync producer's send() itself) or ``Appender.offer`` (the
asyncio one's), which appends to the open batch if it has room and leaves every decision
here to the full path.  ``Batch`` and ``Appender`` are compiled (kafkawire._accumulate)
when the codec is, else the pure-Python twin (kafkawire.protocol._accumulate_py);
``IMPLEMENTATION`` says which ("cython" or "python").
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from kafkawire import _twins, codec, errors
from kafkawire.errors import (
    REFRESH_METADATA_CODES,
    BufferExhaustedError,
    ConfigError,
    DeliveryTimeoutError,
    KafkaConnectionError,
    KafkaTimeoutError,
    RecordTooLargeError,
    broker_error,
)
from kafkawire.protocol import apis
from kafkawire.protocol.idempotence import (
    DUPLICATE_SEQUENCE_NUMBER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    ProducerIdentity,
    restamp,
)
from kafkawire.protocol.producer import produce_request

MESSAGE_TOO_LARGE = 10


class SplitOffsets:
    """What a batch split after MESSAGE_TOO_LARGE resolves to (its parts were written
    apart, KIP-126): each part's (first record's index, record count, (base offset, log
    append time) or the error it failed with).  A record's future asks it for its part."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[tuple[int, int, Any]]):
        self.parts = sorted(parts, key=lambda p: p[0])

    def _find(self, index: int) -> tuple[int, int, Any]:
        for part in self.parts:
            if part[0] <= index < part[0] + part[1]:
                return part
        raise IndexError(f"record {index} is in no part of the split batch")

    def part(self, index: int) -> tuple[int, int]:
        """(the offset of record ``index``, log append time); raises the error its part
        failed with."""
        start, _n, result = self._find(index)
        if isinstance(result, BaseException):
            raise result
        base, append_time = result
        return (base + index - start if base >= 0 else base), append_time

    def error(self, index: int) -> BaseException | None:
        result = self._find(index)[2]
        return result if isinstance(result, BaseException) else None

    def __repr__(self) -> str:
        return f"SplitOffsets({self.parts!r})"


class _Split:
    """A batch refused with MESSAGE_TOO_LARGE and resent in parts: the parts still
    pending and the outcomes of those done.  The batch stays incomplete (holding its
    memory, its future unresolved) until every part is done."""

    __slots__ = ("parent", "pending", "outcomes")

    def __init__(self, parent: Any):
        self.parent = parent
        self.pending = 0
        self.outcomes: list[tuple[int, int, Any]] = []

    def result(self) -> Any:
        if all(isinstance(r, BaseException) for _s, _n, r in self.outcomes):
            return min(self.outcomes, key=lambda o: o[0])[2]
        return SplitOffsets(self.outcomes)


_impl = _twins.load("kafkawire._accumulate", "kafkawire.protocol._accumulate_py")

IMPLEMENTATION: str = _impl.IMPLEMENTATION
Batch = _impl.Batch
Appender = _impl.Appender
murmur2 = _impl.murmur2  # kafkawire.core.partitioner.murmur2

__all__ = ["Accumulator", "Appender", "Batch", "IMPLEMENTATION", "RECORD_OVERHEAD", "BATCH_OVERHEAD",
           "murmur2", "prepare_record"]

PRODUCE = apis.get("Produce")

# Per-record bytes counted against buffer_memory and batch_size beyond key and value
# (record framing in the worst case; the same estimate the Java client makes).
RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61
# Produce request bytes outside the record batches, per partition and per topic.
_PARTITION_OVERHEAD = 8
_TOPIC_OVERHEAD = 4

# What to do about a retriable broker error that lasted until a batch's delivery deadline.
_GAVE_UP_FIX = {
    19: "bring the partition's replicas back (fewer are in sync than min.insync.replicas)",
    20: "bring the partition's replicas back (fewer are in sync than min.insync.replicas)",
    7: "check that the partition's followers are up (the leader waited for them in vain)",
    6: "check that the partition's replicas are up (its leadership kept moving)",
    5: "check that the partition's replicas are up (it had no leader)",
}


def as_bytes(what: str, value: Any) -> Any:
    """``value`` as bytes-like for a record's key or value (None stays None)."""
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


def record_tuples(b: Any) -> list[tuple]:
    """The records appended to ``b`` one by one, as (key, value, timestamp, headers)
    tuples: for a broker too old for RecordBatch (magic 0/1 message sets)."""
    (batch,) = codec.decode_batches(b.encode_v2(0, None, -1, -1, -1, False))
    return [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in batch.records]


def prepare_record(key: Any, value: Any, headers: Any, max_record_size: int, max_request: int
                   ) -> tuple[Any, Any, Any, int]:
    """(key, value, headers, size counted against batch_size and buffer_memory) of one
    record, its key and value made bytes-like; too large a record is refused here."""
    if key is None:
        size = RECORD_OVERHEAD
    else:
        if type(key) is not bytes:
            key = as_bytes("key", key)
        size = RECORD_OVERHEAD + len(key)
    if value is not None:
        if type(value) is not bytes:
            value = as_bytes("value", value)
        size += len(value)
    if headers is not None:
        headers = tuple(headers)
        size += sum(len(k) + (len(v) if v is not None else 0) + 10 for k, v in headers)
    if size > max_record_size:
        raise RecordTooLargeError(
            f"record of about {size} bytes is larger than max_request_size="
            f"{max_request}; raise max_request_size (and the broker's message.max.bytes)"
        )
    return key, value, headers, size


_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _header_pairs(headers: Any) -> tuple[tuple[bytes, Any], ...] | None:
    """A record's headers as (UTF-8 key bytes, value bytes-like or None) pairs; None if none."""
    if not headers:
        return None
    out = []
    for h in headers:
        try:
            hk, hv = h
        except (TypeError, ValueError):
            raise errors.encode_error(f"a header is a (key, value) pair, not {h!r:.60}") from None
        if type(hk) is str:
            try:
                hk = hk.encode("utf-8")
            except UnicodeEncodeError:
                raise errors.encode_error(f"header key {hk!r:.60} is not valid Unicode") from None
        elif isinstance(hk, (bytes, bytearray, memoryview)):
            hk = bytes(hk)
            try:
                hk.decode("utf-8")
            except UnicodeDecodeError:
                raise errors.encode_error(f"header key {hk!r:.60} is not valid UTF-8") from None
        else:
            raise errors.encode_error(f"header key must be str or bytes, not {type(hk).__name__}")
        if hv is not None and type(hv) is not bytes:
            try:
                hv = memoryview(hv).tobytes()
            except TypeError:
                raise errors.encode_error(
                    f"header value must be bytes-like or None, not {type(hv).__name__}") from None
        out.append((hk, hv))
    return tuple(out)


def _record_parts(record: tuple) -> tuple[Any, Any, int, Any]:
    """(key, value, timestamp, headers) of a record tuple (key, value, timestamp[, headers])
    as Batch.add takes them; a record the encoder would refuse is refused here, before
    anything is queued."""
    key, value, ts = record[0], record[1], record[2]
    headers = _header_pairs(record[3]) if len(record) > 3 else None
    if key is not None and type(key) is not bytes:
        key = memoryview(as_bytes("key", key)).tobytes()
    if value is not None and type(value) is not bytes:
        value = memoryview(as_bytes("value", value)).tobytes()
    if type(ts) is not int:
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise errors.encode_error(f"timestamp must be an int or None, not {type(ts).__name__}")
        ts = int(ts)
    if not _INT64_MIN <= ts <= _INT64_MAX:
        raise errors.encode_error(f"timestamp {ts} out of range for int64")
    return key, value, ts, headers


class Accumulator:
    """Every batch of one producer, by partition (``config``: its options)."""

    def __init__(self, config: Any, new_future: Callable[[], Any]):
        self.config = config
        self.new_future = new_future
        self.acks = config.acks
        self.compression = config.compression_type
        self.batch_size = max(config.batch_size, 1)
        self.linger = config.linger_ms / 1000.0
        self.max_request = config.max_request_size
        # The largest record: one that fits a batch fits a request.
        self.max_record_size = self.max_request - BATCH_OVERHEAD - 64
        self.delivery_timeout = config.delivery_timeout_ms / 1000.0
        self.buffer_memory = config.buffer_memory
        # Only partitions with a batch queued have a key (an emptied queue is deleted), so
        # a pass of the sender costs what is queued, not every partition ever written to.
        self.batches: dict[tuple[str, int], deque[Batch]] = {}
        # The batch of each partition that records are appended to (the last of its queue).
        self.open: dict[tuple[str, int], Batch] = {}
        self.incomplete: set[Batch] = set()
        # Why each batch waiting to be resent failed last time: a batch that runs out of
        # delivery_timeout_ms while it waits fails with that reason, not a bare timeout.
        self.last_error: dict[Batch, BaseException] = {}
        # The parts of batches split after MESSAGE_TOO_LARGE: part -> (its split, the index
        # of its first record in the batch split).  Parts are queued and sent as batches
        # are, but never incomplete: the batch split stands for them until all are done.
        self.parts: dict[Batch, tuple[_Split, int]] = {}
        # Split batches whose last part expired: expired_error() gives their result.
        self._split_results: dict[Batch, Any] = {}
        self.used_memory = 0
        # Set when closing a batch gave memory back (close_open): the shell wakes callers
        # waiting for room, then clears it.
        self.freed = False
        # None: neither idempotent nor transactional.
        self.identity: ProducerIdentity | None = None
        # A TransactionManager (protocol/transactions.py) when transactional_id is set.
        self.txn: Any = None
        if config.enable_idempotence:
            self.identity = ProducerIdentity(
                config.transactional_id, config.transaction_timeout_ms,
                explicit="enable_idempotence" in config._given, retry_backoff_ms=config.retry_backoff_ms)

    # -- appending -----------------------------------------------------------------------

    def prepare(self, key: Any, value: Any, headers: Any, timestamp: int | None, now_ms: int
                ) -> tuple[Any, Any, Any, int, int]:
        """A record as send() was given it, ready to append: (key, value, headers,
        timestamp, size).  The serializers applied, key and value bytes-like, too large a
        record refused (prepare_record), the timestamp ``now_ms`` (wall clock) if none."""
        c = self.config
        if c.key_serializer is not None:
            key = c.key_serializer(key)
        if c.value_serializer is not None:
            value = c.value_serializer(value)
        key, value, headers, size = prepare_record(key, value, headers, self.max_record_size, self.max_request)
        return key, value, headers, now_ms if timestamp is None else timestamp, size

    def reservation(self, size: int) -> int:
        """buffer_memory a new batch for a record of ``size`` takes: a batch at a time,
        as the Java client does, so appending to a batch needs no accounting."""
        return max(self.batch_size, BATCH_OVERHEAD + size)

    def has_room(self, reserve: int) -> bool:
        return self.used_memory + reserve <= self.buffer_memory or self.used_memory == 0

    def admit(self, tp: tuple[str, int], size: int) -> int:
        """Before a record of ``size`` bytes is appended to ``tp``: the transaction's
        checks (raising), and the buffer_memory a new batch for it takes (0: it joins the
        open batch); wait for :meth:`room_wait` to say 0 before appending."""
        if self.txn is not None:
            self.txn.check_send()
            self.txn.partition_used(tp)
        return self.reservation(size) if self.needs_new_batch(tp, size) else 0

    def room_wait(self, reserve: int, now: float, deadline: float) -> float:
        """0.0 once buffer_memory has room for a new batch of ``reserve`` bytes; else how
        long to wait for an acknowledged batch to free some (at most 0.1 s, then ask
        again).  BufferExhaustedError once ``deadline`` (max_block_ms) has passed."""
        if self.has_room(reserve):
            return 0.0
        remaining = deadline - now
        if remaining <= 0:
            raise BufferExhaustedError(
                f"buffer_memory={self.buffer_memory} bytes is full ({self.used_memory} in use) and "
                f"no room was freed within max_block_ms={self.config.max_block_ms}; the "
                f"brokers are slower than the producer, or unreachable")
        return min(remaining, 0.1)

    def needs_new_batch(self, tp: tuple[str, int], size: int) -> bool:
        batch = self.open.get(tp)
        return batch is None or (batch.size + size > self.batch_size and batch.count() > 0)

    def append(self, tp: tuple[str, int], record: tuple, size: int, reserve: int, now: float
               ) -> tuple[Batch, int, bool, bool]:
        """Append ``record`` to its partition's open batch (a new one, taking ``reserve``
        bytes, when :meth:`needs_new_batch`).  Returns (batch, index in it, whether a
        batch was made, whether a batch was closed for sending)."""
        key, value, ts, headers = _record_parts(record)
        made = closed = False
        batch = self.open.get(tp)
        if batch is None or (batch.size + size > self.batch_size and batch.count()):
            # A send() on another thread filled the batch since needs_new_batch() said it
            # had room (the compiled hot path appends without the lock): take the memory.
            reserve = reserve or self.reservation(size)
            self.used_memory += reserve
            if batch is not None:
                self.close_open(batch)
                closed = True
            batch = self.new_batch(tp[0], tp[1], now)
            batch.reserved = reserve
            made = True
        index = batch.add(key, value, ts, headers)
        batch.size += size
        if batch.size >= self.batch_size:
            self.close_open(batch)
            closed = True
        return batch, index, made, closed

    def new_batch(self, topic: str, partition: int, now: float) -> Batch:
        batch = Batch(topic, partition, now, now + self.delivery_timeout, self.new_future())
        # Room for the records up front, as the Java client's BufferPool gives a batch
        # batch_size bytes (beyond 1 MiB the buffer grows as records come).
        batch.allocate(min(self.batch_size, 1 << 20))
        q = self.batches.get((topic, partition))
        if q is None:
            q = self.batches[(topic, partition)] = deque()
        q.append(batch)
        self.incomplete.add(batch)
        self.open[(topic, partition)] = batch
        return batch

    def add_full(self, batch: Batch) -> None:
        """Queue a batch made whole (send_batch), after everything before it."""
        batch.full = True
        self.batches.setdefault((batch.topic, batch.partition), deque()).append(batch)
        self.incomplete.add(batch)

    def close_open(self, batch: Batch) -> None:
        """No record is appended to ``batch`` from now on (its encoding may be cached
        before it is sent; a record added after that would be lost)."""
        batch.full = True
        tp = (batch.topic, batch.partition)
        if self.open.get(tp) is batch:
            del self.open[tp]
        spare = batch.reserved - batch.size
        if spare > 0:
            # From now on it holds the memory its records take, not the batch_size it
            # reserved when new: with many partitions getting a few records each, batches
            # sent and awaiting their answers would otherwise fill buffer_memory long
            # before their bytes do, and send() would wait for room it does not need.
            batch.trim()
            batch.reserved = batch.size
            self.used_memory -= spare
            self.freed = True

    # -- sending -------------------------------------------------------------------------

    def collect(self, now: float, leader_for: Callable[[str, int], int | None], flushing: bool
                ) -> tuple[dict[int, list[Batch]], list[Batch], float, set[str]]:
        """The batches to send now, by leader; those past their delivery deadline
        (dequeued: fail them); how long until something is due (at most 0.1 s); the
        topics with a partition whose leader is unknown (refresh the metadata)."""
        wait = 0.1
        by_node: dict[int, list[Batch]] = {}
        expired: list[Batch] = []
        leaderless: set[str] = set()
        ident = self.identity
        if ident is not None and ident.fatal is not None:
            for q in self.batches.values():
                expired.extend(b for b in q if not b.in_flight)
                for b in q:
                    self.close_open(b)
            self.batches.clear()
            return by_node, expired, wait, leaderless
        # How many batches of a partition may be in flight together:
        # max_in_flight_requests_per_connection (at most 5 with idempotence: the broker
        # remembers a producer's last five batches per partition, to know a resent one).
        # Without idempotence a retried batch may land after the one behind it.  With it,
        # the broker refuses a batch whose sequence does not follow the last it wrote, so
        # the batches behind a failed one come back refused and are resent after it, in
        # sequence order: a retried batch goes only at the head of its queue (the
        # transactional producer too: its batches are idempotent ones).
        depth = self.config.max_in_flight_requests_per_connection
        in_order = ident is not None and ident.active
        emptied: list[tuple[str, int]] = []
        for (topic, partition), q in self.batches.items():
            # Each batch goes only when every batch before it is in flight.
            j = 0
            while j < len(q) and j < depth:
                b = q[j]
                if b.in_flight:
                    j += 1
                    continue
                if in_order and j and (b.attempts or (topic, partition) not in ident.written):
                    # Resent only once every batch before it is acknowledged; and behind
                    # a partition's first batch under this epoch, nothing until it is
                    # written (see ProducerIdentity.written).
                    break
                if now >= b.deadline:
                    if j == 0:  # a later batch waits its turn to expire
                        self.close_open(b)
                        q.popleft()
                        if not q:
                            emptied.append((topic, partition))
                        if ident is not None:
                            ident.failed(b)
                        if b in self.parts:
                            # The batch split fails (or resolves) as its parts do.
                            done = self._part_done(b, self.expired_error(b))
                            if done is not None:
                                self._split_results[done[0]] = done[1]
                                expired.append(done[0])
                        else:
                            expired.append(b)
                    break
                if ident is not None and not ident.may_send(b):
                    break  # waiting for a producer id (the InitProducerId answer wakes the sender)
                if self.txn is not None and not self.txn.may_send((topic, partition)):
                    break  # not in the transaction yet (AddPartitionsToTxn)
                if b.retry_at > now:
                    wait = min(wait, b.retry_at - now)
                    break
                if not (b.full or len(q) > j + 1 or flushing or now - b.created >= self.linger):
                    wait = min(wait, b.created + self.linger - now)
                    break
                leader = leader_for(topic, partition)
                if leader is None:
                    leaderless.add(topic)
                    wait = min(wait, b.deadline - now)
                    break
                self.close_open(b)
                by_node.setdefault(leader, []).append(b)
                j += 1
        for tp in emptied:
            del self.batches[tp]
        return by_node, expired, wait, leaderless

    def due_alone(self, b: Batch, now: float, leader_for: Callable[[str, int], int | None]) -> int | None:
        """The leader to send ``b`` to at once, by itself, when it is the only batch not
        done and :meth:`collect` would send it now (due, allowed, not expired); else
        None, and collect() decides.  A record sent one at a time takes this way: the
        caller's pass skips the look at every partition."""
        if len(self.incomplete) != 1 or b.in_flight or b.retry_at > now or now >= b.deadline:
            return None
        ident = self.identity
        if ident is not None and not ident.may_send(b):
            return None  # no producer id yet, or a fatal error: collect() handles both
        if self.txn is not None and not self.txn.may_send((b.topic, b.partition)):
            return None
        if not (b.full or now - b.created >= self.linger):
            return None
        return leader_for(b.topic, b.partition)

    def takes_lone(self) -> bool:
        """Whether a record sent now goes by :meth:`lone_request`: nothing else pending,
        linger_ms=0 (collect() would send its batch at once), an answer to pair with the
        request (acks 1 or all), not transactional (the transaction's partitions and
        markers take the general path).  Both shells ask before appending."""
        return not self.incomplete and self.linger == 0 and self.acks != 0 and self.txn is None

    def lone_request(self, topic: str, partition: int, record: tuple, size: int, now: float, versions: Any
                     ) -> tuple[Batch, tuple, int] | None:
        """A record sent while no other batch is pending, as a batch of its own and the
        fields of the Produce request that carries it (transactional_id, acks,
        timeout_ms, topic, partition, records: the leader's Connection.send_produce_one
        frames them), marked in flight, at the version ``versions`` (the leader's sans-IO
        Connection) chose: (batch, fields, version).  What produce_request would make of
        the batch, without its look at many batches and without a request object: this
        runs before the record's write (issue 23).  The shell writes the request, then
        books the batch (:meth:`book_lone`), so that bookkeeping runs while the request is
        on its way.  None: the general path's (append) to take (no Produce version in
        common or one before v3, no producer id yet, a fatal error, a record that fails to
        encode: append then reports each).  Only when :meth:`takes_lone` says so."""
        try:
            version = versions.version_for(PRODUCE)
        except Exception:  # noqa: BLE001 - no version in common: the general path fails the record
            return None
        if version < 3:
            return None  # message sets: produce_request's checks and encoders
        b = Batch(topic, partition, now, now + self.delivery_timeout, self.new_future())
        ident = self.identity
        if ident is not None and not ident.may_send(b):
            return None
        key, value, ts, headers = _record_parts(record)
        b.add(key, value, ts, headers)  # before the stamp: the partition's next sequence counts it
        stamping = ident is not None and ident.active
        try:
            data = self._encode_stamped(b, 2, stamping)
        except Exception:  # noqa: BLE001 - append reports it, for this record alone
            return None
        b.size += size
        b.reserved = b.size
        b.full = True
        self._sent(b)
        return b, (ident.transactional_id if stamping else None, self.acks, self._timeout_ms(b.deadline, now), topic,
                   partition, data), version

    def book_lone(self, b: Batch) -> None:
        """Book ``b``, sent by :meth:`lone_request`, as append and collect would have:
        queued first in its partition (a batch queued there since, by another thread's
        send(), was sent after it), pending, holding its memory."""
        tp = (b.topic, b.partition)
        q = self.batches.get(tp)
        if q is None:
            q = self.batches[tp] = deque()
        q.appendleft(b)
        self.incomplete.add(b)
        self.used_memory += b.reserved

    def init_wanted(self, now: float) -> bool:
        """Whether the shell should send ``identity.init_request`` now: no producer id
        yet, or an epoch bump that no batch in flight or of unknown outcome holds back."""
        ident = self.identity
        if ident is None or not ident.wants_init(now):
            return False
        if ident.producer_id < 0:
            return True
        # A copy: the sync shell asks this outside its lock, while send() may add a queue.
        if any(self._holds_bump(q) for q in list(self.batches.values())):
            return False
        return not ident.bump_locally()

    def _holds_bump(self, q: deque[Batch]) -> bool:
        """A batch of this partition is in flight, or may have been written under the
        current epoch (to be resolved under it first).  Behind a batch the broker refused,
        none of the same epoch can have been written: each sequence must follow the last
        written one."""
        ident = self.identity
        refused = False
        for b in q:
            if b.in_flight:
                return True
            if ident.unresolved(b) and not refused:
                return True
            if b.attempts and not b.unknown and (b.pid, b.epoch) == (ident.producer_id, ident.epoch):
                refused = True
        return False

    def expired_error(self, b: Batch, meta: Any = None) -> BaseException:
        """What a batch that outlived delivery_timeout_ms fails with; ``meta`` (the
        shell's ClusterMetadata) tells a partition that does not exist from a leader
        that could not be reached.  (A batch split after MESSAGE_TOO_LARGE whose last
        part expired: what its parts came to, a SplitOffsets where some were written.)"""
        if b in self._split_results:
            return self._split_results.pop(b)
        if self.identity is not None and self.identity.fatal is not None:
            return self.identity.fatal
        last = self.last_error.get(b)
        if isinstance(last, errors.BrokerError):
            # The broker kept refusing it (NOT_ENOUGH_REPLICAS while replicas are down, a
            # leader moving): that is why it was not delivered, so the record fails with
            # the broker's typed error, as when that answer comes at the deadline itself.
            exc = type(last)(self._gave_up(b, last))
            exc.code = last.code
            exc.__cause__ = last
            return exc
        if last is not None:
            exc = DeliveryTimeoutError(
                f"{b.count()} record(s) for {b.topic}[{b.partition}] not acknowledged within "
                f"delivery_timeout_ms={self.config.delivery_timeout_ms} (after {b.attempts} "
                f"attempt(s), the last failed with {last}); check that the partition's leader "
                f"is up and reachable, or raise delivery_timeout_ms")
            exc.__cause__ = last
            return exc
        if b.attempts:
            why = f" (after {b.attempts} attempt(s))"
        else:
            topic = meta.topics.get(b.topic) if meta is not None else None
            count = len(topic.partitions) if topic is not None and topic.error_code == 0 else 0
            why = (f" (the topic has {count} partition(s), so partition {b.partition} does not "
                   f"exist: send to one of 0..{count - 1} or add partitions)"
                   if count and b.partition >= count else
                   " (the partition's leader could not be reached)")
        return DeliveryTimeoutError(
            f"{b.count()} record(s) for {b.topic}[{b.partition}] not acknowledged within "
            f"delivery_timeout_ms={self.config.delivery_timeout_ms}" + why)

    def _gave_up(self, b: Batch, last: Any) -> str:
        """The message of a broker error that outlasted a batch's delivery_timeout_ms."""
        fix = _GAVE_UP_FIX.get(last.code, "fix what the error names")
        return (f"{b.count()} record(s) for {b.topic}[{b.partition}] not acknowledged within "
                f"delivery_timeout_ms={self.config.delivery_timeout_ms}: {b.attempts} attempt(s), "
                f"the last refused with {last.name} ({last.code}): {last.meaning} Retried until "
                f"the deadline: {fix}, or raise delivery_timeout_ms to wait longer")

    def encode(self, b: Batch, magic: int) -> bytes:
        stamp = (b.pid, b.epoch, b.sequence)
        transactional = self.identity is not None and self.identity.transactional
        if b.encoded is not None and b.encoded[0] == magic:
            if magic < 2 or b.encoded[3] == stamp:
                return b.encoded[2]
            data = restamp(b.encoded[2], *stamp, transactional)
            b.encoded = (magic, b.encoded[1], data, stamp)
            return data
        level = self.config.compression_level
        if b.columns is not None:
            data = codec.encode_columnar(b.columns, magic=magic, compression=self.compression,
                                         compression_level=level, producer_id=b.pid, producer_epoch=b.epoch,
                                         base_sequence=b.sequence, is_transactional=transactional)
        elif magic == 2 and b.records is None:  # appended one by one: encoded already
            data = b.encode_v2(self.compression, level, b.pid, b.epoch, b.sequence, transactional)
        elif magic == 2:
            data = codec.encode_record_batch(b.records, compression=self.compression,
                                             compression_level=level, timestamp=b.default_ts,
                                             producer_id=b.pid, producer_epoch=b.epoch,
                                             base_sequence=b.sequence, is_transactional=transactional)
        else:
            records = b.records if b.records is not None else record_tuples(b)
            if any(len(r) > 3 and r[3] for r in records):
                raise ConfigError(
                    f"records with headers need Produce v3+ (magic 2); the broker for "
                    f"{b.topic}[{b.partition}] speaks an older version"
                )
            recs = [r[:3] for r in records] if magic == 1 else [r[:2] for r in records]
            data = codec.encode_message_set(recs, magic=magic, compression=self.compression,
                                            compression_level=level, timestamp=b.default_ts)
        b.encoded = (magic, self.compression, data, stamp)
        return data

    def _encode_stamped(self, b: Batch, magic: int, stamping: bool) -> bytes:
        """``b``'s records at ``magic``, stamped first with this producer's id, epoch and
        sequence when ``stamping``; a batch that fails to encode gives its sequence back
        (never sent: it is the next batch's) and raises."""
        if stamping:
            self.identity.stamp(b)
        try:
            return self.encode(b, magic)
        except Exception:
            if stamping:
                self.identity.failed(b)
            raise

    @staticmethod
    def _sent(b: Batch) -> None:
        """``b`` goes out in a Produce request: in flight, one attempt more (read by the
        retry budget, the expiry error and the idempotent producer's ordering)."""
        b.in_flight = True
        b.attempts += 1

    def _timeout_ms(self, first_deadline: float, now: float) -> int:
        """A Produce request's timeout_ms: request_timeout_ms, or less, to end at the
        first delivery deadline of its batches.  With acks=all the leader holds the
        request until the in-sync replicas have the records, up to timeout_ms.  Waiting
        past that deadline is of no use, and a broker asked to answer by then lets the
        batch fail by its deadline with the broker's REQUEST_TIMED_OUT, instead of later
        by the connection's request timeout (replicas down, no quorum to shrink the ISR)."""
        return max(1, min(self.config.request_timeout_ms, int((first_deadline - now) * 1000)))

    def produce_request(self, batches: list[Batch], version: int, now: float | None = None
                        ) -> tuple[Any, list[Batch], list[Batch], list[tuple[Batch, BaseException]]]:
        """One Produce request (None if nothing fits) with as many of ``batches`` as fit
        max_request_size: (request, the batches it carries (marked in flight), the rest,
        the batches that failed to encode, with their errors: dequeue and fail them).
        ``now`` (monotonic seconds) lets the request's timeout end at the batches'
        delivery deadline."""
        magic = 2 if version >= 3 else 1 if version == 2 else 0
        topics: dict[str, list[tuple[int, Any]]] = {}
        sent: list[Batch] = []
        rest: list[Batch] = []
        failed: list[tuple[Batch, BaseException]] = []
        total = 64
        ident = self.identity
        if ident is not None and ident.active and magic < 2:
            ident.unsupported(f"the broker speaks Produce v{version} (message format {magic}), "
                              f"which carries no producer id")
            if ident.fatal is not None:
                return None, sent, rest, [(b, ident.fatal) for b in batches]
        stamping = ident is not None and ident.active
        # One batch per partition in a request (a broker takes a partition once); a
        # partition's later batches wait for later requests, in their order.
        held: set[tuple[str, int]] = set()
        for b in batches:
            tp = (b.topic, b.partition)
            if tp in held:
                rest.append(b)
                continue
            held.add(tp)
            try:
                data = self._encode_stamped(b, magic, stamping)
            except Exception as exc:  # noqa: BLE001 - codec errors belong to this batch only
                failed.append((b, exc))
                continue
            extra = len(data) + _PARTITION_OVERHEAD + (0 if b.topic in topics else len(b.topic) + _TOPIC_OVERHEAD)
            if sent and total + extra > self.max_request:
                rest.append(b)
                continue
            total += extra
            topics.setdefault(b.topic, []).append((b.partition, data))
            sent.append(b)
        if not sent:
            return None, sent, rest, failed
        timeout_ms = self.config.request_timeout_ms
        if now is not None:
            timeout_ms = self._timeout_ms(min(b.deadline for b in sent), now)
        request = produce_request(ident.transactional_id if stamping else None, self.acks, timeout_ms, topics)
        for b in sent:
            self._sent(b)
        return request, sent, rest, failed

    def results(self, resp: Any, sent: list[Batch], broker: str) -> tuple[list[tuple[Batch, Any, bool]], bool]:
        """What a Produce answer means for each batch it carried: (batch, (base offset,
        log append time) or the error, whether the error is retriable), and whether the
        metadata should be refreshed."""
        out: list[tuple[Batch, Any, bool]] = []
        if resp is None:  # acks=0: nothing comes back
            return [(b, (-1, -1), False) for b in sent], False
        refresh = False
        answers: dict[tuple[str, int], Any] = {}
        for t in resp.responses:
            for p in t.partition_responses:
                answers[(t.name, p.index)] = p
        for b in sent:
            p = answers.get((b.topic, b.partition))
            if p is None:
                out.append((b, KafkaConnectionError(
                    f"{broker} did not answer for {b.topic}[{b.partition}] in its Produce response"), True))
                continue
            code = p.error_code
            if code == 0:
                out.append((b, (p.base_offset, getattr(p, "log_append_time_ms", -1)), False))
                continue
            if code == DUPLICATE_SEQUENCE_NUMBER and self.identity is not None:
                out.append((b, (-1, -1), False))  # an earlier attempt wrote it; where is not said
                continue
            refresh = refresh or code in REFRESH_METADATA_CODES
            err = broker_error(code, f"producing {b.count()} record(s) to {b.topic}[{b.partition}] "
                                     f"on {broker}", getattr(p, "error_message", None))
            retriable = err.retriable
            if code == OUT_OF_ORDER_SEQUENCE_NUMBER and self._behind_unacknowledged(b):
                # Refused because a batch before it is not written yet (it failed, or is
                # being resent): not a gap in the sequences, so resent after that one.
                b.unknown = False
                retriable = True
            elif self.identity is not None and self.identity.produce_error(b, code):
                retriable = True
            out.append((b, err, retriable))
        return out, refresh

    def settle(self, sent: list[Batch], resp: Any, exc: BaseException | None, broker: str, now: float,
               closed: bool) -> tuple[list[tuple[Batch, Any]], bool]:
        """A Produce request's outcome, its answer ``resp`` or ``exc`` (why there is none):
        the batches it ends, dequeued, each with its result ((base offset, log append
        time)) or error, for the shell to complete; those to be resent are scheduled
        (:meth:`retry`).  And whether to refresh the metadata."""
        if exc is None and resp is not None and len(sent) == 1 and not self.parts:
            # One batch acknowledged (a record sent one at a time): the general way's
            # result in fewer steps, as this runs before the waiting caller learns (4 µs
            # of its p50 on Kafka, bench/README.md).  Anything else takes the general way.
            b = sent[0]
            topics = resp.responses
            if len(topics) == 1 and topics[0].name == b.topic:
                parts = topics[0].partition_responses
                if len(parts) == 1 and parts[0].index == b.partition and parts[0].error_code == 0:
                    p = parts[0]
                    if self.identity is not None:
                        self.identity.acknowledged(b)
                    self.dequeue(b)
                    return [(b, (p.base_offset, getattr(p, "log_append_time_ms", -1)))], False
        if exc is not None:
            # No answer (connection lost, timed out): the batches may be resent.
            retriable = isinstance(exc, (KafkaConnectionError, KafkaTimeoutError))
            outcomes: list[tuple[Batch, Any, bool]] = [(b, exc, retriable) for b in sent]
            refresh = True
        else:
            outcomes, refresh = self.results(resp, sent, broker)
        done = []
        ident = self.identity
        for b, result, retriable in outcomes:
            if isinstance(result, BaseException):
                if (getattr(result, "code", None) == MESSAGE_TOO_LARGE and not closed and b.count() > 1
                        and b.records is None and b.columns is None):
                    self.split(b)
                    continue
                if self.retry(b, result, retriable, now, closed):
                    continue
            elif ident is not None:
                ident.acknowledged(b)
            self.dequeue(b)
            if b in self.parts:
                parent = self._part_done(b, result)
                if parent is not None:
                    done.append(parent)
                continue
            done.append((b, result))
        return done, refresh

    def split(self, b: Batch) -> None:
        """``b`` was refused as too large (MESSAGE_TOO_LARGE) and holds more than one
        record: it is replaced in its queue by its two halves, sent as any batch (each
        halved again if refused again, as the Java client splits, KIP-126), so that only
        a record too large by itself fails.  Under idempotence the halves keep ``b``'s
        producer id, epoch and sequences (the first half ``b``'s, the second half's
        following it), so the batches behind ``b`` keep theirs: the broker wrote none of
        ``b``'s records."""
        records = record_tuples(b)
        got = self.parts.pop(b, None)
        if got is None:
            split, start = _Split(b), 0
            b.in_flight = False
        else:
            split, start = got
            split.pending -= 1
            b.free()
        self.last_error.pop(b, None)
        half = len(records) // 2
        halves = []
        seq = b.sequence
        for i, chunk in ((0, records[:half]), (half, records[half:])):
            part = Batch(b.topic, b.partition, b.created, b.deadline, None)
            for r in chunk:
                key, value, ts, headers = _record_parts(r)
                part.add(key, value, ts, headers)
                # Counted as send() counted it (no limit: the record was admitted then).
                part.size += prepare_record(key, value, headers, _INT64_MAX, 0)[3]
            part.full = True
            if seq >= 0:
                part.pid, part.epoch, part.sequence = b.pid, b.epoch, seq
                seq = (seq + len(chunk)) & 0x7FFFFFFF
            self.parts[part] = (split, start + i)
            split.pending += 1
            halves.append(part)
        q = self.batches.setdefault((b.topic, b.partition), deque())
        at = q.index(b) if b in q else 0
        if b in q:
            del q[at]
        q.insert(at, halves[1])
        q.insert(at, halves[0])

    def _part_done(self, part: Batch, result: Any) -> tuple[Batch, Any] | None:
        """A part of a split batch is done with ``result``: (the batch split, its result)
        once every part is."""
        split, start = self.parts.pop(part)
        split.outcomes.append((start, part.count(), result))
        split.pending -= 1
        self.last_error.pop(part, None)
        if isinstance(result, BaseException) and self.txn is not None:
            self.txn.batch_failed(result)
        part.free()
        if split.pending:
            return None
        return split.parent, split.result()

    def _behind_unacknowledged(self, b: Batch) -> bool:
        """An idempotent batch of ``b``'s partition, sent before it under the same
        producer id and epoch, is not acknowledged yet (the queue keeps a partition's
        unacknowledged batches in send order)."""
        ident = self.identity
        if ident is None or not ident.active:
            return False
        q = self.batches.get((b.topic, b.partition))
        if not q or q[0] is b:
            return False
        head = q[0]
        return head.sequence >= 0 and (head.pid, head.epoch) == (b.pid, b.epoch)

    def retry(self, b: Batch, exc: BaseException, retriable: bool, now: float, closed: bool) -> bool:
        """Schedule ``b`` again after its backoff if it may be retried (True); else the
        caller dequeues and fails it.  ``exc``: why this attempt failed."""
        ident = self.identity
        if ident is not None and isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
            ident.no_answer(b)
        if retriable and b.attempts <= self.config.retries and now < b.deadline and not closed:
            backoff = min(self.config.retry_backoff_ms * 2 ** (b.attempts - 1),
                          self.config.retry_backoff_max_ms) / 1000.0
            b.retry_at = now + backoff
            b.in_flight = False
            self.last_error[b] = exc
            return True
        if retriable and not closed and now >= b.deadline and isinstance(exc, errors.BrokerError):
            # The caller fails the batch with this answer: say that it was retried to the end.
            exc.args = (self._gave_up(b, exc),)
        if ident is not None:
            ident.failed(b)
        return False

    def dequeue(self, b: Batch) -> None:
        tp = (b.topic, b.partition)
        q = self.batches.get(tp)
        if not q:
            return
        if q[0] is b:
            q.popleft()
        elif b in q:
            q.remove(b)
        if not q:
            del self.batches[tp]

    def release(self, b: Batch) -> None:
        """``b`` is done (acknowledged or failed): its memory is free again."""
        self.incomplete.discard(b)
        self.last_error.pop(b, None)
        self.used_memory -= b.reserved
        b.reserved = 0
        b.free()  # its encoded records (record futures may keep the batch a while)

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"buffered_bytes": self.used_memory, "incomplete_batches": len(self.incomplete)}
        if self.identity is not None:
            out.update(self.identity.describe())
        return out

    def drop_unsent(self) -> list[Batch]:
        """Dequeue every batch never sent (an aborted transaction's); they are to fail."""
        out = []
        emptied = []
        for tp, q in self.batches.items():
            keep = [b for b in q if b.attempts or b.in_flight]
            out.extend(b for b in q if not (b.attempts or b.in_flight))
            q.clear()
            q.extend(keep)
            if not keep:
                emptied.append(tp)
        for tp in emptied:
            del self.batches[tp]
        for b in out:
            self.close_open(b)
        # Parts of split batches: the batch split fails in their place, once none of its
        # parts is left (the transaction is aborted: its written parts are aborted too).
        parents = []
        for b in [b for b in out if b in self.parts]:
            out.remove(b)
            split, _start = self.parts.pop(b)
            split.pending -= 1
            b.free()
            if not split.pending:
                parents.append(split.parent)
        return out + parents

    def drop_all(self) -> list[Batch]:
        """Forget every batch (the producer is closing); the ones still incomplete."""
        left = list(self.incomplete)
        for b in self.open.values():
            b.full = True  # closed: the hot path no longer appends to it (Appender)
        self.incomplete.clear()
        self.last_error.clear()
        self.parts.clear()
        self._split_results.clear()
        self.batches.clear()
        self.open.clear()
        return left

