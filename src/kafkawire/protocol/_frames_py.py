"""The pure-Python twin of kafkawire._frames: the same names and results, composed of the
general path's own direct writer and readers (protocol/producer.py, fetch_response.py)
with the frame checks around them.  See kafkawire._frames for the contract.
"""

from __future__ import annotations

import struct
from typing import Any

from kafkawire import errors
from kafkawire.protocol.fetch_response import decode_fetch_response
from kafkawire.protocol.producer import _decode_one, _encode_one, frame_produce, lone_produce_request

IMPLEMENTATION = "python"

#: A Fetch answer's body read directly (kafkawire._frames.fetch_body): the general path's reader.
fetch_body = decode_fetch_response


_FRAME_HEAD = struct.Struct(">ii")  # size, correlation id


def _body(data: Any, correlation_id: int, flexible: bool) -> memoryview | None:
    """The body of ``data`` when it is one whole answer frame to ``correlation_id`` (its
    header, from flexible versions on, without tagged fields); else None."""
    if type(data) is not bytes or len(data) < 8:
        return None
    size, got = _FRAME_HEAD.unpack_from(data, 0)
    if size != len(data) - 4 or got != correlation_id:
        return None
    if not flexible:
        return memoryview(data)[8:]
    if len(data) < 9 or data[8] != 0:
        return None
    return memoryview(data)[9:]


def produce_answer(data: Any, correlation_id: int, version: int) -> Any:
    """A whole Produce answer frame to the request with ``correlation_id`` at ``version``,
    decoded, when it is the common one-partition answer; None for anything else (the
    general reader's).  See kafkawire._frames.produce_answer."""
    body = _body(data, correlation_id, version >= 9) if 3 <= version <= 11 else None
    if body is None:
        return None
    try:
        return _decode_one(body, version)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None


def produce_frame(request: Any, version: int, correlation_id: int, header_tail: bytes) -> list[Any] | None:
    """The framed Produce ``request`` for one partition of one topic; None for anything
    else (the general writer's).  See kafkawire._frames.produce_frame."""
    topics = request.topic_data
    if not 3 <= version <= 11 or type(topics) is not list or len(topics) != 1 \
            or type(topics[0].partition_data) is not list or len(topics[0].partition_data) != 1:
        return None
    try:
        body = _encode_one(request, topics[0], version >= 9)
    except (errors.EncodeError, struct.error, UnicodeEncodeError):
        return None  # the general writer says what is wrong
    return None if body is None else frame_produce(correlation_id, version, header_tail, body)[1]


def produce_frame_one(transactional_id: Any, acks: Any, timeout_ms: Any, topic: Any, partition: Any,
                      records: Any, version: int, correlation_id: int, header_tail: bytes) -> list[Any] | None:
    """produce_frame for the request with these fields, one partition of one topic.  See
    kafkawire._frames.produce_frame_one."""
    request = lone_produce_request((transactional_id, acks, timeout_ms, topic, partition, records))
    return produce_frame(request, version, correlation_id, header_tail)


def fetch_answer(data: Any, correlation_id: int, version: int) -> Any:
    """A whole Fetch answer frame to the request with ``correlation_id`` at ``version``,
    decoded, records as views of ``data``, when it has no tagged fields; None for anything
    else (the general reader's).  See kafkawire._frames.fetch_answer."""
    body = _body(data, correlation_id, version >= 12) if 4 <= version <= 17 else None
    return None if body is None else decode_fetch_response(body, version)
