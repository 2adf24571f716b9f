# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled record walk for ``arrays.read_columns``: every record's fields in one C pass.

Built at install time (setup.py, Cython) where a C compiler exists. ``arrays`` stays the
reference: it uses this module only when it imports, and reads any input this module refuses
again with numpy, so errors come from one place (tests/protocol/test_fields_c.py pins the two
equal). Numpy-free: it fills the int64 arrays it is given.
"""

from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

#: the rows of the ``out`` array read_fields fills, one column per record
ROWS = ("ts_delta", "offset_delta", "key_at", "key_len", "value_at", "value_len", "header_at", "ends", "header_count")

cdef enum:
    TS_DELTA, OFFSET_DELTA, KEY_AT, KEY_LEN, VALUE_AT, VALUE_LEN, HEADER_AT, ENDS, HEADER_COUNT


cdef inline Py_ssize_t _zigzag(const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end, int limit,
                               int64_t *value) noexcept nogil:
    """The zigzag varint at ``pos`` (at most ``limit`` bytes, all before ``end``) into ``value``:
    the position after it, or -1."""
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef int k
    cdef unsigned char b
    for k in range(limit):
        if pos >= end:
            return -1
        b = buf[pos]
        pos += 1
        raw |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            value[0] = <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))
            return pos
        shift += 7
    return -1


cdef inline Py_ssize_t _sized(const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end, int64_t *start,
                              int64_t *length) noexcept nogil:
    """A key or value at ``pos``: its length varint (-1: null) and where its bytes start, into
    ``start`` and ``length``; the position after its bytes (not checked against ``end`` here: the
    next read is), or -1."""
    cdef int64_t n
    pos = _zigzag(buf, pos, end, 5, &n)
    if pos < 0 or n < -1:
        return -1
    start[0] = pos
    length[0] = n
    return pos + n if n > 0 else pos


cdef bint _walk(const unsigned char[::1] buf, const int64_t[::1] starts, const int64_t[::1] ends,
                const int64_t[::1] counts, int64_t[:, ::1] out) noexcept nogil:
    cdef Py_ssize_t size = buf.shape[0]
    cdef Py_ssize_t s, i, r = 0, pos, rec_end, batch_end, at
    cdef int64_t length, header_count
    for s in range(starts.shape[0]):
        pos = starts[s]
        batch_end = ends[s]
        if batch_end > size or pos < 0 or counts[s] <= 0:
            return False
        for i in range(counts[s]):
            if r >= out.shape[1]:
                return False
            pos = _zigzag(buf, pos, batch_end, 5, &length)
            if pos < 0 or length < 1 or length > batch_end - pos:
                return False
            rec_end = pos + length
            at = _zigzag(buf, pos + 1, rec_end, 10, &out[TS_DELTA, r])
            if at < 0:
                return False
            at = _zigzag(buf, at, rec_end, 5, &out[OFFSET_DELTA, r])
            if at < 0:
                return False
            at = _sized(buf, at, rec_end, &out[KEY_AT, r], &out[KEY_LEN, r])
            if at < 0:
                return False
            at = _sized(buf, at, rec_end, &out[VALUE_AT, r], &out[VALUE_LEN, r])
            if at < 0:
                return False
            out[HEADER_AT, r] = at
            at = _zigzag(buf, at, rec_end, 5, &header_count)
            if at < 0 or header_count < 0 or (header_count == 0 and at != rec_end):
                return False
            out[HEADER_COUNT, r] = header_count
            out[ENDS, r] = rec_end
            pos = rec_end
            r += 1
        if pos != batch_end:
            return False
    return r == out.shape[1]


def read_fields(const unsigned char[::1] buf, const int64_t[::1] starts, const int64_t[::1] ends,
                const int64_t[::1] counts, int64_t[:, ::1] out):
    """Walk the records of each batch span ``buf[starts[i]:ends[i]]`` (``counts[i]`` records) and
    fill ``out`` (a row per name in ROWS, a column per record). False when any record does not parse exactly as the
    reference reads it (the caller then reads the input with the reference, which says what is
    wrong)."""
    cdef bint ok
    with nogil:
        ok = _walk(buf, starts, ends, counts, out)
    return ok


cdef bint _gather(const unsigned char[::1] buf, const int64_t[::1] at, const int64_t[::1] lengths, int[::1] offsets,
                  unsigned char[::1] data) noexcept nogil:
    cdef Py_ssize_t i, n = at.shape[0]
    cdef int64_t pos = 0, length
    if offsets.shape[0] != n + 1 or lengths.shape[0] != n:
        return False
    for i in range(n):
        offsets[i] = <int>pos
        length = lengths[i]
        if length > 0:
            if at[i] < 0 or at[i] > buf.shape[0] - length or pos > data.shape[0] - length:
                return False
            memcpy(&data[pos], &buf[at[i]], length)
            pos += length
    offsets[n] = <int>pos
    return pos == data.shape[0]


def gather(const unsigned char[::1] buf, const int64_t[::1] at, const int64_t[::1] lengths, int[::1] offsets,
           unsigned char[::1] data):
    """Copy ``buf[at[i]:at[i] + lengths[i]]`` one after another into ``data`` (a negative length
    copies nothing) and write where each begins into ``offsets`` (n + 1 entries): Arrow's binary
    layout. False (``data`` partly written) when a value lies outside ``buf`` or the values do
    not fill ``data`` exactly."""
    cdef bint ok
    with nogil:
        ok = _gather(buf, at, lengths, offsets, data)
    return ok
