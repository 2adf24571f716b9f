# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled codecs of what a broker reads and writes most often, each in one typed C pass: the
request header, and the Produce request and response of every version (0-7).

Built at install time (setup.py, Cython) where a C compiler exists. They are drop-in versions of
the generated codecs (``broker.protocol.codegen``: same arguments, same results) for the layouts
of ``broker.protocol.messages.produce``, which stay the one declaration: ``MessageSchema`` uses
these when they import, and input or values they refuse (anything unusual) go to the reference
engine, which answers or says what is wrong. The header reader is the same for
``broker.protocol.header``, whose checked reader answers what it refuses.
``tests/protocol/test_codecs_c.py`` checks them equal to the references.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.long cimport PyLong_Check
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from broker.protocol.bigendian cimport i16 as _i16, i32 as _i32

#: the versions of ProduceRequest and ProduceResponse compiled here
PRODUCE_VERSIONS = range(0, 8)

cdef enum:
    MAX_STRING = 32767
    PARTITION_DATA_MIN = 8  # the least bytes of a partition's data: index, records length
    TOPIC_DATA_MIN = 6  # of a topic's: name length, partition count


class Refused(Exception):
    """Input or a value the compiled codec leaves to the reference."""


cdef object _string(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, bint nullable):
    """The int16-length-prefixed UTF-8 string at ``pos[0]`` (None for length -1 where
    ``nullable``), ``pos[0]`` moved past it; Refused for a length that does not fit, and
    UnicodeDecodeError for bytes that are not UTF-8."""
    cdef Py_ssize_t at = pos[0]
    cdef int16_t n
    if at + 2 > end:
        raise Refused
    n = _i16(b + at)
    at += 2
    if n < 0:
        if n != -1 or not nullable:
            raise Refused
        pos[0] = at
        return None
    if at + n > end:
        raise Refused
    pos[0] = at + n
    return PyUnicode_DecodeUTF8(<const char *>(b + at), n, NULL)


cdef inline object _integer(object value):
    """``value`` if it is an int (bool and IntEnum too, as struct takes them); else Refused.
    Its conversion to the field's C type then raises OverflowError outside the field's range."""
    if not PyLong_Check(value):
        raise Refused
    return value


cdef inline void _put16(unsigned char *p, int16_t v) noexcept nogil:
    p[0] = (<uint16_t>v >> 8) & 0xFF
    p[1] = <uint16_t>v & 0xFF


cdef inline void _put32(unsigned char *p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = (u >> 24) & 0xFF
    p[1] = (u >> 16) & 0xFF
    p[2] = (u >> 8) & 0xFF
    p[3] = u & 0xFF


cdef inline void _put64(unsigned char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    _put32(p, <int32_t>(u >> 32))
    _put32(p + 4, <int32_t>(u & 0xFFFFFFFFu))


cdef class ProduceRequestReader:
    """``(buf, pos, end) -> (request, position after it)`` for one version of ProduceRequest."""

    cdef readonly int version
    cdef bint transactional  # v3+: transactional_id, nullable

    def __init__(self, int version):
        if version not in PRODUCE_VERSIONS:
            raise ValueError(f"ProduceRequest v{version} is not compiled")
        self.version = version
        self.transactional = version >= 3

    def __call__(self, buf, Py_ssize_t pos, Py_ssize_t end):
        cdef const unsigned char[::1] view = buf
        cdef const unsigned char *b
        cdef Py_ssize_t n, i, j, topics, parts
        cdef int16_t acks
        cdef int32_t timeout, index
        if pos < 0 or end > view.shape[0] or pos > end:
            raise Refused
        if end == 0:
            raise Refused
        b = &view[0]
        txn = _string(b, &pos, end, True) if self.transactional else None
        if pos + 10 > end:
            raise Refused
        acks = _i16(b + pos)
        timeout = _i32(b + pos + 2)
        topics = _i32(b + pos + 6)
        pos += 10
        if topics < 0 or topics * TOPIC_DATA_MIN > end - pos:
            raise Refused
        topic_data = []
        for i in range(topics):
            name = _string(b, &pos, end, False)
            if pos + 4 > end:
                raise Refused
            parts = _i32(b + pos)
            pos += 4
            if parts < 0 or parts * PARTITION_DATA_MIN > end - pos:
                raise Refused
            partition_data = []
            for j in range(parts):
                if pos + 8 > end:
                    raise Refused
                index = _i32(b + pos)
                n = _i32(b + pos + 4)
                pos += 8
                if n < 0:
                    if n != -1:
                        raise Refused
                    records = None
                else:
                    if pos + n > end:
                        raise Refused
                    records = PyByteArray_FromStringAndSize(<const char *>(b + pos), n)
                    pos += n
                partition_data.append({"index": index, "records": records})
            topic_data.append({"name": name, "partition_data": partition_data})
        if self.transactional:
            request = {"transactional_id": txn, "acks": acks, "timeout_ms": timeout, "topic_data": topic_data}
        else:
            request = {"acks": acks, "timeout_ms": timeout, "topic_data": topic_data}
        return request, pos


cdef class ProduceResponseWriter:
    """``(writer, response) -> None`` for one version of ProduceResponse: appends to ``writer.buf``;
    ``frame(header, response)``: the whole frame (int32 size, the response header, the body)."""

    cdef readonly int version
    cdef bint throttle, append_time, start_offset  # v1+, v2+, v5+
    cdef Py_ssize_t part_size

    def __init__(self, int version):
        if version not in PRODUCE_VERSIONS:
            raise ValueError(f"ProduceResponse v{version} is not compiled")
        self.version = version
        self.throttle = version >= 1
        self.append_time = version >= 2
        self.start_offset = version >= 5
        self.part_size = 14 + (8 if self.append_time else 0) + (8 if self.start_offset else 0)

    def __call__(self, w, obj):
        self._write(w.buf, obj)

    def frame(self, bytes header, obj):
        cdef bytearray out = bytearray(4)
        out += header
        self._write(out, obj)
        _put32(<unsigned char *>PyByteArray_AS_STRING(out), <int32_t>(PyByteArray_GET_SIZE(out) - 4))
        return bytes(out)

    cdef _write(self, bytearray out, obj):
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(out)
        cdef unsigned char *p
        cdef int32_t index, throttle
        cdef int16_t error
        cdef int64_t base, append_time, start_offset
        cdef Py_ssize_t name_size
        cdef list parts
        responses = obj.get("responses", [])
        if type(responses) is not list:
            raise Refused
        PyByteArray_Resize(out, size + 4)
        _put32(<unsigned char *>PyByteArray_AS_STRING(out) + size, <int32_t>len(<list>responses))
        size += 4
        for topic in <list>responses:
            if type(topic) is not dict:
                raise Refused
            name = (<dict>topic).get("name", "")
            if type(name) is not str:
                raise Refused
            encoded = (<str>name).encode("utf-8")
            name_size = len(<bytes>encoded)
            if name_size > MAX_STRING:
                raise Refused
            found = (<dict>topic).get("partition_responses", [])
            if type(found) is not list:
                raise Refused
            parts = <list>found
            PyByteArray_Resize(out, size + 6 + name_size + self.part_size * len(parts))
            p = <unsigned char *>PyByteArray_AS_STRING(out) + size
            _put16(p, <int16_t>name_size)
            memcpy(p + 2, <const char *>encoded, name_size)
            p += 2 + name_size
            _put32(p, <int32_t>len(parts))
            p += 4
            for part in parts:
                if type(part) is not dict:
                    raise Refused
                index = _integer((<dict>part).get("index", 0))
                error = _integer((<dict>part).get("error_code", 0))
                base = _integer((<dict>part).get("base_offset", 0))
                _put32(p, index)
                _put16(p + 4, error)
                _put64(p + 6, base)
                p += 14
                if self.append_time:
                    append_time = _integer((<dict>part).get("log_append_time_ms", -1))
                    _put64(p, append_time)
                    p += 8
                if self.start_offset:
                    start_offset = _integer((<dict>part).get("log_start_offset", -1))
                    _put64(p, start_offset)
                    p += 8
            size = PyByteArray_GET_SIZE(out)
        if self.throttle:
            throttle = _integer(obj.get("throttle_time_ms", 0))
            PyByteArray_Resize(out, size + 4)
            _put32(<unsigned char *>PyByteArray_AS_STRING(out) + size, throttle)


def read_request_header(buf, frozenset flexible, header_type):
    """The request header at the start of ``buf`` as ``header_type`` (api_key, api_version,
    correlation_id, client_id, body_offset), or None for anything but a header v1, or a v2 one
    (its version in ``flexible``) whose tagged fields are empty, or a buffer it cannot view as
    unsigned bytes: the checked reader then reads it."""
    cdef const unsigned char[::1] view
    cdef const unsigned char *b
    cdef Py_ssize_t end
    cdef Py_ssize_t pos = 8
    cdef int16_t api_key, api_version
    cdef int32_t correlation_id
    try:
        view = buf
    except (TypeError, ValueError, BufferError):
        return None
    end = view.shape[0]
    if end < 10:
        return None
    b = &view[0]
    api_key = _i16(b)
    api_version = _i16(b + 2)
    correlation_id = _i32(b + 4)
    try:
        client_id = _string(b, &pos, end, True)
    except (Refused, UnicodeDecodeError):
        return None
    if (api_key, api_version) in flexible:
        if pos >= end or b[pos] != 0:
            return None
        pos += 1
    return header_type(api_key, api_version, correlation_id, client_id, pos)
