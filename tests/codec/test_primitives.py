"""Wire primitives, checksums and Record, through kafkawire.codec (either implementation)."""

from __future__ import annotations

import importlib.util
import os
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire import codec as C
from kafkawire import errors


def written(writer, *args) -> bytes:
    out = bytearray()
    writer(out, *args)
    return bytes(out)


def test_implementation_is_the_expected_one():
    expected = os.environ.get("KAFKAWIRE_EXPECT_IMPLEMENTATION")
    if expected is None:  # no claim made: the extension whenever it is built and not refused
        if os.environ.get("KAFKAWIRE_PUREPYTHON", "") not in ("", "0"):
            expected = "python"
        else:
            expected = "cython" if importlib.util.find_spec("kafkawire._codec") else "python"
    assert C.IMPLEMENTATION == expected
    assert C.DEFAULT_MAX_DEPTH == 4
    assert C.DEFAULT_MAX_DECOMPRESSED_SIZE == 64 * 1024 * 1024


# ---- fixed-width integers -----------------------------------------------------------------

FIXED = [
    ("int8", -128, b"\x80"),
    ("int8", 127, b"\x7f"),
    ("int8", -1, b"\xff"),
    ("int16", -32768, b"\x80\x00"),
    ("int16", 258, b"\x01\x02"),
    ("int32", -(2**31), b"\x80\x00\x00\x00"),
    ("int32", 0x01020304, b"\x01\x02\x03\x04"),
    ("int32", -1, b"\xff\xff\xff\xff"),
    ("int64", 2**63 - 1, b"\x7f" + b"\xff" * 7),
    ("int64", -(2**63), b"\x80" + b"\x00" * 7),
    ("int64", 0x0102030405060708, bytes(range(1, 9))),
    ("uint32", 2**32 - 1, b"\xff\xff\xff\xff"),
    ("uint32", 0x80000000, b"\x80\x00\x00\x00"),
]


@pytest.mark.parametrize("kind,value,wire", FIXED)
def test_fixed_known_bytes(kind, value, wire):
    assert written(getattr(C, f"write_{kind}"), value) == wire
    read = getattr(C, f"read_{kind}")
    assert read(wire, 0) == (value, len(wire))
    # at an offset, from other buffer types
    padded = b"\xaa\xbb" + wire + b"\xcc"
    for buf in (padded, bytearray(padded), memoryview(padded), np.frombuffer(padded, np.uint8)):
        assert read(buf, 2) == (value, 2 + len(wire))


@pytest.mark.parametrize(
    "kind,size", [("int8", 1), ("int16", 2), ("int32", 4), ("int64", 8), ("uint32", 4)]
)
def test_fixed_truncated(kind, size):
    read = getattr(C, f"read_{kind}")
    with pytest.raises(errors.TruncatedDataError) as info:
        read(b"\x00" * (size + 2), 3)
    assert str(info.value) == (
        f"truncated {kind} at byte 3: needs {size} bytes, {size - 1} remain in the buffer"
    )
    with pytest.raises(errors.TruncatedDataError, match=f"truncated {kind} at byte 0"):
        read(b"", 0)


@pytest.mark.parametrize(
    "kind,bad",
    [
        ("int8", 128),
        ("int8", -129),
        ("int16", 40000),
        ("int16", -32769),
        ("int32", 2**31),
        ("int64", 2**63),
        ("int64", -(2**63) - 1),
        ("uint32", -1),
        ("uint32", 2**32),
    ],
)
def test_fixed_range_errors(kind, bad):
    out = bytearray(b"keep")
    with pytest.raises(errors.EncodeError) as info:
        getattr(C, f"write_{kind}")(out, bad)
    assert str(info.value) == f"{kind} value {bad} out of range"
    assert out == b"keep"


# ---- varints ------------------------------------------------------------------------------

UVARINTS = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
]
VARINTS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]
VARLONGS = VARINTS + [
    (2**31, b"\x80\x80\x80\x80\x10"),
    (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (-(2**63), b"\xff" * 9 + b"\x01"),
]


@pytest.mark.parametrize("value,wire", UVARINTS)
def test_uvarint_known(value, wire):
    assert written(C.write_uvarint, value) == wire
    assert C.read_uvarint(b"\x99" + wire, 1) == (value, 1 + len(wire))
    assert C.size_of_uvarint(value) == len(wire)


@pytest.mark.parametrize("value,wire", VARINTS)
def test_varint_known(value, wire):
    assert written(C.write_varint, value) == wire
    assert C.read_varint(wire, 0) == (value, len(wire))
    assert C.size_of_varint(value) == len(wire)


@pytest.mark.parametrize("value,wire", VARLONGS)
def test_varlong_known(value, wire):
    assert written(C.write_varlong, value) == wire
    assert C.read_varlong(bytearray(wire), 0) == (value, len(wire))
    assert C.size_of_varint(value) == len(wire)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value):
    wire = written(C.write_varlong, value)
    assert C.read_varlong(wire, 0) == (value, len(wire))
    assert C.size_of_varint(value) == len(wire)
    if -(2**31) <= value < 2**31:
        assert written(C.write_varint, value) == wire
        assert C.read_varint(wire, 0) == (value, len(wire))
    if 0 <= value < 2**32:
        uwire = written(C.write_uvarint, value)
        assert C.read_uvarint(uwire, 0) == (value, len(uwire))


@pytest.mark.parametrize("reader,what", [("uvarint", "uvarint"), ("varint", "varint"), ("varlong", "varlong")])
def test_varint_truncated(reader, what):
    read = getattr(C, f"read_{reader}")
    with pytest.raises(errors.TruncatedDataError, match=f"truncated {what} at byte 1"):
        read(b"\x00\x80\x80", 1)
    with pytest.raises(errors.TruncatedDataError, match=f"truncated {what} at byte 0"):
        read(b"", 0)


@pytest.mark.parametrize("reader,limit", [("uvarint", 5), ("varint", 5), ("varlong", 10)])
def test_varint_too_long(reader, limit):
    read = getattr(C, f"read_{reader}")
    too_long = b"\x80" * limit + b"\x00"
    with pytest.raises(errors.CodecError) as info:
        read(b"\x00" + too_long, 1)
    assert not isinstance(info.value, errors.TruncatedDataError)
    assert str(info.value).startswith("malformed varint at byte 1:")
    # exactly the limit is fine
    assert read(b"\x80" * (limit - 1) + b"\x00", 0) == (0, limit)


@pytest.mark.parametrize(
    "writer,bad",
    [
        ("uvarint", -1),
        ("uvarint", 2**32),
        ("varint", 2**31),
        ("varint", -(2**31) - 1),
        ("varlong", 2**63),
        ("varlong", -(2**63) - 1),
    ],
)
def test_varint_range_errors(writer, bad):
    with pytest.raises(errors.EncodeError, match=f"{writer} value {bad} out of range"):
        written(getattr(C, f"write_{writer}"), bad)


def test_size_of_range_errors():
    with pytest.raises(errors.EncodeError):
        C.size_of_uvarint(-1)
    with pytest.raises(errors.EncodeError):
        C.size_of_varint(2**63)


# ---- strings and bytes --------------------------------------------------------------------


def test_string():
    assert written(C.write_string, "héllo") == b"\x00\x06h\xc3\xa9llo"
    assert written(C.write_string, "") == b"\x00\x00"
    assert written(C.write_string, None) == b"\xff\xff"
    assert C.read_string(b"\x00\x06h\xc3\xa9llo!", 0) == ("héllo", 8)
    assert C.read_string(b"\xff\xff", 0) == (None, 2)
    assert C.read_string(b"\x00\x00", 0) == ("", 2)


def test_string_errors():
    with pytest.raises(errors.TruncatedDataError, match=r"truncated string at byte 2: needs 5 bytes, 3 remain"):
        C.read_string(b"\x00\x05abc", 0)
    with pytest.raises(errors.TruncatedDataError, match="truncated int16"):
        C.read_string(b"\x00", 0)
    with pytest.raises(errors.CodecError, match="malformed string at byte 0"):
        C.read_string(b"\xff\xfeabc", 0)
    with pytest.raises(errors.CodecError, match="malformed string") as info:
        C.read_string(b"\x00\x02\xc3\x28", 0)
    assert "UTF-8" in str(info.value)
    with pytest.raises(errors.EncodeError):
        written(C.write_string, "x" * 40000)


def test_bytes():
    assert written(C.write_bytes, b"ab") == b"\x00\x00\x00\x02ab"
    assert written(C.write_bytes, memoryview(b"ab")) == b"\x00\x00\x00\x02ab"
    assert written(C.write_bytes, None) == b"\xff\xff\xff\xff"
    assert C.read_bytes(b"\x00\x00\x00\x02ab", 0) == (b"ab", 6)
    assert C.read_bytes(memoryview(b"\xff\xff\xff\xff"), 0) == (None, 4)
    value, _ = C.read_bytes(bytearray(b"\x00\x00\x00\x01z"), 0)
    assert type(value) is bytes
    with pytest.raises(errors.TruncatedDataError, match="truncated bytes at byte 4: needs 9 bytes, 2 remain"):
        C.read_bytes(b"\x00\x00\x00\x09ab", 0)
    with pytest.raises(errors.CodecError, match="malformed bytes at byte 0"):
        C.read_bytes(b"\xff\xff\xff\xfe", 0)


def test_compact_string_and_bytes():
    assert written(C.write_compact_string, "abc") == b"\x04abc"
    assert written(C.write_compact_string, None) == b"\x00"
    assert written(C.write_compact_string, "") == b"\x01"
    assert C.read_compact_string(b"\x04abc", 0) == ("abc", 4)
    assert C.read_compact_string(b"\x00", 0) == (None, 1)
    assert written(C.write_compact_bytes, b"\x00\x01") == b"\x03\x00\x01"
    assert written(C.write_compact_bytes, None) == b"\x00"
    assert C.read_compact_bytes(b"\x03\x00\x01", 0) == (b"\x00\x01", 3)
    assert C.read_compact_bytes(b"\x00", 0) == (None, 1)
    long = "x" * 200  # a two-byte length
    wire = written(C.write_compact_string, long)
    assert wire[:2] == b"\xc9\x01"
    assert C.read_compact_string(wire, 0) == (long, len(wire))
    with pytest.raises(errors.TruncatedDataError, match="truncated string"):
        C.read_compact_string(b"\x05ab", 0)
    with pytest.raises(errors.TruncatedDataError, match="truncated bytes"):
        C.read_compact_bytes(b"\x05ab", 0)
    with pytest.raises(errors.CodecError, match="malformed string"):
        C.read_compact_string(b"\x02\xff", 0)


def test_array_lengths():
    assert written(C.write_array_length, 3) == b"\x00\x00\x00\x03"
    assert written(C.write_array_length, None) == b"\xff\xff\xff\xff"
    assert C.read_array_length(b"\x00\x00\x00\x03", 0) == (3, 4)
    assert C.read_array_length(b"\xff\xff\xff\xff", 0) == (-1, 4)
    with pytest.raises(errors.CodecError, match="malformed"):
        C.read_array_length(b"\xff\xff\xff\xfe", 0)
    assert written(C.write_compact_array_length, 3) == b"\x04"
    assert written(C.write_compact_array_length, None) == b"\x00"
    assert C.read_compact_array_length(b"\x04", 0) == (3, 1)
    assert C.read_compact_array_length(b"\x00", 0) == (-1, 1)
    with pytest.raises(errors.EncodeError):
        written(C.write_array_length, -2)
    with pytest.raises(errors.EncodeError):
        written(C.write_compact_array_length, -1)


def test_tagged_fields():
    assert written(C.write_tagged_fields, None) == b"\x00"
    assert written(C.write_tagged_fields, {}) == b"\x00"
    wire = written(C.write_tagged_fields, {5: b"xyz", 1: b"", 300: bytearray(b"q")})
    # ascending tags: count 3; tag 1 len 0; tag 5 len 3 "xyz"; tag 300 len 1 "q"
    assert wire == b"\x03\x01\x00\x05\x03xyz\xac\x02\x01q"
    assert C.read_tagged_fields(wire + b"tail", 0) == ({1: b"", 5: b"xyz", 300: b"q"}, len(wire))
    assert C.read_tagged_fields(b"\x00", 0) == ({}, 1)
    with pytest.raises(errors.CodecError, match="malformed"):
        C.read_tagged_fields(b"\x02\x05\x00\x01\x00", 0)  # tag 1 after tag 5
    with pytest.raises(errors.TruncatedDataError):
        C.read_tagged_fields(b"\x01\x05\x04ab", 0)
    with pytest.raises(errors.TruncatedDataError):
        C.read_tagged_fields(b"\x02\x05\x00", 0)


# ---- checksums ----------------------------------------------------------------------------


def test_crc32():
    assert C.crc32(b"123456789") == 0xCBF43926
    data = os.urandom(1000)
    assert C.crc32(data) == zlib.crc32(data)
    assert C.crc32(data[500:], C.crc32(data[:500])) == zlib.crc32(data)


@pytest.mark.parametrize(
    "data,expected",
    [
        (b"", 0),
        (b"123456789", 0xE3069283),
        # RFC 3720 (iSCSI) appendix B.4 test vectors
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_known(data, expected):
    assert C.crc32c(data) == expected
    assert C.crc32c(memoryview(data)) == expected
    assert C.crc32c(bytearray(data)) == expected


def test_crc32c_incremental_and_every_tail_length():
    data = bytes(range(256)) * 4 + b"tail"
    whole = C.crc32c(data)
    for cut in range(0, 40):
        assert C.crc32c(data[cut:], C.crc32c(data[:cut])) == whole
    assert C.crc32c_implementation() in ("sse4.2", "sse4.2-no-clmul", "armv8", "table", "python")


# ---- Record -------------------------------------------------------------------------------


def test_record_fields_equality_and_repr():
    r = C.Record(5, 1000, 0, b"k", b"v", (("h", b"x"),))
    assert (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) == (
        5,
        1000,
        0,
        b"k",
        b"v",
        (("h", b"x"),),
    )
    assert C.Record(1, -1, -1, None, None).headers == ()
    assert r == C.Record(5, 1000, 0, b"k", b"v", (("h", b"x"),))
    assert r != C.Record(5, 1000, 0, b"k", b"w", (("h", b"x"),))
    assert r != C.Record(6, 1000, 0, b"k", b"v", (("h", b"x"),))
    assert r != (5, 1000, 0, b"k", b"v")
    text = repr(r)
    assert text.startswith("Record(") and "offset=5" in text and "b'k'" in text


def test_records_of_both_implementations_compare_equal():
    from kafkawire import _pycodec

    fields = (7, 123, 1, None, b"value", (("a", None),))
    assert C.Record(*fields) == _pycodec.Record(*fields)
    assert _pycodec.Record(*fields) == C.Record(*fields)
    assert _pycodec.Record(*fields) != C.Record(8, *fields[1:])


@pytest.mark.parametrize("size", [4095, 4096, 4097, 10_007, 65_536, 300_001])
def test_crc32c_long_inputs_agree_with_chunked(size):
    # Long inputs may take a different code path than short ones; both must agree.
    data = os.urandom(size)
    crc = 0
    for start in range(0, size, 1000):
        crc = C.crc32c(data[start : start + 1000], crc)
    assert C.crc32c(data) == crc
    assert C.crc32c(memoryview(data)[1:], C.crc32c(data[:1])) == crc
