"""kafkawire.compression: every codec, Kafka's framing quirks, size caps and bad input."""

from __future__ import annotations

import gzip
import os
import struct
import sys
import tracemalloc
import zlib

import pytest

from kafkawire import compression, errors
from kafkawire.compression import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    compress,
    decompress,
)

CODECS = [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
MB = 1024 * 1024

SAMPLES = [
    b"",
    b"x",
    b"kafkawire " * 1000,
    os.urandom(70_000),  # incompressible, and more than one lz4/xerial block
    bytes(range(256)) * 1024,
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_round_trip(codec, sample):
    data = SAMPLES[sample]
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed, len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_from_other_buffers(codec):
    data = b"abc" * 5000
    for buf in (bytearray(data), memoryview(data)):
        packed = compress(codec, buf)
        assert decompress(codec, memoryview(packed), MB) == data
        assert decompress(codec, bytearray(packed), MB) == data


@pytest.mark.parametrize("codec,level", [(CODEC_GZIP, 1), (CODEC_GZIP, 9), (CODEC_LZ4, 9), (CODEC_ZSTD, 1), (CODEC_ZSTD, 19)])
def test_levels(codec, level):
    data = b"level test " * 3000
    assert decompress(codec, compress(codec, data, level), MB) == data


def test_output_is_deterministic():
    data = b"same input, same bytes " * 500
    for codec in CODECS:
        assert compress(codec, data) == compress(codec, data)


def test_none_codec_passes_bytes_through():
    assert compress(CODEC_NONE, bytearray(b"abc")) == b"abc"
    assert decompress(CODEC_NONE, b"abc", 3) == b"abc"
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_NONE, b"abcd", 3)


def test_codec_names_and_availability():
    assert CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    for codec in [CODEC_NONE, *CODECS]:
        assert compression.available(codec)
    assert not compression.available(5)
    assert not compression.available(-1)


# ---- gzip ---------------------------------------------------------------------------------


def test_gzip_writes_a_gzip_member():
    data = b"gzip member " * 100
    packed = compress(CODEC_GZIP, data)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == data


def test_gzip_reads_zlib_headers_and_concatenated_members():
    data = b"hello " * 100
    assert decompress(CODEC_GZIP, zlib.compress(data), MB) == data
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CODEC_GZIP, two, MB) == b"first second"
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_GZIP, two, 10)


# ---- snappy -------------------------------------------------------------------------------


def test_snappy_writes_raw_by_default_and_xerial_on_request():
    from kafka.codec import snappy_decode

    data = b"snappy " * 20000  # several 32 KiB xerial blocks
    raw = compress(CODEC_SNAPPY, data)
    assert not raw.startswith(b"\x82SNAPPY\x00")
    framed = compress(CODEC_SNAPPY, data, xerial=True)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # kafka-python's independent xerial reader
    assert snappy_decode(framed) == data
    assert decompress(CODEC_SNAPPY, framed, len(data)) == data


def test_snappy_reads_xerial_from_another_writer():
    from kafka.codec import snappy_encode

    data = bytes(range(256)) * 1000
    framed = snappy_encode(data, xerial_compatible=True, xerial_blocksize=4096)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert decompress(CODEC_SNAPPY, framed, len(data)) == data


def test_snappy_xerial_by_hand():
    import cramjam

    blocks = [b"first block " * 10, b"second block " * 5]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for block in blocks:
        packed = bytes(cramjam.snappy.compress_raw(block))
        framed += struct.pack(">i", len(packed)) + packed
    assert decompress(CODEC_SNAPPY, framed, MB) == b"".join(blocks)
    with pytest.raises(errors.CorruptRecordError, match="snappy"):
        decompress(CODEC_SNAPPY, framed[:-3], MB)
    with pytest.raises(errors.CorruptRecordError, match="snappy"):
        decompress(CODEC_SNAPPY, framed[:18], MB)
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_SNAPPY, framed, len(blocks[0]) + 1)


def test_snappy_checks_declared_size_before_allocating():
    # The raw format starts with the uncompressed length as a varint: here 2**31.
    lying = bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00" * 10
    with pytest.raises(errors.DecompressedSizeError, match="snappy"):
        decompress(CODEC_SNAPPY, lying, 64 * MB)


# ---- lz4 ----------------------------------------------------------------------------------


def test_lz4_frame_matches_what_kafka_java_reads():
    import lz4.frame

    packed = compress(CODEC_LZ4, b"java reads independent blocks " * 5000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd = packed[4], packed[5]
    assert flg & 0x20  # block independence
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 7 == 4  # 64 KiB blocks
    info = lz4.frame.get_frame_info(packed)
    assert info["block_linked"] is False


def test_lz4_legacy_header_checksum_kip57():
    from kafka.codec import lz4_decode_old_kafka, lz4_encode_old_kafka

    data = b"magic zero lz4 " * 3000
    legacy = compress(CODEC_LZ4, data, legacy_lz4=True)
    # kafka-python's independent reader of Kafka 0.8-0.9 lz4 accepts it
    assert lz4_decode_old_kafka(legacy) == data
    # the standard header checksum differs, so a strict reader rejects it
    assert legacy[6] != compress(CODEC_LZ4, data)[6]
    with pytest.raises(errors.CorruptRecordError, match="lz4"):
        decompress(CODEC_LZ4, legacy, MB)
    assert decompress(CODEC_LZ4, legacy, MB, legacy_lz4=True) == data
    # data from another writer of the old form
    assert decompress(CODEC_LZ4, lz4_encode_old_kafka(data), MB, legacy_lz4=True) == data
    # legacy mode still reads the standard form
    assert decompress(CODEC_LZ4, compress(CODEC_LZ4, data), MB, legacy_lz4=True) == data


def test_lz4_legacy_rejects_a_header_checksum_that_is_neither_form():
    packed = bytearray(compress(CODEC_LZ4, b"abc" * 100, legacy_lz4=True))
    good = compress(CODEC_LZ4, b"abc" * 100)[6]
    packed[6] = next(v for v in range(256) if v not in (packed[6], good))
    with pytest.raises(errors.CorruptRecordError, match="lz4"):
        decompress(CODEC_LZ4, bytes(packed), MB, legacy_lz4=True)


def test_xxh32_known_values():
    assert compression._xxh32(b"") == 0x02CC5D05
    assert compression._xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_with_declared_content_size_over_the_cap():
    import lz4.frame

    packed = lz4.frame.compress(b"\0" * 100_000, store_size=True)
    with pytest.raises(errors.DecompressedSizeError, match="lz4"):
        decompress(CODEC_LZ4, packed, 1000)


# ---- zstd ---------------------------------------------------------------------------------


def test_zstd_frames_without_content_size_and_several_frames():
    import zstandard

    data = b"zstd from java streams " * 4000
    streamed = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(data)
    assert zstandard.frame_content_size(streamed) == -1
    assert decompress(CODEC_ZSTD, streamed, len(data)) == data
    assert decompress(CODEC_ZSTD, streamed + compress(CODEC_ZSTD, b"tail"), MB) == data + b"tail"
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_ZSTD, streamed, len(data) - 1)
    for cut in (len(streamed) - 1, len(streamed) // 2, 7):
        with pytest.raises(errors.CorruptRecordError, match="zstd"):
            decompress(CODEC_ZSTD, streamed[:cut], MB)


def test_zstd_checks_declared_size_before_allocating():
    # A frame header declaring 2**40 bytes (FHD: 8-byte content size, single segment).
    header = struct.pack("<I", 0xFD2FB528) + bytes([0xE0]) + struct.pack("<Q", 2**40)
    with pytest.raises(errors.DecompressedSizeError, match="zstd"):
        decompress(CODEC_ZSTD, header + b"\x01\x00\x00", 64 * MB)


# ---- caps, corruption, unknown codecs -----------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_cap_is_exact(codec):
    data = b"0123456789" * 1000
    packed = compress(codec, data)
    assert decompress(codec, packed, len(data)) == data
    with pytest.raises(errors.DecompressedSizeError) as info:
        decompress(codec, packed, len(data) - 1)
    assert f"max_decompressed_size={len(data) - 1}" in str(info.value)
    assert CODEC_NAMES[codec] in str(info.value)


@pytest.mark.parametrize("codec", CODECS)
def test_bombs_stop_at_the_cap_without_a_huge_allocation(codec):
    bomb = compress(codec, bytes(32 * MB))
    assert len(bomb) < 2 * MB
    cap = 1 * MB
    tracemalloc.start()
    try:
        with pytest.raises(errors.DecompressedSizeError):
            decompress(codec, bomb, cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MB, peak


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_is_corrupt(codec):
    garbage = b"this is not compressed data at all" * 3
    with pytest.raises(errors.CorruptRecordError) as info:
        decompress(codec, garbage, MB)
    assert f"{CODEC_NAMES[codec]} data could not be decompressed" in str(info.value)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_is_corrupt(codec):
    packed = compress(codec, os.urandom(5000) + b"z" * 5000)
    for cut in (len(packed) - 1, len(packed) // 2):
        with pytest.raises(errors.CorruptRecordError):
            decompress(codec, packed[:cut], MB)


@pytest.mark.parametrize("codec", CODECS)
def test_empty_input_is_corrupt(codec):
    with pytest.raises(errors.CorruptRecordError):
        decompress(codec, b"", MB)


def test_unknown_codec():
    for bad in (5, 7, -1):
        with pytest.raises(errors.UnsupportedCodecError, match=f"unknown compression codec {bad}"):
            compress(bad, b"x")
        with pytest.raises(errors.UnsupportedCodecError):
            decompress(bad, b"x", MB)


def test_missing_library_is_reported(monkeypatch):
    # Simulate an environment without zstandard: the lazy import fails.
    monkeypatch.setattr(compression, "_zstd", None)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(errors.CompressionLibraryMissingError, match="pip install zstandard"):
        compress(CODEC_ZSTD, b"x")
    assert not compression.available(CODEC_ZSTD)
    monkeypatch.setattr(compression, "_cramjam_snappy", None)
    monkeypatch.setitem(sys.modules, "cramjam", None)
    with pytest.raises(errors.CompressionLibraryMissingError, match="python-snappy"):
        decompress(CODEC_SNAPPY, b"\x01\x00x", MB)


def test_errors_are_codec_errors():
    assert issubclass(errors.DecompressedSizeError, errors.CodecError)
    with pytest.raises(errors.CodecError):
        decompress(CODEC_GZIP, b"nope", MB)


# ---- lz4: the output bound taken from the block headers -----------------------------------


def _lz4_frame(blocks, *, bd=4, flg=0x60, content_size=None, end=b"\0\0\0\0"):
    """An lz4 frame by hand: blocks are (raw bytes, stored) pairs; 64 KiB blocks by default."""
    head = bytes([flg | (0x08 if content_size is not None else 0), bd << 4])
    if content_size is not None:
        head += struct.pack("<Q", content_size)
    head += bytes([(compression._xxh32(head) >> 8) & 0xFF])
    out = b"\x04\x22\x4d\x18" + head
    for raw, stored in blocks:
        out += struct.pack("<I", len(raw) | (0x80000000 if stored else 0)) + raw
    return out + end


def _lz4_block(data):
    import lz4.block

    return lz4.block.compress(data, store_size=False)


def test_lz4_bound_counts_blocks_without_decompressing():
    data = os.urandom(20_000) + b"z" * 200_000  # four 64 KiB blocks
    packed = compress(CODEC_LZ4, data)
    view = memoryview(packed)
    assert compression._lz4_output_bound(view, MB) == 4 * 65536
    # above the cap (or not worked out) is -1: the capped stream takes over, cap still exact
    assert compression._lz4_output_bound(view, 4 * 65536 - 1) == -1
    assert decompress(CODEC_LZ4, packed, len(data)) == data
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_LZ4, packed, len(data) - 1)
    # a stored block counts its own size
    frame = _lz4_frame([(b"abc", True), (_lz4_block(b"q" * 1000), False)])
    assert compression._lz4_output_bound(memoryview(frame), MB) == 3 + 65536
    assert decompress(CODEC_LZ4, frame, 1003) == b"abc" + b"q" * 1000
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_LZ4, frame, 1002)


def test_lz4_block_inflating_past_the_declared_block_size_is_refused():
    # The header promises 64 KiB blocks, so the bound says 64 KiB and the one-shot call is
    # used; the block really holds 1 MiB.  The library must refuse it, not return 1 MiB.
    frame = _lz4_frame([(_lz4_block(bytes(MB)), False)])
    assert compression._lz4_output_bound(memoryview(frame), 100_000) == 65536
    with pytest.raises(errors.CorruptRecordError, match="lz4"):
        decompress(CODEC_LZ4, frame, 100_000)
    stored = _lz4_frame([(b"s" * 70_000, True)])  # a stored block above the maximum
    assert compression._lz4_output_bound(memoryview(stored), MB) == -1
    with pytest.raises(errors.CorruptRecordError, match="lz4"):
        decompress(CODEC_LZ4, stored, MB)


def test_lz4_headers_that_lie_keep_the_cap():
    data = b"z" * 300_000
    blocks = [(_lz4_block(data[i : i + 65536]), False) for i in range(0, len(data), 65536)]
    # content size declared far too small: the blocks decide the bound, the cap holds
    small = _lz4_frame(blocks, content_size=10)
    with pytest.raises(errors.CodecError):
        decompress(CODEC_LZ4, small, 1000)
    # a 4 MiB maximum block size: five blocks may hold 20 MiB, more than the cap allows,
    # so the capped stream runs and stops at the cap
    big_bd = _lz4_frame(blocks, bd=7)
    assert compression._lz4_output_bound(memoryview(big_bd), MB) == -1
    assert decompress(CODEC_LZ4, big_bd, len(data)) == data
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_LZ4, big_bd, len(data) - 1)
    # a block length running past the end of the data, and a missing end mark
    for bad in (_lz4_frame(blocks)[:-40], _lz4_frame(blocks, end=b""),
                _lz4_frame([(b"\xff" * 8, False)], end=struct.pack("<I", 60_000))):
        assert compression._lz4_output_bound(memoryview(bad), MB) == -1
        with pytest.raises(errors.CorruptRecordError, match="lz4"):
            decompress(CODEC_LZ4, bad, MB)


def test_lz4_many_blocks_fall_back_to_the_capped_stream():
    n = compression._LZ4_WALK_MAX_BLOCKS + 10
    frame = _lz4_frame([(b"ab", True)] * n)
    assert compression._lz4_output_bound(memoryview(frame), MB) == -1
    assert decompress(CODEC_LZ4, frame, 2 * n) == b"ab" * n
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_LZ4, frame, 2 * n - 1)


def test_lz4_legacy_cap_and_bomb():
    data = b"0123456789" * 10_000
    legacy = compress(CODEC_LZ4, data, legacy_lz4=True)
    assert decompress(CODEC_LZ4, memoryview(legacy), len(data), legacy_lz4=True) == data
    with pytest.raises(errors.DecompressedSizeError):
        decompress(CODEC_LZ4, legacy, len(data) - 1, legacy_lz4=True)
    for cut in (len(legacy) - 1, len(legacy) // 2):
        with pytest.raises(errors.CorruptRecordError, match="lz4"):
            decompress(CODEC_LZ4, legacy[:cut], MB, legacy_lz4=True)
    bomb = compress(CODEC_LZ4, bytes(32 * MB), legacy_lz4=True)
    tracemalloc.start()
    try:
        with pytest.raises(errors.DecompressedSizeError):
            decompress(CODEC_LZ4, bomb, MB, legacy_lz4=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MB, peak
