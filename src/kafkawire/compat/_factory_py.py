"""The pure-Python twin of kafkawire._compat: the host clients' ConsumerRecords for one
decoded batch, the same names, results and call order of deserializers, and aiokafka's
batch builder's per-record append (see that module for the contract;
tests/compat/test_factory.py and the builder tests hold the two to it)."""

from __future__ import annotations

import time
from array import array
from itertools import accumulate

from kafkawire import codec as _codec
from kafkawire.compat import _hostbytes

_sv = _codec.size_of_varint


def headers_wire_size(headers) -> tuple[int, int]:
    """(encoded size of magic-2 record headers, their keys' UTF-8 plus values' bytes)."""
    size = _sv(len(headers))
    plain = 0
    for h_key, h_value in headers:
        n = len(h_key.encode("utf-8"))
        size += _sv(n) + n
        plain += n
        if h_value is None:
            size += 1
        else:
            n = len(h_value)
            size += _sv(n) + n
            plain += n
    return size, plain


def kafka_python_records(cr_type, topic, partition, leader_epoch, records, base_offset,
                         base_timestamp, raw_timestamps, deserialize=None,
                         key_deserializer=None, value_deserializer=None):
    custom = deserialize is not None and (
        key_deserializer is not None or value_deserializer is not None)
    new = tuple.__new__
    sv = _sv
    out = []
    sizes = []
    for i, r in enumerate(records):
        offset, ts, key, value, h = r.offset, r.timestamp, r.key, r.value, r.headers
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        raw_ts = ts if raw_timestamps is None else raw_timestamps[i]
        size = (1 + sv(offset - base_offset) + sv(raw_ts - base_timestamp)
                + (1 if klen < 0 else sv(klen) + klen) + (1 if vlen < 0 else sv(vlen) + vlen))
        if h:
            headers = list(h)
            size += headers_wire_size(headers)[0]
        else:
            headers = []
            size += 1
        sizes.append(size)
        if custom:
            try:
                key = deserialize(key_deserializer, topic, headers, key)
                value = deserialize(value_deserializer, topic, headers, value)
            except Exception as exc:  # noqa: BLE001 - handed back, raised after the records
                return out, array("q", accumulate(sizes, initial=0)), exc
        hsize = headers_wire_size(headers)[1] if headers else -1
        out.append(new(cr_type, (topic, partition, leader_epoch, offset, ts, r.timestamp_type,
                                 key, value, headers, None, klen, vlen, hsize)))
    return out, array("q", accumulate(sizes, initial=0)), None


def deserialize(records, key_deserializer, value_deserializer):
    for i, r in enumerate(records):
        try:
            if key_deserializer is not None:
                r.key = key_deserializer(r.key)
            if value_deserializer is not None:
                r.value = value_deserializer(r.value)
        except Exception as exc:  # noqa: BLE001 - handed back, raised after the records
            del records[i:]
            return exc
    return None


# ---- aiokafka's magic-2 batch builder: the per-record append --------------------------

_BYTES_TYPES = (bytes, bytearray, memoryview)


class DefaultRecordMetadata:
    """What aiokafka's DefaultRecordBatchBuilder.append returns: offset, size, timestamp
    (crc None: magic 2 has no per-record CRC)."""

    __slots__ = ("offset", "size", "timestamp")

    def __init__(self, offset: int, size: int, timestamp: int) -> None:
        self.offset = offset
        self.size = size
        self.timestamp = timestamp

    @property
    def crc(self) -> None:
        return None

    def __repr__(self) -> str:
        return (f"DefaultRecordMetadata(offset={self.offset!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")


class AiokafkaAppender:
    """See kafkawire._compat.AiokafkaAppender."""

    __slots__ = ("_records", "_headers", "_first_timestamp", "_size", "_batch_size",
                 "_fallback")

    @classmethod
    def estimate_size_in_bytes(cls, key, value, headers):
        bytes_like = _BYTES_TYPES
        if (headers or type(headers) is not list or not (key is None or type(key) in bytes_like)
                or not (value is None or type(value) in bytes_like)):
            return cls._host_estimate(key, value, headers)
        # the batch header (61) and the most a record's own fields take (21)
        size = 61 + 21 + (1 if key is None else _sv(len(key)) + len(key))
        return size + (1 if value is None else _sv(len(value)) + len(value)) + 1

    def append(self, offset, timestamp, key, value, headers, _svi=_sv, _now=time.time,
               _bytes=_BYTES_TYPES, _limit=_hostbytes.TIMESTAMP_LIMIT):
        if self._fallback is not None:
            return self._fallback.append(offset, timestamp, key, value, headers)
        if timestamp is None:
            timestamp = int(_now() * 1000)
        records = self._records
        if (type(offset) is not int or offset != len(records) // 3 or type(timestamp) is not int
                or not -_limit <= timestamp < _limit):
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if key is None:
            size = 1
        elif type(key) in _bytes:
            n = len(key)
            size = _svi(n) + n
        else:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if value is None:
            size += 1
        elif type(value) in _bytes:
            n = len(value)
            size += _svi(n) + n
        else:
            return self._to_fallback().append(offset, timestamp, key, value, headers)
        if not headers and type(headers) is list:
            size += 1
        else:
            h_size = _hostbytes.headers_size(headers)
            if h_size is None:
                return self._to_fallback().append(offset, timestamp, key, value, headers)
            size += h_size
        first = self._first_timestamp
        if first is None:
            size += 2 + _svi(offset)  # attributes, timestamp delta 0
        else:
            size += 1 + _svi(timestamp - first) + _svi(offset)
        size += _svi(size)
        if first is not None and self._size + size > self._batch_size:
            return None
        if first is None:
            self._first_timestamp = timestamp
        self._size += size
        records += (key, value, timestamp)
        if headers:
            self._headers[offset] = headers
        return DefaultRecordMetadata(offset, size, timestamp)


def resolve_aiokafka_futures(msg_futures, md_type, topic, partition, tp, base_offset,
                             timestamp, timestamp_type, log_start_offset):
    """Each not yet done future of ``msg_futures`` resolved with aiokafka's
    RecordMetadata, as MessageBatch.done resolves them (see kafkawire._compat)."""
    make = tuple.__new__
    for future, metadata in msg_futures:
        if future.done():
            continue
        if timestamp == -1:
            timestamp = metadata.timestamp
        future.set_result(make(md_type, (topic, partition, tp, base_offset + metadata.offset,
                                         timestamp, timestamp_type, log_start_offset)))
