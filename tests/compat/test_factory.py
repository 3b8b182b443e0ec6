"""The record factories of the drop-ins: the compiled kafkawire._compat and its pure-Python
twin kafkawire.compat._factory_py give the same records, sizes and errors.  (That those
are the host clients' own records is checked in test_kafka_python.py/test_aiokafka.py.)"""

from __future__ import annotations

import pytest

pytest.importorskip("kafka")
pytest.importorskip("aiokafka")

from aiokafka.structs import ConsumerRecord as AioConsumerRecord  # noqa: E402
from kafka.consumer.fetcher import ConsumerRecord as KpConsumerRecord  # noqa: E402

from kafkawire import _pycodec, codec  # noqa: E402
from kafkawire.compat import _factory, _factory_py  # noqa: E402

try:
    from kafkawire import _compat
except ImportError:  # the twin-only build
    _compat = None

IMPLS = [_factory_py] + ([_compat] if _compat is not None else [])
BASE_OFFSET = 1_000
RECORDS = [
    (b"key-0", b"value-0", 5_000, []),
    (None, b"no key", 5_001, [("h", b"x"), ("\u00e9t\u00e9", None)]),
    (b"no value", None, 4_000, [("", b"")]),
    (None, None, 9_000_000_000_000, []),
    (b"k" * 300, b"v" * 70_000, 5_003, [("big", b"y" * 200)]),
]


def decoded(log_append_time=False):
    """(codec records, the batch's base timestamp, stored timestamps or None)."""
    data = codec.encode_record_batch(RECORDS, base_offset=BASE_OFFSET, timestamp=77_000,
                                     log_append_time=log_append_time)
    (batch,) = _pycodec.decode_batches(data)
    raw = None
    if log_append_time:
        plain = codec.encode_record_batch(RECORDS, base_offset=BASE_OFFSET)
        raw = [r.timestamp for r in _pycodec.decode_batches(plain)[0].records]
    return batch.records, batch.base_timestamp, raw


def test_the_compiled_factory_is_used_with_the_compiled_codec():
    expected = "cython" if codec.IMPLEMENTATION == "cython" and _compat is not None else "python"
    assert _factory.IMPLEMENTATION == expected


class _Deserializer:
    def __init__(self, fail_at=None):
        self.calls = []
        self.fail_at = fail_at

    def deserialize(self, topic, headers, data):
        self.calls.append((topic, list(headers), data))
        if data is not None and data == self.fail_at:
            raise ValueError(f"cannot read {data!r}")
        if headers:
            headers.append(("seen", b"1"))  # measured after the deserializers, as kafka-python
        return None if data is None else data.upper()


def _kp_deserialize(deserializer, topic, headers, data):
    # the fetcher's _deserialize, in short
    return data if deserializer is None else deserializer.deserialize(topic, headers, data)


@pytest.mark.parametrize("log_append_time", [False, True])
def test_kafka_python_records_agree(log_append_time):
    recs, base_ts, raw = decoded(log_append_time)
    results = []
    for impl in IMPLS:
        out, cum, error = impl.kafka_python_records(KpConsumerRecord, "t", 3, 7, recs,
                                                    BASE_OFFSET, base_ts, raw)
        assert error is None and len(cum) == len(out) + 1 and cum[0] == 0
        assert all(type(r) is KpConsumerRecord and type(r.headers) is list for r in out)
        assert [r.headers for r in out] == [h for *_x, h in RECORDS]
        assert out[0].serialized_header_size == -1 and out[1].serialized_header_size == 7
        assert out[3].serialized_key_size == -1 and out[2].serialized_value_size == -1
        results.append((out, list(cum)))
    assert all(r == results[0] for r in results)
    # each size is the record's length varint as written (uncompressed, so on the wire)
    data = codec.encode_record_batch(RECORDS, base_offset=BASE_OFFSET)
    assert results[0][1][-1] == len(data) - 61 - sum(
        codec.size_of_varint(b - a) for a, b in zip(results[0][1], results[0][1][1:]))


def test_kafka_python_deserializers_and_errors_agree():
    recs, base_ts, _ = decoded()
    results = []
    for impl in IMPLS:
        kd, vd = _Deserializer(), _Deserializer(fail_at=b"v" * 70_000)
        out, cum, error = impl.kafka_python_records(
            KpConsumerRecord, "t", 0, -1, recs, BASE_OFFSET, base_ts, None,
            _kp_deserialize, kd, vd)
        assert type(error) is ValueError and len(out) == 4  # the records before it
        assert out[0].key == b"KEY-0" and out[0].serialized_key_size == 5
        assert out[1].headers[-1] == ("seen", b"1") and out[1].serialized_header_size == 17
        results.append((out, kd.calls, vd.calls, str(error)))
    assert all(r == results[0] for r in results)


def test_aiokafka_records_and_deserializers_agree():
    data = codec.encode_record_batch(RECORDS, base_offset=BASE_OFFSET)
    layout = ("t", 1, codec.FIELD_OFFSET, codec.FIELD_TIMESTAMP, codec.FIELD_TIMESTAMP_TYPE,
              codec.FIELD_KEY, codec.FIELD_VALUE, None, codec.FIELD_KEY_SIZE,
              codec.FIELD_VALUE_SIZE, codec.FIELD_HEADERS)
    results = []
    for impl in IMPLS:
        out = _factory.decode_records_with(data, AioConsumerRecord, layout,
                                           init=AioConsumerRecord.__init__,
                                           start_offset=BASE_OFFSET + 1)
        assert [r.offset for r in out] == [BASE_OFFSET + i for i in (1, 2, 3, 4)]
        assert out[0].headers == (("h", b"x"), ("\u00e9t\u00e9", None)) and out[0].checksum is None
        assert out[-1] == AioConsumerRecord("t", 1, BASE_OFFSET + 4, 5_003, 0, b"k" * 300,
                                            b"v" * 70_000, None, 300, 70_000,
                                            (("big", b"y" * 200),))
        calls = []

        def fails(value, calls=calls):
            calls.append(value)
            if value is None:
                raise KeyError("null value")
            return len(value)

        partial = _factory.decode_records_with(data, AioConsumerRecord, layout)
        error = impl.deserialize(partial, lambda k, calls=calls: calls.append(k) or k, fails)
        assert type(error) is KeyError and [r.value for r in partial] == [7, 6]
        assert impl.deserialize(out, None, None) is None
        results.append(([vars(r) for r in out], [vars(r) for r in partial], calls))
    assert all(r == results[0] for r in results)
