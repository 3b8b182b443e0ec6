"""Request and response headers (v0-v2 and v0-v1)."""

from __future__ import annotations

import struct
from typing import Any

from kafkawire import errors
from kafkawire.protocol.schema import _put_string, _read_string, _skip_tags

__all__ = ["encode_request_header", "decode_request_header", "encode_response_header", "decode_response_header"]

_HDR = struct.Struct(">hhi")
_I32 = struct.Struct(">i")


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, header_version: int
) -> bytes:
    """Header v0: key, version, correlation id; v1 adds client_id; v2 adds tagged fields.

    client_id stays a non-compact nullable string even in v2, so that any broker can read
    it before it knows the request's version is flexible (KIP-482).
    """
    out = bytearray(_HDR.pack(api_key, api_version, correlation_id))
    if header_version >= 1:
        _put_string(out, client_id, False, True, "client_id")
    if header_version >= 2:
        out.append(0)
    return bytes(out)


def decode_request_header(buf: Any, header_version: int) -> tuple[int, int, int, str | None, int]:
    """Returns (api_key, api_version, correlation_id, client_id, body position)."""
    buf = memoryview(buf)
    end = len(buf)
    if end < 8:
        raise errors.truncated("request header", 0, 8, end)
    api_key, api_version, correlation_id = _HDR.unpack_from(buf, 0)
    pos = 8
    client_id = None
    if header_version >= 1:
        client_id, pos = _read_string(buf, pos, end, False)
    if header_version >= 2:
        _tags, pos = _skip_tags(buf, pos, end)
    return api_key, api_version, correlation_id, client_id, pos


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    out = bytearray(_I32.pack(correlation_id))
    if header_version >= 1:
        out.append(0)  # no tagged fields
    return bytes(out)


def decode_response_header(buf: Any, header_version: int) -> tuple[int, int]:
    """Returns (correlation_id, body position)."""
    buf = memoryview(buf)
    end = len(buf)
    if end < 4:
        raise errors.truncated("response header", 0, 4, end)
    (correlation_id,) = _I32.unpack_from(buf, 0)
    pos = 4
    if header_version >= 1:
        _tags, pos = _skip_tags(buf, pos, end)
    return correlation_id, pos
