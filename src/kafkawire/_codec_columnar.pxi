# Part of kafkawire._codec, pulled in by ``include`` in _codec.pyx (one extension module:
# its declarations are in scope here).  decode_columnar: records into arrays that
# point into the input (a Columns, kafkawire._columnar).
# The twin, to read side by side: _pycodec_columnar.py.

_Columns = None
_data_too_large = None


cdef int64_t _payload(VOut* o) noexcept nogil:
    """Bytes of the kept keys, values, header keys and header values."""
    cdef int64_t total = 0
    cdef Py_ssize_t i
    for i in range(o.n):
        if o.kl[i] > 0:
            total += o.kl[i]
        if o.vl[i] > 0:
            total += o.vl[i]
    for i in range(o.nh):
        total += o.hkl[i]
        if o.hvl[i] > 0:
            total += o.hvl[i]
    return total


cdef Py_ssize_t _record_bound(cptr p, Py_ssize_t n) noexcept nogil:
    """Room to start MODE_VIEW's arrays with: at most this many records are kept from the
    complete top-level entries of p[:n] that are uncompressed batches (a record takes 7
    bytes at least), plus a guess for the others; the arrays grow if it is short."""
    cdef Py_ssize_t pos = 0, total = 0, bound
    cdef int32_t size, count
    while n - pos >= 12:
        size = <int32_t>_be32(p + pos + 8)
        if size < 14 or size > n - pos - 12:
            break
        if size >= 49 and p[pos + 16] == 2:
            count = <int32_t>_be32(p + pos + 57)
            bound = (size - 49) // 7 + 1 if (p[pos + 22] & 7) == 0 else 64
            if count > 0:
                total += count if count < bound else bound
        else:
            total += 1
        pos += 12 + size
    return total


cdef inline object _alloc(Py_ssize_t nbytes):
    return PyByteArray_FromStringAndSize(NULL, nbytes)


def decode_columnar(data, *, start_offset=0, check_crcs=True, max_depth=DEFAULT_MAX_DEPTH,
                    max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Every record in ``data`` (control batches skipped) as one Columns.

    One pass, no record bytes copied: the Columns is a view of ``data`` (copied first if
    it is writable) and of the decompressed bytes of compressed batches.
    """
    global _Columns, _data_too_large
    _check_start(start_offset)
    cdef _Decoder d = _decoder(MODE_VIEW, start_offset, check_crcs, max_depth,
                               max_decompressed_size, False)
    cdef Py_buffer view
    cdef Py_ssize_t n, nh, cap, hcap
    if _Columns is None:
        from kafkawire._columnar import Columns, data_too_large
        _Columns = Columns
        _data_too_large = data_too_large
    _getbuf(data, &view)
    if not view.readonly:
        # The Columns points into its input: a buffer someone may still write to is copied
        # once, so decoded records never change (and a bytearray stays resizable).
        try:
            data = PyBytes_FromStringAndSize(<const char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
        _getbuf(data, &view)
    try:
        seg = memoryview(data)
        if seg.ndim != 1 or seg.format != "B":
            seg = seg.cast("B")
        d.o.cap = 0
        d.block = d.relayout(_record_bound(<cptr>view.buf, view.len))
        d.hblock = _alloc(0)
        d.segs = [seg]
        d.bases = [0]
        d.vtotal = view.len
        d.seg_ptr = <cptr>view.buf
        d.seg_vbase = 0
        d.top(data, <cptr>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    if d.vtotal > 2147483647:
        # Kept fields are disjoint pieces of the decoded buffers, so only then can they
        # add up to more than int32 offsets in ``data`` can address.
        total = _payload(&d.o)
        if total > 2147483647:
            raise _data_too_large(total)
    n = d.o.n
    nh = d.o.nh
    if d.o.cap > 2 * n + 64:
        d.block = d.relayout(n)  # most of the room went unused (start_offset, control)
    cap = d.o.cap
    hcap = d.o.hcap
    rec = d.block
    hdr = d.hblock
    return _Columns._from_view(d.segs, d.bases, {
        "offsets": (rec, 0, n),
        "timestamps": (rec, 8 * cap, n),
        "_key_starts": (rec, 16 * cap, n),
        "key_lengths": (rec, 24 * cap, n),
        "value_lengths": (rec, 28 * cap, n),
        "_value_starts": (rec, 32 * cap, n),
        "header_index": (rec, 40 * cap, n + 1),
        "timestamp_types": (rec, 44 * cap + 4, n),
        "_header_key_starts": (hdr, 0, nh),
        "_header_value_starts": (hdr, 8 * hcap, nh),
        "_header_key_lengths": (hdr, 16 * hcap, nh),
        "header_value_lengths": (hdr, 20 * hcap, nh),
    }, _gather_spans, Record)


def _gather_spans(segments, bases, starts, lengths, out, Py_ssize_t pos, offsets):
    """Columns' ``gather`` (see kafkawire._columnar.gather_spans) for the extension's views:
    copy each span's bytes into ``out`` from ``pos`` on, offsets into ``offsets``."""
    cdef Py_ssize_t nseg = len(segments), n, i, j, lo, hi
    cdef Py_buffer sb, lb, ob, fb
    cdef Py_buffer* segbufs
    cdef int64_t* segbase
    cdef int64_t s
    cdef int32_t length
    cdef const int64_t* st
    cdef const int32_t* ln
    cdef int32_t* offs
    cdef unsigned char* o
    cdef Py_ssize_t got = 0
    if nseg < 1 or len(bases) != nseg:
        raise _errors.CodecError("gather: one base per segment, at least one segment")
    segbufs = <Py_buffer*>malloc(nseg * sizeof(Py_buffer))
    segbase = <int64_t*>malloc(nseg * sizeof(int64_t))
    if segbufs == NULL or segbase == NULL:
        free(segbufs)
        free(segbase)
        raise MemoryError()
    _getbuf(starts, &sb)
    try:
        _getbuf(lengths, &lb)
        try:
            _getbuf(out, &ob)
            try:
                _getbuf(offsets, &fb)
                try:
                    for j in range(nseg):
                        _getbuf(segments[j], &segbufs[j])
                        got += 1
                        segbase[j] = bases[j]
                    n = lb.len // 4
                    if sb.len != 8 * n or fb.len != 4 * (n + 1) or fb.readonly or ob.readonly:
                        raise _errors.CodecError("gather: starts, lengths and offsets disagree")
                    st = <const int64_t*>sb.buf
                    ln = <const int32_t*>lb.buf
                    offs = <int32_t*>fb.buf
                    o = <unsigned char*>ob.buf
                    j = 0
                    for i in range(n):
                        offs[i] = <int32_t>pos
                        length = ln[i]
                        if length <= 0:
                            continue
                        s = st[i]
                        if not (segbase[j] <= s and s + length <= segbase[j] + segbufs[j].len):
                            lo = 0
                            hi = nseg - 1
                            while lo < hi:  # the last segment starting at or before s
                                j = (lo + hi + 1) // 2
                                if segbase[j] <= s:
                                    lo = j
                                else:
                                    hi = j - 1
                            j = lo
                            if not (segbase[j] <= s and s + length <= segbase[j] + segbufs[j].len):
                                raise _errors.CodecError(
                                    f"gather: span {s}+{length} is outside the decoded buffers")
                        if pos + length > ob.len:
                            raise _errors.CodecError("gather: the output buffer is too small")
                        memcpy(o + pos, <cptr>segbufs[j].buf + (s - segbase[j]), length)
                        pos += length
                    offs[n] = <int32_t>pos
                finally:
                    for j in range(got):
                        PyBuffer_Release(&segbufs[j])
                    PyBuffer_Release(&fb)
            finally:
                PyBuffer_Release(&ob)
        finally:
            PyBuffer_Release(&lb)
    finally:
        PyBuffer_Release(&sb)
        free(segbufs)
        free(segbase)
    return pos

