"""Confluent's wire framing of a schema'd record key or value, both ways, without I/O.

A framed payload is the magic byte 0, the schema id as a 4-byte big-endian unsigned
integer, for Protobuf the message indexes (which message of the .proto file: the path
of indexes from a top-level message down through nested ones), then the serialized
data.  The message indexes are zigzag varints: their count, then each index; the
common first-message case ``[0]`` is the single byte 0.

:func:`frame` / :func:`frame_header` write it, :func:`unframe` reads it into a
:class:`Framed` whose ``payload`` is a view of the input (no copy).  Bad input raises a
:class:`~kafkawire.schema.errors.FramingError` subclass naming what was wrong, at which
byte, and where the record came from when the caller says (topic, partition, offset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

from kafkawire.schema.errors import (
    FramingError,
    InvalidMessageIndexesError,
    TruncatedFrameError,
    UnknownMagicByteError,
)

__all__ = ["MAGIC_BYTE", "HEADER_SIZE", "Framed", "frame", "frame_header", "unframe"]

#: The first byte of every framed payload.
MAGIC_BYTE = 0
#: Magic byte, then the 4-byte schema id.
HEADER_SIZE = 5
# A schema id is read as unsigned 32 bits; a message index fits a zigzag int32 varint
# (at most 5 bytes).
_MAX_ID = 0xFFFFFFFF
_MAX_INDEX = 0x7FFFFFFF
_MAX_VARINT_BYTES = 5

Buffer = Union[bytes, bytearray, memoryview]


@dataclass(frozen=True)
class Framed:
    """What :func:`unframe` read: the schema id, the Protobuf message indexes (None for
    Avro and JSON Schema) and the serialized data, a view into the input buffer."""

    schema_id: int
    message_indexes: tuple[int, ...] | None
    payload: memoryview


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _put_varint(out: bytearray, value: int) -> None:
    value = _zigzag(value)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def frame_header(schema_id: int, message_indexes: Sequence[int] | None = None) -> bytes:
    """The bytes that go before the serialized data: magic byte, ``schema_id``, and for
    Protobuf (``message_indexes`` given) the message indexes."""
    if isinstance(schema_id, bool) or not isinstance(schema_id, int) or not 0 <= schema_id <= _MAX_ID:
        raise FramingError(f"a schema id is an int from 0 to {_MAX_ID}, not {schema_id!r}")
    out = bytearray((MAGIC_BYTE,))
    out += schema_id.to_bytes(4, "big")
    if message_indexes is not None:
        indexes = list(message_indexes)
        if not indexes:
            raise InvalidMessageIndexesError(
                "Protobuf message indexes are a path of at least one index: [0] is the first "
                "top-level message of the schema, [1, 0] the first message nested in the second")
        for i in indexes:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= _MAX_INDEX:
                raise InvalidMessageIndexesError(
                    f"a Protobuf message index is an int from 0 to {_MAX_INDEX}, not {i!r} (in {indexes})")
        if indexes == [0]:  # the first top-level message: one byte, as Confluent writes it
            out.append(0)
        else:
            _put_varint(out, len(indexes))
            for i in indexes:
                _put_varint(out, i)
    return bytes(out)


def frame(schema_id: int, payload: Buffer, message_indexes: Sequence[int] | None = None) -> bytes:
    """``payload`` framed for ``schema_id`` (and Protobuf's ``message_indexes``)."""
    return frame_header(schema_id, message_indexes) + bytes(payload)


def _where(topic: str | None, partition: int | None, offset: int | None) -> str:
    parts = []
    if topic is not None:
        parts.append(f"topic {topic!r}")
    if partition is not None:
        parts.append(f"partition {partition}")
    if offset is not None:
        parts.append(f"offset {offset}")
    return f" ({', '.join(parts)})" if parts else ""


def unframe(data: Buffer, *, protobuf: bool = False, topic: str | None = None,
            partition: int | None = None, offset: int | None = None) -> Framed:
    """Read a framed payload.  ``protobuf``: message indexes follow the schema id.
    ``topic``, ``partition`` and ``offset`` only name the record in errors (and are set
    on them).  Raises :class:`UnknownMagicByteError` (not framed, or another framing),
    :class:`TruncatedFrameError` (shorter than its header) or
    :class:`InvalidMessageIndexesError`."""
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data
    where = _where(topic, partition, offset)
    context = {"topic": topic, "partition": partition, "offset": offset}
    size = len(view)
    if size == 0:
        raise TruncatedFrameError(
            f"an empty payload{where} has no Confluent framing (magic byte 0 and a schema id): "
            f"was it written without a schema (a null or empty record)?", **context)
    if view[0] != MAGIC_BYTE:
        hint = ("magic byte 1 is the schema-GUID framing, which this reader does not take"
                if view[0] == 1 else "it was not written by a Schema Registry serializer")
        raise UnknownMagicByteError(
            f"the payload{where} starts with byte {view[0]}, not the magic byte 0: {hint}", **context)
    if size < HEADER_SIZE:
        raise TruncatedFrameError(
            f"the payload{where} is {size} bytes, shorter than the 5-byte header (magic byte "
            f"and schema id)", **context)
    schema_id = int.from_bytes(view[1:5], "big")
    if not protobuf:
        return Framed(schema_id, None, view[HEADER_SIZE:])
    pos = HEADER_SIZE

    def varint(what: str) -> int:
        nonlocal pos
        result = shift = 0
        for n in range(_MAX_VARINT_BYTES):
            if pos >= size:
                raise TruncatedFrameError(
                    f"the payload{where} (schema id {schema_id}) ends inside the Protobuf "
                    f"message indexes ({what}, byte {pos})", schema_id=schema_id, **context)
            byte = view[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                value = (result >> 1) ^ -(result & 1)
                if not 0 <= value <= _MAX_INDEX:
                    raise InvalidMessageIndexesError(
                        f"the payload{where} (schema id {schema_id}) has {what} {value} in its "
                        f"Protobuf message indexes (byte {pos - n - 1}); it must be 0 to "
                        f"{_MAX_INDEX}", schema_id=schema_id, **context)
                return value
            shift += 7
        raise InvalidMessageIndexesError(
            f"the payload{where} (schema id {schema_id}) has a varint longer than "
            f"{_MAX_VARINT_BYTES} bytes in its Protobuf message indexes (byte {pos - _MAX_VARINT_BYTES})",
            schema_id=schema_id, **context)

    count = varint("the count")
    if count == 0:
        return Framed(schema_id, (0,), view[pos:])
    # Each index takes a byte at least: a count past the end is damage, found before a
    # list of that size is made.
    if count > size - pos:
        raise TruncatedFrameError(
            f"the payload{where} (schema id {schema_id}) says {count} Protobuf message indexes "
            f"follow, but only {size - pos} bytes do", schema_id=schema_id, **context)
    indexes = tuple(varint(f"index {i}") for i in range(count))
    return Framed(schema_id, indexes, view[pos:])
