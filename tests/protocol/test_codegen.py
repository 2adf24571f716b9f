"""The generated codecs (broker.protocol.codegen) against the reference closures of
broker.protocol.schema, on every version of every message: the same bytes, the same messages,
the same refusals of cut and corrupted input, the reference's errors."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from broker.protocol.messages.produce import PRODUCE_REQUEST, PRODUCE_RESPONSE
from broker.protocol.schema import MessageSchema
from broker.protocol.types import LARGE_CHUNK, Reader, Writer
from broker.storage.file_slice import FileSlice, SegmentFile
from tests.protocol.strategies import CASE_IDS, CASES, struct_strategy

EXAMPLES = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))


def _reference_bytes(schema: MessageSchema, version: int, obj: dict) -> bytes:
    w = Writer()
    schema.compiled(version).write(w, obj)
    return b"".join(w.chunks())


def _reference_read(schema: MessageSchema, version: int, raw: bytes) -> tuple[dict, int] | None:
    r = Reader(raw)
    try:
        return schema.compiled(version).read(r), r.pos
    except ProtocolDecodeError:
        return None


def _generated_read(schema: MessageSchema, version: int, raw: bytes | memoryview) -> tuple[dict, int] | None:
    try:
        return schema.reader(version)(raw, 0, len(raw))
    except Exception:
        return None


@pytest.mark.parametrize("schema, version", CASES, ids=CASE_IDS)
@EXAMPLES
@given(data=st.data())
def test_generated_codec_equals_the_reference(schema: MessageSchema, version: int, data: st.DataObject) -> None:
    obj = data.draw(struct_strategy(schema.fields, version))
    raw = _reference_bytes(schema, version, obj)
    w = Writer()
    schema.writer(version)(w, obj)
    assert b"".join(w.chunks()) == raw
    expected = _reference_read(schema, version, raw)
    assert expected is not None
    assert _generated_read(schema, version, raw) == expected
    assert _generated_read(schema, version, memoryview(raw)) == expected
    # the same input cut short, and with bytes overwritten: refused by both, or read alike
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    damaged = bytearray(raw[:cut])
    for position, value in data.draw(st.lists(st.tuples(st.integers(0, max(cut - 1, 0)), st.integers(0, 255)),
                                              max_size=3 if cut else 0), label="overwrites"):
        damaged[position] = value
    assert _generated_read(schema, version, bytes(damaged)) == _reference_read(schema, version, bytes(damaged))


@pytest.mark.parametrize("schema, version", CASES, ids=CASE_IDS)
def test_generated_writer_fills_defaults_as_the_reference(schema: MessageSchema, version: int) -> None:
    w = Writer()
    schema.writer(version)(w, {})
    assert b"".join(w.chunks()) == _reference_bytes(schema, version, {})


def test_refused_input_gets_the_references_error() -> None:
    request = {"acks": 1, "timeout_ms": 5, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}]}
    raw = PRODUCE_REQUEST.encode_bytes(7, request)
    with pytest.raises(ProtocolDecodeError) as generated:
        PRODUCE_REQUEST.decode(7, raw[:-2])
    with pytest.raises(ProtocolDecodeError) as reference:
        PRODUCE_REQUEST.compiled(7).read(Reader(raw[:-2]))
    assert str(generated.value) == str(reference.value)
    bad = {**request, "topic_data": [{"name": None, "partition_data": []}]}
    with pytest.raises(ProtocolEncodeError, match=r"^ProduceRequest v7: topic_data\.name: null for a non-nullable string$"):
        PRODUCE_REQUEST.encode(7, bad)


def test_a_refused_encoding_leaves_nothing_behind() -> None:
    """The generated writer fails part way; the Writer is rewound before the reference runs."""
    w = Writer()
    w.buf += b"kept"
    mark = w.checkpoint()
    w.append_chunk(b"dropped chunk")
    w.buf += b"dropped"
    w.rewind(mark)
    assert w.chunks() == [b"kept"]
    good = {"responses": [{"name": "t", "partition_responses": [{"index": 0}]}]}
    with pytest.raises(ProtocolEncodeError):
        PRODUCE_RESPONSE.encode_frame(7, {"responses": [*good["responses"], {"name": 5}]}, b"\x00\x00\x00\x07")


def test_encode_frame_sizes_the_whole_frame(tmp_path) -> None:
    response = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 9}]}], "throttle_time_ms": 3}
    parts = PRODUCE_RESPONSE.encode_frame(7, response, b"\x00\x00\x00\x07")
    assert len(parts) == 1
    body = PRODUCE_RESPONSE.encode_bytes(7, response)
    assert parts[0] == (4 + len(body)).to_bytes(4, "big") + b"\x00\x00\x00\x07" + body
    # a large record set goes out as its own chunk, a file slice out of band: both counted
    from broker.protocol.messages.fetch import FETCH_RESPONSE

    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(bytes(100))
    on_disk = FileSlice(SegmentFile(str(segment)), 0, 100)
    large = bytes(LARGE_CHUNK)
    fetched = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": large},
                                                           {"partition_index": 1, "records": on_disk}]}]}
    parts = FETCH_RESPONSE.encode_frame(4, fetched, b"\x00\x00\x00\x07")
    assert any(p is on_disk for p in parts) and any(p is large for p in parts)
    size = sum(p.size if p is on_disk else len(p) for p in parts) - 4
    assert int.from_bytes(parts[0][:4], "big") == size
    assert parts[0][4:8] == b"\x00\x00\x00\x07"
    on_disk.file.close()
