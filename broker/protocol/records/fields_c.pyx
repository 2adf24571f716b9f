# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled record walks: every record's fields in one C pass for ``arrays.read_columns``, and
for a produce append the checks of one batch's header (``layout.check_batch``) and of its
records' framing (``validator.walk_records``).

Built at install time (setup.py, Cython) where a C compiler exists. The Python code stays the
reference: it uses this module only when it imports, and reads any input this module refuses
again itself, so errors come from one place (tests/protocol/test_fields_c.py pins the two
equal). Numpy-free: it fills the int64 arrays it is given.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE

from broker.protocol.bigendian cimport i16 as _i16, i64 as _i64, u32 as _u32

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__x86_64__) && defined(__GNUC__)
    __attribute__((target("sse4.2")))
    static uint32_t logbus_crc32c(const unsigned char *p, size_t n) {
        uint64_t crc = 0xFFFFFFFFu;
        while (n >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            crc = __builtin_ia32_crc32di(crc, v);
            p += 8;
            n -= 8;
        }
        uint32_t c = (uint32_t)crc;
        while (n--) c = __builtin_ia32_crc32qi(c, *p++);
        return c ^ 0xFFFFFFFFu;
    }
    static int logbus_crc32c_builtin(void) { __builtin_cpu_init(); return __builtin_cpu_supports("sse4.2"); }
    #else
    static uint32_t logbus_crc32c(const unsigned char *p, size_t n) { (void)p; (void)n; return 0; }
    static int logbus_crc32c_builtin(void) { return 0; }
    #endif
    """
    uint32_t logbus_crc32c(const unsigned char *p, size_t n) nogil
    int logbus_crc32c_builtin() nogil

#: whether this CPU computes CRC-32C in an instruction (x86-64 SSE 4.2); without it check_header
#: refuses every batch and layout.check_batch runs
CRC32C_BUILTIN = bool(logbus_crc32c_builtin())

cdef enum:
    HEADER_SIZE = 61
    MIN_BATCH_LENGTH = 49
    ATTRIBUTES_POS = 21
    # check_header's bound: its one-instruction-at-a-time CRC is ahead of the crc32c package's
    # call (and its memoryview) up to about 10 KB, and 3 times behind it at 1 MB
    CHECKED_BATCH_MAX = 8192

#: the rows of the ``out`` array read_fields fills, one column per record
ROWS = ("ts_delta", "offset_delta", "key_at", "key_len", "value_at", "value_len", "header_at", "ends", "header_count")

cdef enum:
    TS_DELTA, OFFSET_DELTA, KEY_AT, KEY_LEN, VALUE_AT, VALUE_LEN, HEADER_AT, ENDS, HEADER_COUNT


cdef inline Py_ssize_t _zigzag(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, int limit,
                               int64_t *value) noexcept nogil:
    """The zigzag varint at ``pos`` of at most ``limit`` bytes (5: int32, 10: int64), all before
    ``end``, into ``value``: the position after it, or -1 (also for a value outside the type)."""
    cdef uint64_t raw = 0
    cdef int k
    cdef unsigned char b
    for k in range(limit):
        if pos >= end:
            return -1
        b = buf[pos]
        pos += 1
        if k == limit - 1 and b > (0x0F if limit == 5 else 0x01):  # bits beyond 32 or 64
            return -1
        raw |= (<uint64_t>(b & 0x7F)) << (7 * k)
        if b < 0x80:
            value[0] = <int64_t>(raw >> 1) ^ -(<int64_t>(raw & 1))
            return pos
    return -1


cdef inline Py_ssize_t _sized(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, int64_t *start,
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
    cdef const unsigned char *b = NULL
    if size > 0:
        b = &buf[0]
    for s in range(starts.shape[0]):
        pos = starts[s]
        batch_end = ends[s]
        if batch_end > size or pos < 0 or counts[s] <= 0:
            return False
        for i in range(counts[s]):
            if r >= out.shape[1]:
                return False
            pos = _zigzag(b, pos, batch_end, 5, &length)
            if pos < 0 or length < 1 or length > batch_end - pos:
                return False
            rec_end = pos + length
            at = _zigzag(b, pos + 1, rec_end, 10, &out[TS_DELTA, r])
            if at < 0:
                return False
            at = _zigzag(b, at, rec_end, 5, &out[OFFSET_DELTA, r])
            if at < 0:
                return False
            at = _sized(b, at, rec_end, &out[KEY_AT, r], &out[KEY_LEN, r])
            if at < 0:
                return False
            at = _sized(b, at, rec_end, &out[VALUE_AT, r], &out[VALUE_LEN, r])
            if at < 0:
                return False
            out[HEADER_AT, r] = at
            at = _zigzag(b, at, rec_end, 5, &header_count)
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


cdef int32_t _small_batch_length(const unsigned char *b, Py_ssize_t avail) noexcept nogil:
    """The length field of the v2 batch at ``b`` (``avail`` bytes there) once its length, magic,
    CRC and record count are right and it is at most CHECKED_BATCH_MAX bytes; else -1."""
    cdef int32_t length, last_offset_delta, count
    cdef Py_ssize_t size
    if avail < HEADER_SIZE:
        return -1
    length = <int32_t>_u32(b + 8)
    if length < MIN_BATCH_LENGTH:
        return -1
    size = <Py_ssize_t>length + 12  # in 64 bits: a length near 2^31 must not wrap past the checks
    if size > avail or size > CHECKED_BATCH_MAX or b[16] != 2:
        return -1
    if logbus_crc32c(b + ATTRIBUTES_POS, size - ATTRIBUTES_POS) != _u32(b + 17):
        return -1
    last_offset_delta = <int32_t>_u32(b + 23)
    count = <int32_t>_u32(b + 57)
    if count < 0 or <int64_t>count > <int64_t>last_offset_delta + 1:
        return -1
    return length


cdef object _header(const unsigned char *b, make):
    return make((_i64(b), <int32_t>_u32(b + 8), <int32_t>_u32(b + 12), <signed char>b[16], _u32(b + 17), _i16(b + 21),
                 <int32_t>_u32(b + 23), _i64(b + 27), _i64(b + 35), _i64(b + 43), _i16(b + 51), <int32_t>_u32(b + 53),
                 <int32_t>_u32(b + 57)))


cdef bint _span_deltas(const unsigned char *view, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count,
                       bint need_keys, int64_t *lo, int64_t *hi) noexcept nogil:
    """walk_deltas' walk of ``view`` (``size`` bytes): False where ``walk_records`` would refuse,
    or might."""
    cdef int64_t length, ts_delta, offset_delta, key_length
    cdef Py_ssize_t i, rec_end, at
    if count <= 0 or pos < 0 or end > size or pos >= end:
        return False
    for i in range(count):
        pos = _zigzag(view, pos, end, 5, &length)
        if pos < 0 or length < 1 or length > end - pos:
            return False
        rec_end = pos + length
        at = _zigzag(view, pos + 1, rec_end, 10, &ts_delta)
        if at < 0:
            return False
        at = _zigzag(view, at, rec_end, 5, &offset_delta)
        if at < 0 or offset_delta != i:
            return False
        if need_keys:
            at = _zigzag(view, at, rec_end, 5, &key_length)
            if at < 0 or key_length < 0:
                return False
        if i == 0 or ts_delta < lo[0]:
            lo[0] = ts_delta
        if i == 0 or ts_delta > hi[0]:
            hi[0] = ts_delta
        pos = rec_end
    return pos == end


def check_header(buf, Py_ssize_t pos, Py_ssize_t end, make):
    """``layout.check_batch`` in C for a small batch: the header of the v2 batch at ``pos`` as
    ``make(fields)`` once its length, magic, CRC and record count are right, else None (also for
    a batch above CHECKED_BATCH_MAX bytes, a buffer it cannot view as unsigned bytes, or where the
    CPU has no CRC-32C instruction): ``check_batch`` then checks it and says what is wrong."""
    cdef const unsigned char[::1] view
    if not CRC32C_BUILTIN:
        return None
    try:
        view = buf
    except (TypeError, ValueError, BufferError):
        return None
    if pos < 0 or end > view.shape[0] or _small_batch_length(&view[pos], end - pos) < 0:
        return None
    return _header(&view[pos], make)


def walk_deltas(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, bint need_keys):
    """``validator.walk_records`` in C: the (least, greatest) timestamp delta of the ``count``
    records that fill ``buf[pos:end]`` exactly, with offset deltas 0..count-1 (and keys, with
    ``need_keys``); None otherwise (also for a buffer it cannot view as unsigned bytes), and
    ``walk_records`` then says what is wrong."""
    cdef const unsigned char[::1] view
    cdef int64_t lo = 0, hi = 0
    cdef bint ok
    try:
        view = buf
    except (TypeError, ValueError, BufferError):
        return None
    if view.shape[0] == 0:
        return None
    with nogil:
        ok = _span_deltas(&view[0], view.shape[0], pos, end, count, need_keys, &lo, &hi)
    return (lo, hi) if ok else None


cdef enum:
    COMPRESSION_MASK = 0x07
    LOG_APPEND_TIME_MASK = 0x08
    CONTROL_MASK = 0x20

# timestamps and deltas beyond these are left to Python's unbounded ints
cdef int64_t TIMESTAMP_BOUND = (<int64_t>1) << 62
cdef int64_t DELTA_BOUND = (<int64_t>1) << 60


def check_produced(buf, make, int64_t max_message, bint need_keys, bint log_append_time, int64_t now,
                   int64_t before_max, int64_t after_max):
    """A producer's one small batch filling the bytearray ``buf``, checked as
    ``validator.validate_append`` checks it (``check_header``, max.message.bytes, then
    ``validate_batch``) where that would change nothing: (its header as ``make(fields)``, its max
    timestamp). None for anything else (another type of buffer, compressed, a control batch,
    LogAppendTime claimed, no sequence beside a producer id, a timestamp out of bounds, a
    maxTimestamp that is not the records' greatest, an error): the validator then checks it and
    says what is wrong."""
    cdef const unsigned char *b
    cdef Py_ssize_t end
    cdef int32_t length
    cdef int64_t base_ts, max_ts, lo = 0, hi = 0
    if type(buf) is not bytearray or not CRC32C_BUILTIN:
        return None
    b = <const unsigned char *>PyByteArray_AS_STRING(buf)
    end = PyByteArray_GET_SIZE(buf)
    length = _small_batch_length(b, end)
    if length < 0 or length + 12 != end or end > max_message:
        return None
    if _i16(b + 21) & (COMPRESSION_MASK | LOG_APPEND_TIME_MASK | CONTROL_MASK):
        return None
    if _i64(b + 43) >= 0 and <int32_t>_u32(b + 53) < 0:  # a producer id without a sequence
        return None
    base_ts = _i64(b + 27)
    if base_ts > TIMESTAMP_BOUND or base_ts < -TIMESTAMP_BOUND:
        return None
    if not _span_deltas(b, end, HEADER_SIZE, length + 12, <int32_t>_u32(b + 57), need_keys, &lo, &hi):
        return None
    if lo > DELTA_BOUND or lo < -DELTA_BOUND or hi > DELTA_BOUND or hi < -DELTA_BOUND:
        return None
    max_ts = base_ts + hi
    if not log_append_time:
        if base_ts >= 0 and (now - (base_ts + lo) > before_max or max_ts - now > after_max):
            return None
        if max_ts != _i64(b + 35):
            return None
    return _header(b, make), max_ts
