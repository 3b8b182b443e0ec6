"""The Fetch answer read without the schema's generic machinery, for a consumer's
per-answer latency (issue 23): at 1,000 records/s on Kafka the schema decoder took about
34 µs of the 120 between select() and poll() returning a one-record answer.

:func:`decode_fetch_response` reads the common answer (v4+, no tagged fields, the
aborted transactions a read_committed fetch lists) into the same response objects the
schema decoder makes, and gives up (None) on anything else: tagged fields (KIP-951's
leader hints, diverging epochs, node endpoints) or bytes that do not add up.  The
schema decoder then reads it and says what is wrong.  The Connection uses it for every
Fetch answer; the tests compare the two, version by version.

This module does no I/O.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkawire import errors
from kafkawire.protocol import apis
from kafkawire.protocol.schema import _read_uuid, _uvarint

__all__ = ["decode_fetch_response", "FIRST_VERSION"]

FETCH = apis.get("Fetch")
#: The first Fetch version read here: last_stable_offset and aborted transactions (KIP-98).
FIRST_VERSION = 4
_FLEXIBLE = 12  # compact types and tagged fields from Fetch v12 (KIP-482)
_IDS = 13  # topics named by id from v13 (KIP-516)

_Response = FETCH.Response
_Topic = _Response.FetchableTopicResponse
_Partition = _Topic.PartitionData
_Aborted = _Partition.AbortedTransaction

_I = struct.Struct(">i")
_H = struct.Struct(">h")
_QQ = struct.Struct(">qq")
# The response head by version: throttle_time_ms[, error_code, session_id (v7+)].
_HEAD = {v: struct.Struct(">ihi" if v >= 7 else ">i") for v in range(FIRST_VERSION, FETCH.max_version + 1)}
# A partition's fixed fields: partition_index, error_code, high_watermark,
# last_stable_offset[, log_start_offset (v5+)].
_PART = {v: struct.Struct(">ihqqq" if v >= 5 else ">ihqq") for v in range(FIRST_VERSION, FETCH.max_version + 1)}


def decode_fetch_response(body: Any, version: int) -> Any:
    """Fetch answer ``body`` (a memoryview after the response header) at ``version`` as
    the schema decoder reads it, or None for the schema decoder to read."""
    if not FIRST_VERSION <= version <= FETCH.max_version:
        return None
    try:
        return _decode(body, version)
    except (IndexError, struct.error, errors.CodecError, UnicodeDecodeError):
        return None


def _count(buf: Any, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array's element count or a byte string's length (-1: null)."""
    if flexible:
        n = buf[pos]
        if n < 0x80:
            return n - 1, pos + 1
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    return _I.unpack_from(buf, pos)[0], pos + 4


def _decode(buf: Any, version: int) -> Any:
    flexible = version >= _FLEXIBLE
    end = len(buf)
    head = _HEAD[version]
    r = _Response.__new__(_Response)
    if version >= 7:
        r.throttle_time_ms, r.error_code, r.session_id = head.unpack_from(buf, 0)
    else:
        (r.throttle_time_ms,) = head.unpack_from(buf, 0)
        r.error_code = r.session_id = 0
    pos = head.size
    part = _PART[version]
    wide = version >= 5
    replica = version >= 11
    n, pos = _count(buf, pos, end, flexible)
    if not 0 <= n <= end - pos:
        return None
    responses = r.responses = []
    for _ in range(n):
        t = _Topic.__new__(_Topic)
        if version >= _IDS:
            t.topic = ""
            t.topic_id, pos = _read_uuid(buf, pos, end)
        else:
            size, pos = _count(buf, pos, end, flexible) if flexible else (_H.unpack_from(buf, pos)[0], pos + 2)
            if not 0 <= size <= end - pos:
                return None
            t.topic = str(buf[pos:pos + size], "utf-8")
            t.topic_id = _Topic._default_topic_id()
            pos += size
        count, pos = _count(buf, pos, end, flexible)
        if not 0 <= count <= end - pos:
            return None
        partitions = t.partitions = []
        for _ in range(count):
            p = _Partition.__new__(_Partition)
            if wide:
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, \
                    p.log_start_offset = part.unpack_from(buf, pos)
            else:
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset = part.unpack_from(buf, pos)
                p.log_start_offset = -1
            pos += part.size
            aborted, pos = _count(buf, pos, end, flexible)
            if aborted < 0:
                p.aborted_transactions = None
            else:
                if aborted > end - pos:
                    return None
                p.aborted_transactions = txns = []
                for _ in range(aborted):
                    a = _Aborted.__new__(_Aborted)
                    a.producer_id, a.first_offset = _QQ.unpack_from(buf, pos)
                    pos += 16
                    if flexible:
                        if buf[pos] != 0:
                            return None
                        pos += 1
                    txns.append(a)
            if replica:
                (p.preferred_read_replica,) = _I.unpack_from(buf, pos)
                pos += 4
            else:
                p.preferred_read_replica = -1
            size, pos = _count(buf, pos, end, flexible)
            if size < 0:
                p.records = None
            else:
                if size > end - pos:
                    return None
                p.records = buf[pos:pos + size]
                pos += size
            if flexible:
                if buf[pos] != 0:
                    return None  # diverging_epoch, current_leader or snapshot_id: the schema's
                pos += 1
            p.diverging_epoch = _Partition._default_diverging_epoch()
            p.current_leader = _Partition._default_current_leader()
            p.snapshot_id = _Partition._default_snapshot_id()
            partitions.append(p)
        if flexible:
            if buf[pos] != 0:
                return None
            pos += 1
        responses.append(t)
    if flexible:
        if buf[pos] != 0:
            return None  # node_endpoints (v16+, KIP-951): the schema's
        pos += 1
    if pos != end:
        return None
    r.node_endpoints = []
    return r
