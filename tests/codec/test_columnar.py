"""Columns: the columnar decode shape, its Arrow view and the columnar encoders."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafkawire import codec as C
from kafkawire import errors
from kafkawire.codec import Columns

RECORDS = [
    (b"k0", b"value-0", 1000, [("h1", b"a"), ("h2", None)]),
    (None, b"value-1", 1001, []),
    (b"k2", None, 1002, [(b"h3", b"ccc")]),
    (b"", b"", 1003, []),
]


def expected_records(base=0):
    out = []
    for i, (k, v, ts, hs) in enumerate(RECORDS):
        headers = tuple((hk if isinstance(hk, str) else hk.decode(), hv) for hk, hv in hs)
        out.append(C.Record(base + i, ts, 0, k, v, headers))
    return out


@pytest.fixture
def cols():
    return C.decode_columnar(C.encode_record_batch(RECORDS, base_offset=40))


def test_layout(cols):
    assert len(cols) == 4
    dtypes = {
        "data": np.uint8,
        "offsets": np.int64,
        "timestamps": np.int64,
        "timestamp_types": np.int8,
        "key_offsets": np.int32,
        "key_lengths": np.int32,
        "value_offsets": np.int32,
        "value_lengths": np.int32,
        "header_index": np.int32,
        "header_key_offsets": np.int32,
        "header_value_offsets": np.int32,
        "header_value_lengths": np.int32,
    }
    for name, dtype in dtypes.items():
        assert getattr(cols, name).dtype == dtype, name
    # keys, then values, then header keys, then header values
    assert bytes(cols.data) == b"k0k2" + b"value-0value-1" + b"h1h2h3" + b"accc"
    assert cols.offsets.tolist() == [40, 41, 42, 43]
    assert cols.timestamps.tolist() == [1000, 1001, 1002, 1003]
    assert cols.timestamp_types.tolist() == [0, 0, 0, 0]
    assert cols.key_offsets.tolist() == [0, 2, 2, 4, 4]
    assert cols.key_lengths.tolist() == [2, -1, 2, 0]
    assert cols.value_offsets.tolist() == [4, 11, 18, 18, 18]
    assert cols.value_lengths.tolist() == [7, 7, -1, 0]
    assert cols.header_index.tolist() == [0, 2, 2, 3, 3]
    assert cols.header_key_offsets.tolist() == [18, 20, 22, 24]
    assert cols.header_value_offsets.tolist() == [24, 25, 25, 28]
    assert cols.header_value_lengths.tolist() == [1, -1, 3]


def test_accessors(cols):
    assert [cols.key(i) for i in range(4)] == [b"k0", None, b"k2", b""]
    assert [cols.value(i) for i in range(4)] == [b"value-0", b"value-1", None, b""]
    assert cols.headers(0) == (("h1", b"a"), ("h2", None))
    assert cols.headers(1) == ()
    assert cols.record(2) == expected_records(40)[2]
    assert cols.record(-1) == expected_records(40)[3]
    with pytest.raises(IndexError):
        cols.record(4)
    assert cols.to_records() == expected_records(40)
    assert cols.to_records() == C.decode_records(C.encode_record_batch(RECORDS, base_offset=40))
    assert "4 records" in repr(cols)


def test_empty():
    cols = C.decode_columnar(b"")
    assert len(cols) == 0
    for name in ("key_offsets", "value_offsets", "header_index", "header_key_offsets", "header_value_offsets"):
        assert getattr(cols, name).tolist() == [0], name
    for name in ("offsets", "timestamps", "key_lengths", "value_lengths", "header_value_lengths"):
        assert len(getattr(cols, name)) == 0, name
    assert cols.to_records() == []
    assert cols.to_arrow().num_rows == 0


def test_control_batches_are_skipped():
    control = C.encode_record_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=0, is_control=True)
    data = control + C.encode_record_batch(RECORDS, base_offset=1)
    cols = C.decode_columnar(data)
    assert cols.offsets.tolist() == [1, 2, 3, 4]


def test_mixed_magics_and_start_offset():
    data = (
        C.encode_message_set([(b"a", b"0")], magic=0, base_offset=0)
        + C.encode_message_set([(b"b", b"1", 5), (b"c", b"2", 6)], magic=1, base_offset=1, compression=1)
        + C.encode_record_batch([(b"d", b"3", 7)], base_offset=3)
    )
    cols = C.decode_columnar(data, start_offset=2)
    assert cols.offsets.tolist() == [2, 3]
    assert cols.timestamps.tolist() == [6, 7]
    cols = C.decode_columnar(data)
    assert cols.timestamp_types.tolist() == [-1, 0, 0, 0]
    assert cols.timestamps.tolist() == [-1, 5, 6, 7]
    assert [cols.key(i) for i in range(4)] == [b"a", b"b", b"c", b"d"]


# ---- Arrow --------------------------------------------------------------------------------


def _address_in(buf: pa.Buffer, array: np.ndarray) -> bool:
    start = array.ctypes.data
    return start <= buf.address and buf.address + buf.size <= start + array.nbytes


def test_to_arrow_schema_and_values(cols):
    batch = cols.to_arrow(topic="events", partition=3)
    assert batch.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    types = {f.name: f.type for f in batch.schema}
    assert types["key"] == pa.binary()
    assert types["value"] == pa.binary()
    assert types["topic"] == pa.string()
    assert types["partition"] == pa.int32()
    assert types["offset"] == pa.int64()
    assert types["timestamp"] == pa.timestamp("ms", tz="UTC")
    assert types["timestampType"] == pa.int32()
    assert types["headers"] == pa.list_(
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    )
    batch.validate(full=True)
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == [b"k0", None, b"k2", b""]
    assert [r["value"] for r in rows] == [b"value-0", b"value-1", None, b""]
    assert [r["topic"] for r in rows] == ["events"] * 4
    assert [r["partition"] for r in rows] == [3] * 4
    assert [r["offset"] for r in rows] == [40, 41, 42, 43]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1000, 1001, 1002, 1003]
    assert str(rows[1]["timestamp"]) == "1970-01-01 00:00:01.001000+00:00"
    assert [r["timestampType"] for r in rows] == [0] * 4
    assert rows[0]["headers"] == [{"key": "h1", "value": b"a"}, {"key": "h2", "value": None}]
    assert rows[1]["headers"] == []
    assert rows[2]["headers"] == [{"key": "h3", "value": b"ccc"}]


def test_to_arrow_without_topic_and_partition(cols):
    batch = cols.to_arrow()
    assert batch.schema.names == ["key", "value", "offset", "timestamp", "timestampType", "headers"]


def test_to_arrow_is_zero_copy(cols):
    batch = cols.to_arrow()
    key, value, offset, timestamp, _tt, headers = batch.columns
    for arr, offsets in ((key, cols.key_offsets), (value, cols.value_offsets)):
        _validity, offs, body = arr.buffers()
        assert body.address == cols.data.ctypes.data
        assert offs.address == offsets.ctypes.data
    assert offset.buffers()[1].address == cols.offsets.ctypes.data
    assert timestamp.buffers()[1].address == cols.timestamps.ctypes.data
    assert headers.buffers()[1].address == cols.header_index.ctypes.data
    hkey = headers.values.field("key")
    hvalue = headers.values.field("value")
    assert hkey.buffers()[1].address == cols.header_key_offsets.ctypes.data
    assert hvalue.buffers()[1].address == cols.header_value_offsets.ctypes.data
    assert _address_in(hkey.buffers()[2], cols.data)
    assert _address_in(hvalue.buffers()[2], cols.data)
    # the bytes really are shared: a change in data shows through
    cols.data[0] = ord("K")
    assert batch.column(0)[0].as_py() == b"K0"


def test_from_arrow_round_trip(cols):
    batch = cols.to_arrow(topic="t", partition=0)
    again = Columns.from_arrow(batch)
    for name in (
        "data",
        "offsets",
        "timestamps",
        "timestamp_types",
        "key_offsets",
        "key_lengths",
        "value_offsets",
        "value_lengths",
        "header_index",
        "header_key_offsets",
        "header_value_offsets",
        "header_value_lengths",
    ):
        assert getattr(again, name).tolist() == getattr(cols, name).tolist(), name
    assert Columns.from_arrow(pa.Table.from_batches([batch])).to_records() == cols.to_records()


def test_from_arrow_slices_strings_and_missing_columns(cols):
    sliced = cols.to_arrow().slice(1, 2)
    part = Columns.from_arrow(sliced)
    assert part.to_records() == cols.to_records()[1:3]
    plain = pa.record_batch({"key": pa.array(["a", None]), "value": pa.array([b"x", b"yy"])})
    made = Columns.from_arrow(plain)
    assert made.to_records() == [C.Record(0, -1, 0, b"a", b"x"), C.Record(1, -1, 0, None, b"yy")]
    with pytest.raises(errors.CodecError, match="value"):
        Columns.from_arrow(pa.record_batch({"key": pa.array([b"a"])}))


def test_from_records(cols):
    made = Columns.from_records(RECORDS)
    assert bytes(made.data) == bytes(cols.data)
    assert made.key_offsets.tolist() == cols.key_offsets.tolist()
    assert made.header_value_lengths.tolist() == cols.header_value_lengths.tolist()
    assert made.offsets.tolist() == [0, 1, 2, 3]
    assert Columns.from_records(cols.to_records()).to_records() == cols.to_records()
    defaulted = Columns.from_records([(b"k", b"v")], timestamp=77)
    assert defaulted.timestamps.tolist() == [77]
    with pytest.raises(errors.EncodeError, match="record 1"):
        Columns.from_records([(b"k", b"v"), (b"k", 5)])
    assert len(Columns.from_records([])) == 0


# ---- columnar encoding ----------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_encode_columnar_matches_the_record_encoders(cols, compression):
    assert C.encode_columnar(cols, base_offset=9, compression=compression) == C.encode_record_batch(
        RECORDS, base_offset=9, compression=compression
    )
    no_headers = [(k, v, ts) for k, v, ts, _ in RECORDS]
    plain = Columns.from_records(no_headers)
    for magic in (0, 1):
        if compression == 4:
            with pytest.raises(errors.UnsupportedCodecError, match="KIP-110"):
                C.encode_columnar(plain, magic=magic, compression=4)
            continue
        assert C.encode_columnar(
            plain, magic=magic, base_offset=9, compression=compression
        ) == C.encode_message_set(no_headers, magic=magic, base_offset=9, compression=compression)


def test_encode_columnar_round_trip_ignores_column_offsets(cols):
    encoded = C.encode_columnar(cols, base_offset=100)
    assert C.decode_records(encoded) == expected_records(100)
    via_arrow = C.encode_columnar(Columns.from_arrow(cols.to_arrow()), base_offset=100)
    assert via_arrow == encoded


# ---- construction checks -------------------------------------------------------------------


def _parts(n_records=1):
    return dict(
        data=bytearray(b"kv"),
        offsets=np.array([0], np.int64),
        timestamps=np.array([5], np.int64),
        timestamp_types=np.array([0], np.int8),
        key_offsets=np.array([0, 1], np.int32),
        key_lengths=np.array([1], np.int32),
        value_offsets=np.array([1, 2], np.int32),
        value_lengths=np.array([1], np.int32),
        header_index=np.array([0, 0], np.int32),
        header_key_offsets=np.array([2], np.int32),
        header_value_offsets=np.array([2], np.int32),
        header_value_lengths=np.array([], np.int32),
    )


def test_constructor_takes_any_buffer_zero_copy():
    parts = _parts()
    cols = Columns(*parts.values())
    assert cols.to_records() == [C.Record(0, 5, 0, b"k", b"v")]
    assert cols.data.ctypes.data == np.frombuffer(parts["data"], np.uint8).ctypes.data
    parts["key_offsets"] = bytearray(np.array([0, 1], np.int32).tobytes())
    assert Columns(*parts.values()).key(0) == b"k"


@pytest.mark.parametrize(
    "field,bad",
    [
        ("key_offsets", np.array([0, 1, 2], np.int32)),
        ("timestamps", np.array([], np.int64)),
        ("value_offsets", np.array([1, 9], np.int32)),
        ("key_offsets", np.array([1, 0], np.int32)),
        ("key_lengths", np.array([-1], np.int32)),
        ("header_index", np.array([0, 1], np.int32)),
    ],
)
def test_constructor_rejects_inconsistent_arrays(field, bad):
    parts = _parts()
    parts[field] = bad
    with pytest.raises(errors.CodecError, match="Columns"):
        Columns(*parts.values())


# ---- views: decode_columnar copies no record bytes ------------------------------------------


def test_decode_returns_a_view_that_builds_data_on_first_use():
    data = C.encode_record_batch(RECORDS, base_offset=40)
    cols = C.decode_columnar(data)
    assert cols.is_view
    # record access reads the fields in place and leaves the view as it is
    assert [cols.key(i) for i in range(4)] == [b"k0", None, b"k2", b""]
    assert [cols.value(i) for i in range(-4, 0)] == [b"value-0", b"value-1", None, b""]
    assert cols.headers(0) == (("h1", b"a"), ("h2", None))
    assert cols.headers(2) == (("h3", b"ccc"),)
    assert cols.record(-1) == expected_records(40)[3]
    assert cols.to_records() == expected_records(40)
    assert cols.payload_size == 28
    assert repr(cols) == "Columns(4 records, 3 headers, 28 bytes of data)"
    assert cols.offsets.tolist() == [40, 41, 42, 43]
    assert cols.key_lengths.tolist() == [2, -1, 2, 0]
    assert cols.header_index.tolist() == [0, 2, 2, 3, 3]
    with pytest.raises(IndexError):
        cols.key(4)
    with pytest.raises(AttributeError, match="no_such_field"):
        cols.no_such_field  # noqa: B018
    assert cols.is_view
    # the first use of data or of an offsets array builds them all, once
    offsets = cols.value_offsets
    assert not cols.is_view
    assert offsets.tolist() == [4, 11, 18, 18, 18]
    assert bytes(cols.data) == b"k0k2value-0value-1h1h2h3accc"
    assert cols.value_offsets is offsets
    assert cols.to_records() == expected_records(40)
    assert cols.payload_size == 28


@pytest.mark.parametrize(
    "make", [bytearray, lambda b: memoryview(bytearray(b)), lambda b: np.frombuffer(b, np.uint8).copy()]
)
def test_a_writable_input_is_copied_before_it_is_viewed(make):
    data = make(C.encode_record_batch(RECORDS, base_offset=40))
    cols = C.decode_columnar(data)
    with memoryview(data) as whole, whole.cast("B") as view:
        view[:] = bytes(len(view))  # whoever owns the buffer reuses it
    assert cols.to_records() == expected_records(40)
    if isinstance(data, bytearray):
        data.extend(b"more")  # and it stays resizable: the Columns holds no export of it
        data.clear()
    assert cols.to_records() == expected_records(40)


def test_a_read_only_view_of_a_bytearray_is_used_in_place():
    frame = bytearray(C.encode_record_batch(RECORDS, base_offset=40))
    cols = C.decode_columnar(memoryview(frame).toreadonly())  # as the connection hands it
    assert cols.is_view
    assert cols.to_records() == expected_records(40)


def _mixed_set():
    """Uncompressed and compressed batches, legacy entries, a control batch, headers."""
    many = [(b"k%d" % i, b"v" * (i % 7) if i % 5 else None, 1000 + i,
             [("h", b"x")] if i % 11 == 0 else []) for i in range(300)]
    return (
        C.encode_message_set([(b"a", b"0", 5)], magic=1, base_offset=0)
        + C.encode_record_batch(many[:100], base_offset=1)
        + C.encode_record_batch(many[100:200], base_offset=101, compression=1)
        + C.encode_record_batch([(b"\x00\x00\x00\x00", b"\x00" * 6)], base_offset=201, is_control=True)
        + C.encode_message_set([(b"b", b"1", 6), (b"c", None, 7)], magic=1, base_offset=202, compression=1)
        + C.encode_record_batch(many[200:], base_offset=204, compression=3, log_append_time=True)
        + C.encode_record_batch(RECORDS, base_offset=304)
    )


@pytest.mark.parametrize("start", [0, 1, 150, 203, 250, 306, 400])
def test_views_of_mixed_sets_hold_the_records_decode_records_finds(start):
    data = _mixed_set()
    cols = C.decode_columnar(data, start_offset=start)
    expected = C.decode_records(data, start_offset=start)
    assert cols.is_view
    assert cols.to_records() == expected
    assert [cols.record(i) for i in range(len(cols))] == expected
    assert cols.payload_size == sum(
        len(r.key or b"") + len(r.value or b"") + sum(len(k.encode()) + len(v or b"") for k, v in r.headers)
        for r in expected
    )
    built = C.decode_columnar(data, start_offset=start)
    assert len(built.data) == cols.payload_size
    assert built.to_records() == expected
    assert Columns.from_arrow(built.to_arrow()).to_records() == expected


def test_uncommon_records_inside_a_batch_of_common_ones():
    # The decoder reads records of the usual shape in a tight loop and hands the others
    # (headers, long varints, null fields) to its general loop, then carries on.
    rng = np.random.default_rng(5)
    records = []
    for i in range(2000):
        size = int(rng.choice([0, 5, 100, 70_000, 2_100_000])) if i % 97 == 0 else 10
        key = None if i % 13 == 0 else b"key-%d" % i
        value = None if i % 17 == 0 else bytes(rng.integers(0, 256, size, dtype=np.uint8))
        headers = [("trace", b"t%d" % i), ("n", None)] if i % 29 == 0 else []
        records.append((key, value, 1_700_000_000_000 + (i * 7919) % 200_000, headers))
    data = C.encode_record_batch(records, base_offset=10**12)
    data += C.encode_record_batch(records[:50], base_offset=10**12 + 2000, log_append_time=True,
                                  timestamp=123)
    cols = C.decode_columnar(data)
    assert cols.to_records() == C.decode_records(data)
    assert cols.timestamp_types.tolist() == [0] * 2000 + [1] * 50
    assert len(cols.data) == cols.payload_size
