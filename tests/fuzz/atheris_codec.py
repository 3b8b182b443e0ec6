"""libFuzzer harness: the Cython codec and the pure-Python twin must agree on any input.

Run with `make fuzz` (installs atheris; FUZZ_SECONDS=300 by default), or directly:

    .venv/bin/python tests/fuzz/atheris_codec.py -max_total_time=60 [corpus_dir]

Every input is decoded by both implementations with options taken from its first bytes;
both must return the same records or raise the same exception type with the same message,
and the extension must never crash.  A disagreement raises AssertionError, which libFuzzer
reports with the input saved to crash-<sha1>.

`check(data)` needs no atheris (tests/codec/test_parity.py smoke-tests it under pytest,
and shares `norm` and `fix_crcs`);
the file is named so pytest does not collect it, and tests/conftest.py ignores tests/fuzz.
"""

from __future__ import annotations

import struct
import sys
import zlib

import numpy as np

from kafkawire import _codec as cy
from kafkawire import _pycodec as py
from kafkawire import compression, errors
from kafkawire._columnar import Columns


BATCH_FIELDS = (
    "base_offset", "magic", "crc", "attributes", "compression", "timestamp_type",
    "is_transactional", "is_control", "partition_leader_epoch", "last_offset_delta",
    "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
)
COLUMN_FIELDS = (
    "data", "offsets", "timestamps", "timestamp_types", "key_offsets", "key_lengths",
    "value_offsets", "value_lengths", "header_index", "header_key_offsets",
    "header_value_offsets", "header_value_lengths",
)


def norm(value):
    """A comparable form of either implementation's result (tests/codec/test_parity.py too)."""
    if isinstance(value, (py.Record, cy.Record)):
        return ("Record", value.offset, value.timestamp, value.timestamp_type, value.key,
                value.value, tuple(value.headers))
    if isinstance(value, (py.Batch, cy.Batch)):
        return ("Batch", *(getattr(value, f) for f in BATCH_FIELDS),
                tuple(norm(r) for r in value.records))
    if isinstance(value, Columns):
        out = ["Columns", len(value)]
        for name in COLUMN_FIELDS:
            arr = np.asarray(getattr(value, name))
            out.append((str(arr.dtype), arr.shape, arr.tobytes()))
        return tuple(out)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(norm(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, norm(v)) for k, v in value.items())))
    if isinstance(value, (bytearray, memoryview)):
        return ("bytes-like", type(value).__name__, bytes(value))
    return value


def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", norm(fn(*args, **kwargs)))
    except Exception as exc:  # noqa: BLE001 - type and message are compared
        extra = (exc.offset, exc.expected, exc.found) if isinstance(
            exc, errors.CorruptRecordError) else ()
        return ("error", type(exc).__name__, str(exc), extra)


def fix_crcs(buf: bytearray) -> bytearray:
    """Make the CRC of every complete top-level entry right, so damage reaches the parser."""
    pos = 0
    while pos + 17 <= len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + size
        if size < 14 or end > len(buf):
            break
        if buf[pos + 16] == 2 and size >= 49:
            struct.pack_into(">I", buf, pos + 17, py.crc32c(bytes(buf[pos + 21 : end])))
        elif buf[pos + 16] in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
        pos = end
    return buf


def _seeds() -> list[bytes]:
    records = [(None, b"v0", 10), (b"k1", None, 11, [("h", b"x"), ("n", None)]),
               (b"k2", b"value-2" * 3, 12, [])]
    legacy = [r[:3] for r in records]
    out = [py.encode_record_batch(records, base_offset=5, compression=c, timestamp=1)
           for c in (0, 1, 2, 3, 4)]
    out += [py.encode_message_set(legacy, magic=m, compression=c, base_offset=5)
            for m in (0, 1) for c in (0, 1, 2, 3)]
    out.append(py.encode_record_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01", 3)],
                                      is_control=True, is_transactional=True, producer_id=1,
                                      producer_epoch=0))
    return out


SEEDS = _seeds()


def check(data: bytes) -> None:
    """Decode `data` (shaped by its first bytes) with both implementations; they must agree."""
    if len(data) < 3:
        return
    mode, flags, pick = data[0] % 4, data[1], data[2]
    body = data[3:]
    if mode == 1:  # a valid set with the fuzz bytes spliced in, CRCs made right again
        seed = bytearray(SEEDS[pick % len(SEEDS)])
        at = (pick * 7) % (len(seed) + 1)
        seed[at : at + (flags % 8)] = body[:64]
        fix_crcs(seed)
        body = bytes(seed)
    elif mode == 2:  # fuzz bytes as the inner set of a valid gzip wrapper
        magic = flags & 1
        inner = compression.compress(1, body)
        msg = struct.pack(">bb", magic, 1) + (struct.pack(">q", 0) if magic else b"")
        msg += struct.pack(">ii", -1, len(inner)) + inner
        msg = struct.pack(">I", zlib.crc32(msg)) + msg
        body = struct.pack(">qi", pick, len(msg)) + msg
    elif mode == 3:
        buf = bytearray(body)
        fix_crcs(buf)
        body = bytes(buf)
    options = dict(
        check_crcs=bool(flags & 0x80),
        start_offset=(flags >> 4) & 0x07,
        max_depth=1 + (flags & 0x03),
        max_decompressed_size=1 << (8 + (pick & 0x0F)),
    )
    for name in ("decode_records", "decode_batches", "decode_columnar"):
        a = _outcome(getattr(py, name), body, **options)
        b = _outcome(getattr(cy, name), body, **options)
        if a != b:
            raise AssertionError(f"{name}({body!r}, {options}): python {a!r} != cython {b!r}")
    for name in ("read_uvarint", "read_varlong", "read_compact_string", "read_tagged_fields",
                 "read_string", "read_bytes"):
        a = _outcome(getattr(py, name), body, pick % (len(body) + 1))
        b = _outcome(getattr(cy, name), body, pick % (len(body) + 1))
        if a != b:
            raise AssertionError(f"{name}({body!r}): python {a!r} != cython {b!r}")


def main() -> None:
    import atheris  # installed by `make fuzz` only

    atheris.instrument_all()
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
