"""A magic 1 compressed wrapper whose offset is below its last inner offset: no broker has
assigned its offsets yet (a client builds it with offset 0), and its inner offsets are
kept, in both codec implementations and every decoder, instead of being shifted below
zero by KIP-31's rule.  At or above the last inner offset the shift applies as before."""

from __future__ import annotations

import struct
import zlib

import pytest

from kafkawire import _pycodec as py
from kafkawire import compression

try:
    from kafkawire import _codec as cy
except ImportError:  # pragma: no cover - test_parity.py says whether the build is required
    cy = None

IMPLEMENTATIONS = [py] + ([cy] if cy is not None else [])


def _message(offset: int, value: bytes, codec: int = 0, attributes: int = 0) -> bytes:
    body = struct.pack(">bbq", 1, codec | attributes, 1000) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def _wrapper(offset: int, inner_offsets, codec: int = 1, attributes: int = 0) -> bytes:
    inner = b"".join(_message(o, b"v%d" % o) for o in inner_offsets)
    return _message(offset, compression.compress(codec, inner), codec, attributes)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda m: m.__name__.rsplit(".", 1)[1])
@pytest.mark.parametrize("codec", [1, 2])
@pytest.mark.parametrize("wrapper, expected", [
    (0, [0, 1, 2, 5]),        # as a client builds it
    (4, [0, 1, 2, 5]),        # below the last inner offset: still kept
    (5, [0, 1, 2, 5]),        # equal: the shift is zero
    (105, [100, 101, 102, 105]),  # assigned by a broker: KIP-31's shift
    (-1, [0, 1, 2, 5]),
])
def test_wrapper_below_its_last_inner_offset_keeps_them(impl, codec, wrapper, expected):
    data = _wrapper(wrapper, [0, 1, 2, 5], codec)
    assert [r.offset for r in impl.decode_records(data)] == expected
    (batch,) = impl.decode_batches(data)
    assert [r.offset for r in batch.records] == expected
    assert batch.base_offset == expected[0]
    kept = impl.decode_records(data, start_offset=expected[2])
    assert [r.offset for r in kept] == expected[2:]
    # LogAppendTime still stamps every record with the wrapper's timestamp
    lat = impl.decode_records(_wrapper(wrapper, [0, 1, 2, 5], codec, attributes=8))
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in lat] == [
        (o, 1000, 1) for o in expected]
