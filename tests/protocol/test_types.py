"""Primitive codecs: roundtrips, and malformed input rejected with ProtocolDecodeError."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from broker.protocol.types import (
    LARGE_CHUNK,
    Reader,
    Writer,
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    varint_size,
)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
}


def roundtrip(method: str, value):
    w = Writer()
    getattr(w, method)(value)
    data = b"".join(w.chunks())
    r = Reader(data)
    out = getattr(r, method)()
    assert r.remaining == 0
    return out, data


@pytest.mark.parametrize("name", INT_RANGES)
@given(data=st.data())
def test_int_roundtrip(name, data):
    lo, hi = INT_RANGES[name]
    value = data.draw(st.integers(lo, hi))
    out, raw = roundtrip(name, value)
    assert out == value
    assert len(raw) == {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint32": 4}[name]


@pytest.mark.parametrize("name", INT_RANGES)
def test_int_out_of_range_fails_to_encode(name):
    lo, hi = INT_RANGES[name]
    with pytest.raises(struct.error):
        getattr(Writer(), name)(hi + 1)


def test_big_endian_layout():
    w = Writer()
    w.int16(1)
    w.int32(-2)
    w.int64(3)
    assert b"".join(w.chunks()) == bytes.fromhex("0001fffffffe0000000000000003")


@given(st.booleans())
def test_boolean(value):
    assert roundtrip("boolean", value)[0] is value


def test_boolean_nonzero_is_true():
    assert Reader(b"\x07").boolean() is True


@given(st.floats(allow_nan=False))
def test_float64(value):
    assert roundtrip("float64", value)[0] == value


@given(st.uuids())
def test_uuid(value):
    out, raw = roundtrip("uuid", value)
    assert out == value and isinstance(out, uuid.UUID) and len(raw) == 16


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint(value):
    raw = encode_varint(value)
    assert len(raw) == varint_size(value)
    assert decode_varint(raw, 0) == (value, len(raw))
    assert roundtrip("varint", value)[0] == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong(value):
    raw = encode_varint(value)
    assert decode_varlong(raw, 0) == (value, len(raw))
    assert roundtrip("varlong", value)[0] == value


@pytest.mark.parametrize("value, raw", [(0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (64, "8001"), (300, "d804")])
def test_zigzag_known_values(value, raw):
    assert encode_varint(value).hex() == raw


@given(st.integers(0, 2**64 - 1))
def test_uvarint(value):
    raw = encode_uvarint(value)
    assert decode_uvarint(raw, 0) == (value, len(raw))


def test_varint_errors():
    with pytest.raises(ProtocolDecodeError):
        decode_varint(b"\x80\x80", 0)  # runs off the end
    with pytest.raises(ProtocolDecodeError):
        decode_varint(b"\xff" * 6 + b"\x01", 0)  # too long for an int32
    with pytest.raises(ProtocolDecodeError):
        decode_varlong(b"\xff" * 11 + b"\x01", 0)
    with pytest.raises(ProtocolDecodeError):
        decode_varint(encode_uvarint(2**33), 0)  # 5 bytes but past int32


@given(st.text(max_size=200))
def test_string(value):
    out, raw = roundtrip("string", value)
    assert out == value
    assert raw[:2] == struct.pack(">h", len(value.encode()))


@given(st.one_of(st.none(), st.text(max_size=50)))
def test_nullable_string(value):
    assert roundtrip("nullable_string", value)[0] == value


def test_null_string_encoding():
    w = Writer()
    w.nullable_string(None)
    assert w.chunks() == [b"\xff\xff"]


def test_string_limits():
    with pytest.raises(ProtocolEncodeError):
        Writer().string(None)
    with pytest.raises(ProtocolEncodeError):
        Writer().string("x" * 40000)


@given(st.binary(max_size=300))
def test_bytes(value):
    out, raw = roundtrip("bytes", value)
    assert out == value and isinstance(out, bytes)


@given(st.one_of(st.none(), st.binary(max_size=50)))
def test_nullable_bytes(value):
    assert roundtrip("nullable_bytes", value)[0] == value


@given(st.one_of(st.none(), st.binary(max_size=50)))
def test_records_roundtrip(value):
    out, _ = roundtrip("records", value)
    assert out == value
    if value is not None:
        assert isinstance(out, bytearray)  # mutable: storage stamps offsets in place


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20))
def test_array(items):
    w = Writer()
    w.array(items, Writer.int32)
    r = Reader(b"".join(w.chunks()))
    assert r.array(Reader.int32, 4) == items
    assert r.remaining == 0


def test_nullable_array():
    w = Writer()
    w.nullable_array(None, Writer.int32)
    w.nullable_array([], Writer.int32)
    w.nullable_array(iter([1, 2]), Writer.int32)  # any iterable
    r = Reader(b"".join(w.chunks()))
    assert r.nullable_array(Reader.int32) is None
    assert r.nullable_array(Reader.int32) == []
    assert r.nullable_array(Reader.int32) == [1, 2]
    with pytest.raises(ProtocolEncodeError):
        Writer().array(None, Writer.int32)


# --- malformed input ---------------------------------------------------------------------------

@pytest.mark.parametrize("method, data", [
    ("int8", b""),
    ("int16", b"\x00"),
    ("int32", b"\x00\x00\x00"),
    ("int64", b"\x00" * 7),
    ("uint32", b"\x00"),
    ("uuid", b"\x00" * 15),
    ("string", b"\x00"),
    ("string", b"\x00\x05abc"),
    ("nullable_string", b"\x00\x05abc"),
    ("bytes", b"\x00\x00\x00\x05abc"),
    ("nullable_bytes", b"\x00\x00\x00"),
    ("records", b"\x00\x00\x01\x00abc"),
])
def test_short_data(method, data):
    with pytest.raises(ProtocolDecodeError):
        getattr(Reader(data), method)()


@pytest.mark.parametrize("method, data", [
    ("string", b"\xff\xff"),  # -1 only allowed when nullable
    ("string", b"\xff\xfe"),
    ("nullable_string", b"\xff\xfe"),
    ("bytes", b"\xff\xff\xff\xff"),
    ("nullable_bytes", b"\xff\xff\xff\xfe"),
    ("records", b"\x80\x00\x00\x00"),
])
def test_negative_lengths(method, data):
    with pytest.raises(ProtocolDecodeError, match="negative"):
        getattr(Reader(data), method)()


def test_invalid_utf8():
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        Reader(b"\x00\x02\xff\xfe").string()


def test_array_errors():
    with pytest.raises(ProtocolDecodeError, match="negative"):
        Reader(b"\xff\xff\xff\xff").array(Reader.int32)
    with pytest.raises(ProtocolDecodeError, match="negative"):
        Reader(b"\xff\xff\xff\xfe").nullable_array(Reader.int32)
    # An absurd count is rejected before any item is read or allocated.
    with pytest.raises(ProtocolDecodeError, match="cannot fit"):
        Reader(b"\x7f\xff\xff\xff" + b"\x00" * 8).array(Reader.int32, 4)
    with pytest.raises(ProtocolDecodeError, match="cannot fit"):
        Reader(b"\x00\x00\x00\x03" + b"\x00" * 8).array(Reader.int32, 4)


def test_reader_window_and_views():
    data = bytearray(b"XX\x00\x00\x00\x07YY")
    r = Reader(memoryview(data), 2, 6)
    assert r.int32() == 7
    with pytest.raises(ProtocolDecodeError):
        r.int8()  # the window ends at 6 even though the buffer goes on


# --- out-of-band chunks ------------------------------------------------------------------------

class FakeSlice:
    def __init__(self, size):
        self.size = size


def test_records_out_of_band():
    w = Writer()
    w.int16(1)
    fs = FakeSlice(1234)
    w.records(fs)
    w.int32(9)
    chunks = w.chunks()
    assert chunks == [b"\x00\x01" + struct.pack(">i", 1234), fs, struct.pack(">i", 9)]
    assert chunks[1] is fs


def test_records_out_of_band_at_end_and_consecutive():
    w = Writer()
    a, b = FakeSlice(1), FakeSlice(2)
    w.records(a)
    w.records(b)
    assert w.chunks() == [struct.pack(">i", 1), a, struct.pack(">i", 2), b]


def test_records_bad_objects():
    with pytest.raises(ProtocolEncodeError):
        Writer().records(object())
    with pytest.raises(ProtocolEncodeError):
        Writer().records(FakeSlice("12"))


def test_large_bytes_records_are_not_copied():
    big = b"x" * LARGE_CHUNK
    w = Writer()
    w.int8(1)
    w.records(big)
    chunks = w.chunks()
    assert chunks[1] is big
    assert b"".join(chunks) == b"\x01" + struct.pack(">i", len(big)) + big


def test_records_memoryview():
    w = Writer()
    w.records(memoryview(b"abc"))
    assert w.chunks() == [b"\x00\x00\x00\x03abc"]
