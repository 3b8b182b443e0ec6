"""The Cython extension and the pure-Python twin give identical results and errors.

Both modules are loaded directly (not through kafkawire.codec), so this file checks the
pair whatever KAFKAWIRE_PUREPYTHON says.  The fuzz test at the end mutates valid sets and
feeds both implementations; it is seeded, so a failure reproduces.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire import _pycodec as py
from kafkawire import compression, errors
from kafkawire._columnar import Columns

try:
    from kafkawire import _codec as cy
except ImportError as exc:  # pragma: no cover - depends on the build
    # `make test` and CI build the extension before both runs (and export
    # KAFKAWIRE_REQUIRE_EXTENSION), so there a missing build fails instead of skipping parity.
    if (os.environ.get("KAFKAWIRE_EXPECT_IMPLEMENTATION") == "cython"
            or os.environ.get("KAFKAWIRE_REQUIRE_EXTENSION", "") not in ("", "0")):
        pytest.fail(f"kafkawire._codec must be built for this run: {exc!r}", pytrace=False)
    pytest.skip(
        "kafkawire._codec is not built (run `python setup.py build_ext --inplace`)",
        allow_module_level=True,
    )

# The libFuzzer harness (`make fuzz`) compares the same way; this file smoke-tests it and
# shares its `norm` (comparable results) and `fix_crcs` (make damaged input's CRCs right).
_spec = importlib.util.spec_from_file_location(
    "kafkawire_atheris_codec", Path(__file__).resolve().parents[1] / "fuzz" / "atheris_codec.py"
)
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)
norm = harness.norm
_fix_crcs = harness.fix_crcs


def outcome(fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the type and message are what we compare
        extra = ()
        if isinstance(exc, errors.CorruptRecordError):
            extra = (exc.offset, exc.expected, exc.found)
        return ("raised", type(exc), str(exc), extra)
    return ("returned", norm(result))


def assert_same(name: str, *args, **kwargs):
    """Call `name` in both implementations; the outcomes must match.  Returns py's."""
    expected = outcome(getattr(py, name), *args, **kwargs)
    got = outcome(getattr(cy, name), *args, **kwargs)
    assert got == expected, f"{name}{_show(args, kwargs)}: cython {got!r} != python {expected!r}"
    return expected


def _show(args, kwargs) -> str:
    parts = [repr(bytes(a)[:200]) if isinstance(a, (bytes, bytearray, memoryview)) else repr(a)
             for a in args]
    parts += [f"{k}={v!r}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def test_identity() -> None:
    assert py.IMPLEMENTATION == "python"
    assert cy.IMPLEMENTATION == "cython"
    assert py.DEFAULT_MAX_DEPTH == cy.DEFAULT_MAX_DEPTH == 4
    assert py.DEFAULT_MAX_DECOMPRESSED_SIZE == cy.DEFAULT_MAX_DECOMPRESSED_SIZE
    assert cy.crc32c_implementation() in ("sse4.2", "sse4.2-no-clmul", "armv8", "table")
    assert py.crc32c_implementation() == "python"


def test_records_compare_across_implementations() -> None:
    a = py.Record(1, 2, 0, b"k", None, (("h", b"v"),))
    b = cy.Record(1, 2, 0, b"k", None, (("h", b"v"),))
    assert a == b and b == a
    assert a != cy.Record(1, 2, 0, b"k", b"", (("h", b"v"),))


# ---------------------------------------------------------------------------------------
# Checksums and primitives
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 63, 64, 65, 1000, 4099])
def test_crc_parity(size: int) -> None:
    data = random.Random(size).randbytes(size)
    for start in (0, 0xFFFFFFFF, 12345):
        assert cy.crc32(data, start) == py.crc32(data, start) == zlib.crc32(data, start)
        assert cy.crc32c(data, start) == py.crc32c(data, start)
    # chaining equals one pass
    half = size // 2
    assert cy.crc32c(data[half:], cy.crc32c(data[:half])) == cy.crc32c(data)
    assert cy.crc32c(memoryview(data)) == cy.crc32c(bytearray(data))


READERS = [
    "read_int8", "read_int16", "read_int32", "read_int64", "read_uint32", "read_uvarint",
    "read_varint", "read_varlong", "read_string", "read_bytes", "read_compact_string",
    "read_compact_bytes", "read_array_length", "read_compact_array_length",
    "read_tagged_fields",
]

READER_INPUTS = [
    b"",
    b"\x00",
    b"\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xff" * 12,
    b"\x80" * 11,
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\x1f",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02",
    b"\x00\x03abc",
    b"\x00\x05abc",
    b"\x00\x02\xc3\x28",  # invalid UTF-8
    b"\x04abc",
    b"\x03\xff\xfe",
    b"\xff\xfe",
    b"\x00\x00\x00\x02hi",
    b"\xff\xff\xff\xfe",
    b"\x80\x00\x00\x00",
    b"\x02\x00\x01x\x05\x02yz",  # two tagged fields
    b"\x02\x05\x01x\x00\x02yz",  # tags out of order
    b"\x01\x00\x7f",  # tagged field longer than the buffer
]


@pytest.mark.parametrize("name", READERS)
def test_reader_parity(name: str) -> None:
    rng = random.Random(name)
    inputs = READER_INPUTS + [rng.randbytes(rng.randrange(0, 24)) for _ in range(200)]
    found = Disagreements()
    for data in inputs:
        for pos in range(0, len(data) + 2):  # including a position past the end
            found.check(name, data, pos)
        found.check(name, memoryview(data), 0)
    found.assert_none()


WRITER_VALUES = {
    "write_int8": [0, 1, -1, 127, -128, 128, -129, 2**70],
    "write_int16": [0, -1, 32767, -32768, 40000, -40000],
    "write_int32": [0, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1],
    "write_int64": [0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1],
    "write_uint32": [0, 1, 2**32 - 1, 2**32, -1],
    "write_uvarint": [0, 1, 127, 128, 300, 2**31 - 1, 2**32 - 1, 2**32, 2**35, -1],
    "write_varint": [0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1],
    "write_varlong": [0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 12345678901],
    "write_string": [None, "", "abc", "é€😀", "x" * 40000, "\ud800"],
    "write_bytes": [None, b"", b"abc", bytearray(b"xy"), memoryview(b"mv")],
    "write_compact_string": [None, "", "abc", "é€😀", "\ud800"],
    "write_compact_bytes": [None, b"", b"abc", bytearray(b"x" * 300)],
    "write_array_length": [None, 0, 5, -1, 2**31 - 1, 2**31],
    "write_compact_array_length": [None, 0, 5, 2**31 - 1, 2**32],
    "write_tagged_fields": [None, {}, {0: b"a"}, {5: b"x", 1: b"yz"}, {300: b"q" * 200}, {-1: b""}],
}


@pytest.mark.parametrize("name", sorted(WRITER_VALUES))
def test_writer_parity(name: str) -> None:
    for value in WRITER_VALUES[name]:
        out_py, out_cy = bytearray(b"pre"), bytearray(b"pre")
        expected = outcome(getattr(py, name), out_py, value)
        got = outcome(getattr(cy, name), out_cy, value)
        assert got == expected, f"{name}({value!r}): cython {got!r} != python {expected!r}"
        if expected[0] == "returned":
            assert out_cy == out_py, f"{name}({value!r}) wrote different bytes"


def test_size_of_parity() -> None:
    for value in [0, 1, -1, 63, 64, 127, 128, 2**31 - 1, -(2**31), 2**35, 2**63 - 1, -(2**63)]:
        assert_same("size_of_varint", value)
        if value >= 0:
            assert_same("size_of_uvarint", value)


# ---------------------------------------------------------------------------------------
# Encoders
# ---------------------------------------------------------------------------------------

blobs = st.one_of(st.none(), st.binary(max_size=40))
timestamps = st.one_of(st.none(), st.integers(min_value=0, max_value=2**41))
headers = st.lists(st.tuples(st.text(max_size=6), blobs), max_size=3)
records_v2 = st.lists(st.tuples(blobs, blobs, timestamps, headers), min_size=1, max_size=12)
records_legacy = st.lists(st.tuples(blobs, blobs, timestamps), max_size=12)

PARITY_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("compression_id", [0, 1, 2, 3, 4])
@PARITY_SETTINGS
@given(records=records_v2, base=st.integers(0, 2**40), ts=st.integers(0, 2**41),
       lat=st.booleans(), txn=st.booleans())
def test_encode_record_batch_parity(compression_id, records, base, ts, lat, txn):
    kwargs = dict(base_offset=base, compression=compression_id, timestamp=ts,
                  log_append_time=lat, is_transactional=txn, producer_id=7 if txn else -1,
                  producer_epoch=1 if txn else -1, base_sequence=3 if txn else -1)
    expected = assert_same("encode_record_batch", records, **kwargs)
    assert expected[0] == "returned"
    data = expected[1]
    for options in ({}, {"check_crcs": False}, {"start_offset": base + 1}):
        assert_same("decode_records", data, **options)
        assert_same("decode_batches", data, **options)
        assert_same("decode_columnar", data, **options)
    cols = Columns.from_records(records, timestamp=ts)
    assert_same("encode_columnar", cols, base_offset=base, compression=compression_id,
                log_append_time=lat)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression_id", [0, 1, 2, 3, 4])
@PARITY_SETTINGS
@given(records=records_legacy, base=st.integers(0, 2**40), ts=st.integers(0, 2**41),
       lat=st.booleans())
def test_encode_message_set_parity(magic, compression_id, records, base, ts, lat):
    kwargs = dict(magic=magic, base_offset=base, compression=compression_id, timestamp=ts,
                  log_append_time=lat and magic == 1)
    expected = assert_same("encode_message_set", records, **kwargs)
    if expected[0] == "returned":
        data = expected[1]
        assert_same("decode_records", data)
        assert_same("decode_batches", data, start_offset=base + 1)
        assert_same("decode_columnar", data)
    if records:
        cols = Columns.from_records(records, timestamp=ts)
        assert_same("encode_columnar", cols, magic=magic, base_offset=base,
                    compression=compression_id)


BAD_RECORDS = [
    [],
    [42],
    [None],
    [(b"k",)],
    [("text", b"v")],
    [(b"k", "text")],
    [(b"k", b"v", "noon")],
    [(b"k", b"v", 1.5)],
    [(b"k", b"v", 2**63)],
    [(b"k", b"v", -(2**63) - 1)],
    [(b"k", b"v", 1, [(1, b"x")])],
    [(b"k", b"v", 1, [("h", "text")])],
    [(b"k", b"v", 1, [("h",)])],
    [(b"k", b"v", 1, [(b"\xff", b"x")])],
    [(b"k", b"v", 1, 7)],
    [(b"k", b"v", 1, [], "extra")],
    [(b"ok", b"ok", 0), (b"k", b"v", 2**62), (b"k", b"v", -(2**62))],
    [(bytearray(b"k"), memoryview(b"v"), None, [(b"h", bytearray(b"x"))])],
    [(np.frombuffer(b"key", dtype=np.uint8), b"v")],
]

BAD_OPTIONS = [
    {},
    {"compression": 9},
    {"compression": -1},
    {"compression": 4},
    {"base_offset": 2**63},
    {"base_offset": -(2**63) - 1},
    {"timestamp": 2**63},
    {"producer_epoch": 40000},
    {"producer_id": 2**63},
    {"base_sequence": 2**31},
    {"partition_leader_epoch": 2**31},
    {"compression_level": 3, "compression": 1},
    {"compression_level": 999, "compression": 4},
]


@pytest.mark.parametrize("records", BAD_RECORDS, ids=range(len(BAD_RECORDS)))
def test_encoder_errors_parity(records) -> None:
    found = Disagreements()
    for options in BAD_OPTIONS:
        found.check("encode_record_batch", records, **options)
        legacy = {k: v for k, v in options.items()
                  if k in ("compression", "compression_level", "base_offset", "timestamp")}
        for magic in (0, 1, 2, -1):
            found.check("encode_message_set", records, magic=magic, **legacy)
    found.assert_none()


# ---------------------------------------------------------------------------------------
# Fuzz: mutated sets through both decoders
# ---------------------------------------------------------------------------------------


def _corpus() -> list[bytes]:
    rng = random.Random(2024)

    def recs(n, headers=True):
        out = []
        for i in range(n):
            key = None if i % 3 == 0 else rng.randbytes(rng.randrange(0, 9))
            value = None if i % 5 == 4 else rng.randbytes(rng.randrange(0, 30))
            hdrs = [("h%d" % j, None if j == 1 else b"v" * j) for j in range(i % 3)]
            out.append((key, value, 1000 + i) + ((hdrs,) if headers else ()))
        return out

    corpus = []
    for codec_id in (0, 1, 2, 3, 4):
        corpus.append(py.encode_record_batch(
            recs(4), base_offset=10, compression=codec_id, timestamp=5,
            is_transactional=codec_id == 2, producer_id=3, producer_epoch=0, base_sequence=0,
        ))
    corpus.append(py.encode_record_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x02", 9)], base_offset=14,
        is_control=True, is_transactional=True, producer_id=3, producer_epoch=0,
    ))
    for magic in (0, 1):
        for codec_id in (0, 1, 2, 3):
            corpus.append(py.encode_message_set(
                recs(3, headers=False), magic=magic, compression=codec_id, base_offset=20,
                timestamp=7, log_append_time=magic == 1 and codec_id == 1,
            ))
    corpus.append(corpus[0] + corpus[6] + corpus[9] + corpus[3][:-5])
    return corpus


def _legacy_wrap(inner: bytes, magic: int, offset: int) -> bytes:
    """A gzip wrapper with a correct CRC around (possibly damaged) inner bytes."""
    body = struct.pack(">bb", magic, 1) + (struct.pack(">q", 0) if magic == 1 else b"")
    compressed = compression.compress(1, inner)
    body += struct.pack(">i", -1) + struct.pack(">i", len(compressed)) + compressed
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


HUGE = [-1, -2, -(2**31), 2**31 - 1, 0x7FFFFFF0, 0xFFFF, 13, 48, 49, 0]
HUGE_VARINTS = [b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f", b"\x01", b"\xff\xff\xff\xff\xff",
                b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", b"\xe8\x07"]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(7)
        if not buf:
            buf += rng.randbytes(rng.randrange(1, 30))
            continue
        pos = rng.randrange(len(buf))
        if kind == 0:  # bit flips
            buf[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:  # truncation
            del buf[pos:]
        elif kind == 2:  # inserted bytes
            buf[pos:pos] = rng.randbytes(rng.randrange(1, 9))
        elif kind == 3:  # an int32 length set to a huge or negative value
            at = rng.choice([8, 57, 18, 22, 26, pos])  # size, recordCount, key/value lengths
            if at + 4 <= len(buf):
                struct.pack_into(">i", buf, at, rng.choice(HUGE))
        elif kind == 4:  # a varint (record length, key length...) replaced
            at = rng.choice([61, 62, 65, 66, pos])
            if at < len(buf):
                buf[at : at + 1] = rng.choice(HUGE_VARINTS)
        elif kind == 5:  # attributes / magic bytes
            at = rng.choice([16, 17, 21, 22, pos])
            if at < len(buf):
                buf[at] = rng.randrange(256)
        else:  # deleted bytes
            del buf[pos : pos + rng.randrange(1, 6)]
    return bytes(buf)


def _fuzz_input(rng: random.Random, corpus: list[bytes]) -> bytes:
    base = rng.choice(corpus)
    mode = rng.randrange(4)
    if mode == 0:
        return _mutate(rng, base)
    if mode == 1:  # damage, then make CRCs right so the structural checks are reached
        return bytes(_fix_crcs(bytearray(_mutate(rng, base))))
    if mode == 2:  # damaged inner set inside a valid compressed wrapper
        inner = _mutate(rng, rng.choice(corpus[6:14]))
        return _legacy_wrap(inner, rng.randrange(2), rng.randrange(0, 40))
    # damaged records section inside a batch whose CRC is right
    plain = bytearray(corpus[0])
    tail = _mutate(rng, bytes(plain[61:]))
    plain[61:] = tail
    struct.pack_into(">i", plain, 8, len(plain) - 12)
    return bytes(_fix_crcs(plain))


class Disagreements:
    """Collects parity failures so one run reports every distinct one, not just the first."""

    def __init__(self) -> None:
        self.seen: dict[tuple, str] = {}

    def check(self, name: str, *args, **kwargs):
        expected = outcome(getattr(py, name), *args, **kwargs)
        got = outcome(getattr(cy, name), *args, **kwargs)
        if got != expected:
            # one example per kind of disagreement (numbers in messages do not count)
            key = tuple(
                (o[0], o[1].__name__, re.sub(r"-?\d+", "N", o[2])[:70])
                if o[0] == "raised" else ("returned",)
                for o in (expected, got)
            )
            self.seen.setdefault(
                key, f"{name}{_show(args, kwargs)[:300]}\n  python: {expected!r:.400}"
                     f"\n  cython: {got!r:.400}"
            )
        return expected

    def assert_none(self) -> None:
        assert not self.seen, f"{len(self.seen)} distinct disagreement(s):\n\n" + "\n\n".join(
            list(self.seen.values())[:15]
        )


def test_fuzz_decoder_parity() -> None:
    rng = random.Random(0xC0DEC)
    corpus = _corpus()
    for data in corpus:  # the corpus itself decodes cleanly
        assert assert_same("decode_records", data)[0] == "returned"
    rounds = int(os.environ.get("KAFKAWIRE_FUZZ_ROUNDS", "600"))
    kinds: dict[str, int] = {}
    found = Disagreements()
    for _ in range(rounds):
        data = _fuzz_input(rng, corpus)
        for check in (True, False):
            result = found.check("decode_records", data, check_crcs=check, include_control=True)
            found.check("decode_batches", data, check_crcs=check, start_offset=11)
            found.check("decode_columnar", data, check_crcs=check, max_decompressed_size=200)
            kind = "returned" if result[0] == "returned" else result[1].__name__
            kinds[kind] = kinds.get(kind, 0) + 1
    found.assert_none()
    # The mutations must reach both the success and the error paths, several kinds of error.
    assert kinds.get("returned", 0) > rounds // 10, kinds
    assert kinds.get("CorruptRecordError", 0) > rounds // 10, kinds
    assert len(kinds) >= 3, kinds


def test_fuzz_reader_parity() -> None:
    rng = random.Random(7)
    found = Disagreements()
    for _ in range(300):
        data = rng.randbytes(rng.randrange(0, 16))
        pos = rng.randrange(0, len(data) + 1)
        for name in READERS:
            found.check(name, data, pos)
    found.assert_none()


def test_atheris_harness_smoke() -> None:
    """`make fuzz` runs tests/fuzz/atheris_codec.py; keep its check() working without atheris."""
    rng = random.Random(99)
    for i in range(400):
        head = bytes([i % 4, rng.randrange(256), rng.randrange(256)])
        if i % 3 == 0:
            body = _mutate(rng, rng.choice(harness.SEEDS))
        else:
            body = rng.randbytes(rng.randrange(0, 80))
        harness.check(head + body)


# ---------------------------------------------------------------------------------------
# Edge inputs where the two implementations once differed
# ---------------------------------------------------------------------------------------


def _v2_with(base_offset: int, base_ts: int, log_append: bool = False) -> bytes:
    """Two records (deltas 0 and 1) under the given base offset and timestamp, CRC fixed."""
    batch = bytearray(py.encode_record_batch([(b"k", b"v", 0), (b"k", b"v", 1)], timestamp=0))
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">q", batch, 27, base_ts)
    struct.pack_into(">q", batch, 35, base_ts)
    if log_append:
        batch[22] |= 0x08
    return bytes(_fix_crcs(batch))


DECODERS = ("decode_records", "decode_batches", "decode_columnar")


@pytest.mark.parametrize("name", DECODERS)
def test_offsets_and_timestamps_outside_int64_are_corrupt_in_both(name) -> None:
    cases = {
        "offset": (_v2_with(2**63 - 1, 0), "offset 9223372036854775808"),
        "timestamp": (_v2_with(0, 2**63 - 1), "timestamp 9223372036854775808"),
    }
    for what, (data, text) in cases.items():
        outcome_ = assert_same(name, data)
        assert outcome_[:2] == ("raised", errors.CorruptRecordError), what
        assert f"record 1: {text} is outside the int64 range" in outcome_[2]
    # the edges themselves are fine, and LogAppendTime never adds the deltas
    assert assert_same(name, _v2_with(2**63 - 2, 2**63 - 2))[0] == "returned"
    assert assert_same(name, _v2_with(0, 2**63 - 1, log_append=True))[0] == "returned"
    assert assert_same(name, _v2_with(-(2**63), -(2**63)), start_offset=-(2**63))[0] == "returned"


def _zz(n: int) -> bytes:
    """A zigzag varint."""
    u, out = (n << 1) ^ (n >> 63), bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    return bytes(out + bytes([u]))


def _raw_record(od: int, td: int, key: bytes, value: bytes, *, key_len=None, value_len=None,
                tail=b"\x00"):
    """A record from its fields; key_len and value_len (the lengths written) and tail (the
    header count and anything after it) may lie."""
    body = (b"\x00" + _zz(td) + _zz(od) + _zz(len(key) if key_len is None else key_len) + key
            + _zz(len(value) if value_len is None else value_len) + value + tail)
    return _zz(len(body)) + body


def _batch_of(records: list[bytes], base_offset: int = 100) -> bytes:
    """A magic 2 batch around records built by hand, CRC fixed."""
    batch = bytearray(py.encode_record_batch([(b"k", b"v", 0)], base_offset=base_offset,
                                             timestamp=5000))[:61]
    batch += b"".join(records)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, len(records))
    return bytes(_fix_crcs(batch))


ODD_RECORDS = {
    "negative offset delta": _raw_record(-3, 0, b"k", b"v"),
    "negative timestamp delta": _raw_record(5, -4000, b"k", b"v"),
    "value longer than its record": _raw_record(5, 0, b"k", b"v", value_len=9),
    "value shorter than its record": _raw_record(5, 0, b"k", b"vv", value_len=1),
    "key longer than its record": _raw_record(5, 0, b"k", b"v", key_len=40),
    "a header count": _raw_record(5, 0, b"k", b"v", tail=b"\x02\x02h\x02v"),
    "bytes after the header count": _raw_record(5, 0, b"k", b"v", tail=b"\x00\x00"),
}


@pytest.mark.parametrize("case", sorted(ODD_RECORDS))
@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("start", [0, 104])
def test_odd_records_among_common_ones_decode_the_same(case, name, start) -> None:
    # The extension reads records of the common shape in a tight loop that leaves every
    # other record to the general loop: the outcome must not depend on which one read it.
    common = [_raw_record(i, 3 * i, b"key", b"value-%d" % i) for i in range(8)]
    data = _batch_of(common[:4] + [ODD_RECORDS[case]] + common[4:])
    assert_same(name, data, start_offset=start)


def _message(offset: int, magic: int, value: bytes, codec: int = 0, ts: int = 0) -> bytes:
    body = struct.pack(">bb", magic, codec) + (struct.pack(">q", ts) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def _wrapper(offset: int, magic: int, inner: bytes) -> bytes:
    return _message(offset, magic, compression.compress(1, inner), codec=1)


@pytest.mark.parametrize("name", DECODERS)
def test_kip31_shift_uses_the_last_inner_record(name) -> None:
    # A magic 1 wrapper (offset 100) whose last inner entry is a magic 0 wrapper at
    # relative offset 9 holding records at 3 and 4: the last inner *record* (4) maps to
    # 100 (not the nested wrapper's 9), so the records are 96, 97, 99 and 100.
    nested = _wrapper(9, 0, _message(3, 0, b"c") + _message(4, 0, b"d"))
    data = _wrapper(100, 1, _message(0, 1, b"a") + _message(1, 1, b"b") + nested)
    for start in (0, 99):
        result = assert_same(name, data, start_offset=start)
        assert result[0] == "returned"
    records = py.decode_records(data)
    assert [r.offset for r in records] == [96, 97, 99, 100]
    assert [r.offset for r in cy.decode_records(data)] == [96, 97, 99, 100]
    # ... also when that nested wrapper is empty: the record before it anchors the shift
    empty = _message(7, 0, compression.compress(1, b""), codec=1)
    data = _wrapper(50, 1, _message(0, 1, b"a") + _message(1, 1, b"b") + empty)
    assert [r.offset for r in cy.decode_records(data)] == [49, 50]
    assert assert_same(name, data)[0] == "returned"


@pytest.mark.parametrize("name", DECODERS)
def test_kip31_shift_outside_int64_is_corrupt_in_both(name) -> None:
    # Inner offsets that go backwards push the earlier records past int64.
    data = _wrapper(2**63 - 1, 1, _message(5, 1, b"a") + _message(0, 1, b"b"))
    result = assert_same(name, data)
    assert result[:2] == ("raised", errors.CorruptRecordError)
    assert "inner message offset 9223372036854775812 is outside the int64 range" in result[2]
    # in range, but the first and last kept offsets are further apart than int64 allows
    data = _wrapper(2**63 - 1, 0, _message(-(2**63), 0, b"a") + _message(2**63 - 1, 0, b"b"))
    result = assert_same(name, data, start_offset=-(2**63))
    assert result[:2] == ("raised", errors.CorruptRecordError)
    assert "span more than the int64 range" in result[2]
    assert assert_same(name, data)[0] == "returned"  # start_offset 0 drops the first one


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("start", [2**63, -(2**63) - 1, 1.5, "3", None])
def test_bad_start_offset_is_the_same_error(name, start) -> None:
    data = py.encode_record_batch([(b"k", b"v", 5)])
    result = assert_same(name, data, start_offset=start)
    assert result[:2] == ("raised", errors.CodecError)
    assert "start_offset" in result[2]


def test_non_contiguous_input_to_readers_is_the_same_type_error() -> None:
    strided = memoryview(bytes(40))[::2]
    for name in READERS:
        result = assert_same(name, strided, 0)
        assert result[:2] == ("raised", TypeError), name


@pytest.mark.parametrize("name", DECODERS + ("crc32", "crc32c"))
def test_non_contiguous_input_is_the_same_type_error(name) -> None:
    data = py.encode_record_batch([(b"k", b"v", 5)])
    strided = memoryview(bytes(b for b in data for _ in (0, 1)))[::2]
    assert bytes(strided) == data
    result = assert_same(name, strided)
    assert result[:2] == ("raised", TypeError)
    assert "not C-contiguous" in result[2]
    # numpy's strided arrays too
    result = assert_same(name, np.frombuffer(bytes(strided.obj), dtype=np.uint8)[::2])
    assert result[:2] == ("raised", TypeError)


# ---------------------------------------------------------------------------------------
# Columnar views: both implementations return the same view
# ---------------------------------------------------------------------------------------


def _view_state(cols) -> tuple:
    """What a view shows before its data is built (reading it keeps it a view)."""
    n = len(cols)
    state = (
        cols.is_view,
        cols.payload_size,
        repr(cols),
        tuple(norm(r) for r in cols.to_records()),
        tuple((cols.key(i), cols.value(i), cols.headers(i)) for i in range(n)),
        tuple(
            (str(a.dtype), a.tobytes())
            for a in (cols.offsets, cols.timestamps, cols.timestamp_types, cols.key_lengths,
                      cols.value_lengths, cols.header_index, cols.header_value_lengths)
        ),
    )
    assert cols.is_view
    return state


def _view_sets() -> list[bytes]:
    headers = [("h", b"1"), ("\u00e9t\u00e9", None)]
    plain = [(b"k%d" % i, bytes(i % 300), 1000 + i, headers if i % 9 == 0 else [])
             for i in range(600)]
    return [
        b"",
        py.encode_record_batch(plain),
        py.encode_record_batch(plain, compression=3, log_append_time=True, timestamp=99),
        py.encode_record_batch([(None, None), (b"", b"")] * 40, base_offset=2**40),
        py.encode_message_set([(b"a", b"b", 5), (None, b"c", 6)], magic=1, compression=1)
        + py.encode_record_batch(plain[:50], base_offset=2)
        + py.encode_record_batch([(b"\x00\x00\x00\x00", b"\x00" * 6)], base_offset=52, is_control=True)
        + py.encode_record_batch(plain[50:90], base_offset=53, compression=4)
        + py.encode_record_batch(plain[90:99], base_offset=93)[:-3],  # a partial entry at the end
    ]


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("start", [0, 3, 60])
def test_columnar_views_are_the_same(index, start):
    data = _view_sets()[index]
    for buf in (data, bytearray(data), memoryview(data)):
        a = py.decode_columnar(buf, start_offset=start)
        b = cy.decode_columnar(buf, start_offset=start)
        assert _view_state(b) == _view_state(a)
        assert norm(b) == norm(a)  # builds data and the offsets arrays
        assert not a.is_view and not b.is_view
        assert b.to_records() == a.to_records() == py.decode_records(buf, start_offset=start)


def test_a_columns_hands_out_the_records_of_the_implementation_that_built_it():
    # The decoder hands Columns its own Record type: the twin's Columns must never give
    # out the extension's records (nor the other way round), whichever kafkawire.codec loaded.
    data = _view_sets()[4]
    for impl in (py, cy):
        cols = impl.decode_columnar(data)
        assert cols.record_type is impl.Record
        assert type(cols.record(0)) is impl.Record
        assert {type(r) for r in cols.to_records()} == {impl.Record}
    # Built by hand: kafkawire.codec's Record, unless the builder names another.
    from kafkawire import codec

    records = py.decode_records(data)
    assert type(Columns.from_records(records).record(0)) is codec.Record
    for impl in (py, cy):
        made = Columns.from_records(records, record_type=impl.Record)
        assert type(made.record(0)) is impl.Record and made.to_records() == records
        arrow = Columns.from_arrow(made.to_arrow(), record_type=impl.Record)
        assert type(arrow.to_records()[0]) is impl.Record


def test_a_columns_built_before_the_codec_loads_asks_for_a_record_type():
    # _columnar imports no implementation (that was an import circle), so until
    # kafkawire.codec registers its Record a hand-built Columns has none to give out.
    code = (
        "from kafkawire import _pycodec as py, errors\n"
        "import sys\n"
        "assert 'kafkawire.codec' not in sys.modules\n"
        "cols = py.Columns.from_records([(b'k', b'v')])\n"
        "assert cols.key(0) == b'k'\n"
        "try:\n"
        "    cols.record(0)\n"
        "except errors.CodecError as exc:\n"
        "    assert 'record_type=' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
        "assert type(py.Columns.from_records([(b'k', b'v')], record_type=py.Record).record(0)) is py.Record\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_the_extension_view_points_into_the_input():
    data = _view_sets()[4]
    cols = cy.decode_columnar(data)
    start = np.frombuffer(data, np.uint8).ctypes.data
    first = cols._segments[0]
    assert np.frombuffer(first, np.uint8).ctypes.data == start and len(first) == len(data)
    # every uncompressed value starts inside the fetched bytes, where its bytes are
    for i in range(len(cols)):
        s, n = int(cols._value_starts[i]), int(cols.value_lengths[i])
        if s + max(n, 0) <= len(data) and n > 0:
            assert data[s : s + n] == cols.value(i)
    # the two decompressed sets are buffers of their own, after the input's bytes
    assert len(cols._segments) == 3 and cols._bases[0] == 0 and cols._bases[1] == len(data)
    assert cols.to_records() == py.decode_records(data)
