"""The producer's decisions that both shells share and the accumulator does not hold:
an explicit partition checked against the topic's partition count
(:func:`partition_check`), and the Produce request and answer on the producer's path.

The Produce request and answer are written and read without the schema's generic
machinery, for the per-request latency of a producer that sends one record at a time
(issue 23).

:func:`encode_produce` writes a Produce request body (v3+, RecordBatch) byte for byte as
the schema encoder does, record data as chunks of their own (never copied);
:func:`decode_produce_response` reads the common answer (no per-record errors, no
tagged fields) into the same response objects the schema decoder makes, and gives up
(None) on anything else, which the schema decoder then reads.  The Connection uses both
for Produce; the tests compare them with the schema, version by version.

This module does no I/O.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.metadata import check_partition_in_range
from kafkawire.protocol.schema import _length, _put_string, _put_uvarint, _read_string

__all__ = ["NEED_COUNT", "NEED_FRESH_COUNT", "partition_check", "produce_request", "lone_produce_request",
           "encode_produce", "frame_produce", "decode_produce_response", "FIRST_VERSION"]

PRODUCE = apis.get("Produce")
#: The first Produce version these fast paths write and read (RecordBatch, KIP-98).
FIRST_VERSION = 3
_FLEXIBLE = 9  # compact types and tagged fields from Produce v9 (KIP-482)

_Request = PRODUCE.Request
_TopicData = _Request.TopicProduceData
_PartitionData = _TopicData.PartitionProduceData
_Response = PRODUCE.Response
_TopicResponse = _Response.TopicProduceResponse
_PartitionResponse = _TopicResponse.PartitionProduceResponse

_I = struct.Struct(">i")
_HI = struct.Struct(">hi")
_IH = struct.Struct(">ih")
_II = struct.Struct(">ii")
_QQ = struct.Struct(">qq")
_QQQ = struct.Struct(">qqq")
# v8+ partition answer tail in the common case: no record_errors, a null error_message
_NO_RECORD_ERRORS = (b"\0\0\0\0\xff\xff", b"\x01\0\0")  # (v8, v9+ with its empty tags)
_LeaderIdAndEpoch = type(_PartitionResponse._default_current_leader())
# An answer for one partition of one topic (a producer sending one batch at a time), from
# the partition's index to the end, by version: index, error_code, base_offset,
# log_append_time_ms[, log_start_offset (v5+)][, the empty record_errors and null
# error_message (v8+), in v9+ with the partition's and topic's empty tags], throttle_time_ms
# [, the response's empty tags (v9+)].
_ONE_PARTITION_TAIL = {v: struct.Struct(">ihqq" + ("q" if v >= 5 else "") + ("ih" if v == 8 else "")
                                        + ("BBBB" if v >= _FLEXIBLE else "") + "i"
                                        + ("B" if v >= _FLEXIBLE else ""))
                       for v in range(FIRST_VERSION, PRODUCE.max_version + 1)}
# The values the fixed bytes after log_start_offset must have (v8 and v9+).
_ONE_PARTITION_FIXED = {8: (0, -1), _FLEXIBLE: (1, 0, 0, 0)}


#: partition_check wants the topic's partition count (any known one).
NEED_COUNT = "count"
#: partition_check wants the count from a Metadata answer received from now on.
NEED_FRESH_COUNT = "fresh count"


def partition_check(topic: str, partition: int, count: int | None, fresh: int | None) -> str | None:
    """May a record go to the explicit ``partition`` (an int >= 0) of ``topic``?  As the
    Java client does, a partition the topic lacks is refused before queueing (it could
    never be delivered): None when it may go; NEED_COUNT or NEED_FRESH_COUNT when the shell
    must find that out and ask again with it (``count``: the count known, None or 0 if
    none; ``fresh``: the count of a Metadata answer received after this record came,
    None until asked for); raises UnknownPartitionError when even that count lacks it.
    The count known may predate partitions added since, hence the fresh answer."""
    if fresh is not None:
        check_partition_in_range(topic, partition, fresh)
        return None
    if not count:
        return NEED_COUNT
    return None if partition < count else NEED_FRESH_COUNT


def produce_request(transactional_id: str | None, acks: int, timeout_ms: int,
                    topics: dict[str, list[tuple[int, Any]]]) -> Any:
    """A Produce request object ({topic: [(partition, records)]}), equal to the one the
    schema's constructor makes, built without its field-by-field defaults."""
    topic_data = []
    for name, parts in topics.items():
        t = _TopicData.__new__(_TopicData)
        t.name = name
        t.partition_data = pd = []
        for index, records in parts:
            p = _PartitionData.__new__(_PartitionData)
            p.index = index
            p.records = records
            pd.append(p)
        topic_data.append(t)
    r = _Request.__new__(_Request)
    r.transactional_id = transactional_id
    r.acks = acks
    r.timeout_ms = timeout_ms
    r.topic_data = topic_data
    return r


def lone_produce_request(fields: tuple) -> Any:
    """The Produce request object of one partition's batch given by its fields
    (transactional_id, acks, timeout_ms, topic, partition, records), as
    Accumulator.lone_request makes them: for the ways that need the object (a request
    held for a re-authentication, the general writer)."""
    transactional_id, acks, timeout_ms, topic, partition, records = fields
    return produce_request(transactional_id, acks, timeout_ms, {topic: [(partition, records)]})


_FRAME_HEAD = struct.Struct(">ihhi")  # frame size, api key (Produce: 0), version, correlation id
_MAX_FRAME = 2**31 - 1


def frame_produce(correlation_id: int, version: int, header_tail: bytes, body: list[Any]
                  ) -> tuple[int, list[Any] | None]:
    """The Produce request ``body`` (:func:`encode_produce`'s chunks) framed for the wire:
    (the frame's size, its chunks), the size prefix and request header (``header_tail``:
    the header after the correlation id) joined to the first chunk and the records as
    they are.  No chunks (None) for a frame too large for its size prefix."""
    size = 8 + len(header_tail) + sum(len(c) if type(c) is bytes else memoryview(c).nbytes for c in body)
    if size > _MAX_FRAME:
        return size, None
    # body[0]: the fields before any records
    return size, [_FRAME_HEAD.pack(size, 0, version, correlation_id) + header_tail + body[0], *body[1:]]


def encode_produce(request: Any, version: int) -> list[Any] | None:
    """The body of Produce ``request`` at ``version`` as chunks to write in order (record
    data as the very objects the request holds), or None before v3 (the schema encoder
    writes those).  A value the schema refuses is refused the same way."""
    if version < FIRST_VERSION:
        return None
    flexible = version >= _FLEXIBLE
    topics = request.topic_data
    if len(topics) == 1 and len(topics[0].partition_data) == 1:
        one = _encode_one(request, topics[0], flexible)
        if one is not None:
            return one
    out = bytearray()
    chunks: list[Any] = []
    _put_string(out, request.transactional_id, flexible, True, "transactional_id")
    out += _HI.pack(request.acks, request.timeout_ms)
    _put_count(out, len(topics), flexible)
    for t in topics:
        _put_string(out, t.name, flexible, False, "name")
        parts = t.partition_data
        _put_count(out, len(parts), flexible)
        for p in parts:
            out += _I.pack(p.index)
            records = p.records
            if records is None:
                out += b"\0" if flexible else b"\xff\xff\xff\xff"
            else:
                n = len(records) if type(records) is bytes else memoryview(records).nbytes
                _put_count(out, n, flexible)
                if n:
                    chunks.append(bytes(out))
                    out.clear()
                    chunks.append(records)
            if flexible:
                out.append(0)  # the partition's tagged fields: none
        if flexible:
            out.append(0)  # the topic's
    if flexible:
        out.append(0)  # the request's
    if out:
        chunks.append(bytes(out))
    return chunks


# (transactional_id, topic name, flexible) -> the request's bytes before acks and between
# timeout_ms and the partition index, for one partition of one topic (see _encode_one).
_ONE_PARTITION_HEADS: dict[tuple[str | None, str, bool], tuple[bytes, bytes]] = {}
_HEADS_KEPT = 1024  # a producer writes to a bounded set of topics; past this, start over


def _encode_one(request: Any, topic: Any, flexible: bool) -> list[Any] | None:
    """encode_produce of a request for one partition of one topic (a producer sending one
    batch at a time) from cached pieces; None for the general writer (null or empty
    records, or values the general writer should judge)."""
    p = topic.partition_data[0]
    records = p.records
    if type(records) is not bytes or not records:
        return None
    key = (request.transactional_id, topic.name, flexible)
    head = _ONE_PARTITION_HEADS.get(key)
    if head is None:
        if type(topic.name) is not str:
            return None
        before = bytearray()
        _put_string(before, request.transactional_id, flexible, True, "transactional_id")
        between = bytearray()
        _put_count(between, 1, flexible)
        _put_string(between, topic.name, flexible, False, "name")
        _put_count(between, 1, flexible)
        if len(_ONE_PARTITION_HEADS) >= _HEADS_KEPT:
            _ONE_PARTITION_HEADS.clear()
        head = _ONE_PARTITION_HEADS[key] = (bytes(before), bytes(between))
    n = len(records)
    if flexible:
        size = bytearray()
        _put_uvarint(size, n + 1)
        # the partition's, the topic's and the request's tagged fields: none
        return [head[0] + _HI.pack(request.acks, request.timeout_ms) + head[1] + _I.pack(p.index) + size,
                records, b"\0\0\0"]
    return [head[0] + _HI.pack(request.acks, request.timeout_ms) + head[1] + _II.pack(p.index, n), records]


def _put_count(out: bytearray, n: int, flexible: bool) -> None:
    """An array's element count or a byte string's length (compact: plus one)."""
    if flexible:
        _put_uvarint(out, n + 1)
    else:
        out += _I.pack(n)


def decode_produce_response(body: Any, version: int) -> Any:
    """Produce answer ``body`` (after the response header) at ``version`` as the schema
    decoder reads it, or None for the schema decoder to read: before v3, per-record
    errors, an error message, tagged fields (KIP-951's leader hints), or bytes that do
    not add up (the schema decoder then says what is wrong)."""
    if version < FIRST_VERSION:
        return None
    try:
        return _decode_one(body, version) or _decode(body, version)
    except (IndexError, struct.error, errors.CodecError, UnicodeDecodeError):
        return None


def _decode_one(buf: Any, version: int) -> Any:
    """The common answer for one partition of one topic, read with one unpack after the
    topic name (short, as a compact string: one length byte); None for anything else."""
    tail = _ONE_PARTITION_TAIL.get(version)
    if tail is None:
        return None
    if version >= _FLEXIBLE:
        # one topic (compact count 2), a name shorter than 127 bytes, one partition
        n = buf[1] - 1
        if buf[0] != 2 or not 0 <= n < 127 or buf[2 + n] != 2:
            return None
        name = str(buf[2:2 + n], "utf-8")
        pos = 3 + n
    else:
        count, n = _IH.unpack_from(buf, 0)
        if count != 1 or n < 0 or _I.unpack_from(buf, 6 + n)[0] != 1:
            return None
        name = str(buf[6:6 + n], "utf-8")
        pos = 10 + n
    if pos + tail.size != len(buf):
        return None
    f = tail.unpack_from(buf, pos)
    wide = 5 if version >= 5 else 4
    fixed = _ONE_PARTITION_FIXED.get(min(version, _FLEXIBLE))
    if fixed is not None and f[wide:wide + len(fixed)] != fixed:
        return None  # per-record errors, an error message, tagged fields: the schema's
    if version >= _FLEXIBLE and f[-1] != 0:
        return None
    p = _PartitionResponse.__new__(_PartitionResponse)
    p.index, p.error_code, p.base_offset, p.log_append_time_ms = f[0], f[1], f[2], f[3]
    p.log_start_offset = f[4] if wide == 5 else -1
    p.record_errors = []
    p.error_message = None
    p.current_leader = leader = _LeaderIdAndEpoch.__new__(_LeaderIdAndEpoch)
    leader.leader_id = leader.leader_epoch = -1
    t = _TopicResponse.__new__(_TopicResponse)
    t.name = name
    t.partition_responses = [p]
    r = _Response.__new__(_Response)
    r.responses = [t]
    r.throttle_time_ms = f[-2] if version >= _FLEXIBLE else f[-1]
    r.node_endpoints = []
    return r


def _decode(buf: Any, version: int) -> Any:
    flexible = version >= _FLEXIBLE
    end = len(buf)
    no_errors = _NO_RECORD_ERRORS[flexible] if version >= 8 else b""
    wide = 24 if version >= 5 else 16  # base_offset, log_append_time_ms[, log_start_offset]
    n, pos = _length(buf, 0, end, flexible, True, "responses")
    if n < 0:
        return None  # null: the schema's to read
    responses = []
    for _ in range(n):
        name, pos = _read_string(buf, pos, end, flexible)
        count, pos = _length(buf, pos, end, flexible, True, "partition_responses")
        if name is None or count < 0:
            return None
        partitions = []
        for _ in range(count):
            p = _PartitionResponse.__new__(_PartitionResponse)
            p.index, p.error_code = _IH.unpack_from(buf, pos)
            pos += 6
            if wide == 24:
                p.base_offset, p.log_append_time_ms, p.log_start_offset = _QQQ.unpack_from(buf, pos)
            else:
                p.base_offset, p.log_append_time_ms = _QQ.unpack_from(buf, pos)
                p.log_start_offset = -1
            pos += wide
            if no_errors:
                if buf[pos:pos + len(no_errors)] != no_errors:
                    return None
                pos += len(no_errors)
            p.record_errors = []
            p.error_message = None
            p.current_leader = _PartitionResponse._default_current_leader()
            partitions.append(p)
        if flexible:
            if buf[pos] != 0:
                return None
            pos += 1
        t = _TopicResponse.__new__(_TopicResponse)
        t.name = name
        t.partition_responses = partitions
        responses.append(t)
    r = _Response.__new__(_Response)
    r.responses = responses
    (r.throttle_time_ms,) = _I.unpack_from(buf, pos)
    pos += 4
    if flexible:
        if buf[pos] != 0:
            return None
        pos += 1
    if pos != end:
        return None
    r.node_endpoints = _Response._default_node_endpoints()
    return r
