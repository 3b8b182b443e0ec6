"""Compression codecs for Kafka record data: gzip, snappy, lz4 and zstd.

Both codec implementations (the Cython extension and the pure-Python twin) call
:func:`compress` and :func:`decompress` for every compressed set, so their output is
byte-identical and their errors are the same.

:func:`decompress` never returns more than ``max_size`` bytes: sizes declared in the
compressed data are checked before anything is allocated, and data whose size is not
declared is decompressed with a cap.  The codec libraries are imported lazily, so
kafkawire works without the ones a user never needs.

This module does no I/O.
"""

from __future__ import annotations

import struct
import zlib

from kafkawire import errors

__all__ = [
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "CODEC_NAMES",
    "compress",
    "decompress",
    "available",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    CODEC_NONE: "none",
    CODEC_GZIP: "gzip",
    CODEC_SNAPPY: "snappy",
    CODEC_LZ4: "lz4",
    CODEC_ZSTD: "zstd",
}

_PACKAGES = {CODEC_SNAPPY: "python-snappy", CODEC_LZ4: "lz4", CODEC_ZSTD: "zstandard"}

# Worst-case expansion ratio of deflate.  Input this small cannot exceed the cap, so the
# one-shot call (the fastest path) is safe to use without a streaming cap.
_GZIP_MAX_RATIO = 1040  # deflate: 258 bytes per ~2 bits, about 1032:1

# ---------------------------------------------------------------------------------------
# lazy library imports
# ---------------------------------------------------------------------------------------

_cramjam_snappy = None
_lz4frame = None
_zstd = None


def _snappy_lib():
    global _cramjam_snappy
    if _cramjam_snappy is None:
        try:
            # python-snappy 0.7 is a thin layer over cramjam; call cramjam directly.
            import cramjam
        except ImportError:
            raise errors.library_missing("snappy", "python-snappy") from None
        _cramjam_snappy = cramjam.snappy
    return _cramjam_snappy


def _lz4_lib():
    global _lz4frame
    if _lz4frame is None:
        try:
            import lz4.frame
        except ImportError:
            raise errors.library_missing("lz4", "lz4") from None
        _lz4frame = lz4.frame
    return _lz4frame


def _zstd_lib():
    global _zstd
    if _zstd is None:
        try:
            import zstandard
        except ImportError:
            raise errors.library_missing("zstd", "zstandard") from None
        _zstd = zstandard
    return _zstd


def available(codec: int) -> bool:
    """True when ``codec`` is known and the package implementing it is importable."""
    if codec in (CODEC_NONE, CODEC_GZIP):
        return True
    loader = {CODEC_SNAPPY: _snappy_lib, CODEC_LZ4: _lz4_lib, CODEC_ZSTD: _zstd_lib}.get(codec)
    if loader is None:
        return False
    try:
        loader()
    except errors.CompressionLibraryMissingError:
        return False
    return True


# ---------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------


def compress(
    codec: int,
    data,
    level: int | None = None,
    *,
    legacy_lz4: bool = False,
    xerial: bool = False,
) -> bytes:
    """Compress ``data`` (any buffer) with Kafka codec id ``codec``.

    ``level`` is the codec's own level (None: the codec's default; snappy has none).
    ``legacy_lz4`` writes the frame-header checksum of Kafka 0.8-0.9 (KIP-57), as magic 0
    sets need; ``xerial`` writes snappy in the xerial framing Java clients use.
    """
    if codec == CODEC_GZIP:
        # A gzip member (wbits 31): what Kafka's GZIPOutputStream writes and reads.
        return zlib.compress(data, -1 if level is None else level, 31)
    if codec == CODEC_SNAPPY:
        lib = _snappy_lib()
        if xerial:
            return _xerial_compress(lib, data)
        return bytes(lib.compress_raw(data))
    if codec == CODEC_LZ4:
        return _lz4_compress(data, level, legacy_lz4)
    if codec == CODEC_ZSTD:
        return _zstd_compress(data, 3 if level is None else level)
    if codec == CODEC_NONE:
        return bytes(data)
    raise errors.unsupported_codec(codec)


def decompress(codec: int, data, max_size: int, *, legacy_lz4: bool = False) -> bytes:
    """Decompress ``data`` compressed with codec id ``codec``; at most ``max_size`` bytes.

    Raises DecompressedSizeError past ``max_size``, CorruptRecordError when the data is
    not valid for the codec, CompressionLibraryMissingError when the codec's package is
    missing and UnsupportedCodecError for an unknown codec id.  Snappy in xerial framing
    is detected automatically; ``legacy_lz4`` also accepts the Kafka 0.8-0.9 lz4 frame
    header checksum (KIP-57).
    """
    if codec == CODEC_GZIP:
        return _gzip_decompress(data, max_size)
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == CODEC_LZ4:
        return _lz4_decompress(data, max_size, legacy_lz4)
    if codec == CODEC_ZSTD:
        return _zstd_decompress(data, max_size)
    if codec == CODEC_NONE:
        if len(data) > max_size:
            raise errors.too_big("none", max_size)
        return bytes(data)
    raise errors.unsupported_codec(codec)


# ---------------------------------------------------------------------------------------
# gzip
# ---------------------------------------------------------------------------------------


def _gzip_decompress(data, max_size: int) -> bytes:
    # wbits 47 = 32 + 15: accept a gzip or a zlib header.  Concatenated gzip members are
    # read like Java's GZIPInputStream does.
    view = memoryview(data)
    size = view.nbytes
    parts = []
    budget = max_size
    try:
        while True:
            d = zlib.decompressobj(47)
            if size * _GZIP_MAX_RATIO <= budget:
                out = d.decompress(view)
            else:
                out = d.decompress(view, budget + 1)
                if len(out) > budget:
                    raise errors.too_big("gzip", max_size)
            if not d.eof:
                raise errors.bad_compressed("gzip", "truncated stream")
            parts.append(out)
            rest = d.unused_data
            if not rest:
                break
            budget -= len(out)
            view = memoryview(rest)
            size = len(rest)
    except zlib.error as exc:
        raise errors.bad_compressed("gzip", str(exc)) from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ---------------------------------------------------------------------------------------
# snappy
# ---------------------------------------------------------------------------------------

# xerial snappy-java framing (Java clients, KAFKA-1718 era): 8-byte magic, int32 version,
# int32 minimum compatible version, then blocks of int32 length + raw snappy block.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")
_U32LE = struct.Struct("<I")


def _xerial_compress(lib, data) -> bytes:
    view = memoryview(data).cast("B")
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(lib.compress_raw(view[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data, max_size: int) -> bytes:
    lib = _snappy_lib()
    view = memoryview(data).cast("B")
    if view[:8] == _XERIAL_MAGIC:
        return _xerial_decompress(lib, view, max_size)
    return _snappy_block(lib, view, max_size, max_size)


def _snappy_block(lib, block, budget: int, max_size: int) -> bytes:
    try:
        # The raw format starts with the uncompressed length: check it before allocating.
        n = lib.decompress_raw_len(block)
    except Exception as exc:  # cramjam.DecompressionError (or a bad length preamble)
        raise errors.bad_compressed("snappy", str(exc)) from None
    if n > budget:
        raise errors.too_big("snappy", max_size)
    try:
        return bytes(lib.decompress_raw(block))
    except Exception as exc:
        raise errors.bad_compressed("snappy", str(exc)) from None


def _xerial_decompress(lib, view, max_size: int) -> bytes:
    size = len(view)
    if size < 16:
        raise errors.bad_compressed("snappy", "truncated xerial header")
    pos = 16
    parts = []
    budget = max_size
    while pos < size:
        if pos + 4 > size:
            raise errors.bad_compressed("snappy", "truncated xerial block length")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > size:
            raise errors.bad_compressed(
                "snappy", f"xerial block of {n} bytes does not fit in the {size - pos} remaining"
            )
        out = _snappy_block(lib, view[pos : pos + n], budget, max_size)
        budget -= len(out)
        parts.append(out)
        pos += n
    return b"".join(parts)


# ---------------------------------------------------------------------------------------
# lz4 (frame format)
# ---------------------------------------------------------------------------------------

_XXH_P1 = 2654435761
_XXH_P2 = 2246822519
_XXH_P3 = 3266489917
_XXH_P4 = 668265263
_XXH_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, only ever applied to the few bytes of an lz4 frame header."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [
            (seed + _XXH_P1 + _XXH_P2) & _M32,
            (seed + _XXH_P2) & _M32,
            seed & _M32,
            (seed - _XXH_P1) & _M32,
        ]
        while i + 16 <= n:
            for lane in range(4):
                (word,) = struct.unpack_from("<I", data, i)
                v[lane] = (_rotl((v[lane] + word * _XXH_P2) & _M32, 13) * _XXH_P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _XXH_P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (word,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + word * _XXH_P3) & _M32, 17) * _XXH_P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _XXH_P5) & _M32, 11) * _XXH_P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _XXH_P2) & _M32
    h ^= h >> 13
    h = (h * _XXH_P3) & _M32
    h ^= h >> 16
    return h


def _lz4_header_end(header) -> int:
    """Index of the header-checksum byte HC in an lz4 frame (magic, FLG, BD, [size], [dict])."""
    flg = header[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _lz4_compress(data, level: int | None, legacy: bool) -> bytes:
    lib = _lz4_lib()
    # Kafka's Java lz4 streams use independent 64 KiB blocks, no content size and no
    # content checksum; its reader cannot follow linked blocks.
    out = lib.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lib.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if legacy:
        # KIP-57: Kafka 0.8-0.9 computed the header checksum over the magic number too;
        # magic 0 message sets keep that broken form so old brokers and clients read them.
        hc = _lz4_header_end(out)
        out = out[:hc] + bytes(((_xxh32(out[:hc]) >> 8) & 0xFF,)) + out[hc + 1 :]
    return out


def _lz4_legacy_header(view):
    """The standard frame header for a KIP-57 broken header checksum, or None.

    None when ``view`` does not carry the broken form (nothing to fix; the library then
    judges the header as it is).  Only the few header bytes are copied.
    """
    if len(view) < 7 or view[:4] != _LZ4_MAGIC:
        return None
    hc = _lz4_header_end(view)
    if len(view) <= hc:
        return None
    head = bytes(view[:hc])
    good = (_xxh32(head[4:]) >> 8) & 0xFF
    if view[hc] == good or view[hc] != (_xxh32(head) >> 8) & 0xFF:
        return None
    return head + bytes((good,))


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}  # BD byte bits 4-6
_LZ4_WALK_MAX_BLOCKS = 4096  # longer walks are left to the capped stream


def _lz4_output_bound(view, max_size: int) -> int:
    """An upper bound on what the lz4 frame at the start of ``view`` decompresses to.

    Walks the block headers without decompressing: a stored block holds exactly its
    size, a compressed block at most the frame's maximum block size (the library refuses
    bigger ones).  Returns -1 when the bound is above ``max_size`` or cannot be worked out
    cheaply (odd or damaged header, truncated frame, very many blocks); the caller then
    decompresses with a streaming cap, which also reports the damage.
    """
    size = len(view)
    if size < 7 or view[:4] != _LZ4_MAGIC:
        return -1
    flg = view[4]
    block_max = _LZ4_BLOCK_MAX.get((view[5] >> 4) & 7)
    if flg >> 6 != 1 or block_max is None:
        return -1
    pos = _lz4_header_end(view) + 1
    block_checksum = 4 if flg & 0x10 else 0
    bound = 0
    for _ in range(_LZ4_WALK_MAX_BLOCKS):
        if pos + 4 > size:
            return -1
        (word,) = _U32LE.unpack_from(view, pos)
        pos += 4
        if word == 0:  # EndMark
            return bound
        n = word & 0x7FFFFFFF
        if n > block_max:
            return -1
        bound += n if word & 0x80000000 else block_max
        if bound > max_size:
            return -1
        pos += n + block_checksum
    return -1


def _lz4_decompress(data, max_size: int, legacy: bool) -> bytes:
    lib = _lz4_lib()
    view = memoryview(data).cast("B")
    head = _lz4_legacy_header(view) if legacy else None
    try:
        if _lz4_output_bound(view, max_size) >= 0:
            # The bound is within the cap: the one-shot call is safe (and fastest).
            if head is None:
                return lib.decompress(view)
            # KIP-57 header: hand the decompressor the fixed header, then the rest of
            # the frame in place (no copy of the payload).
            d = lib.LZ4FrameDecompressor()
            d.decompress(head)
            out = d.decompress(view[len(head) :])
        else:
            info = lib.get_frame_info(head if head is not None else view)
            if info["content_size"] > max_size:
                raise errors.too_big("lz4", max_size)
            d = lib.LZ4FrameDecompressor()
            if head is not None:
                d.decompress(head)
                view = view[len(head) :]
            out = d.decompress(view, max_size + 1)
            if len(out) > max_size:
                raise errors.too_big("lz4", max_size)
        if not d.eof:
            raise errors.bad_compressed("lz4", "truncated frame")
    except errors.CodecError:
        raise
    except (RuntimeError, ValueError) as exc:  # what the lz4 package raises for bad frames
        raise errors.bad_compressed("lz4", str(exc)) from None
    return out


# ---------------------------------------------------------------------------------------
# zstd
# ---------------------------------------------------------------------------------------

# zstandard's (de)compressor objects must not be used by two threads at once; a pool of
# them (list pop/append are atomic) reuses contexts without any lock.
_zstd_compressors: dict[int, list] = {}
_zstd_decompressors: list = []
_POOL_MAX = 8


def _zstd_compress(data, level: int) -> bytes:
    lib = _zstd_lib()
    pool = _zstd_compressors.get(level)
    if pool is None:
        pool = _zstd_compressors.setdefault(level, [])
    try:
        c = pool.pop()
    except IndexError:
        c = lib.ZstdCompressor(level=level)
    out = c.compress(data)
    if len(pool) < _POOL_MAX:
        pool.append(c)
    return out


def _zstd_decompress(data, max_size: int) -> bytes:
    lib = _zstd_lib()
    try:
        d = _zstd_decompressors.pop()
    except IndexError:
        d = lib.ZstdDecompressor()
    try:
        try:
            declared = lib.frame_content_size(data)
        except lib.ZstdError as exc:
            raise errors.bad_compressed("zstd", str(exc)) from None
        if declared > max_size:
            raise errors.too_big("zstd", max_size)
        if declared >= 0:
            # The frame declares its size (checked above) and zstd refuses to write past it.
            try:
                return d.decompress(data, allow_extra_data=False)
            except lib.ZstdError:
                pass  # several frames, or corrupt: the careful path says which
        return _zstd_stream(lib, d, data, max_size)
    finally:
        if len(_zstd_decompressors) < _POOL_MAX:
            _zstd_decompressors.append(d)


def _zstd_check_frames(lib, view) -> None:
    """Walk the frame and block headers; raise if the data is truncated or malformed.

    Java's zstd streams do not declare the content size, and zstandard's stream reader
    stops silently at a truncated frame, so completeness is checked here first.
    """
    size = len(view)
    pos = 0
    while pos < size:
        if pos + 8 > size:
            raise errors.bad_compressed("zstd", "truncated frame header")
        (magic,) = _U32LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            (n,) = _U32LE.unpack_from(view, pos + 4)
            pos += 8 + n
            if pos > size:
                raise errors.bad_compressed("zstd", "truncated skippable frame")
            continue
        descriptor = view[pos + 4]  # Frame_Header_Descriptor; bit 2: content checksum
        try:
            pos += lib.frame_header_size(view[pos:])
        except lib.ZstdError as exc:
            raise errors.bad_compressed("zstd", str(exc)) from None
        while True:
            if pos + 3 > size:
                raise errors.bad_compressed("zstd", "truncated block header")
            header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
            pos += 3
            kind = (header >> 1) & 3
            if kind == 3:
                raise errors.bad_compressed("zstd", "reserved block type")
            pos += 1 if kind == 1 else header >> 3  # an RLE block stores one byte
            if pos > size:
                raise errors.bad_compressed("zstd", "truncated block")
            if header & 1:  # last block
                break
        if descriptor & 0x04:
            pos += 4
            if pos > size:
                raise errors.bad_compressed("zstd", "truncated frame checksum")


def _zstd_stream(lib, d, data, max_size: int) -> bytes:
    view = memoryview(data).cast("B")
    _zstd_check_frames(lib, view)
    parts = []
    total = 0
    try:
        with d.stream_reader(view, read_across_frames=True) as reader:
            while True:
                chunk = reader.read(min(max_size + 1 - total, 1 << 20) or 1)
                if not chunk:
                    break
                total += len(chunk)
                if total > max_size:
                    raise errors.too_big("zstd", max_size)
                parts.append(chunk)
    except lib.ZstdError as exc:
        raise errors.bad_compressed("zstd", str(exc)) from None
    return b"".join(parts)
