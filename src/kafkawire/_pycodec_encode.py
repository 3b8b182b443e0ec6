"""Records and Columns to bytes: RecordBatch (magic 2), MessageSet (magic 0/1).

Part of the pure-Python twin kafkawire._pycodec, which re-exports every name; the
compiled counterpart, to read side by side, is _codec_encode.pxi.  No I/O.
"""

from __future__ import annotations

import struct
import zlib

from kafkawire import compression as _compression
from kafkawire import errors
from kafkawire._columnar import Columns, record_fields
from kafkawire._pycodec_crc import crc32c
from kafkawire._pycodec_primitives import (
    _INT16_MAX,
    _INT16_MIN,
    _INT32_MAX,
    _INT32_MIN,
    _INT64_MAX,
    _INT64_MIN,
    _S_ENTRY,
    _S_INT32,
    _S_INT64,
    _S_UINT32,
    _zz32,
    _zz64,
)

# ---------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------
# In the order of _codec_encode.pxi: the input, RecordBatch (magic 2), MessageSet (magic
# 0/1), Columns.


def _normalize(records, timestamp: int):
    items = []
    for i, rec in enumerate(records):
        items.append(record_fields(i, rec, timestamp))
    return items


def _encode_records_section(items, base_ts: int) -> bytearray:
    out = bytearray()
    for i, (key, value, ts, headers) in enumerate(items):
        delta = ts - base_ts
        if not _INT64_MIN <= delta <= _INT64_MAX:
            raise errors.encode_error(
                f"record {i}: timestampDelta {delta} out of range for varlong"
            )
        body = bytearray(b"\x00")  # record attributes: unused, always 0
        body += _zz64(delta)
        body += _zz32(i)
        if key is None:
            body += b"\x01"  # zigzag(-1)
        else:
            body += _zz32(len(key))
            body += key
        if value is None:
            body += b"\x01"
        else:
            body += _zz32(len(value))
            body += value
        body += _zz32(len(headers))
        for hk, hv in headers:
            body += _zz32(len(hk))
            body += hk
            if hv is None:
                body += b"\x01"
            else:
                body += _zz32(len(hv))
                body += hv
        if len(body) > _INT32_MAX:
            raise errors.encode_error(f"record {i}: {len(body)} bytes is larger than a record can be")
        out += _zz32(len(body))
        out += body
    return out


def _check_range(field: str, value, lo: int, hi: int, typename: str) -> None:
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise errors.encode_error(f"{field} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise errors.encode_error(f"{field} {value} out of range")


def _check_ts(i: int, ts: int) -> None:
    if not _INT64_MIN <= ts <= _INT64_MAX:
        raise errors.encode_error(f"record {i}: timestamp {ts} out of range for int64")


def _check_codec(compression, magic: int) -> None:
    if compression not in _compression.CODEC_NAMES:
        raise errors.unsupported_codec(compression)
    if compression == _compression.CODEC_ZSTD and magic < 2:
        # KIP-110: zstd exists only in RecordBatch (magic 2).
        raise errors.unsupported_codec(compression, magic)


def _encode_batch_items(
    items,
    base_offset,
    compression,
    level,
    timestamp,
    log_append,
    producer_id,
    producer_epoch,
    base_sequence,
    is_transactional,
    is_control,
    leader_epoch,
):
    n = len(items)
    if n == 0:
        raise errors.encode_error("a RecordBatch needs at least one record")
    _check_range("base_offset", base_offset, _INT64_MIN, _INT64_MAX - n + 1, "int64")
    _check_range("producer_id", producer_id, _INT64_MIN, _INT64_MAX, "int64")
    _check_range("producer_epoch", producer_epoch, _INT16_MIN, _INT16_MAX, "int16")
    _check_range("base_sequence", base_sequence, _INT32_MIN, _INT32_MAX, "int32")
    _check_range("partition_leader_epoch", leader_epoch, _INT32_MIN, _INT32_MAX, "int32")
    if n - 1 > _INT32_MAX:
        raise errors.encode_error(f"{n} records are more than one RecordBatch can hold")
    for i, item in enumerate(items):
        _check_ts(i, item[2])
    base_ts = items[0][2]
    max_ts = timestamp if log_append else max(item[2] for item in items)
    section = _encode_records_section(items, base_ts)
    if compression:
        section = _compression.compress(compression, section, level)
    attributes = compression
    if log_append:
        attributes |= 8
    if is_transactional:
        attributes |= 16
    if is_control:
        attributes |= 32
    # From attributes to the end: the part CRC32C covers (KIP-98).
    tail = bytearray(
        struct.pack(
            ">hiqqqhii",
            attributes,
            n - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            n,
        )
    )
    tail += section
    batch_length = 9 + len(tail)  # partitionLeaderEpoch, magic, crc, then the tail
    if batch_length > _INT32_MAX:
        raise errors.encode_error(f"a RecordBatch of {batch_length} bytes is larger than int32 allows")
    out = bytearray(_S_ENTRY.pack(base_offset, batch_length))
    out += _S_INT32.pack(leader_epoch)
    out.append(2)
    out += _S_UINT32.pack(crc32c(tail))
    out += tail
    return bytes(out)


def encode_record_batch(
    records,
    *,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    timestamp: int = -1,
    log_append_time: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One RecordBatch (magic 2) holding ``records``."""
    _check_codec(compression, 2)
    _check_range("timestamp", timestamp, _INT64_MIN, _INT64_MAX, "int64")
    items = _normalize(records, timestamp)
    return _encode_batch_items(
        items,
        base_offset,
        compression,
        compression_level,
        timestamp,
        log_append_time,
        producer_id,
        producer_epoch,
        base_sequence,
        is_transactional,
        is_control,
        partition_leader_epoch,
    )


def _message(out: bytearray, offset: int, magic: int, attributes: int, ts: int, key, value) -> None:
    """Append one magic 0/1 message (offset, size, crc, body) to ``out``."""
    body = bytearray()
    body.append(magic)
    body.append(attributes)
    if magic == 1:
        body += _S_INT64.pack(ts)
    if key is None:
        body += b"\xff\xff\xff\xff"
    else:
        body += _S_INT32.pack(len(key))
        body += key
    if value is None:
        body += b"\xff\xff\xff\xff"
    else:
        body += _S_INT32.pack(len(value))
        body += value
    out += _S_ENTRY.pack(offset, len(body) + 4)
    out += _S_UINT32.pack(zlib.crc32(body))
    out += body


def _encode_message_set_items(items, magic, compression, level, base_offset, timestamp, log_append):
    n = len(items)
    if n == 0:
        return b""
    _check_range("base_offset", base_offset, _INT64_MIN, _INT64_MAX - n + 1, "int64")
    if magic == 1:
        for i, (_k, _v, ts, headers) in enumerate(items):
            _check_ts(i, ts)
    for i, item in enumerate(items):
        if item[3]:
            raise errors.encode_error(
                f"record {i}: headers need magic 2 (a RecordBatch); magic {magic} has none"
            )
    if compression == 0:
        out = bytearray()
        attributes = 8 if log_append else 0
        for i, (key, value, ts, _h) in enumerate(items):
            _message(
                out, base_offset + i, magic, attributes, timestamp if log_append else ts, key, value
            )
        return bytes(out)
    inner = bytearray()
    for i, (key, value, ts, _h) in enumerate(items):
        # KIP-31: magic 1 inner offsets are relative (0..n-1); magic 0 ones are absolute.
        _message(inner, i if magic == 1 else base_offset + i, magic, 0, ts, key, value)
    wrapped = _compression.compress(compression, inner, level, legacy_lz4=(magic == 0))
    if magic == 1 and log_append:
        attributes = compression | 8
        wrapper_ts = timestamp
    else:
        attributes = compression
        wrapper_ts = max(item[2] for item in items) if magic == 1 else -1
    out = bytearray()
    _message(out, base_offset + n - 1, magic, attributes, wrapper_ts, None, wrapped)
    return bytes(out)


def encode_message_set(
    records,
    *,
    magic: int = 1,
    compression: int = 0,
    compression_level: int | None = None,
    base_offset: int = 0,
    timestamp: int = -1,
    log_append_time: bool = False,
) -> bytes:
    """A MessageSet (magic 0 or 1) of ``records``; one compressed wrapper when compressing."""
    if magic != 0 and magic != 1:
        raise errors.encode_error(
            f"encode_message_set writes magic 0 or 1, not {magic}; "
            f"use encode_record_batch for magic 2"
        )
    _check_codec(compression, magic)
    if log_append_time and magic == 0:
        raise errors.encode_error("log_append_time needs magic 1 or 2; magic 0 has no timestamps")
    _check_range("timestamp", timestamp, _INT64_MIN, _INT64_MAX, "int64")
    items = _normalize(records, timestamp)
    return _encode_message_set_items(
        items, magic, compression, compression_level, base_offset, timestamp, log_append_time
    )


def _columns_items(columns: Columns):
    view = memoryview(columns.data)
    ko = columns.key_offsets.tolist()
    kl = columns.key_lengths.tolist()
    vo = columns.value_offsets.tolist()
    vl = columns.value_lengths.tolist()
    hi = columns.header_index.tolist()
    hko = columns.header_key_offsets.tolist()
    hvo = columns.header_value_offsets.tolist()
    hvl = columns.header_value_lengths.tolist()
    items = []
    for i, ts in enumerate(columns.timestamps.tolist()):
        key = None if kl[i] < 0 else view[ko[i] : ko[i + 1]]
        value = None if vl[i] < 0 else view[vo[i] : vo[i + 1]]
        if hi[i] == hi[i + 1]:
            headers = ()
        else:
            headers = tuple(
                (view[hko[j] : hko[j + 1]], None if hvl[j] < 0 else view[hvo[j] : hvo[j + 1]])
                for j in range(hi[i], hi[i + 1])
            )
        items.append((key, value, ts, headers))
    return items


def encode_columnar(
    columns: Columns,
    *,
    magic: int = 2,
    base_offset: int = 0,
    compression: int = 0,
    compression_level: int | None = None,
    log_append_time: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a Columns: magic 2 as one RecordBatch, magic 0/1 as a MessageSet.

    Offsets are ``base_offset + i`` (``columns.offsets`` is ignored); timestamps come from
    the columns.  With ``log_append_time`` the batch (or wrapper) timestamp is the largest
    record timestamp.
    """
    if not isinstance(columns, Columns):
        raise errors.encode_error(
            f"encode_columnar needs a kafkawire Columns, not {type(columns).__name__}"
        )
    if magic not in (0, 1, 2):
        raise errors.encode_error(f"encode_columnar writes magic 0, 1 or 2, not {magic}")
    _check_codec(compression, magic)
    items = _columns_items(columns)
    if magic == 2:
        append_ts = max((item[2] for item in items), default=-1)
        return _encode_batch_items(
            items,
            base_offset,
            compression,
            compression_level,
            append_ts,
            log_append_time,
            producer_id,
            producer_epoch,
            base_sequence,
            is_transactional,
            False,
            partition_leader_epoch,
        )
    if log_append_time and magic == 0:
        raise errors.encode_error("log_append_time needs magic 1 or 2; magic 0 has no timestamps")
    append_ts = max((item[2] for item in items), default=-1)
    return _encode_message_set_items(
        items, magic, compression, compression_level, base_offset, append_ts, log_append_time
    )
