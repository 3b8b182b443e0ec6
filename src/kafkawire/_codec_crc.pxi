# Part of kafkawire._codec, pulled in by ``include`` in _codec.pyx (one extension module:
# its declarations are in scope here).  CRC32 (MessageSet magic 0/1) and CRC32C
# (RecordBatch magic 2, KIP-98), in C (_crc.h).
# The twin, to read side by side: _pycodec_crc.py.

cdef extern from "_crc.h" nogil:
    int kw_crc_init_from_env()
    uint32_t kw_crc32(uint32_t crc, const unsigned char *p, size_t n)
    uint32_t kw_crc32c(uint32_t crc, const unsigned char *p, size_t n)

# KAFKAWIRE_CRC32C=table forces the portable CRC32C path and =no-clmul the sse4.2 path
# without its PCLMULQDQ merge (read once, at import; see _crc.h), so tests can cover
# every path on one machine.
cdef int _CRC_IMPL = kw_crc_init_from_env()
_CRC_NAMES = {0: "table", 1: "sse4.2", 2: "armv8", 3: "sse4.2-no-clmul"}


# ---------------------------------------------------------------------------------------
# checksums
# ---------------------------------------------------------------------------------------

cdef inline uint32_t _crc32c(cptr p, Py_ssize_t n) noexcept:
    cdef uint32_t c
    if n >= NOGIL_BYTES:
        with nogil:
            c = kw_crc32c(0, p, <size_t>n)
        return c
    return kw_crc32c(0, p, <size_t>n)


cdef inline uint32_t _crc32(cptr p, Py_ssize_t n) noexcept:
    cdef uint32_t c
    if n >= NOGIL_BYTES:
        with nogil:
            c = kw_crc32(0, p, <size_t>n)
        return c
    return kw_crc32(0, p, <size_t>n)


def crc32(data, value=0):
    """CRC32 (IEEE 802.3) of ``data``, continuing from ``value``; as zlib.crc32."""
    cdef Py_buffer view
    cdef uint32_t c = <uint32_t>(value & 0xFFFFFFFF)
    _getbuf(data, &view)
    try:
        if view.len >= NOGIL_BYTES:
            with nogil:
                c = kw_crc32(c, <cptr>view.buf, <size_t>view.len)
        else:
            c = kw_crc32(c, <cptr>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32c(data, value=0):
    """CRC32C (Castagnoli) of ``data``, continuing from ``value``; hardware when present."""
    cdef Py_buffer view
    cdef uint32_t c = <uint32_t>(value & 0xFFFFFFFF)
    _getbuf(data, &view)
    try:
        if view.len >= NOGIL_BYTES:
            with nogil:
                c = kw_crc32c(c, <cptr>view.buf, <size_t>view.len)
        else:
            c = kw_crc32c(c, <cptr>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32c_implementation():
    """Which CRC32C path is active: "sse4.2", "armv8" or "table"; "sse4.2-no-clmul" is the
    sse4.2 path without its PCLMULQDQ stream merge (CPUs without it, or forced), about half
    as fast below 24 KiB."""
    return _CRC_NAMES[_CRC_IMPL]
