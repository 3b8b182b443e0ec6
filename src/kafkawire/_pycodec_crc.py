"""CRC32 (MessageSet magic 0/1) and CRC32C (RecordBatch magic 2, KIP-98).

Part of the pure-Python twin kafkawire._pycodec, which re-exports every name; the
compiled counterpart, to read side by side, is _codec_crc.pxi.  No I/O.
"""

from __future__ import annotations

import struct
import sys
import zlib

from kafkawire._pycodec_primitives import _M32, _contiguous

# ---------------------------------------------------------------------------------------
# checksums
# ---------------------------------------------------------------------------------------


def crc32(data, value: int = 0) -> int:
    """CRC32 (IEEE), as zlib.crc32: the checksum of MessageSet magic 0 and 1."""
    if type(data) is not bytes:
        data = _contiguous(data)
    return zlib.crc32(data, value)


_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected
_crc_tables: list | None = None


def _crc32c_tables():
    # Slice-by-8 with 16-bit tables: four lookups per 8 bytes, the fewest Python
    # operations per byte.  Built on first use (about 20 ms, a few MB).
    global _crc_tables
    if _crc_tables is None:
        t = [[0] * 256 for _ in range(8)]
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ _CRC32C_POLY if c & 1 else c >> 1
            t[0][i] = c
        for k in range(1, 8):
            prev = t[k - 1]
            for i in range(256):
                c = prev[i]
                t[k][i] = (c >> 8) ^ t[0][c & 0xFF]
        _crc_tables = [
            t[0],
            [lo ^ hi for hi in t[6] for lo in t[7]],
            [lo ^ hi for hi in t[4] for lo in t[5]],
            [lo ^ hi for hi in t[2] for lo in t[3]],
            [lo ^ hi for hi in t[0] for lo in t[1]],
        ]
    return _crc_tables


_LITTLE = sys.byteorder == "little"
_NUMPY_CRC_MIN = 4096  # below this the plain loop beats numpy's per-call overhead


def crc32c(data, value: int = 0) -> int:
    """CRC32C (Castagnoli): the checksum of RecordBatch magic 2 (KIP-98)."""
    t0, a, b, c, d = _crc_tables or _crc32c_tables()
    crc = (value & _M32) ^ _M32
    mv = _contiguous(data).cast("B")
    n = len(mv)
    if n >= _NUMPY_CRC_MIN:
        return _crc32c_numpy(mv, crc) ^ _M32
    n8 = n & ~7
    if n8:
        words = mv[:n8].cast("Q") if _LITTLE else struct.unpack(f"<{n8 // 8}Q", mv[:n8])
        for w in words:
            x = crc ^ w
            crc = a[x & 0xFFFF] ^ b[(x >> 16) & 0xFFFF] ^ c[(x >> 32) & 0xFFFF] ^ d[x >> 48]
    for byte in mv[n8:]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ _M32


# CRC without pre/post inversion is linear over GF(2), so long inputs are done in numpy:
# every 8-byte word's CRC at once, then pairs combined in a tree, the left one shifted past
# the right one by an operator "append L zero bytes" (tables per power-of-two L).
_np_crc_tables = None
_shift_lists: list = []  # per k: 4 x 256 lists for "append 2**k zero bytes"
_shift_arrays: list = []  # the same as numpy arrays


def _shift_level(k: int):
    import numpy as np

    t0 = (_crc_tables or _crc32c_tables())[0]
    while len(_shift_lists) <= k:
        if not _shift_lists:
            images = [t0[(1 << i) & 0xFF] ^ ((1 << i) >> 8) for i in range(32)]
        else:
            # "append 2**k zero bytes" is "append 2**(k-1)" twice: the previous operator's
            # images of the 32 unit bits, mapped through it once more.
            prev = _shift_lists[-1]
            images = [
                prev[0][x & 0xFF] ^ prev[1][(x >> 8) & 0xFF] ^ prev[2][(x >> 16) & 0xFF] ^ prev[3][x >> 24]
                for x in (1 << i for i in range(32))
            ]
            images = [
                prev[0][x & 0xFF] ^ prev[1][(x >> 8) & 0xFF] ^ prev[2][(x >> 16) & 0xFF] ^ prev[3][x >> 24]
                for x in images
            ]
        tables = []
        for p in range(4):
            table = [0] * 256
            for v in range(1, 256):
                low = v & -v
                table[v] = table[v ^ low] ^ images[8 * p + low.bit_length() - 1]
            tables.append(table)
        _shift_lists.append(tables)
        _shift_arrays.append([np.array(t, dtype=np.uint32) for t in tables])
    return _shift_lists[k], _shift_arrays[k]


def _crc32c_numpy(mv, crc: int) -> int:
    import numpy as np

    global _np_crc_tables
    t0 = (_crc_tables or _crc32c_tables())[0]
    if _np_crc_tables is None:
        _np_crc_tables = [np.array(t, dtype=np.uint32) for t in _crc_tables[1:]]
    a, b, c, d = _np_crc_tables
    n = len(mv)
    head = n & 7
    for byte in mv[:head]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    words = np.frombuffer(mv[head:], dtype="<u8")
    m = len(words)
    crcs = a[words & 0xFFFF] ^ b[(words >> 16) & 0xFFFF] ^ c[(words >> 32) & 0xFFFF] ^ d[words >> 48]
    size = 1 << (m - 1).bit_length()
    if size != m:  # leading zero blocks do not change a CRC that starts from 0
        crcs = np.concatenate((np.zeros(size - m, dtype=np.uint32), crcs))
    k = 3  # blocks of 2**3 bytes
    while len(crcs) > 1:
        t = _shift_level(k)[1]
        left = crcs[0::2]
        crcs = t[0][left & 0xFF] ^ t[1][(left >> 8) & 0xFF] ^ t[2][(left >> 16) & 0xFF] ^ t[3][left >> 24] ^ crcs[1::2]
        k += 1
    # The register left by the head bytes, moved past the 8*m bytes that follow it.
    shift = 8 * m
    k = 0
    while shift:
        if shift & 1:
            t = _shift_level(k)[0]
            crc = t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24]
        shift >>= 1
        k += 1
    return crc ^ int(crcs[0])


def crc32c_implementation() -> str:
    return "python"

