# cython: language_level=3
"""Big-endian integers read from bytes, as the Kafka protocol and the record batch store them:
the one set of readers the compiled modules (``codecs_c.pyx``, ``records/fields_c.pyx``) cimport."""

from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t


cdef inline int16_t i16(const unsigned char *p) noexcept nogil:
    return <int16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline uint32_t u32(const unsigned char *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int32_t i32(const unsigned char *p) noexcept nogil:
    return <int32_t>u32(p)


cdef inline int64_t i64(const unsigned char *p) noexcept nogil:
    cdef uint64_t u = 0
    cdef int k
    for k in range(8):
        u = (u << 8) | p[k]
    return <int64_t>u
