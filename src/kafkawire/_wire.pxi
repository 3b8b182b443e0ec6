# Big-endian integers and unsigned varints in and out of a byte buffer, for the compiled
# modules that write or read the wire format directly (included, so calls inline).
# cimports needed by the includer: libc.stdint's fixed-width ints.


cdef inline Py_ssize_t _uvarint_size(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char* _put_uvarint(unsigned char* o, uint64_t v) noexcept nogil:
    while v >= 0x80:
        o[0] = <unsigned char>((v & 0x7F) | 0x80)
        o += 1
        v >>= 7
    o[0] = <unsigned char>v
    return o + 1


cdef inline void _put16(unsigned char* o, uint16_t v) noexcept nogil:
    o[0] = v >> 8
    o[1] = v & 0xFF


cdef inline void _put32(unsigned char* o, uint32_t v) noexcept nogil:
    o[0] = v >> 24
    o[1] = (v >> 16) & 0xFF
    o[2] = (v >> 8) & 0xFF
    o[3] = v & 0xFF


cdef inline void _put64(unsigned char* o, uint64_t v) noexcept nogil:
    _put32(o, <uint32_t>(v >> 32))
    _put32(o + 4, <uint32_t>v)


cdef inline uint32_t _get32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int64_t _get64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t>_get32(p) << 32) | _get32(p + 4))
