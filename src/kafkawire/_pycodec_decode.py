"""MessageSet (magic 0/1) and RecordBatch (magic 2) bytes to objects: one walker over the
entries (_entries) for decode_batches, decode_records and decode_consumer_records (and
decode_columnar, in _pycodec_columnar).

Part of the pure-Python twin kafkawire._pycodec, which re-exports every name; the
compiled counterpart, to read side by side, is _codec_decode.pxi.  No I/O.
"""

from __future__ import annotations

import zlib

from kafkawire import compression as _compression
from kafkawire import errors
from kafkawire._pycodec_crc import crc32c
from kafkawire._pycodec_primitives import (
    _INT64_MAX,
    _INT64_MIN,
    _M32,
    _M64,
    _S_BATCH,
    _S_ENTRY,
    _S_INT8,
    _S_INT32,
    _S_INT64,
    _S_LEGACY,
    _contiguous,
)
from kafkawire._pycodec_records import _SET_KEY, _SET_VALUE, Batch, ConsumerRecord, Record, _fill

# The decoders' defaults for nesting depth and decompressed size (both caps are options).
DEFAULT_MAX_DEPTH = 4
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


# ---------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------
# Records are decoded as tuples (offset, timestamp, timestamp_type, key, value, headers) and
# turned into Record objects (or columns) at the end.  The walk over the entries, then magic
# 0/1 and magic 2: the order of _Decoder.top, .message and .batch in _codec_decode.pxi.


class _Options:
    __slots__ = ("start_offset", "check_crcs", "max_depth", "max_size", "with_crc")

    def __init__(self, start_offset, check_crcs, max_depth, max_size):
        self.start_offset = start_offset
        self.check_crcs = check_crcs
        self.max_depth = max_depth
        self.max_size = max_size
        self.with_crc = False  # magic 0/1 record tuples end with their message's CRC


def _entries(data, opts: _Options):
    """Parse the entries of a top-level buffer: a list of (batch header tuple, record tuples).

    The header tuple holds the Batch fields in order, without ``records``.
    """
    t = type(data)
    mv = _contiguous(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    buf = data if t is bytes else mv  # bytes slices are cheaper to copy out of
    n = len(mv)
    pos = 0
    out = []
    while n - pos >= 12:
        offset, size = _S_ENTRY.unpack_from(mv, pos)
        if 12 + size > n - pos:
            break  # a partial entry at the end of a fetch response is normal
        if size < 14:
            raise errors.corrupt(
                "message", offset, f"size {size} is below the 14-byte minimum of any entry"
            )
        magic = _S_INT8.unpack_from(mv, pos + 16)[0]
        end = pos + 12 + size
        if magic == 2:
            out.append(_decode_v2(buf, mv, pos, end, offset, size, opts))
        elif magic == 0 or magic == 1:
            out.append(_decode_legacy_top(buf, mv, pos, end, offset, size, magic, opts))
        else:
            raise errors.unsupported_magic(magic, offset)
        pos = end
    return out


# ---- magic 0 and 1 ----------------------------------------------------------------------


def _parse_message(buf, mv, pos, end, offset, size, magic, check_crcs):
    """Parse one message; returns (crc, attributes, timestamp, key, value)."""
    kind = "message"
    if magic == 1:
        if size < 22:
            raise errors.corrupt(kind, offset, f"size {size} is below the 22-byte minimum for magic 1")
    crc, _magic, attributes = _S_LEGACY.unpack_from(mv, pos + 12)
    attributes &= 0xFF
    if check_crcs:
        computed = zlib.crc32(mv[pos + 16 : end])
        if computed != crc:
            raise errors.crc_mismatch(kind, offset, crc, computed)
    p = pos + 18
    if magic == 1:
        timestamp = _S_INT64.unpack_from(mv, p)[0]
        p += 8
    else:
        timestamp = -1
    key_len = _S_INT32.unpack_from(mv, p)[0]
    p += 4
    if key_len < 0:
        if key_len != -1:
            raise errors.corrupt(kind, offset, f"invalid key length {key_len}")
        key = None
    else:
        if key_len > end - p:
            raise errors.corrupt(kind, offset, f"key of {key_len} bytes runs past the end of the message")
        key = bytes(buf[p : p + key_len])
        p += key_len
    if end - p < 4:
        raise errors.corrupt(kind, offset, "value length runs past the end of the message")
    value_len = _S_INT32.unpack_from(mv, p)[0]
    p += 4
    if value_len < 0:
        if value_len != -1:
            raise errors.corrupt(kind, offset, f"invalid value length {value_len}")
        value_start = -1
    else:
        if value_len > end - p:
            raise errors.corrupt(
                kind, offset, f"value of {value_len} bytes runs past the end of the message"
            )
        value_start = p
        p += value_len
    if p != end:
        raise errors.corrupt(kind, offset, f"{end - p} bytes follow the value")
    return crc, attributes, timestamp, key, value_start, value_len


def _decode_legacy_set(buf, mv, pos, end, depth, wrapper_offset, opts):
    """Decode a message set (the top level, or a decompressed inner set at ``depth``).

    Returns record tuples with offsets in this set's own frame (relative ones stay
    relative; the enclosing wrapper maps them).
    """
    records = []
    while pos < end:
        remaining = end - pos
        if remaining < 12:
            raise errors.corrupt("message", wrapper_offset, "compressed message set is truncated")
        offset, size = _S_ENTRY.unpack_from(mv, pos)
        if 12 + size > remaining:
            raise errors.corrupt("message", wrapper_offset, "compressed message set is truncated")
        if size < 14:
            raise errors.corrupt(
                "message", offset, f"size {size} is below the 14-byte minimum of any entry"
            )
        magic = _S_INT8.unpack_from(mv, pos + 16)[0]
        if magic != 0 and magic != 1:
            if magic == 2:
                raise errors.corrupt(
                    "message", wrapper_offset, "compressed message set holds a magic 2 batch"
                )
            raise errors.unsupported_magic(magic, offset)
        msg_end = pos + 12 + size
        records.extend(_decode_message(buf, mv, pos, msg_end, offset, size, magic, depth, opts)[1])
        pos = msg_end
    return records


def _decode_message(buf, mv, pos, end, offset, size, magic, depth, opts):
    """One message (plain or compressed wrapper); returns (parsed header, record tuples)."""
    crc, attributes, timestamp, key, value_start, value_len = _parse_message(
        buf, mv, pos, end, offset, size, magic, opts.check_crcs
    )
    codec = attributes & 7
    ttype = ((attributes >> 3) & 1) if magic == 1 else -1
    if codec == 0:
        value = None if value_start < 0 else bytes(buf[value_start : value_start + value_len])
        record = (offset, timestamp, ttype, key, value, ())
        return (crc, attributes, timestamp, ttype), [record + (crc,) if opts.with_crc else record]
    if value_start < 0:
        raise errors.corrupt("message", offset, "compressed wrapper message has a null value")
    if depth + 1 > opts.max_depth:
        raise errors.too_deep(depth + 1, opts.max_depth, offset)
    inner = _compression.decompress(
        codec, mv[value_start : value_start + value_len], opts.max_size, legacy_lz4=(magic == 0)
    )
    inner_records = _decode_legacy_set(inner, memoryview(inner), 0, len(inner), depth + 1, offset, opts)
    if magic == 1 and inner_records:
        # KIP-31: inner offsets of a magic 1 wrapper are relative; the wrapper carries the
        # absolute offset of the last inner message.
        shift = offset - inner_records[-1][0]
        if shift < 0:
            # A wrapper below its last inner offset has had none assigned (a client
            # builds it with offset 0): its inner offsets are kept, as the Python clients
            # and Java's read it, where the shift would make them negative.
            shift = 0
        if attributes & 8:
            # KIP-32: with LogAppendTime the wrapper's timestamp applies to every record.
            inner_records = [
                (r[0] + shift, timestamp, 1, r[3], r[4], r[5]) + r[6:] for r in inner_records
            ]
        elif shift:
            inner_records = [(r[0] + shift,) + r[1:] for r in inner_records]
    return (crc, attributes, timestamp, ttype), inner_records


def _decode_legacy_top(buf, mv, pos, end, offset, size, magic, opts):
    (crc, attributes, timestamp, ttype), records = _decode_message(
        buf, mv, pos, end, offset, size, magic, 0, opts
    )
    if attributes & 7:
        # KIP-31 shifts of (damaged) wrappers can take an offset outside int64
        for r in records:
            if not _INT64_MIN <= r[0] <= _INT64_MAX:
                raise errors.corrupt("message", offset, _outside_int64("inner message offset", r[0]))
    start = opts.start_offset
    if len(records) == 1:
        if records[0][0] < start:
            records = []
    else:
        records = [r for r in records if r[0] >= start]
    base = records[0][0] if records else offset
    last = records[-1][0] if records else offset
    if not _INT64_MIN <= last - base <= _INT64_MAX:
        raise errors.corrupt(
            "message", offset, f"inner message offsets {base} to {last} span more than the int64 range"
        )
    header = (
        base,
        magic,
        crc,
        attributes,
        attributes & 7,
        ttype,
        False,
        False,
        -1,
        last - base,
        timestamp,
        timestamp,
        -1,
        -1,
        -1,
    )
    return header, records


# ---- magic 2 ------------------------------------------------------------------------------


def _decode_v2(buf, mv, pos, end, base_offset, size, opts):
    if size < 49:
        raise errors.corrupt(
            "record batch", base_offset, f"size {size} is below the 49-byte minimum for magic 2"
        )
    (
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _S_BATCH.unpack_from(mv, pos + 12)
    if opts.check_crcs:
        # KIP-98: CRC32C covers everything from the attributes to the end of the batch.
        computed = crc32c(mv[pos + 21 : end])
        if computed != crc:
            raise errors.crc_mismatch("record batch", base_offset, crc, computed)
    if count < 0:
        raise errors.corrupt("record batch", base_offset, f"negative record count {count}")
    codec = attributes & 7
    log_append = attributes & 8
    ttype = 1 if log_append else 0
    body_start = pos + 61
    if codec:
        rbuf = _compression.decompress(codec, mv[body_start:end], opts.max_size)
        rpos = 0
        rend = len(rbuf)
    else:
        rbuf = buf
        rpos = body_start
        rend = end
    records = _decode_v2_records(
        rbuf, rpos, rend, count, base_offset, base_ts, max_ts if log_append else None, ttype,
        opts.start_offset,
    )
    header = (
        base_offset,
        2,
        crc,
        attributes,
        codec,
        ttype,
        bool(attributes & 16),
        bool(attributes & 32),
        leader_epoch,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
    )
    return header, records


class _RecordError(Exception):
    """Internal: a problem inside record ``index`` of a batch; becomes CorruptRecordError."""


def _varint_slow(buf, p, limit_bytes, mask):
    result = 0
    shift = 0
    start = p
    while True:
        if p - start == limit_bytes:
            raise _RecordError(f"varint longer than {limit_bytes} bytes")
        byte = buf[p]  # IndexError past the buffer: caught by the record loop
        p += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & mask, p
        shift += 7


def _span(buf, p, rec_end, what):
    """A record field of varint length then bytes (key, value, header value; -1 is null).

    Returns (bytes or None, position after the field).
    """
    b = buf[p]
    if b < 0x80:
        n = b
        p += 1
    else:
        n, p = _varint_slow(buf, p, 5, _M32)
    n = (n >> 1) ^ -(n & 1)
    if n < 0:
        if n != -1:
            raise _RecordError(f"invalid {what} length {n}")
        return None, p
    if p + n > rec_end:
        raise _RecordError(f"{what} of {n} bytes runs past the end of the record")
    return bytes(buf[p : p + n]), p + n


def _outside_int64(what: str, value: int) -> str:
    return f"{what} {value} is outside the int64 range"


def _decode_v2_records(buf, pos, end, count, base_offset, base_ts, append_ts, ttype, start_offset):
    records = []
    append = records.append
    k = 0
    try:
        while k < count:
            if pos >= end:
                break
            # length varint
            b = buf[pos]
            if b < 0x80:
                length = b
                p = pos + 1
            else:
                length, p = _varint_slow(buf, pos, 5, _M32)
            length = (length >> 1) ^ -(length & 1)
            if length < 0:
                raise _RecordError(f"negative length {length}")
            rec_end = p + length
            if rec_end > end:
                raise _RecordError(f"length {length} runs past the end of the batch")
            p += 1  # attributes (unused, always 0)
            # timestampDelta varlong
            b = buf[p]
            if b < 0x80:
                v = b
                p += 1
            else:
                v, p = _varint_slow(buf, p, 10, _M64)
            ts_delta = (v >> 1) ^ -(v & 1)
            # offsetDelta varint
            b = buf[p]
            if b < 0x80:
                v = b
                p += 1
            else:
                v, p = _varint_slow(buf, p, 5, _M32)
            offset = base_offset + ((v >> 1) ^ -(v & 1))
            key, p = _span(buf, p, rec_end, "key")
            value, p = _span(buf, p, rec_end, "value")
            # headers
            b = buf[p]
            if b < 0x80:
                v = b
                p += 1
            else:
                v, p = _varint_slow(buf, p, 5, _M32)
            hcount = (v >> 1) ^ -(v & 1)
            if hcount == 0:
                headers = ()
            else:
                if hcount < 0:
                    raise _RecordError(f"negative header count {hcount}")
                hs = []
                for _ in range(hcount):
                    v, p = _varint_slow(buf, p, 5, _M32)
                    n = (v >> 1) ^ -(v & 1)
                    if n < 0:
                        raise _RecordError(f"invalid header key length {n}")
                    if p + n > rec_end:
                        raise _RecordError(f"header key of {n} bytes runs past the end of the record")
                    try:
                        hkey = str(buf[p : p + n], "utf-8")
                    except UnicodeDecodeError:
                        raise _RecordError("header key is not valid UTF-8") from None
                    hvalue, p = _span(buf, p + n, rec_end, "header value")
                    hs.append((hkey, hvalue))
                headers = tuple(hs)
            if p != rec_end:
                raise _RecordError(f"its fields take {p - rec_end + length} of its {length} bytes")
            # Offsets and timestamps are int64 in Kafka: a sum outside it is corrupt data.
            if not _INT64_MIN <= offset <= _INT64_MAX:
                raise _RecordError(_outside_int64("offset", offset))
            ts = append_ts if append_ts is not None else base_ts + ts_delta
            if not _INT64_MIN <= ts <= _INT64_MAX:
                raise _RecordError(_outside_int64("timestamp", ts))
            if offset >= start_offset:
                append((offset, ts, ttype, key, value, headers))
            pos = rec_end
            k += 1
    except _RecordError as exc:
        raise errors.corrupt("record batch", base_offset, f"record {k}: {exc}") from None
    except IndexError:
        raise errors.corrupt(
            "record batch", base_offset, f"record {k}: runs past the end of the batch"
        ) from None
    if k < count:
        raise errors.corrupt(
            "record batch", base_offset, f"holds {k} records, fewer than its record count {count}"
        )
    if pos != end:
        raise errors.corrupt(
            "record batch", base_offset, f"{end - pos} bytes follow its {count} records"
        )
    return records


# ---- public decoders ----------------------------------------------------------------------


def _options(start_offset, check_crcs, max_depth, max_decompressed_size):
    if not isinstance(start_offset, int):
        raise errors.CodecError(
            f"start_offset must be an int (a Kafka offset), not {type(start_offset).__name__}"
        )
    if not _INT64_MIN <= start_offset <= _INT64_MAX:
        raise errors.CodecError(
            f"start_offset {start_offset} is outside the int64 range of Kafka offsets"
        )
    return _Options(int(start_offset), bool(check_crcs), max_depth, max_decompressed_size)


def decode_batches(
    data,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list:
    """Every batch (magic 2) and top-level message (magic 0/1) in ``data``, as Batch objects."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    out = []
    for header, records in _entries(data, opts):
        if records:
            out.append(Batch(*header, [Record(*r) for r in records]))
    return out


def decode_records(
    data,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    include_control: bool = False,
) -> list:
    """Every record in ``data`` (control batches skipped unless ``include_control``)."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    out = []
    for header, records in _entries(data, opts):
        if header[7] and not include_control:
            continue
        out.extend([Record(*r) for r in records])
    return out


def decode_consumer_records(
    data,
    topic,
    partition,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    key_deserializer=None,
    value_deserializer=None,
) -> tuple:
    """``(records, next_offset)``: every record in ``data`` (control batches skipped) as a
    ConsumerRecord of ``topic`` and ``partition``, and the offset after the last batch (or
    legacy message) with records at or past ``start_offset``, control batches included
    (None when there is none).  Deserializers, if given, replace keys and values once
    every batch is decoded, in record order, keys first."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    out = []
    end = None
    new = ConsumerRecord.__new__
    for header, records in _entries(data, opts):
        if not records:
            continue
        end = header[0] + header[9] + 1  # base offset + last offset delta + 1
        if header[7]:  # a control batch
            continue
        for offset, ts, tt, key, value, headers in records:
            r = new(ConsumerRecord)
            _fill(r, topic, partition, offset, ts, tt, key, value, headers)
            out.append(r)
    if key_deserializer is not None or value_deserializer is not None:
        for r in out:
            if key_deserializer is not None:
                _SET_KEY(r, key_deserializer(r.key))
            if value_deserializer is not None:
                _SET_VALUE(r, value_deserializer(r.value))
    return out, end


# ---- records made by the caller's factory -------------------------------------------------

MAX_LAYOUT = 32  # arguments a factory may take per record


class _RecordField:
    """One field of each record, as it goes into decode_records_with's ``layout`` (the
    _FIELD_* constants)."""

    __slots__ = ("name", "code")

    def __init__(self, name: str, code: int) -> None:
        self.name = name
        self.code = code

    def __repr__(self) -> str:
        return f"_RecordField({self.name!r})"


_FIELD_OFFSET = _RecordField("offset", 0)
_FIELD_TIMESTAMP = _RecordField("timestamp", 1)
_FIELD_TIMESTAMP_TYPE = _RecordField("timestamp_type", 2)
_FIELD_KEY = _RecordField("key", 3)
_FIELD_VALUE = _RecordField("value", 4)
_FIELD_KEY_SIZE = _RecordField("key_size", 5)  # the key's length in bytes, -1 for null
_FIELD_VALUE_SIZE = _RecordField("value_size", 6)
_FIELD_HEADERS = _RecordField("headers", 7)
_FIELD_CRC = _RecordField("crc", 8)  # a magic 0/1 message's own CRC; None in magic 2


def _check_layout(factory, layout, init) -> None:
    if type(layout) is not tuple:
        raise errors.CodecError(f"layout must be a tuple, not {type(layout).__name__}")
    if len(layout) > MAX_LAYOUT:
        raise errors.CodecError(
            f"layout has {len(layout)} items; a factory takes at most {MAX_LAYOUT}")
    if not callable(factory):
        raise errors.CodecError(f"factory must be callable, not {type(factory).__name__}")
    if init is not None and not (isinstance(factory, type) and callable(init)):
        raise errors.CodecError("init needs a class as factory and a callable init")


def decode_records_with(
    data,
    factory,
    layout,
    *,
    init=None,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    include_control: bool = False,
) -> list:
    """Every record in ``data`` (MessageSets and RecordBatches, any codec) made as your own
    record type, straight from the bytes, with no :class:`Record` in between.

    Each record is ``factory(*args)``, where ``args`` is ``layout`` (a tuple of at most 32
    items) with every ``FIELD_*`` item replaced by that field of the record; other items
    are passed as they are::

        Row = collections.namedtuple("Row", "topic offset key value")
        rows = codec.decode_records_with(data, Row, ("orders", codec.FIELD_OFFSET,
                                                     codec.FIELD_KEY, codec.FIELD_VALUE))

    With ``init``, ``factory`` must be a class and a record is made as
    ``factory.__new__(factory)`` followed by ``init(record, *args)`` (for a class whose
    ``__init__`` is ``init``: what calling the class does, only faster).

    Records are read as a consumer fetching at ``start_offset`` reads them: one whose
    offset is below the position (``start_offset`` at first, then just past each record
    made) is left out, as are control batches unless ``include_control`` and a partial
    batch at the end of ``data`` (as a fetch response may hold).  Raises
    :class:`kafkawire.errors.CodecError` (or a subclass) for a bad layout or factory and for
    corrupt or unreadable data, as :func:`decode_records` does; an exception the factory
    raises comes out as it is.  ``check_crcs``, ``max_depth`` and ``max_decompressed_size``
    are :func:`decode_batches`' own."""
    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    _check_layout(factory, layout, init)
    slots = [(i, f.code) for i, f in enumerate(layout) if type(f) is _RecordField]
    opts.with_crc = any(code == 8 for _i, code in slots)
    args = list(layout)
    out = []
    pos = opts.start_offset
    for header, records in _entries(data, opts):
        if header[7] and not include_control:
            continue
        for offset, ts, tt, key, value, headers, *crc in records:
            if offset < pos:
                continue
            pos = offset + 1
            fields = (offset, ts, tt, key, value, -1 if key is None else len(key),
                      -1 if value is None else len(value), headers, crc[0] if crc else None)
            for i, code in slots:
                args[i] = fields[code]
            if init is None:
                out.append(factory(*args))
                continue
            made = factory.__new__(factory)
            ret = init(made, *args)
            if ret is not None:
                raise TypeError(f"__init__() should return None, not '{type(ret).__name__}'")
            out.append(made)
    return out
