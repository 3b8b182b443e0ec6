"""Hand-written wire encodings for golden vectors, shared by the protocol tests.

They are written with struct.pack from the protocol grammars and share no code with
kafkawire, so a golden frame built from them checks kafkawire's encoders independently.
Classic forms: i8..i64, s (int16-length string), b (int32-length bytes), arr (int32 count);
compact forms of flexible versions (KIP-482): uvarint, cs, cb, carr (length + 1, 0 is null).
"""

from __future__ import annotations

import struct

__all__ = ["i8", "i16", "i32", "i64", "s", "b", "arr", "uvarint", "cs", "cb", "carr", "NO_TAGS"]

#: An empty tagged-field section.
NO_TAGS = b"\x00"


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None) -> bytes:
    if v is None:
        return i16(-1)
    data = v.encode()
    return i16(len(data)) + data


def b(v: bytes | None) -> bytes:
    if v is None:
        return i32(-1)
    return i32(len(v)) + v


def arr(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cs(v: str | None) -> bytes:
    if v is None:
        return b"\x00"
    data = v.encode()
    return uvarint(len(data) + 1) + data


def cb(v: bytes | None) -> bytes:
    if v is None:
        return b"\x00"
    return uvarint(len(v) + 1) + v


def carr(items: list[bytes] | None) -> bytes:
    if items is None:
        return b"\x00"
    return uvarint(len(items) + 1) + b"".join(items)
