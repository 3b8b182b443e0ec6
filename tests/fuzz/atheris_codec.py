"""libFuzzer harness: the Cython codec and the pure-Python twin must agree on any input.

Run with `make fuzz` (installs atheris; FUZZ_SECONDS=300 by default), or directly:

    .venv/bin/python tests/fuzz/atheris_codec.py -max_total_time=60 [corpus_dir]

Every input is decoded by both implementations with options taken from its first bytes;
both must return the same records or raise the same exception type with the same message,
and the extension must never crash.  A disagreement raises AssertionError, which libFuzzer
reports with the input saved to crash-<sha1>.

`check(data)` needs no atheris (tests/codec/test_parity.py smoke-tests it under pytest);
the file is named so pytest does not collect it, and tests/conftest.py ignores tests/fuzz.
"""

from __future__ import annotations

import struct
import sys
import zlib

from kafkawire import _codec as cy
from kafkawire import _pycodec as py
from kafkawire import compression, errors


def _norm(value):
    if isinstance(value, (py.Record, cy.Record)):
        return (value.offset, value.timestamp, value.timestamp_type, value.key, value.value,
                tuple(value.headers))
    if isinstance(value, (py.Batch, cy.Batch)):
        return (value.base_offset, value.magic, value.crc, value.attributes, value.compression,
                value.timestamp_type, value.is_transactional, value.is_control,
                value.partition_leader_epoch, value.last_offset_delta, value.base_timestamp,
                value.max_timestamp, value.producer_id, value.producer_epoch,
                value.base_sequence, tuple(_norm(r) for r in value.records))
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if hasattr(value, "to_records"):  # Columns
        return ("columns", bytes(value.data), value.offsets.tobytes(),
                value.timestamps.tobytes(), value.key_lengths.tobytes(),
                value.value_offsets.tobytes(), value.header_index.tobytes(),
                value.header_key_offsets.tobytes(), value.header_value_lengths.tobytes())
    return value


def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", _norm(fn(*args, **kwargs)))
    except Exception as exc:  # noqa: BLE001 - type and message are compared
        extra = (exc.offset, exc.expected, exc.found) if isinstance(
            exc, errors.CorruptRecordError) else ()
        return ("error", type(exc).__name__, str(exc), extra)


def _fix_crcs(buf: bytearray) -> None:
    """Make the CRC of every complete top-level entry right, so damage reaches the parser."""
    pos = 0
    while pos + 17 <= len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + size
        if size < 14 or end > len(buf):
            return
        if buf[pos + 16] == 2 and size >= 49:
            struct.pack_into(">I", buf, pos + 17, py.crc32c(bytes(buf[pos + 21 : end])))
        elif buf[pos + 16] in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
        pos = end


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
        _fix_crcs(seed)
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
        _fix_crcs(buf)
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
