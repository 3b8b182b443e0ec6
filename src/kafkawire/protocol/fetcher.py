"""The consumer's fetching without I/O: which partitions to fetch from which broker
and from what offset, what a Fetch response means for each partition, and the records
poll() hands out, with every position kept here.  The sync consumer drives it today
(sending the requests, feeding back the answers) and an asyncio consumer can drive the
same one.

Fetches are long polls (``fetch_max_wait_ms``, ``fetch_min_bytes``), one per leader
broker, bounded by ``fetch_max_bytes`` and ``max_partition_fetch_bytes``.  Up to two
fetch responses per partition are buffered (a partition is fetched again while the
previous response is still being handed out), which bounds memory.

Each broker keeps a fetch session (KIP-227, Fetch v7+): after the first, full request a
Fetch lists only the partitions whose fetch offset changed (and forgets those no longer
fetched), and the broker answers only for partitions with news, so an assigned partition
without data costs nothing per fetch; the poll loop touches only partitions with data
buffered, and plans again only after something changed.

With ``client_rack`` set, each Fetch names the consumer's rack (v11+) and a leader whose
broker runs a replica selector may name a closer replica to read from (KIP-392): the
partition is then fetched from that replica until the lease ends (metadata_max_age_ms, as
the Java client), the replica answers with an error or fails, or it leaves the metadata,
and from the leader again after that.

Under read_committed, batches of aborted transactions are dropped on their headers before
anything is decoded, by the Fetch answer's aborted_transactions list and the producers'
ABORT markers, as Kafka's consumer does (KIP-98); control batches are never handed out.

This module does no I/O.
"""

from __future__ import annotations

import gc
import struct
from collections import deque
from typing import Any, Iterator, Mapping

from kafkawire import codec, errors
from kafkawire.codec import _decode_consumer_records
from kafkawire.errors import (
    REFRESH_METADATA_CODES,
    KafkaConnectionError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    broker_error,
)
from kafkawire.protocol import apis

__all__ = ["Fetcher", "EARLIEST", "LATEST", "ConsumerRecord", "TopicPartition", "FetchedBatch",
           "OffsetAndTimestamp", "PartitionState", "as_topic_partition"]

FETCH = apis.get("Fetch")
_FetchTopic = FETCH.Request.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_Forgotten = FETCH.Request.ForgottenTopic

#: ListOffsets' timestamps for "the first offset" and "the offset after the last record".
EARLIEST, LATEST = -2, -1


class TopicPartition(tuple):
    """``(topic, partition)``."""

    __slots__ = ()

    def __new__(cls, topic: str, partition: int) -> TopicPartition:
        return tuple.__new__(cls, (topic, partition))

    topic = property(lambda self: self[0])
    partition = property(lambda self: self[1])

    def __repr__(self) -> str:
        return f"TopicPartition({self[0]!r}, {self[1]})"


#: One record: ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestamp_type``,
#: ``key``, ``value``, ``headers`` (a tuple of (str, bytes or None)), all read-only;
#: ``ConsumerRecord(topic, partition, offset, timestamp, timestamp_type, key, value,
#: headers=())`` makes one.  The codec's class: poll()'s records are made by the decoder
#: straight from the fetched batches, one object per record (a Python object wrapping a
#: decoded record cost more than the decoding).
ConsumerRecord = codec._ConsumerRecord


class FetchedBatch:
    """Records of one partition from one fetch, as :class:`kafkawire.codec.Columns`.

    ``last_stable_offset`` is the end a read_committed consumer can read up to (-1 when
    the broker did not say); under read_uncommitted it is the broker's, for information.
    """

    __slots__ = ("topic", "partition", "columns", "high_watermark", "last_stable_offset")

    def __init__(self, topic: str, partition: int, columns: Any, high_watermark: int,
                 last_stable_offset: int = -1):
        self.topic = topic
        self.partition = partition
        self.columns = columns
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset

    def __len__(self) -> int:
        return len(self.columns)

    def __repr__(self) -> str:
        return f"<FetchedBatch {self.topic}[{self.partition}] {len(self.columns)} records>"


class OffsetAndTimestamp:
    __slots__ = ("offset", "timestamp")

    def __init__(self, offset: int, timestamp: int):
        self.offset = offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return f"OffsetAndTimestamp(offset={self.offset}, timestamp={self.timestamp})"


# Fetch responses buffered per partition, not yet decoded: the next fetch goes out while
# the caller works through the previous one (bounds memory to about this many times
# max_partition_fetch_bytes per partition, plus the records poll() has yet to return).
_MAX_PENDING = 2


class PartitionState:
    __slots__ = ("position", "buffer", "pending", "txns", "fetch_offset", "high_watermark",
                 "last_stable_offset", "paused", "reset_to")

    def __init__(self) -> None:
        self.position: int | None = None
        # Decoded records poll() has yet to return (max_records cut them off), or None.
        self.buffer: list[Any] | None = None
        # Raw records data of fetch responses, in offset order, not yet decoded.
        self.pending: deque[Any] = deque()
        # read_committed: one _AbortedTxns (or None, nothing to drop) per entry of pending.
        self.txns: deque[_AbortedTxns | None] = deque()
        # The offset after everything buffered (where the next fetch starts), None when
        # unknown (nothing more is fetched until the buffers are drained).
        self.fetch_offset: int | None = None
        self.high_watermark = -1
        # read_committed: the offset of the first record of the earliest open transaction
        # (the high watermark when none is open); -1 when the broker did not say (Fetch v0-v3).
        self.last_stable_offset = -1
        self.paused = False
        self.reset_to: int | None = None

    def clear(self) -> None:
        self.buffer = None
        self.pending.clear()
        self.txns.clear()
        self.fetch_offset = None

    def buffered(self) -> bool:
        return self.buffer is not None or bool(self.pending)

    def next_fetch(self) -> int | None:
        """The offset the next fetch of this partition asks for (None: do not fetch)."""
        if self.buffer is None and not self.pending:
            return self.position
        if len(self.pending) >= _MAX_PENDING:
            return None
        return self.fetch_offset


_HEAD = struct.Struct(">qi")  # base offset, batch length: the start of every log entry
_INT32 = struct.Struct(">i")
# RecordBatch header from the partition leader epoch: epoch, magic, crc, attributes,
# last offset delta, base and max timestamps, producer id (KIP-98 layout).
_V2_HEAD = struct.Struct(">ibIhiqqq")
_TRANSACTIONAL, _CONTROL = 0x10, 0x20  # RecordBatch attribute bits
_ABORT = 0  # control record type of an ABORT marker (COMMIT is 1)


class _AbortedTxns:
    """read_committed state for one Fetch response of one partition: the response's
    aborted transactions not reached yet, and the producers whose aborted transaction is
    under way at the current batch (Kafka's consumer keeps the same two, per response)."""

    __slots__ = ("todo", "producers")

    def __init__(self, aborted: Any):
        # (first_offset, producer_id), latest first: the next one to reach is popped.
        self.todo = sorted(((a.first_offset, a.producer_id) for a in aborted), reverse=True)
        self.producers: set[int] = set()


def _control_type(batch: Any, offset: int) -> int:
    """The type of a control batch's marker (0 ABORT, 1 COMMIT), read from its key."""
    records = batch.records
    key = records[0].key if records else None
    if key is None or len(key) < 4:
        raise errors.corrupt("control batch", offset, f"its record key {key!r} is not a version and a type")
    return int.from_bytes(key[2:4], "big", signed=True)


def _drop_aborted(data: Any, txns: _AbortedTxns, check_crcs: bool) -> tuple[Any, int | None]:
    """``data`` without the batches of aborted transactions, by Kafka's read_committed rule,
    and the offset after its last complete entry.

    A transactional batch whose producer has an aborted transaction starting at or before
    the batch's last offset is dropped, until that producer's ABORT marker.  Every batch
    belongs wholly to one transaction, so this works on the batch headers and the record
    bytes of dropped batches are never decoded.  Control batches stay (the decoders skip
    them).  The first element is ``data`` itself when nothing is dropped; a zero-copy slice
    when what is kept is contiguous; otherwise a copy of the kept batches only.
    """
    size = len(data)
    pos = 0
    keep_from = 0  # start of the run of kept entries being built
    runs: list[tuple[int, int]] = []
    next_offset = None
    todo, producers = txns.todo, txns.producers
    while pos + 12 <= size:
        base, length = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > size:
            break  # a batch cut off by the size limit: left for the decoder to stop at
        if length < 49 or data[pos + 16] != 2:
            next_offset = base + 1  # a legacy entry (no producer id) carries its last offset
            pos = end
            continue
        _epoch, _magic, crc, attributes, last_delta, _t0, _t1, producer_id = _V2_HEAD.unpack_from(data, pos + 12)
        last = base + last_delta
        next_offset = last + 1
        drop = False
        if producer_id >= 0:
            while todo and todo[-1][0] <= last:
                producers.add(todo.pop()[1])
            if attributes & _CONTROL:
                if producer_id in producers:
                    # One small batch per transaction: decoding it checks its CRC too.
                    (marker,) = codec.decode_batches(data[pos:end], start_offset=0, check_crcs=check_crcs)
                    if _control_type(marker, base) == _ABORT:
                        producers.discard(producer_id)
            elif attributes & _TRANSACTIONAL and producer_id in producers:
                # A batch whose CRC does not match is kept, so the decoder raises as usual.
                drop = not check_crcs or codec.crc32c(data[pos + 21:end]) == crc
        if drop:
            if pos > keep_from:
                runs.append((keep_from, pos))
            keep_from = end
        pos = end
    if keep_from == 0:
        return data, next_offset
    if keep_from < size:
        runs.append((keep_from, size))
    if len(runs) == 1:
        start, stop = runs[0]
        return memoryview(data)[start:stop], next_offset
    view = memoryview(data)
    return b"".join([view[start:stop] for start, stop in runs]), next_offset


def _next_offset(data: Any) -> int | None:
    """The offset after the last complete RecordBatch in ``data``, read from the batch
    headers alone (the columnar path needs nothing else from them); None when there is
    no complete batch or an entry is not magic 2 (decode_batches handles those)."""
    size = len(data)
    pos = 0
    last = None
    while pos + 27 <= size:
        base, length = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > size:
            break  # a batch cut off by the fetch size limit: fetched again next time
        if length < 15 or data[pos + 16] != 2:
            return None
        last = base + _INT32.unpack_from(data, pos + 23)[0]
        pos = end
    return None if last is None else last + 1


def _split_point(data: Any, want: int) -> int:
    """Where to cut ``data`` so that its complete magic-2 batches before the cut hold at
    least ``want`` records (by their headers' record counts); 0 for "do not cut" (the
    data holds no more than that, or something other than whole magic-2 batches)."""
    size = len(data)
    pos = 0
    count = 0
    while pos + 61 <= size:
        length = _HEAD.unpack_from(data, pos)[1]
        end = pos + 12 + length
        if end > size or length < 49 or data[pos + 16] != 2:
            return 0
        count += _INT32.unpack_from(data, pos + 57)[0]
        pos = end
        if count >= want:
            return pos if pos < size else 0
    return 0


def _per_topic(cls: Any, by_topic: dict[str, list[Any]], topics: Mapping[str, Any]) -> list[Any]:
    """One ``cls`` (a Fetch request's topic entry) per topic of ``by_topic``, named by id
    too where the metadata ``topics`` has one (Fetch v13+)."""
    out = []
    for t, parts in by_topic.items():
        topic_id = getattr(topics.get(t), "topic_id", None)
        kwargs = {"topic": t, "partitions": parts}
        if topic_id is not None:
            kwargs["topic_id"] = topic_id
        out.append(cls(**kwargs))
    return out


def as_topic_partition(x: Any) -> TopicPartition:
    """``x`` as a TopicPartition, checked: a (topic: str, partition: int >= 0) pair."""
    if isinstance(x, TopicPartition):
        return x
    try:
        topic, partition = x
    except (TypeError, ValueError):
        raise TypeError(f"expected (topic, partition), got {x!r}") from None
    if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
        raise TypeError(f"expected (topic: str, partition: int >= 0), got {x!r}")
    return TopicPartition(topic, partition)


_INT32_MAX = 2**31 - 1
_NOWHERE = object()  # plan(): a partition not among those to fetch
# Whole-response codes that say the broker lost or refused the session: fetch in full again.
_SESSION_ERRORS = frozenset((70, 71, 106))  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR
# Partition errors from a preferred read replica that send the partition back to its
# leader rather than to the caller (KIP-392, as the Java client): OFFSET_OUT_OF_RANGE,
# NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH,
# UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE.
_REPLICA_RETRY = frozenset((1, 6, 9, 56, 74, 75, 78))


class FetchSession:
    """A consumer's fetch session with one broker (KIP-227): its id (0: none yet), the
    epoch the next request carries (0: a full request, which opens a new session and
    closes the old one), and the partitions with the fetch offsets the broker holds."""

    __slots__ = ("id", "epoch", "parts")

    def __init__(self) -> None:
        self.id = 0
        self.epoch = 0
        self.parts: dict[TopicPartition, int] = {}

    def build(self, want: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
        """What the next request lists for the broker to fetch ``want``: (partitions to
        add or move, partitions to forget); every partition of ``want`` when full."""
        parts = self.parts
        self.parts = want
        if self.epoch == 0:
            return want, []
        if want == parts:
            return {}, []  # idle: nothing moved (one comparison in C, not a loop here)
        changed = {tp: o for tp, o in want.items() if parts.get(tp) != o}
        return changed, [tp for tp in parts if tp not in want]

    def answered(self, resp: Any) -> None:
        """Move on after an answer to the request :meth:`build` made."""
        code = getattr(resp, "error_code", 0)
        if code:
            # Any whole-response error leaves the session's state in doubt (Kafka's
            # consumer does the same): the next request is full; a lost id is not reused.
            self.reset(forget_id=code == 70)
        elif self.epoch == 0:
            self.id = getattr(resp, "session_id", 0)
            self.epoch = 1 if self.id else 0  # 0: the broker keeps no session for us (yet)
        else:
            self.epoch = 1 if self.epoch == _INT32_MAX else self.epoch + 1

    def reset(self, forget_id: bool = False) -> None:
        self.epoch = 0
        if forget_id:
            self.id = 0


class Fetcher:
    """Partition states and the fetch decisions of one consumer (``config``: its
    options, read as attributes)."""

    def __init__(self, config: Any):
        self.config = config
        self.assigned: dict[TopicPartition, PartitionState] = {}
        #: An error to raise from the next poll (set where it could not be raised then).
        self.pending_error: BaseException | None = None
        self.isolation = 1 if config.isolation_level == "read_committed" else 0
        self.kdes = config.key_deserializer
        self.vdes = config.value_deserializer
        self.retry_backoff = config.retry_backoff_ms / 1000
        #: Seconds within which a fetch's answer is due: a long poll is allowed
        #: fetch_max_wait_ms at the broker on top of the request timeout.
        self.answer_timeout = (config.request_timeout_ms + config.fetch_max_wait_ms) / 1000
        #: Broker id -> the time (the shell's clock) before which it is not fetched from
        #: again: after a failed fetch (a connection error, or a retriable error for the
        #: whole response), so that a failing broker costs little.
        self.backoff: dict[int, float] = {}
        #: Broker id -> its fetch session (KIP-227).
        self.sessions: dict[int, FetchSession] = {}
        # Partitions with data buffered, in the order it came: all that drain() looks at.
        self._ready: dict[TopicPartition, None] = {}
        #: The next fetches (due()'s next round) wait at most 1 ms at the broker, as
        #: ones sent with records buffered do: set when poll() hands out the records of an
        #: answer that reached the end of the log before fetching again
        #: (ConsumerBase._fetch_round), so that the fetches it put off ask what they would have.
        self.prefetch_due = False
        # plan() is skipped while nothing it depends on changed (see due()).
        self._changed = True
        self._quiet = False  # the last plan found every partition fetchable or parked by its buffers
        self._plan_nodes: frozenset[int] = frozenset()
        self._plan_len = -1
        self._planned: dict[int, list[TopicPartition]] = {}
        self._planned_offsets: dict[int, dict[TopicPartition, int]] = {}
        # plan()'s memory between plans, so that a plan costs what changed rather than
        # what is assigned: leader (None: unknown) -> {partition: fetch offset} of every
        # partition to fetch when not in flight; where each sits; those waiting for a
        # position; partitions changed since (seek, pause, reset, answered, drained);
        # whether everything is looked at again (assign, a metadata refresh).
        self._plannable: dict[int | None, dict[TopicPartition, int]] = {}
        self._slot: dict[TopicPartition, int | None] = {}
        self._unplaced: set[TopicPartition] = set()
        self._dirty: set[TopicPartition] = set()
        self._rescan = True
        self._meta_mark: tuple[Any, ...] = ()
        self._topics: list[str] = []  # the assigned topics, for _mark
        # The partitions in a Fetch in flight: one set, not a flag per partition, so that
        # sending and answering a Fetch costs set operations, not a walk of its partitions.
        self._in_flight: set[TopicPartition] = set()
        self._unsettled = True  # some partition may need a position (needs_position)
        self._settled_len = -1
        # When each partition without a leader was first found so (see _missing).
        self._leaderless_since: dict[TopicPartition, float] = {}
        #: KIP-392: the consumer's rack, sent with every Fetch (v11+).
        self.client_rack = getattr(config, "client_rack", "") or ""
        # How long a replica a leader named is read from before the leader is asked again.
        self._lease = getattr(config, "metadata_max_age_ms", 300000) / 1000
        #: Partition -> (the replica its leader named to read from, when that lease ends).
        self.preferred: dict[TopicPartition, tuple[int, float]] = {}
        self._lease_end = float("inf")  # the earliest lease end in preferred
        #: Broker id -> bytes of records data its Fetch answers carried (which node served).
        self.bytes_from: dict[int, int] = {}

    # -- positions (the same for both shells) -------------------------------------------

    def assign(self, tps: list[TopicPartition]) -> None:
        """Consume exactly ``tps``, keeping the state of those already assigned."""
        old = self.assigned
        self.assigned = {tp: old.get(tp) or PartitionState() for tp in tps}
        self._changed = self._unsettled = self._rescan = True
        self._leaderless_since.clear()
        self._topics = sorted(self.assigned_topics())

    def state(self, tp: Any) -> PartitionState:
        tp = as_topic_partition(tp)
        st = self.assigned.get(tp)
        if st is None:
            raise ValueError(f"{tp} is not assigned; call assign() first")
        return st

    def seek(self, tp: Any, offset: int) -> None:
        """Make the next poll start at ``offset`` for ``tp``."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        st = self.state(tp)
        st.position = offset
        st.clear()  # a fetch already in flight is dropped when it arrives
        st.reset_to = None
        self._changed = True
        self._dirty.add(as_topic_partition(tp))

    def pause(self, tps: Any, paused: bool = True) -> None:
        for tp in tps:
            self.state(tp).paused = paused
            self._dirty.add(as_topic_partition(tp))
        self._changed = True

    def reset_query(self, tps: list[TopicPartition], out_of_range: bool = False) -> dict[TopicPartition, int]:
        """The ListOffsets query that resets ``tps`` per auto_offset_reset; raises
        OffsetOutOfRangeError under "none"."""
        policy = self.config.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(
                f"no valid position for {sorted(tps)} and auto_offset_reset='none': seek() to "
                f"an offset first" + (" (the position is outside the log)" if out_of_range else ""),
                partitions={tp: self.assigned[tp].position for tp in tps})
        which = EARLIEST if policy == "earliest" else LATEST
        return {tp: which for tp in tps}

    def apply_reset(self, found: dict[TopicPartition, tuple[int, int]]) -> None:
        for tp, (offset, _ts) in found.items():
            st = self.assigned.get(tp)
            if st is not None:
                st.position = offset
                st.clear()
                st.reset_to = None
                self._dirty.add(tp)
        self._changed = True

    def assigned_topics(self) -> set[str]:
        return {tp.topic for tp in self.assigned}

    def plan(self, leader_for: Any) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, int], bool, bool]:
        """What to fetch now: (leader -> partitions, partition -> fetch offset, whether
        records are buffered, whether a partition has no known leader).

        Only partitions changed since the last plan are looked at again (and their
        leaders asked for); every one after assign(), forget_fetches(), a metadata
        refresh (``leader_for`` a ClusterMetadata's: its ``last_refresh`` or a topic's
        entry changed) or another ``leader_for``."""
        mark = self._mark(leader_for)
        # (A count changed behind assign()'s back: look at everything too.)
        if self._rescan or mark != self._meta_mark or len(self.assigned) != self._plan_len:
            self._rescan = False
            self._meta_mark = mark
            self._plannable, self._slot = {}, {}
            self._unplaced.clear()
            self._dirty.clear()
            for tp in self.assigned:
                self._place(tp, leader_for)
        elif self._dirty:
            dirty, self._dirty = self._dirty, set()
            for tp in dirty:
                self._place(tp, leader_for)
        in_flight = self._in_flight
        by_node: dict[int, list[TopicPartition]] = {}
        offsets: dict[TopicPartition, int] = {}
        # Each list's fetch offsets, for request() (the lists are kept in _planned).
        planned_offsets: dict[int, dict[TopicPartition, int]] = {}
        leaderless = False
        for node, parts in self._plannable.items():
            if not parts:
                continue
            if in_flight and not in_flight.isdisjoint(parts):
                if in_flight.issuperset(parts):
                    continue
                parts = {tp: o for tp, o in parts.items() if tp not in in_flight}
            offsets.update(parts)
            if node is None:
                leaderless = True
            else:
                by_node[node] = planned = list(parts)
                planned_offsets[id(planned)] = parts
        quiet = not any(tp not in in_flight for tp in self._unplaced)
        self._changed = False
        self._quiet = quiet and not leaderless
        self._plan_len = len(self.assigned)
        self._plan_nodes = frozenset(by_node)
        self._planned = by_node
        self._planned_offsets = planned_offsets
        return by_node, offsets, bool(self._ready), leaderless

    def _mark(self, leader_for: Any) -> tuple[Any, ...]:
        """What plan()'s memory of leaders was made from: ``leader_for`` and, when it is
        a ClusterMetadata's, the time of its last refresh and the assigned topics' entries
        (a refresh replaces each; kept here, so an entry's identity is never reused)."""
        meta = getattr(leader_for, "__self__", None)
        topics = getattr(meta, "topics", None)
        if not isinstance(topics, dict):
            return (leader_for,)
        return (leader_for, getattr(meta, "last_refresh", None),
                *(topics.get(t) for t in self._topics))

    def _place(self, tp: TopicPartition, leader_for: Any) -> None:
        """Put ``tp`` where plan() finds it: with its leader and fetch offset, among those
        waiting for a position, or nowhere (unassigned, paused, buffers full)."""
        plannable = self._plannable
        old = self._slot.pop(tp, _NOWHERE)
        self._unplaced.discard(tp)
        st = self.assigned.get(tp)
        offset = leader = None
        if st is not None and not st.paused:
            if st.position is None or st.reset_to is not None:
                self._unplaced.add(tp)  # a position to come from outside (the group, a lookup)
            else:
                offset = st.next_fetch()
                if offset is not None:
                    leader = leader_for(*tp)
                    if leader is not None and tp in self.preferred:
                        leader = self._read_replica(tp, leader, leader_for)
        if offset is None:
            if old is not _NOWHERE:
                del plannable[old][tp]
            return
        if old is not _NOWHERE and old != leader:
            del plannable[old][tp]
        # The same leader keeps the partition's place: plans list partitions in assignment order.
        plannable.setdefault(leader, {})[tp] = offset
        self._slot[tp] = leader

    def _read_replica(self, tp: TopicPartition, leader: int, leader_for: Any) -> int:
        """Where to fetch ``tp`` from: the replica its leader named, unless the metadata
        (``leader_for``'s ClusterMetadata) no longer lists it as a live replica of the
        partition; then the leader, with a refresh asked for (it may be stale)."""
        node = self.preferred[tp][0]
        meta = getattr(leader_for, "__self__", None)
        brokers = getattr(meta, "brokers", None)
        if node == leader or not isinstance(brokers, dict):
            return node
        topic = meta.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic is not None else None
        if node in brokers and part is not None and (not part.replicas or node in part.replicas):
            return node
        del self.preferred[tp]
        meta.need_refresh = True
        return leader

    def _prefer(self, tp: TopicPartition, node: int, now: float) -> None:
        """The leader named ``node`` as ``tp``'s replica to read from (KIP-392)."""
        old = self.preferred.get(tp)
        end = now + self._lease
        self.preferred[tp] = (node, end)
        self._lease_end = min(self._lease_end, end)
        if old is None or old[0] != node:
            self._dirty.add(tp)
            self._changed = True

    def _unprefer(self, tps: Any) -> bool:
        """Read ``tps`` from their leaders again; whether any had a replica to read from."""
        dropped = False
        for tp in tps:
            if self.preferred.pop(tp, None) is not None:
                self._dirty.add(tp)
                dropped = True
        if dropped:
            self._changed = True
        return dropped

    def replica_failed(self, node: int) -> None:
        """Broker ``node`` failed (a connection lost or refused, a whole-answer error): the
        partitions read from it as their preferred replica go back to their leaders."""
        if self.preferred:
            self._unprefer([tp for tp, (n, _end) in self.preferred.items() if n == node])

    def _expire_leases(self, now: float) -> None:
        if now < self._lease_end:
            return
        self._unprefer([tp for tp, (_n, end) in self.preferred.items() if end <= now])
        self._lease_end = min((end for _n, end in self.preferred.values()), default=float("inf"))

    def metrics(self) -> dict[str, Any]:
        """What is buffered and where partitions are read from (the consumers' metrics())."""
        records = nbytes = parts = 0
        answers: dict[int, int] = {}
        for st in self.assigned.values():
            if st.buffer is None and not st.pending:
                continue
            parts += 1
            if st.buffer is not None:
                records += len(st.buffer)
                for r in st.buffer:
                    k, v = r.key, r.value
                    nbytes += (len(k) if isinstance(k, (bytes, bytearray, memoryview, str)) else 0) + \
                              (len(v) if isinstance(v, (bytes, bytearray, memoryview, str)) else 0)
            for chunk in st.pending:
                nbytes += len(chunk)
                base = chunk.obj if isinstance(chunk, memoryview) else chunk
                answers[id(base)] = len(base) if isinstance(base, (bytes, bytearray)) else len(chunk)
        return {
            "buffered_records": records,
            "buffered_bytes": nbytes,
            "retained_bytes": sum(answers.values()),
            "buffered_partitions": parts,
            "preferred_read_replicas": {tp: node for tp, (node, _end) in self.preferred.items()},
            "fetched_bytes_by_node": dict(self.bytes_from),
        }

    def read_replica(self, tp: Any) -> int:
        """The broker ``tp`` is read from when it is not its leader (KIP-392), else -1
        (the Java client's preferred-read-replica metric)."""
        got = self.preferred.get(as_topic_partition(tp))
        return -1 if got is None else got[0]

    def request(self, tps: list[TopicPartition], offsets: dict[TopicPartition, int], buffered: bool,
                topics: Mapping[str, Any]) -> tuple[Any, dict[TopicPartition, int]]:
        """The Fetch request for ``tps`` (marked as being fetched) and the positions it
        asks for; ``topics`` is the cluster metadata (for topic ids, Fetch v13+).  When
        ``tps`` is a list the last plan made for a broker, the request goes in that
        broker's fetch session: it lists only what changed since the session's last one."""
        cfg = self.config
        mine = self._planned_offsets.get(id(tps))
        positions = dict(mine) if mine is not None else {tp: offsets[tp] for tp in tps}
        session_id, epoch, listed, forgotten = 0, -1, positions, []  # no session
        node = next((n for n, planned in self._planned.items() if planned is tps), None)
        if node is not None:
            session = self.sessions.get(node)
            if session is None:
                session = self.sessions[node] = FetchSession()
            session_id, epoch = session.id, session.epoch
            listed, gone = session.build(positions)
            if gone:
                forgotten = self.forgotten_topics(gone, topics)
        # A long poll holds the connection (answers come in order), so it must not
        # delay the fetch of a partition whose buffered records poll() is still
        # handing out: while any are buffered, the broker answers (almost) at once.
        # 1 ms, not 0: Tansu answers a Fetch with max_wait_ms=0 with no partitions at all.
        req = FETCH.Request(
            replica_id=-1, max_wait_ms=1 if buffered else cfg.fetch_max_wait_ms,
            min_bytes=cfg.fetch_min_bytes, max_bytes=cfg.fetch_max_bytes,
            isolation_level=self.isolation, session_id=session_id, session_epoch=epoch,
            topics=self.fetch_topics(listed, cfg.max_partition_fetch_bytes, topics),
            forgotten_topics_data=forgotten, rack_id=self.client_rack)
        self._in_flight.update(tps)
        return req, positions

    # -- the fetch loop's decisions, for both shells (``now``: the shell's clock) ---------

    def raise_pending(self) -> None:
        """Raise the error a fetch or an earlier poll left for this poll, once."""
        err = self.pending_error
        if err is not None:
            self.pending_error = None
            raise err

    def due(self, meta: Any, now: float, busy: Any) -> tuple[list[tuple[int, list[TopicPartition]]],
                                                             dict[TopicPartition, int], bool]:
        """What to fetch now, from :meth:`plan`: ([(broker, partitions)], partition ->
        fetch offset, whether the fetches go out as prefetches: records are buffered, or
        these are the ones poll() put off (prefetch_due), every broker's alike), leaving
        out brokers in ``busy`` (a fetch in flight) or backing off.  ``meta`` is the
        ClusterMetadata: a partition without a known leader asks it for a refresh, and a
        permanent error its answer carries for an assigned topic is raised by the next poll."""
        if self.preferred:
            self._expire_leases(now)
        if (not self._changed and self._quiet and len(self.assigned) == self._plan_len
                and all(node in busy for node in self._plan_nodes)):
            # Every fetch planned last time is still in flight and nothing it depends on
            # changed: planning again would find the same, at a cost that grows with the
            # partitions assigned.  An answer, a drained buffer, seek, pause or assign
            # plans again.
            return [], {}, bool(self._ready)
        by_node, offsets, buffered, leaderless = self.plan(meta.leader_for)
        if leaderless:
            meta.need_refresh = True
            if self.pending_error is None:
                self.pending_error = meta.take_topic_error(self.assigned_topics()) or self._missing(meta, now)
        backoff = self.backoff
        due = [(node, tps) for node, tps in by_node.items()
               if node not in busy and backoff.get(node, 0.0) <= now]
        if due and self.prefetch_due:
            self.prefetch_due = False
            buffered = True
        return due, offsets, buffered

    def _missing(self, meta: Any, now: float) -> BaseException | None:
        """UnknownPartitionError for a partition without a leader whose topic lacks it, by
        an answer received since the partition was first found without one (an older
        answer may predate partitions added since)."""
        since = self._leaderless_since
        for tp in self._plannable.get(None, ()):
            exc = meta.missing_partition(tp.topic, tp.partition, since.setdefault(tp, now))
            if exc is not None:
                return exc
        return None

    def fetched(self, resp: Any, positions: dict[TopicPartition, int], meta: Any, node: int, now: float) -> None:
        """Apply broker ``node``'s Fetch answer for ``positions`` (see :meth:`on_response`),
        marking ``meta`` for refresh and backing off from the broker as it says."""
        session = self.sessions.get(node)
        if session is not None:
            session.answered(resp)
            if getattr(resp, "error_code", 0) in _SESSION_ERRORS:
                # The session is gone or out of step: nothing in the answer, fetch in
                # full again at once (not an error for the caller).
                self.on_failure(positions)
                return
        refresh, back_off = self.on_response(resp, positions, meta.topic_names, node, now)
        if refresh:
            meta.need_refresh = True
        if back_off:
            self.backoff[node] = now + self.retry_backoff

    def fetch_failed(self, positions: dict[TopicPartition, int], exc: BaseException, meta: Any, node: int,
                     now: float) -> None:
        """The Fetch to broker ``node`` for ``positions`` got no answer but ``exc``.  A
        connection lost or an answer late (any retriable error) refreshes the metadata
        and leaves the broker alone for retry_backoff_ms; anything else (no Fetch version
        the broker serves, KIP-896) is raised by the next poll."""
        self.on_failure(positions)
        self.replica_failed(node)
        session = self.sessions.get(node)
        if session is not None:
            session.reset()  # whether the broker saw the request is unknown
        if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)) or getattr(exc, "retriable", False):
            meta.need_refresh = True
            self.backoff[node] = now + self.retry_backoff
        else:
            self.pending_error = exc

    def idle_wait(self, remaining: float, fetching: bool, connect_delay: float = 0.0) -> float:
        """How long a poll with nothing to return waits for news: up to its
        ``remaining`` time while a fetch is in flight (its answer ends the wait); else
        (a connection being set up, a broker backing off, a refresh) no longer than
        retry_backoff_ms or ``connect_delay`` (until a broker leaves its reconnect
        backoff), so that a backoff ends within it."""
        remaining = max(0.0, remaining)
        if fetching and not self._plannable.get(None):
            return remaining  # (a partition waiting for a leader waits for a refresh too)
        return min(remaining, max(connect_delay, self.retry_backoff))

    def forget_fetches(self) -> None:
        """After os.fork(): the fetches in flight and the data buffered were the parent's
        (the child fetches again from its positions, so its buffers are its own reads)."""
        for st in self.assigned.values():
            st.clear()
        self.backoff.clear()
        self.sessions.clear()  # the parent's sessions: the child opens its own
        self._unprefer(list(self.preferred))
        self._ready.clear()
        self._in_flight.clear()
        self._changed = self._rescan = True

    def in_flight(self, tp: Any) -> bool:
        """Whether ``tp`` is in a Fetch awaiting its answer."""
        return as_topic_partition(tp) in self._in_flight

    def on_failure(self, positions: dict[TopicPartition, int]) -> None:
        """The Fetch for ``positions`` got no answer."""
        self._changed = True
        self._in_flight.difference_update(positions)

    def on_response(self, resp: Any, positions: dict[TopicPartition, int], topic_names: Mapping[Any, str],
                    node: int, now: float | None = None) -> tuple[bool, bool]:
        """Apply the Fetch answer for ``positions`` from broker ``node`` (``topic_names``:
        ClusterMetadata.topic_names, for v13+); returns (refresh the metadata, back off
        from that broker).  A preferred read replica the answer names is taken only given
        ``now`` (its lease needs the shell's clock), as :meth:`fetched` gives it."""
        self.on_failure(positions)  # no longer being fetched
        refresh = backoff = False
        # Fetch v7+ (KIP-227) has an error code for the whole response: fetch-session
        # errors, and whatever applies to every partition asked for.  Partitions the
        # response still carries are handled below as usual.
        code = getattr(resp, "error_code", 0)
        if code:
            refresh = code in REFRESH_METADATA_CODES
            self.replica_failed(node)
            if errors.for_code(code).retriable:
                backoff = True
            else:
                self.pending_error = broker_error(
                    code, f"fetching {', '.join(f'{t}[{p}]' for t, p in sorted(positions))} "
                          f"from broker {node}", getattr(resp, "error_message", None))
        for name, t in self.response_topics(resp, topic_names):
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                st = self.assigned.get(tp)
                # Dropped if unassigned or seeked since the request went out.
                if st is None or positions.get(tp) is None or st.next_fetch() != positions[tp]:
                    continue
                self._dirty.add(tp)
                code = p.error_code
                if code == 0:
                    st.high_watermark = p.high_watermark
                    st.last_stable_offset = p.last_stable_offset
                    # KIP-392: the leader names a replica to read from (and sends no records).
                    replica = getattr(p, "preferred_read_replica", -1)
                    if replica >= 0 and now is not None:
                        self._prefer(tp, replica, now)
                    records = p.records
                    if records is not None and len(records):
                        self.bytes_from[node] = self.bytes_from.get(node, 0) + len(records)
                        st.pending.append(records)
                        # Kafka brokers list aborted transactions to read_committed fetches only.
                        aborted = p.aborted_transactions if self.isolation else None
                        st.txns.append(_AbortedTxns(aborted) if aborted else None)
                        st.fetch_offset = _next_offset(records)
                        self._ready[tp] = None
                elif tp in self.preferred and self._unprefer((tp,)) and code in _REPLICA_RETRY:
                    # A replica other than the leader refused: fetch from the leader at the
                    # same position (out of range at a lagging follower is no reset).
                    refresh = refresh or code in REFRESH_METADATA_CODES
                elif code == 1:  # OFFSET_OUT_OF_RANGE
                    st.reset_to = -1
                    self._unsettled = True
                else:
                    if code in REFRESH_METADATA_CODES:
                        refresh = True
                    if not errors.for_code(code).retriable:
                        self.pending_error = broker_error(code, f"fetching {tp} at offset {st.position}")
        return refresh, backoff

    @staticmethod
    def fetch_topics(offsets: dict[TopicPartition, int], partition_max_bytes: int,
                     topics: Mapping[str, Any]) -> list[Any]:
        """Fetch request topics for ``offsets`` (topic ids where the metadata has them,
        for Fetch v13+)."""
        by_topic: dict[str, list[Any]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(_FetchPartition(
                partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
        return _per_topic(_FetchTopic, by_topic, topics)

    @staticmethod
    def forgotten_topics(tps: list[TopicPartition], topics: Mapping[str, Any]) -> list[Any]:
        """A Fetch request's forgotten_topics_data for ``tps`` (topic ids for v13+)."""
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return _per_topic(_Forgotten, by_topic, topics)

    @staticmethod
    def response_topics(resp: Any, topic_names: Mapping[Any, str]) -> Iterator[tuple[str | None, Any]]:
        """(topic name, topic response) of a Fetch response; v13+ names topics by id,
        named from ``topic_names`` (ClusterMetadata.topic_names; None for an id not there)."""
        for t in resp.responses:
            yield getattr(t, "topic", None) or topic_names.get(getattr(t, "topic_id", None)), t

    def needs_position(self, waiting: Any = ()) -> list[TopicPartition]:
        """Partitions whose position must be looked up (none yet, or out of range),
        except those in ``waiting`` (their committed offsets are on the way)."""
        # Every position was known at the last look and nothing since could have taken
        # one away: assign(), an out-of-range answer, or the group adding partitions (it
        # puts them in ``waiting`` while it asks for their committed offsets) look again.
        if not self._unsettled and not waiting and len(self.assigned) == self._settled_len:
            return []
        todo = []
        unsettled = False
        for tp, st in self.assigned.items():
            if st.position is None or st.reset_to is not None:
                unsettled = True
                if st.reset_to is not None or tp not in waiting:
                    todo.append(tp)
        self._unsettled = unsettled
        self._settled_len = len(self.assigned)
        return todo

    def caught_up(self) -> bool:
        """Whether every partition with records buffered holds no decoded leftovers and
        had its last answer reach the end of the log (its high watermark; under
        read_committed its last stable offset): a fetch sent now would only wait at the
        broker for records still to come."""
        assigned = self.assigned
        for tp in self._ready:
            st = assigned.get(tp)
            if st is None:
                continue
            end = st.last_stable_offset if self.isolation and st.last_stable_offset >= 0 else st.high_watermark
            if st.buffer is not None or st.fetch_offset is None or st.fetch_offset < end:
                return False
        return True

    def drain(self, max_records: int, columnar: bool) -> list[Any]:
        """Records (or, ``columnar``, one FetchedBatch per partition) from what the
        fetches buffered, at most ``max_records`` records; positions move past them."""
        ready = list(self._ready)
        if not ready:
            return []
        assigned, keep = self.assigned, self._ready
        before = [st.next_fetch() if st is not None else None for st in map(assigned.get, ready)]
        try:
            return self._drain(ready, max_records, columnar)
        finally:
            for tp, was in zip(ready, before):
                st = assigned.get(tp)
                if st is None or (st.buffer is None and not st.pending):
                    keep.pop(tp, None)
                # A partition whose buffers were full (or dropped) is fetched again: plan.
                if st is not None and st.next_fetch() != was:
                    self._changed = True
                    self._dirty.add(tp)

    def _drain(self, ready: list[TopicPartition], max_records: int, columnar: bool) -> list[Any]:
        out: list[Any] = []
        assigned = self.assigned
        for tp in ready:
            st = assigned.get(tp)
            if st is None or (st.buffer is None and not st.pending):
                continue
            if len(out) >= max_records and not columnar:
                break
            if st.buffer is not None:  # decoded records left over from an earlier poll
                if columnar:
                    # poll() left them and the caller switched to poll_batch(), which
                    # hands out Columns only: fetch again from the first of them.
                    first = st.buffer[0].offset
                    st.clear()
                    st.position = first
                    continue
                data = st.buffer
                room = max_records - len(out)
                take = data[:room] if room < len(data) else data
                if take:
                    out.extend(take)
                    st.position = take[-1].offset + 1
                if len(take) < len(data):
                    st.buffer = data[len(take):]
                    continue
                st.buffer = None
                if not st.pending and st.fetch_offset is not None:
                    # The end of the decoded response (past any control batch at its end).
                    st.position = max(st.position, st.fetch_offset)
            if not st.pending or (len(out) >= max_records and not columnar):
                continue
            # One response per partition and poll: poll_batch returns one FetchedBatch each.
            # Each record counts as a GC allocation (untracked unless deserializers ran):
            # the collector would run every 700 of them and scan whatever else is young
            # again and again.  Deserialized records cannot form cycles before poll()
            # returns them, so it waits until they are all made.
            pause_gc = not columnar and gc.isenabled()
            if pause_gc:
                gc.disable()
            try:
                before = len(out)
                while True:
                    self._drain_one(tp, st, st.pending.popleft(), st.txns.popleft(), out, max_records, columnar)
                    # What held only markers or aborted transactions gave nothing: go on
                    # with what follows rather than return an empty poll with data buffered.
                    if len(out) > before or not st.pending or st.buffer is not None:
                        break
            except Exception as exc:
                # A corrupt batch or a failing deserializer: drop what is buffered, so
                # the next poll fetches from the same position and fails the same way
                # rather than skip past the bad records.  Records already taken from
                # other partitions are returned first; the next poll() raises.
                st.clear()
                if not out:
                    raise
                self.pending_error = exc
                return out
            finally:
                if pause_gc:
                    gc.enable()
        return out

    def _drain_one(self, tp: TopicPartition, st: PartitionState, data: Any, txns: _AbortedTxns | None,
                   out: list[Any], max_records: int, columnar: bool) -> None:
        check = self.config.check_crcs
        start = st.position
        if columnar:
            next_pos = _next_offset(data)
            if next_pos is not None:  # else decode_batches below says what is wrong
                if txns is not None:
                    data = _drop_aborted(data, txns, check)[0]
                cols = codec.decode_columnar(data, start_offset=start, check_crcs=check)
                st.position = max(next_pos, start)
                if len(cols):
                    out.append(FetchedBatch(tp.topic, tp.partition, cols, st.high_watermark,
                                            st.last_stable_offset))
                return
        if not columnar:
            # Decode only the batches this poll hands out; the rest stays raw, first in
            # line.  A large fetch answer then never turns into a crowd of live record
            # objects at once.
            cut = _split_point(data, max_records - len(out))
            if cut:
                st.pending.appendleft(data[cut:])
                st.txns.appendleft(txns)  # the same response: its transactions carry on there
                data = data[:cut]
        # The position moves past batches of aborted transactions too (dropped here).
        dropped_to = None
        if txns is not None:
            kept, end = _drop_aborted(data, txns, check)
            if kept is not data:
                data, dropped_to = kept, end
        if columnar:
            # Not whole magic-2 batches (see _next_offset): decode_batches says what is
            # wrong, or finds the legacy messages' end, and the columns follow.
            batches = codec.decode_batches(data, start_offset=start, check_crcs=check)
            end = batches[-1].base_offset + batches[-1].last_offset_delta + 1 if batches else None
        else:
            recs, end = _decode_consumer_records(
                data, tp.topic, tp.partition, start_offset=start, check_crcs=check,
                key_deserializer=self.kdes, value_deserializer=self.vdes)
        if end is None:
            if dropped_to is not None:
                st.position = max(dropped_to, start)
            elif len(data) >= self.config.max_partition_fetch_bytes and not self._has_complete_entry(data):
                self.pending_error = RecordTooLargeError(
                    f"{tp} at offset {start}: the next batch is larger than "
                    f"max_partition_fetch_bytes={self.config.max_partition_fetch_bytes}; raise it")
            return
        next_pos = max(end, start, dropped_to or 0)
        if columnar:
            cols = codec.decode_columnar(data, start_offset=start, check_crcs=check)
            st.position = next_pos
            if len(cols):
                out.append(FetchedBatch(tp.topic, tp.partition, cols, st.high_watermark,
                                        st.last_stable_offset))
            return
        room = max_records - len(out)
        if len(recs) > room:
            out.extend(recs[:room])
            st.buffer = recs[room:]
            if room:
                st.position = recs[room - 1].offset + 1
            if not st.pending:
                st.fetch_offset = next_pos  # where the leftovers' response ended
        else:
            out.extend(recs)
            st.position = next_pos

    @staticmethod
    def _has_complete_entry(data: Any) -> bool:
        if len(data) < 12:
            return False
        return 12 + _HEAD.unpack_from(data, 0)[1] <= len(data)
