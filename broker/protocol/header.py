"""Request and response headers: the envelope around every message body.

Requests: int16 api_key, int16 api_version, int32 correlation_id, nullable string client_id
(header v1); a flexible version's request (header v2) adds tagged fields after client_id.
Responses: int32 correlation_id (header v0); a flexible version's response adds tagged fields
(header v1), except ApiVersions, whose response header is always v0 so that any client can read
the versions it may use.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import NamedTuple

from broker.protocol.api_keys import ApiKey
from broker.protocol.compiled import read_request_header as _compiled_read
from broker.protocol.messages import REQUESTS, RESPONSES
from broker.protocol.schema import MessageSchema
from broker.protocol.types import INT32, BytesLike, Reader, Writer

_FIXED = struct.Struct(">hhi")
_FIXED_AND_ID_LENGTH = struct.Struct(">hhih")  # the fixed fields and client_id's int16 length


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
    """Decode the header at ``data[offset:]``; ProtocolDecodeError if it is short or malformed.

    A header whose client_id fits and decodes, and whose tagged fields (if any) are empty, is
    read in one pass (compiled where it is built, else one struct call); anything else goes the
    checked way, which says what is wrong."""
    if offset == 0 and _compiled_read is not None:
        header = _compiled_read(data, _FLEXIBLE_REQUESTS, RequestHeader)
        if header is not None:
            return header
    end = len(data)
    if end - offset >= _FIXED_AND_ID_LENGTH.size:
        api_key, api_version, correlation_id, size = _FIXED_AND_ID_LENGTH.unpack_from(data, offset)
        pos = offset + _FIXED_AND_ID_LENGTH.size
        if size == -1 or 0 <= size <= end - pos:
            try:
                client_id = None if size < 0 else str(data[pos : pos + size], "utf-8")
            except UnicodeDecodeError:
                return _decode_request_header_checked(data, offset)
            pos += max(size, 0)
            if (api_key, api_version) not in _FLEXIBLE_REQUESTS:
                return RequestHeader(api_key, api_version, correlation_id, client_id, pos)
            if pos < end and data[pos] == 0:
                return RequestHeader(api_key, api_version, correlation_id, client_id, pos + 1)
    return _decode_request_header_checked(data, offset)


def _decode_request_header_checked(data: BytesLike, offset: int) -> RequestHeader:
    r = Reader(data, offset)
    api_key, api_version, correlation_id = r.unpack(_FIXED)
    client_id = r.nullable_string()
    if request_header_flexible(api_key, api_version):
        r.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, r.pos)


def _flexible(schemas: Mapping[ApiKey, MessageSchema]) -> frozenset[tuple[int, int]]:
    return frozenset((int(key), v) for key, schema in schemas.items()
                     for v in range(schema.min_version, schema.max_version + 1) if schema.is_flexible(v))


_FLEXIBLE_REQUESTS = _flexible(REQUESTS)
_FLEXIBLE_RESPONSES = _flexible({key: schema for key, schema in RESPONSES.items() if key != ApiKey.API_VERSIONS})


def request_header_flexible(api_key: int, api_version: int) -> bool:
    """Whether the request has header v2 (its version is flexible)."""
    return (api_key, api_version) in _FLEXIBLE_REQUESTS


def response_header_flexible(api_key: int, api_version: int) -> bool:
    """Whether the response has header v1: a flexible version, except ApiVersions'."""
    return (api_key, api_version) in _FLEXIBLE_RESPONSES


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """Header v1 (v2 for a flexible version) bytes for a client's request."""
    w = Writer()
    w.pack(_FIXED, api_key, api_version, correlation_id)
    w.nullable_string(client_id)
    if request_header_flexible(api_key, api_version):
        w.empty_tagged_fields()
    return bytes(w.buf)


def encode_response_header(correlation_id: int, api_key: int = -1, api_version: int = 0) -> bytes:
    """Response header v0 (the correlation id), or v1 (with empty tagged fields) for a flexible version."""
    if response_header_flexible(api_key, api_version):
        return INT32.pack(correlation_id) + b"\x00"
    return INT32.pack(correlation_id)


def decode_response_header(data: BytesLike, offset: int = 0, api_key: int = -1, api_version: int = 0) -> ResponseHeader:
    """Decode the response header at ``data[offset:]`` of a response to ``api_key`` v``api_version``."""
    r = Reader(data, offset)
    correlation_id = r.int32()
    if response_header_flexible(api_key, api_version):
        r.skip_tagged_fields()
    return ResponseHeader(correlation_id, r.pos)
