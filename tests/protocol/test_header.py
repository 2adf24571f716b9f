"""Request header v1 and response header v0, against kafka-python's encoder."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from broker.protocol.messages import REQUESTS, ApiKey


@given(
    st.integers(0, 2**15 - 1),
    st.integers(0, 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.one_of(st.none(), st.text(max_size=30)),
)
def test_request_header_roundtrip(api_key, api_version, correlation_id, client_id):
    raw = encode_request_header(api_key, api_version, correlation_id, client_id)
    header = decode_request_header(raw + b"BODY")
    assert header == RequestHeader(api_key, api_version, correlation_id, client_id, len(raw))


def test_request_header_layout_and_offset():
    raw = encode_request_header(3, 1, 7, "cli")
    assert raw == struct.pack(">hhih", 3, 1, 7, 3) + b"cli"
    assert decode_request_header(b"\x00\x00\x00\x10" + raw, offset=4).body_offset == 4 + len(raw)


@pytest.mark.parametrize("cut", range(10))
def test_short_request_header(cut):
    raw = encode_request_header(3, 1, 7, "client")
    with pytest.raises(ProtocolDecodeError):
        decode_request_header(raw[:cut])


def test_response_header():
    assert encode_response_header(-5) == struct.pack(">i", -5)
    assert decode_response_header(b"\x00\x00\x00\x09rest") == (9, 4)
    with pytest.raises(ProtocolDecodeError):
        decode_response_header(b"\x00\x00")


def test_kafka_python_request_is_understood():
    from kafka.protocol.metadata import MetadataRequest

    req = MetadataRequest(version=4, topics=[MetadataRequest.MetadataRequestTopic(name="t", version=4)],
                          allow_auto_topic_creation=False)
    req.with_header(correlation_id=42, client_id="kp")
    raw = bytes(req.encode(header=True))
    header = decode_request_header(raw)
    assert header[:4] == (ApiKey.METADATA, 4, 42, "kp")
    body = REQUESTS[ApiKey.METADATA].decode(4, raw, header.body_offset)
    assert body == {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}
