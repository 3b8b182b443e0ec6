"""decode_columnar: records into arrays (a Columns, kafkawire._columnar).

Part of the pure-Python twin kafkawire._pycodec, which re-exports every name; the
compiled counterpart, to read side by side, is _codec_columnar.pxi.  No I/O.
"""

from __future__ import annotations

from kafkawire._columnar import Columns, data_too_large
from kafkawire._pycodec_decode import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    DEFAULT_MAX_DEPTH,
    _entries,
    _options,
)
from kafkawire._pycodec_primitives import _INT32_MAX
from kafkawire._pycodec_records import Record


def decode_columnar(
    data,
    *,
    start_offset: int = 0,
    check_crcs: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Columns:
    """Every record in ``data`` (control batches skipped) as one Columns."""
    import numpy as np

    opts = _options(start_offset, check_crcs, max_depth, max_decompressed_size)
    rows = []
    for header, records in _entries(data, opts):
        if not header[7]:
            rows.extend(records)
    # A view, as the extension returns (same arrays, same behaviour): the extension's
    # spans point into the input and decompressed buffers; the twin's into one buffer of
    # the record bytes it decoded.
    parts = []
    pos = 0

    def span(blob):
        nonlocal pos
        start = pos
        if blob is None:
            return start, -1
        parts.append(blob)
        pos += len(blob)
        return start, len(blob)

    ks, kl, vs, vl = [], [], [], []
    hi = [0]
    hks, hkl, hvs, hvl = [], [], [], []
    for r in rows:
        s, ln = span(r[3])
        ks.append(s)
        kl.append(ln)
        s, ln = span(r[4])
        vs.append(s)
        vl.append(ln)
        for hk, hv in r[5]:
            s, ln = span(hk.encode("utf-8", "surrogatepass"))
            hks.append(s)
            hkl.append(ln)
            s, ln = span(hv)
            hvs.append(s)
            hvl.append(ln)
        hi.append(len(hks))
    if pos > _INT32_MAX:
        raise data_too_large(pos)

    def arr(values, dtype):
        a = np.array(values, dtype=dtype)
        return (a, 0, len(a))

    i32, i64 = np.int32, np.int64
    raw = {
        "offsets": arr([r[0] for r in rows], i64),
        "timestamps": arr([r[1] for r in rows], i64),
        "timestamp_types": arr([r[2] for r in rows], np.int8),
        "key_lengths": arr(kl, i32),
        "value_lengths": arr(vl, i32),
        "header_index": arr(hi, i32),
        "header_value_lengths": arr(hvl, i32),
        "_key_starts": arr(ks, i64),
        "_value_starts": arr(vs, i64),
        "_header_key_starts": arr(hks, i64),
        "_header_key_lengths": arr(hkl, i32),
        "_header_value_starts": arr(hvs, i64),
    }
    return Columns._from_view([memoryview(b"".join(parts))], [0], raw, record_type=Record)
