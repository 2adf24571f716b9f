"""Request header v1 and response header v0: the envelope around every message body.

Requests: int16 api_key, int16 api_version, int32 correlation_id, nullable string client_id.
Responses: int32 correlation_id. Flexible requests (header v2) add tagged fields after
client_id; the broker only decodes bodies of non-flexible versions, so it never needs them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.protocol.types import INT32, BytesLike, Reader, Writer

_FIXED = struct.Struct(">hhi")


class RequestHeader(NamedTuple):
    """A decoded request header; the body starts at ``body_offset`` in the same buffer."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


class ResponseHeader(NamedTuple):
    correlation_id: int
    body_offset: int


def decode_request_header(data: BytesLike, offset: int = 0) -> RequestHeader:
    """Decode the header at ``data[offset:]``; ProtocolDecodeError if it is short or malformed."""
    r = Reader(data, offset)
    api_key, api_version, correlation_id = r.unpack(_FIXED)
    client_id = r.nullable_string()
    return RequestHeader(api_key, api_version, correlation_id, client_id, r.pos)


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """Header v1 bytes for a client's request."""
    w = Writer()
    w.pack(_FIXED, api_key, api_version, correlation_id)
    w.nullable_string(client_id)
    return bytes(w.buf)


def encode_response_header(correlation_id: int) -> bytes:
    """Response header v0: just the correlation id."""
    return INT32.pack(correlation_id)


def decode_response_header(data: BytesLike, offset: int = 0) -> ResponseHeader:
    """Decode a response header v0 at ``data[offset:]``."""
    r = Reader(data, offset)
    return ResponseHeader(r.int32(), r.pos)
