"""Dispatch: an unknown API key, an unserved version or a body that does not fit its schema
closes the connection (as Kafka does), except ApiVersions, which answers any version in v0
with UNSUPPORTED_VERSION so a newer client learns what is served."""

from __future__ import annotations

import struct

from broker.protocol.errors import ErrorCode
from broker.protocol.header import encode_request_header
from broker.protocol.messages import ApiKey
from broker.server.handlers import ALL_HANDLERS
from tests.server.unit.wire import connect, decode, request, responses, unstarted_broker


def _raw(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = encode_request_header(api_key, version, correlation_id, "unit-test") + body
    return struct.pack(">i", len(payload)) + payload


def test_an_unknown_api_key_closes_the_connection() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(_raw(999, 0, 1))
    assert transport.disconnecting and transport.value() == b""


def test_an_unserved_version_of_an_api_closes_the_connection() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(_raw(ApiKey.FETCH, 12, 1))  # Fetch is served up to v11
    assert transport.disconnecting and transport.value() == b""


def test_api_versions_above_the_served_range_answers_v0_with_unsupported_version() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(_raw(ApiKey.API_VERSIONS, 9, 42))
    [(correlation_id, body)] = responses(transport)
    assert correlation_id == 42
    answer = decode(ApiKey.API_VERSIONS, 0, body)
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert [(k["api_key"], k["min_version"], k["max_version"]) for k in answer["api_keys"]] == [(ApiKey.API_VERSIONS, 0, 2)]
    assert not transport.disconnecting


def test_api_versions_advertises_exactly_the_dispatch_table() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    [(_, body)] = responses(transport)
    advertised = {(k["api_key"], k["min_version"], k["max_version"]) for k in decode(ApiKey.API_VERSIONS, 2, body)["api_keys"]}
    assert advertised == {(h.api_key, h.min_version, h.max_version) for h in ALL_HANDLERS}
    operator_apis = {(ApiKey.DELETE_RECORDS, 0, 1), (ApiKey.ALTER_CONFIGS, 0, 1), (ApiKey.DESCRIBE_LOG_DIRS, 0, 1),
                     (ApiKey.DELETE_GROUPS, 0, 1), (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 0), (ApiKey.OFFSET_DELETE, 0, 0)}
    assert operator_apis <= advertised


def test_a_body_that_does_not_fit_its_schema_closes_the_connection() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(_raw(ApiKey.METADATA, 8, 1, b"\x00\x00\x00\x05"))  # 5 topics announced, none sent
    assert transport.disconnecting and transport.value() == b""


def test_a_malformed_header_closes_the_connection() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(struct.pack(">i", 3) + b"\x00\x12\x00")
    assert transport.disconnecting and transport.value() == b""
