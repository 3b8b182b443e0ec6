"""Property tests: what kafkawire encodes, it decodes back, in every format and codec."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import codec, compression
from kafkawire.codec import Columns

LEGACY_CODECS = [0, 1, 2, 3]  # none, gzip, snappy, lz4 (zstd needs magic 2, KIP-110)
V2_CODECS = [0, 1, 2, 3, 4]

SETTINGS = settings(
    max_examples=40,
    deadline=None,  # compression libraries warm up on first use
    suppress_health_check=[HealthCheck.too_slow],
)

blobs = st.one_of(st.none(), st.binary(max_size=64))
# Timestamps stay within 2**41 so timestamp deltas inside a batch always fit (a varlong).
timestamps = st.one_of(st.none(), st.integers(min_value=0, max_value=2**41))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
)
legacy_records = st.lists(st.tuples(blobs, blobs, timestamps), max_size=20)
v2_records = st.lists(st.tuples(blobs, blobs, timestamps, header_lists), min_size=1, max_size=20)
base_offsets = st.integers(min_value=0, max_value=2**40)
default_timestamps = st.integers(min_value=0, max_value=2**41)


def fields(r) -> tuple:
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))


def available(codec_id: int) -> None:
    if not compression.available(codec_id):
        pytest.fail(f"compression codec {codec_id} library is not installed in the test env")


def expected_legacy(records, magic, base_offset, default_ts, log_append_time=False):
    out = []
    for i, (key, value, ts) in enumerate(records):
        if magic == 0:
            out.append((base_offset + i, -1, -1, key, value, ()))
        elif log_append_time:
            out.append((base_offset + i, default_ts, 1, key, value, ()))
        else:
            out.append((base_offset + i, default_ts if ts is None else ts, 0, key, value, ()))
    return out


def expected_v2(records, base_offset, default_ts, log_append_time=False):
    out = []
    for i, (key, value, ts, headers) in enumerate(records):
        if log_append_time:
            ts, ts_type = default_ts, 1
        else:
            ts, ts_type = (default_ts if ts is None else ts), 0
        out.append((base_offset + i, ts, ts_type, key, value, tuple(headers)))
    return out


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression_id", LEGACY_CODECS)
@SETTINGS
@given(records=legacy_records, base_offset=base_offsets, default_ts=default_timestamps)
def test_message_set_roundtrip(magic, compression_id, records, base_offset, default_ts):
    available(compression_id)
    data = codec.encode_message_set(
        records, magic=magic, compression=compression_id, base_offset=base_offset,
        timestamp=default_ts,
    )
    expected = expected_legacy(records, magic, base_offset, default_ts)
    decoded = codec.decode_records(data)
    assert [fields(r) for r in decoded] == expected
    assert [fields(r) for r in codec.decode_columnar(data).to_records()] == expected
    batches = codec.decode_batches(data)
    assert [fields(r) for b in batches for r in b.records] == expected
    if records:
        assert all(b.magic == magic and b.compression == compression_id for b in batches)
        # uncompressed: one entry per record; compressed: one wrapper
        assert len(batches) == (len(records) if compression_id == 0 else 1)


@pytest.mark.parametrize("compression_id", [1, 2, 3])
@SETTINGS
@given(records=legacy_records.filter(bool), base_offset=base_offsets, default_ts=default_timestamps)
def test_message_set_log_append_time(compression_id, records, base_offset, default_ts):
    data = codec.encode_message_set(
        records, magic=1, compression=compression_id, base_offset=base_offset,
        timestamp=default_ts, log_append_time=True,
    )
    expected = expected_legacy(records, 1, base_offset, default_ts, log_append_time=True)
    assert [fields(r) for r in codec.decode_records(data)] == expected
    [batch] = codec.decode_batches(data)
    assert batch.timestamp_type == 1 and batch.max_timestamp == default_ts


@pytest.mark.parametrize("compression_id", V2_CODECS)
@SETTINGS
@given(
    records=v2_records,
    base_offset=base_offsets,
    default_ts=default_timestamps,
    log_append_time=st.booleans(),
)
def test_record_batch_roundtrip(compression_id, records, base_offset, default_ts, log_append_time):
    available(compression_id)
    data = codec.encode_record_batch(
        records, base_offset=base_offset, compression=compression_id, timestamp=default_ts,
        log_append_time=log_append_time,
    )
    expected = expected_v2(records, base_offset, default_ts, log_append_time)
    decoded = codec.decode_records(data)
    assert [fields(r) for r in decoded] == expected
    assert [fields(r) for r in codec.decode_columnar(data).to_records()] == expected
    [batch] = codec.decode_batches(data)
    assert batch.magic == 2
    assert batch.compression == compression_id
    assert batch.base_offset == base_offset
    assert batch.last_offset_delta == len(records) - 1
    assert batch.timestamp_type == (1 if log_append_time else 0)
    assert batch.max_timestamp == max(r[1] for r in expected)
    if not log_append_time:
        assert batch.base_timestamp == expected[0][1]


@SETTINGS
@given(
    records=v2_records,
    producer_id=st.integers(min_value=-1, max_value=2**63 - 1),
    producer_epoch=st.integers(min_value=-1, max_value=2**15 - 1),
    base_sequence=st.integers(min_value=-1, max_value=2**31 - 1),
    leader_epoch=st.integers(min_value=-1, max_value=2**31 - 1),
    transactional=st.booleans(),
)
def test_record_batch_producer_fields(
    records, producer_id, producer_epoch, base_sequence, leader_epoch, transactional
):
    data = codec.encode_record_batch(
        records, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, partition_leader_epoch=leader_epoch,
        is_transactional=transactional,
    )
    [batch] = codec.decode_batches(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        producer_id, producer_epoch, base_sequence,
    )
    assert batch.partition_leader_epoch == leader_epoch
    assert batch.is_transactional is transactional
    assert batch.is_control is False


@SETTINGS
@given(
    parts=st.lists(
        st.tuples(st.sampled_from([0, 1, 2]), st.sampled_from([0, 1, 3]), v2_records),
        min_size=1, max_size=4,
    ),
    cut=st.integers(min_value=1, max_value=200),
)
def test_concatenated_sets_and_partial_tail(parts, cut):
    """Sets of any magics back to back decode as one stream; a cut-off tail is dropped."""
    data = b""
    expected = []
    offset = 0
    for magic, compression_id, records in parts:
        if magic == 2:
            data += codec.encode_record_batch(
                records, base_offset=offset, compression=compression_id, timestamp=5
            )
            expected += expected_v2(records, offset, 5)
        else:
            plain = [r[:3] for r in records]
            data += codec.encode_message_set(
                plain, magic=magic, compression=compression_id, base_offset=offset, timestamp=5
            )
            expected += expected_legacy(plain, magic, offset, 5)
        offset += len(records)
    assert [fields(r) for r in codec.decode_records(data)] == expected
    assert [fields(r) for r in codec.decode_columnar(data).to_records()] == expected
    # Cutting bytes off the end loses only the entries that were cut.
    truncated = data[: max(0, len(data) - cut)]
    got = [fields(r) for r in codec.decode_records(truncated)]
    assert got == expected[: len(got)]
    assert len(got) < len(expected)


@pytest.mark.parametrize("compression_id", V2_CODECS)
@SETTINGS
@given(records=v2_records, base_offset=base_offsets, default_ts=default_timestamps)
def test_encode_columnar_equals_record_batch(compression_id, records, base_offset, default_ts):
    cols = Columns.from_records(records, timestamp=default_ts)
    assert len(cols) == len(records)
    assert codec.encode_columnar(
        cols, base_offset=base_offset, compression=compression_id
    ) == codec.encode_record_batch(
        records, base_offset=base_offset, compression=compression_id, timestamp=default_ts
    )


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression_id", LEGACY_CODECS)
@SETTINGS
@given(records=legacy_records.filter(bool), base_offset=base_offsets, default_ts=default_timestamps)
def test_encode_columnar_equals_message_set(magic, compression_id, records, base_offset, default_ts):
    cols = Columns.from_records(records, timestamp=default_ts)
    assert codec.encode_columnar(
        cols, magic=magic, base_offset=base_offset, compression=compression_id
    ) == codec.encode_message_set(
        records, magic=magic, base_offset=base_offset, compression=compression_id,
        timestamp=default_ts,
    )


@pytest.mark.parametrize("compression_id", [0, 4])
@SETTINGS
@given(records=v2_records, base_offset=base_offsets)
def test_decoded_columns_reencode_identically(compression_id, records, base_offset):
    """decode_columnar -> encode_columnar reproduces the batch byte for byte."""
    data = codec.encode_record_batch(
        records, base_offset=base_offset, compression=compression_id, timestamp=9
    )
    cols = codec.decode_columnar(data)
    assert codec.encode_columnar(
        cols, base_offset=base_offset, compression=compression_id
    ) == data


@SETTINGS
@given(records=v2_records, start=st.integers(min_value=0, max_value=25))
def test_start_offset_filters(records, start):
    data = codec.encode_record_batch(records, base_offset=0, compression=1, timestamp=1)
    expected = [o for o in range(len(records)) if o >= start]
    assert [r.offset for r in codec.decode_records(data, start_offset=start)] == expected
    assert list(codec.decode_columnar(data, start_offset=start).offsets) == expected
    batches = codec.decode_batches(data, start_offset=start)
    assert [r.offset for b in batches for r in b.records] == expected
    assert len(batches) == (1 if expected else 0)


def test_record_objects_roundtrip() -> None:
    """Decoded Records are valid encoder input and compare equal field by field."""
    records = [
        codec.Record(0, 10, 0, b"k", b"v", (("h", b"1"), ("n", None))),
        codec.Record(1, 11, 0, None, None, ()),
    ]
    data = codec.encode_record_batch(records, base_offset=0)
    decoded = codec.decode_records(data)
    assert decoded == records
    assert codec.encode_record_batch(decoded, base_offset=0) == data
    assert decoded[0] != codec.Record(0, 10, 0, b"k", b"v", ())
