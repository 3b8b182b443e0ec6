"""Kafka 0.7's wire protocol, sans-IO: encode and decode, kept as history.

Before 0.8 (the 0.8 wire-format redesign says why it changed) a request carried no api
version, no correlation id and no client id; it named one topic-partition, or a count of
them for the MULTI* types, and PRODUCE had no response at all.  Message offsets were byte positions
in the partition's log.  Every integer is big-endian.

Request (REQUEST_TYPE 0 PRODUCE, 1 FETCH, 4 OFFSETS)::

    REQUEST_LENGTH int32   bytes that follow this field
    REQUEST_TYPE   int16
    TOPIC_LENGTH   int16
    TOPIC          ASCII bytes
    PARTITION      int32
    body:  PRODUCE  MESSAGES_LENGTH int32, MESSAGES (a message set)
           FETCH    OFFSET int64, MAX_SIZE int32
           OFFSETS  TIME int64 (-1 latest, -2 earliest), MAX_NUMBER int32

Multi-request (REQUEST_TYPE 2 MULTIFETCH, 3 MULTIPRODUCE)::

    REQUEST_LENGTH int32, REQUEST_TYPE int16, TOPICPARTITION_COUNT int16,
    then COUNT x (TOPIC_LENGTH, TOPIC, PARTITION, FETCH or PRODUCE body)

Response (FETCH, OFFSETS, MULTIFETCH; the type is not on the wire: the caller knows it)::

    RESPONSE_LENGTH int32, ERROR_CODE int16, then
    FETCH       MESSAGES (the rest of the frame)
    OFFSETS     NUMBER_OFFSETS int32, OFFSETS int64 x NUMBER_OFFSETS
    MULTIFETCH  one FETCH response (with its own length and error code) per fetch

Message (magic 0: no attribute byte; magic 1: COMPRESSION byte, 0 none 1 gzip 2 snappy)::

    LENGTH int32, MAGIC int8, [COMPRESSION int8], CHECKSUM int32 (CRC32 of PAYLOAD), PAYLOAD

A compressed message's payload is a compressed message set of inner messages.

This module does no I/O.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Union

from kafkawire import errors
from kafkawire.codec import crc32

__all__ = [
    "RequestType",
    "ErrorCode",
    "ERROR_MEANINGS",
    "LATEST",
    "EARLIEST",
    "COMPRESSION_NONE",
    "COMPRESSION_GZIP",
    "COMPRESSION_SNAPPY",
    "Legacy07BrokerError",
    "UnknownRequestTypeError",
    "Message",
    "MessageAndOffset",
    "ProduceRequest",
    "FetchRequest",
    "OffsetsRequest",
    "MultiFetchRequest",
    "MultiProduceRequest",
    "FetchResponse",
    "MultiFetchResponse",
    "OffsetsResponse",
    "encode_message",
    "decode_message",
    "encode_message_set",
    "decode_message_set",
    "encode_request",
    "decode_request",
    "encode_response",
    "decode_response",
    "frame_length",
]


class RequestType(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    MULTIFETCH = 2
    MULTIPRODUCE = 3
    OFFSETS = 4


class ErrorCode(enum.IntEnum):
    """0.7's error codes.  Names are 0.7's (Unknown, NoError, ...) in Kafka's case."""

    UNKNOWN = -1
    NO_ERROR = 0
    OFFSET_OUT_OF_RANGE = 1
    INVALID_MESSAGE = 2
    WRONG_PARTITION = 3
    INVALID_FETCH_SIZE = 4


#: code -> (0.7's name, its meaning)
ERROR_MEANINGS: dict[int, tuple[str, str]] = {
    -1: ("Unknown", "Unknown Error"),
    0: ("NoError", "Success"),
    1: ("OffsetOutOfRange", "Offset requested is no longer available on the server"),
    2: ("InvalidMessage", "A message you sent failed its checksum and is corrupt."),
    3: (
        "WrongPartition",
        "You tried to access a partition that doesn't exist (was not between 0 and "
        "(num_partitions - 1)).",
    ),
    4: (
        "InvalidFetchSize",
        "The size you requested for fetching is smaller than the message you're trying "
        "to fetch.",
    ),
}

#: OFFSETS TIME values with special meaning.
LATEST = -1
EARLIEST = -2

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
_COMPRESSIONS = (COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_INT16_MAX = (1 << 15) - 1
_INT32_MAX = (1 << 31) - 1


class Legacy07BrokerError(errors.BrokerError):
    """An error code in a 0.7 response.

    0.7's codes are not 0.8's (3 meant WrongPartition, not UNKNOWN_TOPIC_OR_PARTITION),
    so these are not registered in :func:`kafkawire.errors.for_code`.
    """

    def __init__(self, code: int):
        self.code = code
        self.name, self.meaning = ERROR_MEANINGS.get(
            code, ("Unrecognised", "an error code 0.7 did not define")
        )
        self.retriable = False
        super().__init__(f"Kafka 0.7 error {self.name} ({code}): {self.meaning}")


class UnknownRequestTypeError(errors.CodecError):
    """A 0.7 request whose REQUEST_TYPE is not 0 to 4."""


# ---------------------------------------------------------------------------------------
# dataclasses
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One 0.7 message.  ``compression`` needs ``magic=1``; the CRC is computed on encode."""

    payload: bytes
    compression: int = COMPRESSION_NONE
    magic: int = 1


@dataclass(frozen=True)
class MessageAndOffset:
    """A decoded message and its byte offset; ``next_offset`` is where the next one starts."""

    message: Message
    offset: int
    next_offset: int


@dataclass(frozen=True)
class ProduceRequest:
    """PRODUCE: ``messages`` is an encoded message set (see :func:`encode_message_set`)."""

    topic: str
    partition: int
    messages: bytes = b""


@dataclass(frozen=True)
class FetchRequest:
    topic: str
    partition: int
    offset: int
    max_size: int


@dataclass(frozen=True)
class OffsetsRequest:
    """OFFSETS: up to ``max_number`` segment start offsets before ``time`` (ms), newest
    first; ``time`` may be :data:`LATEST` or :data:`EARLIEST`."""

    topic: str
    partition: int
    time: int
    max_number: int


@dataclass(frozen=True)
class MultiFetchRequest:
    fetches: tuple[FetchRequest, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class MultiProduceRequest:
    produces: tuple[ProduceRequest, ...] = field(default_factory=tuple)


Request = Union[ProduceRequest, FetchRequest, OffsetsRequest, MultiFetchRequest, MultiProduceRequest]


class _HasError:
    error_code: int

    @property
    def error(self) -> Legacy07BrokerError | None:
        """The error as an exception (not raised), or None for NoError."""
        return None if self.error_code == 0 else Legacy07BrokerError(self.error_code)

    def raise_for_error(self) -> None:
        if self.error_code != 0:
            raise Legacy07BrokerError(self.error_code)


@dataclass(frozen=True)
class FetchResponse(_HasError):
    """FETCH: ``messages`` is the raw message set; its last message may be cut short."""

    error_code: int = 0
    messages: bytes = b""


@dataclass(frozen=True)
class MultiFetchResponse(_HasError):
    """MULTIFETCH: one FetchResponse per fetch of the request, in its order."""

    error_code: int = 0
    responses: tuple[FetchResponse, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class OffsetsResponse(_HasError):
    error_code: int = 0
    offsets: tuple[int, ...] = field(default_factory=tuple)


Response = Union[FetchResponse, MultiFetchResponse, OffsetsResponse]


# ---------------------------------------------------------------------------------------
# encoding helpers
# ---------------------------------------------------------------------------------------


def _check_int(name: str, value: object, bits: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise errors.encode_error(f"{name} must be an int, got {type(value).__name__}")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise errors.encode_error(f"{name}={value} does not fit an int{bits} ({lo}..{hi})")
    return value


def _topic_bytes(topic: object) -> bytes:
    if not isinstance(topic, str):
        raise errors.encode_error(f"topic must be a str, got {type(topic).__name__}")
    try:
        raw = topic.encode("ascii")
    except UnicodeEncodeError:
        raise errors.encode_error(
            f"topic {topic!r} is not ASCII; 0.7 topic names are ASCII (they name a "
            f"directory on the broker)"
        ) from None
    if len(raw) > _INT16_MAX:
        raise errors.encode_error(f"topic is {len(raw)} bytes; TOPIC_LENGTH is an int16")
    return raw


def _bytes(name: str, value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise errors.encode_error(f"{name} must be bytes, got {type(value).__name__}")
    return bytes(value)


def _topic_partition(topic: str, partition: int) -> bytes:
    raw = _topic_bytes(topic)
    return _I16.pack(len(raw)) + raw + _I32.pack(_check_int("partition", partition, 32))


def _produce_body(req: ProduceRequest) -> bytes:
    messages = _bytes("messages", req.messages)
    if len(messages) > _INT32_MAX:
        raise errors.encode_error("message set too large for MESSAGES_LENGTH (int32)")
    return _topic_partition(req.topic, req.partition) + _I32.pack(len(messages)) + messages


def _fetch_body(req: FetchRequest) -> bytes:
    return (
        _topic_partition(req.topic, req.partition)
        + _I64.pack(_check_int("offset", req.offset, 64))
        + _I32.pack(_check_int("max_size", req.max_size, 32))
    )


def _offsets_body(req: OffsetsRequest) -> bytes:
    return (
        _topic_partition(req.topic, req.partition)
        + _I64.pack(_check_int("time", req.time, 64))
        + _I32.pack(_check_int("max_number", req.max_number, 32))
    )


def _frame(body: bytes) -> bytes:
    if len(body) > _INT32_MAX:
        raise errors.encode_error(f"frame of {len(body)} bytes does not fit an int32 length")
    return _I32.pack(len(body)) + body


def _error_code(code: object) -> int:
    return _check_int("error_code", code, 16)


# ---------------------------------------------------------------------------------------
# decoding helpers
# ---------------------------------------------------------------------------------------


class _Reader:
    """Bounds-checked reads over ``buf[pos:end]``; ``what`` names the structure in errors."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf: memoryview, pos: int, end: int, what: str):
        self.buf, self.pos, self.end, self.what = buf, pos, end, what

    def _need(self, n: int, field_name: str) -> int:
        pos = self.pos
        if self.end - pos < n:
            raise errors.truncated(f"{self.what} {field_name}", pos, n, self.end - pos)
        self.pos = pos + n
        return pos

    def i16(self, field_name: str) -> int:
        return _I16.unpack_from(self.buf, self._need(2, field_name))[0]

    def i32(self, field_name: str) -> int:
        return _I32.unpack_from(self.buf, self._need(4, field_name))[0]

    def i64(self, field_name: str) -> int:
        return _I64.unpack_from(self.buf, self._need(8, field_name))[0]

    def raw(self, n: int, field_name: str) -> bytes:
        if n < 0:
            raise errors.malformed(self.what, self.pos, f"{field_name} length is negative ({n})")
        pos = self._need(n, field_name)
        return bytes(self.buf[pos : pos + n])

    def topic(self) -> str:
        n = self.i16("TOPIC_LENGTH")
        start = self.pos
        raw = self.raw(n, "TOPIC")
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise errors.malformed(self.what, start, "TOPIC is not ASCII") from None

    def rest(self) -> bytes:
        pos, self.pos = self.pos, self.end
        return bytes(self.buf[pos : self.end])

    def finish(self) -> None:
        if self.pos != self.end:
            raise errors.malformed(
                self.what,
                self.pos,
                f"{self.end - self.pos} bytes left over after the last field; the length "
                f"prefix does not match the fields",
            )


def _open_frame(data: bytes | bytearray | memoryview, what: str) -> _Reader:
    buf = memoryview(data).cast("B")
    reader = _Reader(buf, 0, len(buf), what)
    length = reader.i32("length prefix")
    if length < 2:
        raise errors.malformed(what, 0, f"length prefix {length} is shorter than its 2-byte type/error field")
    if length > len(buf) - 4:
        raise errors.truncated(what, 4, length, len(buf) - 4)
    if length < len(buf) - 4:
        raise errors.malformed(
            what,
            4 + length,
            f"{len(buf) - 4 - length} bytes follow the {length}-byte frame; pass one frame "
            f"at a time (frame_length() tells where a frame ends)",
        )
    reader.end = 4 + length
    return reader


def frame_length(data: bytes | bytearray | memoryview) -> int | None:
    """Total size (length prefix included) of the frame at the start of ``data``, or None
    while fewer than 4 bytes have arrived."""
    if len(data) < 4:
        return None
    length = _I32.unpack_from(data, 0)[0]
    if length < 2:
        raise errors.malformed("0.7 frame", 0, f"length prefix {length} is below 2")
    return 4 + length


# ---------------------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------------------


def encode_message(message: Message) -> bytes:
    """LENGTH, MAGIC, [COMPRESSION], CHECKSUM, PAYLOAD."""
    payload = _bytes("payload", message.payload)
    if message.magic == 0:
        if message.compression != COMPRESSION_NONE:
            raise errors.encode_error(
                f"compression={message.compression} needs magic 1: magic 0 messages have "
                f"no COMPRESSION byte"
            )
        header = _I8.pack(0)
    elif message.magic == 1:
        if message.compression not in _COMPRESSIONS:
            raise errors.encode_error(
                f"compression={message.compression!r} is not a 0.7 codec (0 none, 1 gzip, "
                f"2 snappy)"
            )
        header = _I8.pack(1) + _I8.pack(message.compression)
    else:
        raise errors.encode_error(f"magic={message.magic!r}: 0.7 messages have magic 0 or 1")
    return _frame(header + _U32.pack(crc32(payload)) + payload)


def decode_message(
    data: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True
) -> tuple[Message, int]:
    """Decode the message at ``pos``; return it and the position after it.

    Raises TruncatedDataError if the buffer ends inside it.
    """
    buf = memoryview(data).cast("B")
    reader = _Reader(buf, pos, len(buf), "0.7 message")
    length = reader.i32("LENGTH")
    if length < 5:  # MAGIC + CHECKSUM at least
        raise errors.corrupt("0.7 message", pos, f"LENGTH {length} is below the 5-byte minimum")
    if length > reader.end - reader.pos:
        raise errors.truncated("0.7 message", reader.pos, length, reader.end - reader.pos)
    reader.end = reader.pos + length
    magic = _I8.unpack_from(buf, reader._need(1, "MAGIC"))[0]
    if magic == 0:
        compression = COMPRESSION_NONE
    elif magic == 1:
        compression = _I8.unpack_from(buf, reader._need(1, "COMPRESSION"))[0]
        if compression not in _COMPRESSIONS:
            raise errors.UnsupportedCodecError(
                f"0.7 message at byte {pos} has COMPRESSION {compression}; 0.7 knows 0 none, "
                f"1 gzip and 2 snappy"
            )
    else:
        raise errors.UnsupportedMagicError(
            f"0.7 message at byte {pos} has MAGIC {magic}; 0.7 messages have magic 0 (no "
            f"COMPRESSION byte) or 1"
        )
    stored = _U32.unpack_from(buf, reader._need(4, "CHECKSUM"))[0]
    payload = reader.rest()
    if check_crc:
        found = crc32(payload)
        if found != stored:
            raise errors.crc_mismatch("0.7 message", pos, stored, found)
    return Message(payload, compression, magic), reader.end


def encode_message_set(messages: list[Message] | tuple[Message, ...]) -> bytes:
    """Messages back to back, no count: the MESSAGES section of PRODUCE."""
    return b"".join(encode_message(m) for m in messages)


def decode_message_set(
    data: bytes | bytearray | memoryview, base_offset: int = 0, *, check_crcs: bool = True
) -> list[MessageAndOffset]:
    """Decode a message set; ``base_offset`` is the byte offset of its first message.

    A message cut short at the end (a FETCH returns MAX_SIZE bytes of log, wherever that
    ends) stops decoding without error: fetch again from the last ``next_offset``.
    """
    buf = memoryview(data).cast("B")
    out: list[MessageAndOffset] = []
    pos = 0
    while len(buf) - pos >= 4:
        length = _I32.unpack_from(buf, pos)[0]
        if length >= 0 and pos + 4 + length > len(buf):
            break  # partial trailing message
        message, end = decode_message(buf, pos, check_crc=check_crcs)
        out.append(MessageAndOffset(message, base_offset + pos, base_offset + end))
        pos = end
    return out


# ---------------------------------------------------------------------------------------
# requests
# ---------------------------------------------------------------------------------------


def encode_request(request: Request) -> bytes:
    """The whole request frame, REQUEST_LENGTH included."""
    if isinstance(request, ProduceRequest):
        return _frame(_I16.pack(RequestType.PRODUCE) + _produce_body(request))
    if isinstance(request, FetchRequest):
        return _frame(_I16.pack(RequestType.FETCH) + _fetch_body(request))
    if isinstance(request, OffsetsRequest):
        return _frame(_I16.pack(RequestType.OFFSETS) + _offsets_body(request))
    if isinstance(request, MultiFetchRequest):
        parts, kind = [_fetch_body(f) for f in request.fetches], RequestType.MULTIFETCH
    elif isinstance(request, MultiProduceRequest):
        parts, kind = [_produce_body(p) for p in request.produces], RequestType.MULTIPRODUCE
    else:
        raise errors.encode_error(
            f"cannot encode {type(request).__name__} as a 0.7 request; pass a ProduceRequest, "
            f"FetchRequest, OffsetsRequest, MultiFetchRequest or MultiProduceRequest"
        )
    if len(parts) > _INT16_MAX:
        raise errors.encode_error(f"{len(parts)} topic-partitions; TOPICPARTITION_COUNT is an int16")
    return _frame(_I16.pack(kind) + _I16.pack(len(parts)) + b"".join(parts))


def _read_produce(r: _Reader) -> ProduceRequest:
    topic, partition = r.topic(), r.i32("PARTITION")
    n = r.i32("MESSAGES_LENGTH")
    return ProduceRequest(topic, partition, r.raw(n, "MESSAGES"))


def _read_fetch(r: _Reader) -> FetchRequest:
    topic, partition = r.topic(), r.i32("PARTITION")
    return FetchRequest(topic, partition, r.i64("OFFSET"), r.i32("MAX_SIZE"))


def _read_offsets(r: _Reader) -> OffsetsRequest:
    topic, partition = r.topic(), r.i32("PARTITION")
    return OffsetsRequest(topic, partition, r.i64("TIME"), r.i32("MAX_NUMBER"))


def decode_request(data: bytes | bytearray | memoryview) -> Request:
    """Decode one whole request frame (REQUEST_LENGTH included)."""
    r = _open_frame(data, "0.7 request")
    kind = r.i16("REQUEST_TYPE")
    req: Request
    if kind == RequestType.PRODUCE:
        r.what = "0.7 PRODUCE request"
        req = _read_produce(r)
    elif kind == RequestType.FETCH:
        r.what = "0.7 FETCH request"
        req = _read_fetch(r)
    elif kind == RequestType.OFFSETS:
        r.what = "0.7 OFFSETS request"
        req = _read_offsets(r)
    elif kind in (RequestType.MULTIFETCH, RequestType.MULTIPRODUCE):
        r.what = f"0.7 {RequestType(kind).name} request"
        count = r.i16("TOPICPARTITION_COUNT")
        if count < 0:
            raise errors.malformed(r.what, r.pos - 2, f"TOPICPARTITION_COUNT is negative ({count})")
        if kind == RequestType.MULTIFETCH:
            req = MultiFetchRequest(tuple(_read_fetch(r) for _ in range(count)))
        else:
            req = MultiProduceRequest(tuple(_read_produce(r) for _ in range(count)))
    else:
        raise UnknownRequestTypeError(
            f"0.7 request has REQUEST_TYPE {kind}; 0.7 defines 0 PRODUCE, 1 FETCH, "
            f"2 MULTIFETCH, 3 MULTIPRODUCE and 4 OFFSETS (a 0.8+ request starts with an "
            f"ApiKey and ApiVersion instead)"
        )
    r.finish()
    return req


# ---------------------------------------------------------------------------------------
# responses
# ---------------------------------------------------------------------------------------


def encode_response(response: Response) -> bytes:
    """The whole response frame, RESPONSE_LENGTH included."""
    if isinstance(response, FetchResponse):
        return _frame(_I16.pack(_error_code(response.error_code)) + _bytes("messages", response.messages))
    if isinstance(response, OffsetsResponse):
        offsets = [_check_int("offset", o, 64) for o in response.offsets]
        if len(offsets) > _INT32_MAX:
            raise errors.encode_error("too many offsets for NUMBER_OFFSETS (int32)")
        return _frame(
            _I16.pack(_error_code(response.error_code))
            + _I32.pack(len(offsets))
            + b"".join(_I64.pack(o) for o in offsets)
        )
    if isinstance(response, MultiFetchResponse):
        parts = []
        for sub in response.responses:
            if not isinstance(sub, FetchResponse):
                raise errors.encode_error(
                    f"MultiFetchResponse.responses holds {type(sub).__name__}; it takes FetchResponse"
                )
            parts.append(encode_response(sub))
        return _frame(_I16.pack(_error_code(response.error_code)) + b"".join(parts))
    raise errors.encode_error(
        f"cannot encode {type(response).__name__} as a 0.7 response; PRODUCE and "
        f"MULTIPRODUCE have none, the others take FetchResponse, MultiFetchResponse or "
        f"OffsetsResponse"
    )


def decode_response(request_type: int, data: bytes | bytearray | memoryview) -> Response:
    """Decode one whole response frame to the request of ``request_type``."""
    if request_type in (RequestType.PRODUCE, RequestType.MULTIPRODUCE):
        raise errors.CodecError(
            f"0.7 {RequestType(request_type).name} has no response: the broker sends nothing back"
        )
    if request_type not in (RequestType.FETCH, RequestType.MULTIFETCH, RequestType.OFFSETS):
        raise UnknownRequestTypeError(
            f"no 0.7 response for REQUEST_TYPE {request_type}; responses exist for 1 FETCH, "
            f"2 MULTIFETCH and 4 OFFSETS"
        )
    name = RequestType(request_type).name
    r = _open_frame(data, f"0.7 {name} response")
    error_code = r.i16("ERROR_CODE")
    if request_type == RequestType.FETCH:
        return FetchResponse(error_code, r.rest())
    if request_type == RequestType.OFFSETS:
        count = r.i32("NUMBER_OFFSETS")
        if count < 0:
            raise errors.malformed(r.what, r.pos - 4, f"NUMBER_OFFSETS is negative ({count})")
        if count * 8 > r.end - r.pos:  # checked before building the tuple
            raise errors.truncated(f"{r.what} OFFSETS", r.pos, count * 8, r.end - r.pos)
        offsets = struct.unpack_from(f">{count}q", r.buf, r.pos)
        r.pos += count * 8
        r.finish()
        return OffsetsResponse(error_code, offsets)
    subs = []
    while r.pos < r.end:
        start = r.pos
        length = r.i32("fetch response length")
        if length < 2:
            raise errors.malformed(r.what, start, f"fetch response length {length} is below 2")
        body = r.raw(length, "fetch response")
        subs.append(FetchResponse(_I16.unpack_from(body, 0)[0], body[2:]))
    return MultiFetchResponse(error_code, tuple(subs))
