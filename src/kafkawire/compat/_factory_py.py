"""The pure-Python twin of kafkawire._compat: the host clients' ConsumerRecords for one
decoded batch, the same names, results and call order of deserializers (see that module
for the contract; tests/compat/test_factory.py holds the two to it)."""

from __future__ import annotations

from array import array
from itertools import accumulate

from kafkawire import codec as _codec

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


def aiokafka_records(cr_type, topic, partition, records, position, key_deserializer=None,
                     value_deserializer=None):
    out = []
    for r in records:
        offset = r.offset
        if offset < position:
            continue
        position = offset + 1
        key = r.key
        value = r.value
        try:
            out.append(cr_type(
                topic, partition, offset, r.timestamp, r.timestamp_type,
                key if key_deserializer is None else key_deserializer(key),
                value if value_deserializer is None else value_deserializer(value),
                None, -1 if key is None else len(key), -1 if value is None else len(value),
                r.headers))
        except Exception as exc:  # noqa: BLE001 - handed back, raised after the records
            return out, exc
    return out, None
