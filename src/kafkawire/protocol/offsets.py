"""Offset lookups by ListOffsets, with no I/O: the request, what its answer means, and
:func:`list_offsets_steps`, the whole lookup with its retries as a step generator (see
protocol/steps.py) that the sync and the asyncio consumer each run with their one runner.

The lookup asks each partition's leader; a partition with no known leader, an answer
naming a moved leader (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) or a
connection that fails has the metadata refreshed first.  Retriable errors wait
retry_backoff_ms and try again until the deadline; a permanent one (not authorized, an
unsupported version, a topic the broker refuses) ends the lookup at once.
"""

from __future__ import annotations

from typing import Any, Generator, Mapping

from kafkawire import errors
from kafkawire.errors import REFRESH_METADATA_CODES, KafkaConnectionError, KafkaTimeoutError, broker_error
from kafkawire.protocol import apis
from kafkawire.protocol.fetcher import Fetcher, OffsetAndTimestamp, TopicPartition, as_topic_partition
from kafkawire.protocol.metadata import ClusterMetadata
from kafkawire.protocol.steps import NOW, Refresh, Request, Sleep

__all__ = ["list_offsets_request", "apply_list_offsets", "list_offsets_steps", "reset_steps", "poll_reset_steps",
           "check_timestamps", "offsets_and_times"]

LIST_OFFSETS = apis.get("ListOffsets")
_LOTopic = LIST_OFFSETS.Request.ListOffsetsTopic
_LOPartition = _LOTopic.ListOffsetsPartition


def list_offsets_request(query: Mapping[TopicPartition, int], isolation: int) -> Any:
    """A ListOffsets request for ``query``: partition -> timestamp (ms), or EARLIEST / LATEST."""
    topics: dict[str, list[Any]] = {}
    for tp, ts in query.items():
        topics.setdefault(tp.topic, []).append(
            _LOPartition(partition_index=tp.partition, timestamp=ts, max_num_offsets=1))
    return LIST_OFFSETS.Request(replica_id=-1, isolation_level=isolation,
                                topics=[_LOTopic(name=t, partitions=p) for t, p in topics.items()])


def apply_list_offsets(resp: Any, version: int, todo: dict[TopicPartition, int],
                       result: dict[TopicPartition, tuple[int, int]]) -> bool:
    """Move the partitions ``resp`` answers from ``todo`` to ``result`` as (offset,
    timestamp); raises a partition's error unless it is retriable (the partition then
    stays in ``todo``).  Returns whether the metadata should be refreshed first."""
    refresh = False
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if tp not in todo:
                continue
            if p.error_code:
                refresh = refresh or p.error_code in REFRESH_METADATA_CODES
                if not errors.for_code(p.error_code).retriable:
                    raise broker_error(p.error_code, f"ListOffsets for {tp}")
                continue
            if version == 0:
                offsets = p.old_style_offsets
                result[tp] = (offsets[0] if offsets else -1, -1)
            else:
                result[tp] = (p.offset, p.timestamp)
            del todo[tp]
    return refresh


def _by_leader(meta: ClusterMetadata, tps: Any) -> dict[int, list[TopicPartition]] | None:
    """``tps`` grouped by leader; None while one of them has no known leader."""
    by_node: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        leader = meta.leader_for(*tp)
        if leader is None:
            return None
        by_node.setdefault(leader, []).append(tp)
    return by_node


def _ask(node: int, query: dict[TopicPartition, int], isolation: int) -> Generator[Any, Any, tuple[Any, int]]:
    """One ListOffsets request to ``node``: its answer and the version it was sent at."""
    sent: list[int] = []

    def build(version: int) -> Any:
        sent.append(version)
        return list_offsets_request(query, isolation)

    resp = yield Request(node, LIST_OFFSETS, build)
    return resp, sent[-1]


def _not_found(meta: ClusterMetadata, todo: Mapping[TopicPartition, int], timeout: float,
               last: BaseException | None) -> KafkaTimeoutError:
    """The lookup's error at its deadline: what the metadata says of the partitions
    without a leader, and the last failure."""
    why = sorted({f"topic {tp.topic!r}: {meta.why_unavailable(tp.topic)}"
                  for tp in todo if meta.leader_for(*tp) is None})
    return KafkaTimeoutError(f"offsets for {sorted(todo)} not found within {timeout:g}s"
                             + "".join(f"; {w}" for w in why)
                             + (f"; last error: {last}" if last else ""))


def list_offsets_steps(meta: ClusterMetadata, query: Mapping[TopicPartition, int], isolation: int,
                       timeout: float, retry_backoff: float
                       ) -> Generator[Any, Any, dict[TopicPartition, tuple[int, int]]]:
    """Find ``query``'s offsets (partition -> timestamp, EARLIEST or LATEST) within
    ``timeout`` seconds; returns partition -> (offset, timestamp).  ``meta`` is the
    cluster's metadata (read for leaders, marked for refresh); ``retry_backoff`` is the
    wait between rounds in seconds.  A partition its topic lacks, by an answer received
    during the call, raises UnknownPartitionError at once."""
    now = yield NOW
    asked = now
    deadline = now + timeout
    todo = dict(query)
    result: dict[TopicPartition, tuple[int, int]] = {}
    last: BaseException | None = None
    answered = False  # a refresh of this call was answered
    meta.interest.update(tp.topic for tp in todo)
    while todo:
        if now >= deadline:
            raise _not_found(meta, todo, timeout, last)
        by_node = _by_leader(meta, todo)
        if by_node is None:
            for tp in todo:
                if meta.leader_for(*tp) is None:
                    missing = meta.missing_partition(tp.topic, tp.partition, asked)
                    if missing is not None:
                        raise missing
            exc = meta.take_topic_error({tp.topic for tp in todo})
            if exc is not None:  # not authorized, invalid: waiting cannot help
                raise exc
            if answered:
                # An answer since the call began still names no leader (a topic not made
                # yet, an election): ask again after retry_backoff_ms, not at once.
                yield Sleep(min(retry_backoff, deadline - now))
                now = yield NOW
                if now >= deadline:
                    continue
            meta.need_refresh = True
            try:
                yield Refresh(deadline - now)
                answered = True
            except KafkaTimeoutError as exc:
                if not answered:  # else the answers say more (see _not_found)
                    last = exc
            now = yield NOW
            continue
        for node, tps in by_node.items():
            try:
                resp, version = yield from _ask(node, {tp: todo[tp] for tp in tps}, isolation)
                if apply_list_offsets(resp, version, todo, result):
                    meta.need_refresh = True
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
                meta.need_refresh = True
            except Exception as exc:  # a broker error: retried only if retriable
                if not getattr(exc, "retriable", False):
                    raise
                last = exc
        if todo:
            now = yield NOW
            yield Sleep(min(retry_backoff, max(0.0, deadline - now)))
            now = yield NOW
            if meta.refresh_due(now):
                try:
                    yield Refresh(max(0.001, deadline - now))
                    answered = True
                except KafkaTimeoutError as exc:
                    if not answered:
                        last = exc
                now = yield NOW
    return result


def reset_steps(fetcher: Fetcher, meta: ClusterMetadata, tps: list[TopicPartition], timeout: float
                ) -> Generator[Any, Any, None]:
    """Give ``tps`` (assigned to ``fetcher``) the positions auto_offset_reset says (the
    earliest or the latest offset), looked up within ``timeout`` seconds; under "none",
    OffsetOutOfRangeError at once."""
    out_of_range = any(st.reset_to is not None for st in map(fetcher.assigned.get, tps) if st is not None)
    query = fetcher.reset_query(tps, out_of_range)
    found = yield from list_offsets_steps(meta, query, fetcher.isolation, timeout, fetcher.retry_backoff)
    fetcher.apply_reset(found)


def poll_reset_steps(fetcher: Fetcher, meta: ClusterMetadata, tps: list[TopicPartition], timeout: float
                     ) -> Generator[Any, Any, None]:
    """:func:`reset_steps` inside a poll: no answer within the poll's time is no error
    (the next poll asks again)."""
    try:
        yield from reset_steps(fetcher, meta, tps, timeout)
    except KafkaTimeoutError:
        pass


def check_timestamps(timestamps: Mapping[Any, int]) -> dict[TopicPartition, int]:
    """offsets_for_times' query, checked: (topic, partition) -> timestamp (ms) >= 0."""
    query = {as_topic_partition(k): v for k, v in timestamps.items()}
    for tp, ts in query.items():
        if not isinstance(ts, int) or ts < 0:
            raise ValueError(f"timestamp for {tp} must be an int >= 0 (ms), got {ts!r}")
    return query


def offsets_and_times(query: Mapping[TopicPartition, int], found: Mapping[TopicPartition, tuple[int, int]]
                      ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """offsets_for_times' answer: None where no record has such a timestamp."""
    return {tp: (OffsetAndTimestamp(*found[tp]) if found[tp][0] >= 0 else None) for tp in query}
