# Big-endian integers and unsigned varints in and out of a byte buffer: the one copy for
# every compiled module that reads or writes the wire format directly (_codec through
# _codec_primitives.pxi, _accumulate, _frames), included so the calls inline.  No bounds
# checks: callers check first.  The includer cimports libc.stdint's fixed-width ints.


cdef inline uint16_t _be16(const unsigned char* p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline uint32_t _be32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline uint64_t _be64(const unsigned char* p) noexcept nogil:
    return (<uint64_t>_be32(p) << 32) | <uint64_t>_be32(p + 4)


cdef inline void _put16(unsigned char* p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v


cdef inline void _put32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void _put64(unsigned char* p, uint64_t v) noexcept nogil:
    _put32(p, <uint32_t>(v >> 32))
    _put32(p + 4, <uint32_t>v)


cdef inline int _size_uvar(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char* _put_uvar(unsigned char* p, uint64_t v) noexcept nogil:
    while v >= 0x80:
        p[0] = <unsigned char>(v | 0x80)
        p += 1
        v >>= 7
    p[0] = <unsigned char>v
    return p + 1
