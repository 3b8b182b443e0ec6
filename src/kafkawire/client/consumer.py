"""The consumer: manual assignment (``assign``, ``seek``, ``poll``) or a consumer group
(``group_id`` and ``subscribe``; see :mod:`kafkawire.client.group`).

``poll(timeout, max_records)`` returns :class:`ConsumerRecord` objects (with topic and
partition); ``poll_batch(timeout)`` returns the codec's columnar shape per partition.
Fetches are long polls (``fetch_max_wait_ms``, ``fetch_min_bytes``), one per leader
broker, bounded by ``fetch_max_bytes`` and ``max_partition_fetch_bytes``.  The next
fetch is sent before poll() returns, so it is in flight while the caller works.  Up to
two fetch responses per partition are buffered (a partition is fetched again while
the previous response is still being handed out), which bounds memory.

Not thread-safe: call it from one thread.
"""

from __future__ import annotations

import gc
import struct
from collections import deque
import time
from operator import attrgetter
from typing import Any, Iterable, Iterator

from kafkawire import codec, errors
from kafkawire.client.cluster import Cluster
from kafkawire.client.config import Config
from kafkawire.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    REFRESH_METADATA_CODES,
    RecordTooLargeError,
    broker_error,
)
from kafkawire.client.future import Future
from kafkawire.client.group import ConsumerGroup, ConsumerRebalanceListener
from kafkawire.protocol import apis

__all__ = ["Consumer", "ConsumerRecord", "TopicPartition", "FetchedBatch", "OffsetAndTimestamp",
           "ConsumerRebalanceListener"]

FETCH = apis.get("Fetch")
LIST_OFFSETS = apis.get("ListOffsets")
_FetchTopic = FETCH.Request.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_LOTopic = LIST_OFFSETS.Request.ListOffsetsTopic
_LOPartition = _LOTopic.ListOffsetsPartition

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


class ConsumerRecord:
    """One record: ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestamp_type``,
    ``key``, ``value``, ``headers``.

    A thin view over the codec's decoded record: poll() makes one per record, and
    copying eight fields into it would cost more than the decoding; the fields are read
    from the decoded record when asked for.
    """

    __slots__ = ("topic", "partition", "_record")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int, timestamp_type: int,
                 key: Any, value: Any, headers: tuple = ()):
        self.topic = topic
        self.partition = partition
        self._record = codec.Record(offset, timestamp, timestamp_type, key, value, tuple(headers))

    # attrgetter with a dotted name reads through _record in C, without a Python frame.
    offset = property(attrgetter("_record.offset"))
    timestamp = property(attrgetter("_record.timestamp"))
    timestamp_type = property(attrgetter("_record.timestamp_type"))
    key = property(attrgetter("_record.key"))
    value = property(attrgetter("_record.value"))
    headers = property(attrgetter("_record.headers"))

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp={self.timestamp}, key={self.key!r}, value={self.value!r})")


class _RecordView(ConsumerRecord):
    # How poll() makes a ConsumerRecord: around the decoded record as it is.
    __slots__ = ()

    def __init__(self, topic: str, partition: int, record: Any):  # noqa: D107
        self.topic = topic
        self.partition = partition
        self._record = record


class _DeserializedRecord(ConsumerRecord):
    # With key_deserializer / value_deserializer: their results replace key and value.
    __slots__ = ("key", "value")

    def __init__(self, topic: str, partition: int, record: Any, key: Any, value: Any):  # noqa: D107
        self.topic = topic
        self.partition = partition
        self._record = record
        self.key = key
        self.value = value


class FetchedBatch:
    """Records of one partition from one fetch, as :class:`kafkawire.codec.Columns`."""

    __slots__ = ("topic", "partition", "columns", "high_watermark")

    def __init__(self, topic: str, partition: int, columns: Any, high_watermark: int):
        self.topic = topic
        self.partition = partition
        self.columns = columns
        self.high_watermark = high_watermark

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


class _PartitionState:
    __slots__ = ("position", "fetching", "buffer", "pending", "fetch_offset", "high_watermark",
                 "paused", "reset_to")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetching = False
        # Decoded records poll() has yet to return (max_records cut them off), or None.
        self.buffer: list[Any] | None = None
        # Raw records data of fetch responses, in offset order, not yet decoded.
        self.pending: deque[Any] = deque()
        # The offset after everything buffered (where the next fetch starts), None when
        # unknown (nothing more is fetched until the buffers are drained).
        self.fetch_offset: int | None = None
        self.high_watermark = -1
        self.paused = False
        self.reset_to: int | None = None

    def clear(self) -> None:
        self.buffer = None
        self.pending.clear()
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


def _tp(x: Any) -> TopicPartition:
    if isinstance(x, TopicPartition):
        return x
    try:
        topic, partition = x
    except (TypeError, ValueError):
        raise TypeError(f"expected (topic, partition), got {x!r}") from None
    if not isinstance(topic, str) or not isinstance(partition, int) or partition < 0:
        raise TypeError(f"expected (topic: str, partition: int >= 0), got {x!r}")
    return TopicPartition(topic, partition)


class Consumer:
    """A Kafka consumer.  Options are the Java client's in snake_case
    (``bootstrap_servers``, ``group_id``, ``fetch_max_wait_ms``, ...).

    Without ``group_id``, ``assign()`` the partitions and ``seek()`` positions yourself.
    With it, ``subscribe()`` to topics and the group shares their partitions among its
    members; offsets are committed to the group (automatically every
    ``auto_commit_interval_ms`` unless ``enable_auto_commit=False``: only offsets of
    records an earlier poll() returned, so every record is processed at least once).
    A member that assign()s its partitions can still commit to its group.
    """

    def __init__(self, **config: Any):
        self.config = c = Config.consumer(**config)
        self.cluster = Cluster(c)
        self.cluster.bootstrap(c.request_timeout_ms / 1000.0)
        self._assigned: dict[TopicPartition, _PartitionState] = {}
        self._inflight: dict[int, Future] = {}
        # Broker id -> monotonic time before which it is not fetched from again (after a
        # failed fetch: a connection error, or a retriable error for the whole response).
        self._fetch_backoff: dict[int, float] = {}
        self._pending_error: BaseException | None = None
        self._isolation = 1 if c.isolation_level == "read_committed" else 0
        self._closed = False
        self._kdes = c.key_deserializer
        self._vdes = c.value_deserializer
        self._group = ConsumerGroup(self) if c.group_id is not None else None

    # -- assignment and positions ---------------------------------------------------------

    def assign(self, partitions: Iterable[Any]) -> None:
        """Consume exactly these (topic, partition) pairs (replacing any earlier set)."""
        self._check_open()
        if self._group is not None and self._group.subscribed:
            raise ValueError("assign() while subscribed: call unsubscribe() first")
        tps = [_tp(x) for x in partitions]
        self._assigned = {tp: self._assigned.get(tp) or _PartitionState() for tp in tps}
        self.cluster.interest.update(tp.topic for tp in tps)
        missing = [tp for tp in tps if self.cluster.leader_for(*tp) is None]
        if missing:
            try:
                self.cluster.refresh(self.config.request_timeout_ms / 1000.0)
            except KafkaTimeoutError:
                pass  # poll() keeps trying

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def _state(self, tp: Any) -> _PartitionState:
        tp = _tp(tp)
        state = self._assigned.get(tp)
        if state is None:
            raise ValueError(f"{tp} is not assigned; call assign() first")
        return state

    def seek(self, partition: Any, offset: int) -> None:
        """Make the next poll start at ``offset`` for ``partition``."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        state = self._state(partition)
        state.position = offset
        state.clear()  # a fetch already in flight is dropped when it arrives
        state.reset_to = None

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None, timeout: float | None = None) -> None:
        self._seek_to(EARLIEST, partitions, timeout)

    def seek_to_end(self, partitions: Iterable[Any] | None = None, timeout: float | None = None) -> None:
        self._seek_to(LATEST, partitions, timeout)

    def _seek_to(self, which: int, partitions: Iterable[Any] | None, timeout: float | None) -> None:
        tps = list(self._assigned) if partitions is None else [_tp(x) for x in partitions]
        offsets = self._list_offsets({tp: which for tp in tps}, self._timeout(timeout))
        for tp, (offset, _ts) in offsets.items():
            self.seek(tp, offset)

    def position(self, partition: Any, timeout: float | None = None) -> int:
        """The offset of the next record poll() returns for ``partition``."""
        state = self._state(partition)
        if state.position is None:
            self._reset_positions([_tp(partition)], self._timeout(timeout))
        return state.position  # type: ignore[return-value]

    def offsets_for_times(self, timestamps: dict[Any, int], timeout: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one (ms), per partition;
        None where no such record exists."""
        query = {_tp(k): v for k, v in timestamps.items()}
        for tp, ts in query.items():
            if not isinstance(ts, int) or ts < 0:
                raise ValueError(f"timestamp for {tp} must be an int >= 0 (ms), got {ts!r}")
        found = self._list_offsets(query, self._timeout(timeout))
        return {tp: (OffsetAndTimestamp(*found[tp]) if found[tp][0] >= 0 else None) for tp in query}

    def beginning_offsets(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        got = self._list_offsets({_tp(x): EARLIEST for x in partitions}, self._timeout(timeout))
        return {tp: v[0] for tp, v in got.items()}

    def end_offsets(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        got = self._list_offsets({_tp(x): LATEST for x in partitions}, self._timeout(timeout))
        return {tp: v[0] for tp, v in got.items()}

    def _timeout(self, timeout: float | None) -> float:
        return self.config.request_timeout_ms / 1000.0 if timeout is None else timeout

    def _list_offsets(self, query: dict[TopicPartition, int], timeout: float
                      ) -> dict[TopicPartition, tuple[int, int]]:
        self._check_open()
        deadline = time.monotonic() + timeout
        result: dict[TopicPartition, tuple[int, int]] = {}
        todo = dict(query)
        last: BaseException | None = None
        self.cluster.interest.update(tp.topic for tp in todo)
        while todo:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"offsets for {sorted(todo)} not found within {timeout:g}s"
                    + (f"; last error: {last}" if last else "")
                )
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in todo:
                leader = self.cluster.leader_for(*tp)
                if leader is None:
                    try:
                        self.cluster.refresh(remaining)
                    except KafkaTimeoutError as exc:
                        last = exc
                    break
                by_node.setdefault(leader, []).append(tp)
            else:
                for node, tps in by_node.items():
                    try:
                        self._list_offsets_node(node, tps, todo, result, deadline)
                    except (KafkaConnectionError, KafkaTimeoutError) as exc:
                        last = exc
                        self.cluster.request_refresh()
                    except Exception as exc:  # broker errors that are not retriable
                        if getattr(exc, "retriable", False):
                            last = exc
                        else:
                            raise
                if todo:
                    self.cluster.poll(min(self.config.retry_backoff_ms / 1000, max(0.0, deadline - time.monotonic())))
                    if self.cluster.refresh_due():
                        try:
                            self.cluster.refresh(max(0.001, deadline - time.monotonic()))
                        except KafkaTimeoutError as exc:
                            last = exc
        return result

    def _list_offsets_node(self, node: int, tps: list[TopicPartition], todo: dict, result: dict,
                           deadline: float) -> None:
        conn = self.cluster.connection(node, deadline)
        version = conn.version_for(LIST_OFFSETS)
        topics: dict[str, list[Any]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(
                _LOPartition(partition_index=tp.partition, timestamp=todo[tp], max_num_offsets=1))
        req = LIST_OFFSETS.Request(
            replica_id=-1, isolation_level=self._isolation,
            topics=[_LOTopic(name=t, partitions=p) for t, p in topics.items()])
        fut = conn.send(LIST_OFFSETS, req, version)
        if not fut.wait(max(0.0, deadline - time.monotonic())):
            raise KafkaTimeoutError(f"ListOffsets to {conn.name}: no answer in time")
        resp = fut.result()
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if tp not in todo:
                    continue
                if p.error_code:
                    if p.error_code in REFRESH_METADATA_CODES:
                        self.cluster.request_refresh()
                    if not errors.for_code(p.error_code).retriable:
                        raise broker_error(p.error_code, f"ListOffsets for {tp}")
                    continue
                if version == 0:
                    offsets = p.old_style_offsets
                    result[tp] = (offsets[0] if offsets else -1, -1)
                else:
                    result[tp] = (p.offset, p.timestamp)
                del todo[tp]

    def _reset_positions(self, tps: list[TopicPartition], timeout: float, out_of_range: bool = False) -> None:
        policy = self.config.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(
                f"no valid position for {sorted(tps)} and auto_offset_reset='none': seek() to "
                f"an offset first" + (" (the position is outside the log)" if out_of_range else ""),
                partitions={tp: self._assigned[tp].position for tp in tps},
            )
        which = EARLIEST if policy == "earliest" else LATEST
        for tp, (offset, _ts) in self._list_offsets({tp: which for tp in tps}, timeout).items():
            self._assigned[tp].position = offset
            self._assigned[tp].clear()

    # -- fetching -------------------------------------------------------------------------

    def _send_fetches(self) -> None:
        cfg = self.config
        by_node: dict[int, list[TopicPartition]] = {}
        offsets: dict[TopicPartition, int] = {}
        buffered = False
        for tp, st in self._assigned.items():
            if st.buffer is not None or st.pending:
                buffered = True
            if st.fetching or st.paused or st.position is None:
                continue
            offset = st.next_fetch()
            if offset is None:
                continue
            offsets[tp] = offset
            leader = self.cluster.leader_for(*tp)
            if leader is None:
                self.cluster.request_refresh()
                continue
            by_node.setdefault(leader, []).append(tp)
        now = time.monotonic()
        for node, tps in by_node.items():
            if node in self._inflight or self._fetch_backoff.get(node, 0.0) > now:
                continue
            # Never waits: a connection being set up finishes inside the polls that
            # follow, and the partitions are fetched once it is ready.
            conn = self.cluster.ready_connection(node)
            if conn is None:
                continue
            version = conn.version_for(FETCH)
            fetch_topics = self._fetch_topics({tp: offsets[tp] for tp in tps}, cfg.max_partition_fetch_bytes)
            # A long poll holds the connection (answers come in order), so it must not
            # delay the fetch of a partition whose buffered records poll() is still
            # handing out: while any are buffered, the broker answers at once.
            req = FETCH.Request(
                replica_id=-1, max_wait_ms=0 if buffered else cfg.fetch_max_wait_ms,
                min_bytes=cfg.fetch_min_bytes,
                max_bytes=cfg.fetch_max_bytes, isolation_level=self._isolation,
                session_id=0, session_epoch=-1, topics=fetch_topics)
            positions = {tp: offsets[tp] for tp in tps}
            for tp in tps:
                self._assigned[tp].fetching = True
            fut = conn.send(FETCH, req, version)
            self._inflight[node] = fut
            fut.add_done_callback(lambda f, node=node, positions=positions: self._on_fetch(f, node, positions))

    def _on_fetch(self, f: Future, node: int, positions: dict[TopicPartition, int]) -> None:
        self._inflight.pop(node, None)
        for tp in positions:
            st = self._assigned.get(tp)
            if st is not None:
                st.fetching = False
        exc = f.exception()
        if exc is not None:
            self.cluster.request_refresh()
            self._back_off(node)
            return
        resp = f.result()
        # Fetch v7+ (KIP-227) has an error code for the whole response: fetch-session
        # errors, and whatever applies to every partition asked for.  Partitions the
        # response still carries are handled below as usual.
        code = getattr(resp, "error_code", 0)
        if code:
            if code in REFRESH_METADATA_CODES:
                self.cluster.request_refresh()
            if errors.for_code(code).retriable:
                self._back_off(node)
            else:
                self._pending_error = broker_error(
                    code, f"fetching {', '.join(f'{t}[{p}]' for t, p in sorted(positions))} "
                          f"from broker {node}", getattr(resp, "error_message", None))
        for name, t in self._response_topics(resp):
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                st = self._assigned.get(tp)
                # Dropped if unassigned or seeked since the request went out.
                if st is None or positions.get(tp) is None or st.next_fetch() != positions[tp]:
                    continue
                code = p.error_code
                if code == 0:
                    st.high_watermark = p.high_watermark
                    records = p.records
                    if records is not None and len(records):
                        st.pending.append(records)
                        st.fetch_offset = _next_offset(records)
                elif code == 1:  # OFFSET_OUT_OF_RANGE
                    st.reset_to = -1
                else:
                    if code in REFRESH_METADATA_CODES:
                        self.cluster.request_refresh()
                    if not errors.for_code(code).retriable:
                        self._pending_error = broker_error(code, f"fetching {tp} at offset {st.position}")

    def _fetch_topics(self, offsets: dict[TopicPartition, int], partition_max_bytes: int) -> list[Any]:
        """Fetch request topics for ``offsets`` (topic ids where the metadata has them,
        for Fetch v13+)."""
        topics: dict[str, list[Any]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append(_FetchPartition(
                partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes))
        out = []
        for t, parts in topics.items():
            topic_id = getattr(self.cluster.topics.get(t), "topic_id", None)
            kwargs = {"topic": t, "partitions": parts}
            if topic_id is not None:
                kwargs["topic_id"] = topic_id
            out.append(_FetchTopic(**kwargs))
        return out

    def _response_topics(self, resp: Any) -> Iterator[tuple[str, Any]]:
        """(topic name, topic response) of a Fetch response; v13+ names topics by id."""
        ids = {getattr(m, "topic_id", None): name for name, m in self.cluster.topics.items()}
        for t in resp.responses:
            yield getattr(t, "topic", None) or ids.get(getattr(t, "topic_id", None)), t

    def high_watermarks(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int]:
        """The offset after each partition's last readable record, as a Fetch response
        reports it (the high watermark; the last stable offset under read_committed).

        Each partition is fetched from its ListOffsets latest offset, so an answer carries
        at most the last batch; where no Fetch answers, or ListOffsets says more, that is
        the result.  Tansu answers ListOffsets latest with the last batch's base offset + 1,
        below its watermark, so end_offsets() alone can stop a reader short there."""
        deadline = time.monotonic() + self._timeout(timeout)
        latest = self._list_offsets({_tp(x): LATEST for x in partitions}, self._timeout(timeout))
        out = {tp: offset for tp, (offset, _ts) in latest.items()}
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, offset in out.items():
            leader = self.cluster.leader_for(*tp)
            if leader is not None:
                by_node.setdefault(leader, {})[tp] = offset
        for node, wanted in by_node.items():
            # Tansu answers a Fetch with max_wait_ms=0 with no partitions at all: wait a little.
            req = FETCH.Request(
                replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 16,
                isolation_level=self._isolation, session_id=0, session_epoch=-1,
                topics=self._fetch_topics(wanted, 1 << 16))
            resp = self.cluster.request(node, FETCH, req, max(0.0, deadline - time.monotonic()))
            for name, t in self._response_topics(resp):
                for p in t.partitions:
                    tp = TopicPartition(name, p.partition_index)
                    if tp in wanted and p.error_code == 0:
                        lso = getattr(p, "last_stable_offset", -1)
                        out[tp] = max(out[tp], lso if self._isolation and lso >= 0 else p.high_watermark)
        return out

    def _back_off(self, node: int) -> None:
        # Retried after retry_backoff_ms, not at once: a failing broker costs little.
        self._fetch_backoff[node] = time.monotonic() + self.config.retry_backoff_ms / 1000

    def _handle_resets(self, deadline: float) -> None:
        waiting = self._group.pending_positions if self._group is not None else ()
        todo = [tp for tp, st in self._assigned.items()
                if (st.position is None and tp not in waiting) or st.reset_to is not None]
        if todo:
            out_of_range = any(self._assigned[tp].reset_to is not None for tp in todo)
            try:
                self._reset_positions(todo, max(0.001, deadline - time.monotonic()), out_of_range)
            except KafkaTimeoutError:
                return  # no answer within this poll's timeout: the next poll asks again
            for tp in todo:
                self._assigned[tp].reset_to = None

    def _drain(self, max_records: int, columnar: bool) -> list[Any]:
        out: list[Any] = []
        for tp, st in self._assigned.items():
            if st.buffer is None and not st.pending:
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
            data = st.pending.popleft()
            # Decoding makes two objects per record, and they live until the caller is
            # done with them: the collector, run every 700 allocations, would scan and
            # promote them again and again (a third of poll()'s time at 100-byte
            # values).  They cannot form cycles, so it waits until they are all made.
            pause_gc = not columnar and gc.isenabled()
            if pause_gc:
                gc.disable()
            try:
                self._drain_one(tp, st, data, out, max_records, columnar)
            except Exception as exc:
                # A corrupt batch or a failing deserializer: drop what is buffered, so
                # the next poll fetches from the same position and fails the same way
                # rather than skip past the bad records.  Records already taken from
                # other partitions are returned first; the next poll() raises.
                st.clear()
                if not out:
                    raise
                self._pending_error = exc
                return out
            finally:
                if pause_gc:
                    gc.enable()
        return out

    def _drain_one(self, tp: TopicPartition, st: _PartitionState, data: Any, out: list[Any],
                   max_records: int, columnar: bool) -> None:
        check = self.config.check_crcs
        start = st.position
        if columnar:
            next_pos = _next_offset(data)
            if next_pos is not None:  # else decode_batches below says what is wrong
                cols = codec.decode_columnar(data, start_offset=start, check_crcs=check)
                st.position = max(next_pos, start)
                if len(cols):
                    out.append(FetchedBatch(tp.topic, tp.partition, cols, st.high_watermark))
                return
        if not columnar:
            # Decode only the batches this poll hands out; the rest stays raw, first in
            # line.  A large fetch answer then never turns into a crowd of live record
            # objects at once (which the garbage collector would scan again and again).
            cut = _split_point(data, max_records - len(out))
            if cut:
                st.pending.appendleft(data[cut:])
                data = data[:cut]
        batches = codec.decode_batches(data, start_offset=start, check_crcs=check)
        if not batches:
            if len(data) >= self.config.max_partition_fetch_bytes and not self._has_complete_entry(data):
                self._pending_error = RecordTooLargeError(
                    f"{tp} at offset {start}: the next batch is larger than "
                    f"max_partition_fetch_bytes={self.config.max_partition_fetch_bytes}; raise it")
            return
        last = batches[-1]
        next_pos = max(last.base_offset + last.last_offset_delta + 1, start)
        if columnar:
            cols = codec.decode_columnar(data, start_offset=start, check_crcs=check)
            st.position = next_pos
            if len(cols):
                out.append(FetchedBatch(tp.topic, tp.partition, cols, st.high_watermark))
            return
        topic, partition = tp
        kdes, vdes = self._kdes, self._vdes
        recs: list[ConsumerRecord] = []
        for b in batches:
            if b.is_control:
                continue
            if kdes is None and vdes is None:
                recs.extend([_RecordView(topic, partition, r) for r in b.records])
                continue
            for r in b.records:
                k, v = r.key, r.value
                if kdes is not None:
                    k = kdes(k)
                if vdes is not None:
                    v = vdes(v)
                recs.append(_DeserializedRecord(topic, partition, r, k, v))
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

    def _poll(self, timeout: float, max_records: int, columnar: bool) -> list[Any]:
        self._check_open()
        group = self._group
        if not self._assigned and (group is None or not group.subscribed):
            raise ValueError("poll() with no partitions assigned; call assign() or subscribe() first")
        deadline = time.monotonic() + timeout
        while True:
            if self._pending_error is not None:
                err, self._pending_error = self._pending_error, None
                raise err
            if group is not None:
                group.step(deadline)
            self._handle_resets(deadline)
            # Fetches go out before decoding and again before returning, so the broker
            # works while kafkawire decodes and the caller processes.
            self._send_fetches()
            out = self._drain(max_records, columnar)
            self.cluster.maybe_refresh()
            self._send_fetches()
            if out:
                return out
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            wait = remaining
            if not self._inflight:
                # Waiting for a connection's setup, a broker's backoff or a refresh:
                # their progress ends the poll, a backoff ends within this.
                wait = min(wait, max(self.cluster.next_connect_delay(), self.config.retry_backoff_ms / 1000))
            self.cluster.poll(wait)

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout`` seconds for
        some; at most ``max_records`` (default ``max_poll_records``)."""
        return self._poll(timeout, max_records or self.config.max_poll_records, False)

    def poll_batch(self, timeout: float = 1.0) -> list[FetchedBatch]:
        """Like poll(), but one :class:`FetchedBatch` (columnar) per partition fetched."""
        return self._poll(timeout, 1 << 62, True)

    def pause(self, partitions: Iterable[Any]) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, partitions: Iterable[Any]) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    # -- groups and offsets -----------------------------------------------------------------

    def _need_group(self, what: str) -> ConsumerGroup:
        self._check_open()
        if self._group is None:
            raise ValueError(f"{what} needs a consumer group: create the Consumer with group_id=...")
        return self._group

    def subscribe(self, topics: Iterable[str] | str | None = None, *, pattern: Any = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group and consume its share of ``topics`` (or of every topic whose
        name matches ``pattern``, a regex; checked again on each metadata refresh).
        ``listener`` gets on_partitions_revoked / _assigned / _lost calls inside poll()."""
        self._need_group("subscribe()").subscribe(topics, pattern, listener)

    def subscription(self) -> set[str]:
        """The topics subscribed to (a pattern's current matches); empty when not subscribed."""
        g = self._group
        return set(g.topics) if g is not None and g.topics is not None else set()

    def unsubscribe(self, timeout: float | None = None) -> None:
        """Give up the subscription's partitions (committing with auto-commit) and leave the group."""
        self._need_group("unsubscribe()").unsubscribe(time.monotonic() + self._timeout(timeout))

    def commit(self, offsets: dict[Any, int] | None = None, timeout: float | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): next offset to read}; default: the
        position of every assigned partition, i.e. after the records poll() returned)
        and wait for the group's answer.  Raises :class:`~kafkawire.errors.CommitFailedError`
        when the group rebalanced in the meantime, KafkaTimeoutError after ``timeout``."""
        g = self._need_group("commit()")
        g.commit(None if offsets is None else {_tp(k): v for k, v in offsets.items()},
                 time.monotonic() + self._timeout(timeout))

    def commit_async(self, offsets: dict[Any, int] | None = None, callback: Any = None) -> None:
        """Like commit(), without waiting; ``callback(offsets, exception_or_None)`` runs
        inside a later poll(), commit() or close()."""
        g = self._need_group("commit_async()")
        g.commit_async(None if offsets is None else {_tp(k): v for k, v in offsets.items()}, callback)

    def committed(self, partitions: Iterable[Any], timeout: float | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where there is none)."""
        g = self._need_group("committed()")
        return g.committed([_tp(x) for x in partitions], time.monotonic() + self._timeout(timeout))

    def group_state(self) -> dict[str, Any]:
        """The member's health: ``state`` (unjoined, joining, awaiting-assignment,
        syncing, stable), ``member_id``, ``generation``, ``assignment``, ``protocol``,
        ``is_leader``, ``coordinator``, ``rejoin_needed`` and why, the last rebalance's
        reason, the last heartbeat's age (s) and result, the last error."""
        return self._need_group("group_state()").state()

    def close(self, timeout: float | None = None) -> None:
        """Leave the group (committing first with auto-commit) and close the
        connections, within ``timeout`` seconds (default request_timeout_ms)."""
        if not self._closed:
            try:
                if self._group is not None:
                    self._group.close(time.monotonic() + self._timeout(timeout))
            finally:
                self._closed = True
                self.cluster.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
