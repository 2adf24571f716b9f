"""The compiled codecs (broker/protocol/codecs_c.pyx) against their references. The Produce
request and response, against the reference engine and the generated codecs on every version:
the same messages and bytes for any well-formed input; cut, damaged or out-of-range input either
refused (then the reference answers) or read alike. The request header, against the checked
reader: the same header, or refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol import codegen, compiled
from broker.protocol.errors import ErrorCode, ProtocolDecodeError, ProtocolEncodeError
from broker.protocol.header import (
    _FLEXIBLE_REQUESTS,
    RequestHeader,
    _decode_request_header_checked,
    decode_request_header,
    encode_request_header,
)
from broker.protocol.messages.produce import PRODUCE_REQUEST, PRODUCE_RESPONSE
from broker.protocol.schema import _REFERENCE
from broker.protocol.types import Reader, Writer
from tests.protocol.strategies import struct_strategy

codecs_c: Any = compiled.codecs_c  # None where it is not built: the first test says so
VERSIONS = range(PRODUCE_REQUEST.min_version, PRODUCE_REQUEST.max_version + 1)
PROPERTIES = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


def _reference_read(version: int, raw: bytes) -> tuple[dict, int] | None:
    r = Reader(raw)
    try:
        return PRODUCE_REQUEST.compiled(version).read(r), r.pos
    except ProtocolDecodeError:
        return None


def _compiled_read(version: int, raw: bytes | memoryview, pos: int = 0) -> tuple[dict, int] | None:
    try:
        return codecs_c.ProduceRequestReader(version)(raw, pos, len(raw))
    except Exception:
        return None


def _reference_bytes(version: int, obj: dict) -> bytes:
    w = Writer()
    PRODUCE_RESPONSE.compiled(version).write(w, obj)
    return b"".join(w.chunks())


def test_the_compiled_codecs_are_built_and_used():
    assert compiled.codecs_c is not None, "make setup builds broker/protocol/codecs_c.pyx (needs gcc and Cython)"
    assert compiled.read_request_header is codecs_c.read_request_header
    for version in VERSIONS:
        assert isinstance(PRODUCE_REQUEST.reader(version), codecs_c.ProduceRequestReader)
        assert isinstance(PRODUCE_RESPONSE.writer(version), codecs_c.ProduceResponseWriter)
    with pytest.raises(ValueError):
        codecs_c.ProduceRequestReader(8)


@pytest.mark.parametrize("version", VERSIONS)
@PROPERTIES
@given(data=st.data())
def test_the_request_reader_equals_the_reference(version: int, data: st.DataObject) -> None:
    obj = data.draw(struct_strategy(PRODUCE_REQUEST.fields, version))
    raw = PRODUCE_REQUEST.encode_bytes(version, obj)
    expected = _reference_read(version, raw)
    assert expected is not None
    assert _compiled_read(version, raw) == expected
    assert _compiled_read(version, memoryview(raw)) == expected
    assert _compiled_read(version, bytearray(raw)) == expected
    generated = codegen.generate_reader(PRODUCE_REQUEST.name, PRODUCE_REQUEST.fields, version, False, _REFERENCE)
    assert generated(raw, 0, len(raw)) == expected
    # inside a larger buffer (a frame after its header), from an offset
    framed = b"head" + raw + b"tail"
    found = codecs_c.ProduceRequestReader(version)(memoryview(framed)[: 4 + len(raw)], 4, 4 + len(raw))
    assert found == (expected[0], 4 + expected[1])
    # the same input cut short, and with bytes overwritten: refused, or read as the reference reads it
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    damaged = bytearray(raw[:cut])
    for position, value in data.draw(st.lists(st.tuples(st.integers(0, max(cut - 1, 0)), st.integers(0, 255)),
                                              max_size=3 if cut else 0), label="overwrites"):
        damaged[position] = value
    got = _compiled_read(version, bytes(damaged))
    assert got is None or got == _reference_read(version, bytes(damaged))
    # what the schema answers is the reference's, refused or not
    reference = _reference_read(version, bytes(damaged))
    if reference is not None and reference[1] == len(damaged):
        assert PRODUCE_REQUEST.decode(version, bytes(damaged)) == reference[0]


@pytest.mark.parametrize("version", VERSIONS)
@PROPERTIES
@given(data=st.data())
def test_the_response_writer_equals_the_reference(version: int, data: st.DataObject) -> None:
    obj = data.draw(struct_strategy(PRODUCE_RESPONSE.fields, version))
    w = Writer()
    w.buf += b"kept"
    codecs_c.ProduceResponseWriter(version)(w, obj)  # well-formed: written, not refused
    body = _reference_bytes(version, obj)
    assert b"".join(w.chunks()) == b"kept" + body
    assert PRODUCE_RESPONSE.encode_bytes(version, obj) == body
    head = data.draw(st.binary(min_size=4, max_size=5), label="response header")
    framed = (len(head) + len(body)).to_bytes(4, "big") + head + body
    assert codecs_c.ProduceResponseWriter(version).frame(head, obj) == framed
    assert PRODUCE_RESPONSE.encode_frame(version, obj, head) == [framed]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_response_writer_fills_defaults_as_the_reference(version: int) -> None:
    for obj in ({}, {"responses": [{}]}, {"responses": [{"name": "t", "partition_responses": [{}]}]}):
        w = Writer()
        codecs_c.ProduceResponseWriter(version)(w, obj)
        assert bytes(w.buf) == _reference_bytes(version, obj)


BAD_VALUES = [
    {"index": 1 << 31}, {"index": -(1 << 31) - 1}, {"error_code": 1 << 15}, {"base_offset": 1 << 63},
    {"log_append_time_ms": -(1 << 63) - 1}, {"log_start_offset": 1 << 64}, {"index": 1.0}, {"error_code": "3"},
    {"base_offset": None},
]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=[next(iter(b.items())).__repr__() for b in BAD_VALUES])
def test_a_value_out_of_its_field_is_refused_and_the_reference_says_why(bad: dict) -> None:
    obj = {"responses": [{"name": "t", "partition_responses": [{"index": 0, **bad}]}], "throttle_time_ms": 0}
    w = Writer()
    with pytest.raises(Exception):  # noqa: B017 - any refusal; the schema then asks the reference
        codecs_c.ProduceResponseWriter(7)(w, obj)
    with pytest.raises(ProtocolEncodeError, match=r"^ProduceResponse v7: responses\.partition_responses\."):
        PRODUCE_RESPONSE.encode_frame(7, obj, b"\x00\x00\x00\x01")


@pytest.mark.parametrize("obj", [
    {"responses": ({"name": "t", "partition_responses": []},)},  # a tuple, not a list
    {"responses": [{"name": "t", "partition_responses": ({"index": 3},)}]},
    {"throttle_time_ms": 1 << 31},
])
def test_shapes_it_leaves_to_the_reference_encode_alike(obj: dict) -> None:
    with pytest.raises(Exception):  # noqa: B017 - refused by the compiled writer
        codecs_c.ProduceResponseWriter(7)(Writer(), obj)
    try:
        expected: bytes | str = _reference_bytes(7, obj)
    except ProtocolEncodeError as exc:
        expected = str(exc)
    try:
        got: bytes | str = PRODUCE_RESPONSE.encode_bytes(7, obj)
    except ProtocolEncodeError as exc:
        got = str(exc).removeprefix("ProduceResponse v7: ")
    assert got == expected


@given(names=st.lists(st.text(max_size=20), min_size=1, max_size=3), offsets=st.lists(INT64, min_size=1, max_size=3))
@settings(max_examples=40, deadline=None)
def test_non_ascii_topic_names_and_any_offsets(names: list[str], offsets: list[int]) -> None:
    obj = {"responses": [{"name": n, "partition_responses": [{"index": i, "base_offset": o} for i, o in enumerate(offsets)]}
                         for n in names], "throttle_time_ms": 7}
    w = Writer()
    codecs_c.ProduceResponseWriter(7)(w, obj)
    assert bytes(w.buf) == _reference_bytes(7, obj)


def test_error_codes_and_bools_are_written_as_struct_writes_them() -> None:
    obj = {"responses": [{"name": "t", "partition_responses": [
        {"index": True, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "base_offset": -1}]}]}
    w = Writer()
    codecs_c.ProduceResponseWriter(7)(w, obj)
    assert bytes(w.buf) == _reference_bytes(7, obj)


HEADER_KEYS = st.sampled_from(sorted({key for key, _ in _FLEXIBLE_REQUESTS} | {0, 1, 3, 18}))


@given(api_key=HEADER_KEYS, api_version=st.integers(0, 13), correlation_id=st.integers(-(1 << 31), (1 << 31) - 1),
       client_id=st.one_of(st.none(), st.text(max_size=20)), body=st.binary(max_size=8))
@settings(max_examples=300, deadline=None)
def test_the_header_reader_equals_the_checked_reader(api_key: int, api_version: int, correlation_id: int,
                                                     client_id: str | None, body: bytes) -> None:
    raw = encode_request_header(api_key, api_version, correlation_id, client_id) + body
    expected = _decode_request_header_checked(raw, 0)
    for buf in (raw, bytearray(raw), memoryview(bytearray(raw))):
        got = codecs_c.read_request_header(buf, _FLEXIBLE_REQUESTS, RequestHeader)
        assert got == expected and type(got) is RequestHeader


@given(raw=st.binary(max_size=40))
@settings(max_examples=500, deadline=None)
def test_the_header_reader_refuses_or_reads_alike_any_bytes(raw: bytes) -> None:
    got = codecs_c.read_request_header(raw, _FLEXIBLE_REQUESTS, RequestHeader)
    try:
        expected = _decode_request_header_checked(raw, 0)
    except ProtocolDecodeError:
        assert got is None
        return
    assert got is None or got == expected
    assert decode_request_header(raw) == expected


def test_a_flexible_header_with_tagged_fields_or_without_their_count_is_left_to_the_checked_reader() -> None:
    api_key, version = min(_FLEXIBLE_REQUESTS)
    plain = encode_request_header(api_key, version, 7, "c")
    assert plain.endswith(b"\x00")
    tagged = plain[:-1] + b"\x01\x00\x02ab"  # one tagged field: tag 0, two bytes
    assert codecs_c.read_request_header(tagged, _FLEXIBLE_REQUESTS, RequestHeader) is None
    assert decode_request_header(tagged).body_offset == len(tagged)
    assert codecs_c.read_request_header(plain[:-1], _FLEXIBLE_REQUESTS, RequestHeader) is None
    assert codecs_c.read_request_header(plain, _FLEXIBLE_REQUESTS, RequestHeader) == decode_request_header(plain)


def test_only_compiled_versions_are_offered() -> None:
    assert compiled.reader("ProduceRequest", 7) is not None and compiled.writer("ProduceResponse", 0) is not None
    assert compiled.reader("ProduceRequest", 8) is None and compiled.writer("ProduceResponse", -1) is None
    assert compiled.reader("FetchRequest", 4) is None


def test_a_buffer_of_another_item_type_is_read_the_python_way() -> None:
    raw = encode_request_header(0, 7, 9, "client")
    signed = memoryview(raw).cast("b")  # items of another type than unsigned bytes
    assert decode_request_header(signed) == decode_request_header(raw)
