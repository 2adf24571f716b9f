"""The schema engine: version ranges, defaults, nullability, strict decoding, out-of-band records."""

from __future__ import annotations

import struct

import pytest

from broker.protocol.errors import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError
from broker.protocol.schema import F, MessageSchema, Versions

TOY = MessageSchema("ToyRequest", 99, "0-3", [
    F("id", "int32"),
    F("flag", "bool", "1+"),
    F("epoch", "int16", "1-2", default=-1),
    F("name", "string", nullable="2+"),
    F("items", "[]", "0+", [
        F("index", "int32"),
        F("offset", "int64", default=-1),
        F("data", "records", nullable="0+"),
    ], nullable="3+"),
    F("ids", "[]int32"),
    F("tags", "[]string", "2+"),
    F("blob", "bytes", "3+", nullable="3+"),
])


def test_versions_parse():
    assert Versions.parse("3+") == (3, None)
    assert Versions.parse("0-4") == (0, 4)
    assert Versions.parse("5") == (5, 5)
    assert 3 in Versions.parse("3+") and 2 not in Versions.parse("3+")
    assert 0 not in Versions.parse("none")
    assert 4 in Versions.parse("1-4") and 5 not in Versions.parse("1-4")


def test_declaration_errors():
    with pytest.raises(ValueError):
        F("x", "[]")  # struct array without fields
    with pytest.raises(ValueError):
        F("x", "int32", fields=[F("y", "int8")])
    with pytest.raises(ValueError):
        F("x", "nosuchtype")
    with pytest.raises(ValueError):
        MessageSchema("Bad", 1, "0+", [])  # open range
    with pytest.raises(ValueError):
        MessageSchema("Bad", 1, "0", [F("x", "int32", nullable="0+")])  # int32 cannot be null
    with pytest.raises(ValueError):
        MessageSchema("Bad", 1, "0", [F("x", "int32"), F("x", "int8")])


def test_defaults_fill_missing_fields():
    for version in range(4):
        obj = TOY.decode(version, TOY.encode_bytes(version, {}))
        assert obj["id"] == 0 and obj["items"] == [] and obj["ids"] == []
        assert obj["name"] == ("" if version < 2 else None)
        if version >= 1:
            assert obj["flag"] is False
        if version in (1, 2):
            assert obj["epoch"] == -1  # declared default
        if version >= 3:
            assert obj["blob"] is None


def test_nested_defaults():
    obj = TOY.decode(1, TOY.encode_bytes(1, {"items": [{"index": 4}]}))
    assert obj["items"] == [{"index": 4, "offset": -1, "data": None}]


def test_fields_follow_versions():
    obj = {"id": 7, "flag": True, "epoch": 3, "name": "n", "items": [], "ids": [1, 2], "tags": ["a"], "blob": b"z"}
    assert set(TOY.decode(0, TOY.encode_bytes(0, obj))) == {"id", "name", "items", "ids"}
    assert set(TOY.decode(1, TOY.encode_bytes(1, obj))) == {"id", "flag", "epoch", "name", "items", "ids"}
    assert set(TOY.decode(3, TOY.encode_bytes(3, obj))) == {"id", "flag", "name", "items", "ids", "tags", "blob"}
    assert TOY.decode(2, TOY.encode_bytes(2, obj)) == {k: v for k, v in obj.items() if k != "blob"}


def test_exact_layout():
    obj = {"id": 1, "flag": True, "epoch": 2, "name": "ab", "items": [{"index": 5, "offset": 6, "data": b"xyz"}],
           "ids": [7, 8]}
    expected = (
        struct.pack(">i?h", 1, True, 2)
        + b"\x00\x02ab"
        + struct.pack(">iiqi", 1, 5, 6, 3) + b"xyz"
        + struct.pack(">iii", 2, 7, 8)
    )
    assert TOY.encode_bytes(1, obj) == expected


def test_unknown_keys_are_ignored():
    assert TOY.encode_bytes(0, {"id": 1, "whatever": 2}) == TOY.encode_bytes(0, {"id": 1})


def test_nullable_only_in_its_versions():
    with pytest.raises(ProtocolEncodeError, match="name"):
        TOY.encode(1, {"name": None})
    assert TOY.decode(2, TOY.encode_bytes(2, {"name": None}))["name"] is None
    with pytest.raises(ProtocolEncodeError, match="items"):
        TOY.encode(2, {"items": None})
    assert TOY.decode(3, TOY.encode_bytes(3, {"items": None}))["items"] is None
    # On the wire a null where the version forbids it is a decode error.
    raw = TOY.encode_bytes(2, {"name": None})
    with pytest.raises(ProtocolDecodeError, match="negative string length"):
        TOY.decode(1, raw)


def test_encode_errors_name_the_field():
    with pytest.raises(ProtocolEncodeError, match=r"ToyRequest v0: .*id"):
        TOY.encode(0, {"id": "seven"})
    with pytest.raises(ProtocolEncodeError, match=r"items\.\(index, offset\)"):
        TOY.encode(0, {"items": [{"index": 2**40}]})
    with pytest.raises(ProtocolEncodeError, match="dict"):
        TOY.encode(0, {"items": [(1, 2, None)]})
    with pytest.raises(ProtocolEncodeError):
        TOY.encode(0, {"ids": ["x"]})


def test_trailing_and_short_bytes():
    raw = TOY.encode_bytes(0, {"id": 1})
    with pytest.raises(ProtocolDecodeError, match="trailing"):
        TOY.decode(0, raw + b"\x00")
    for cut in range(len(raw)):
        with pytest.raises(ProtocolDecodeError):
            TOY.decode(0, raw[:cut])


def test_absurd_nested_array_count():
    raw = struct.pack(">i", 1) + b"\x00\x00" + struct.pack(">i", 100_000_000) + b"\x00" * 20
    with pytest.raises(ProtocolDecodeError, match="cannot fit"):
        TOY.decode(0, raw)


def test_decode_at_offset():
    raw = TOY.encode_bytes(0, {"id": 42})
    assert TOY.decode(0, b"HEADER" + raw, offset=6)["id"] == 42
    assert TOY.decode(0, memoryview(bytearray(b"HEADER" + raw)), offset=6)["id"] == 42


def test_unsupported_version():
    with pytest.raises(UnsupportedVersionError):
        TOY.decode(4, b"")
    with pytest.raises(UnsupportedVersionError):
        TOY.encode(-1, {})
    assert TOY.supports(3) and not TOY.supports(4)


class FakeSlice:
    size = 3


def test_records_out_of_band_through_schema():
    fs = FakeSlice()
    chunks = TOY.encode(0, {"id": 1, "items": [{"index": 0, "data": fs}, {"index": 1, "data": b"ab"}]})
    assert len(chunks) == 3 and chunks[1] is fs
    assert chunks[0].endswith(struct.pack(">i", 3))
    assert chunks[2].startswith(struct.pack(">iq", 1, -1) + struct.pack(">i", 2) + b"ab")
    with pytest.raises(ProtocolEncodeError, match="out-of-band"):
        TOY.encode_bytes(0, {"items": [{"data": fs}]})
    # Splicing the slice's bytes in gives a body that decodes.
    body = chunks[0] + b"xyz" + chunks[2]
    assert TOY.decode(0, body)["items"][0]["data"] == b"xyz"
