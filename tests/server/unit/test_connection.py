"""Framing on one connection (a StringTransport, no socket): size-prefixed frames may be split
across reads or share one, an oversized or negative size closes the connection, and responses
go out in request order even when they complete out of order."""

from __future__ import annotations

import struct

from twisted.internet import defer

from broker.protocol.messages import ApiKey
from broker.server.broker import Broker
from broker.server.dispatch import Dispatcher, Handler
from tests.server.unit.wire import MAX_REQUEST_BYTES, connect, decode, request, responses, unstarted_broker


def test_a_frame_split_across_reads_is_answered_once_whole() -> None:
    connection, transport = connect(unstarted_broker())
    frame = request(ApiKey.API_VERSIONS, 2, 7)
    for i in range(len(frame) - 1):
        connection.dataReceived(frame[i : i + 1])
        assert transport.value() == b""
    connection.dataReceived(frame[-1:])
    [(correlation_id, body)] = responses(transport)
    assert correlation_id == 7
    assert decode(ApiKey.API_VERSIONS, 2, body)["error_code"] == 0
    assert not transport.disconnecting


def test_several_frames_in_one_read_are_all_answered_in_order() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(b"".join(request(ApiKey.API_VERSIONS, v, 10 + v) for v in (0, 1, 2)))
    assert [cid for cid, _ in responses(transport)] == [10, 11, 12]


def test_a_frame_larger_than_socket_request_max_bytes_closes_the_connection() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\0" * 16)
    assert transport.disconnecting
    assert transport.value() == b""
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    assert transport.value() == b"", "nothing more is read from a closed connection"


def test_a_negative_size_closes_the_connection() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(struct.pack(">i", -1))
    assert transport.disconnecting


def test_responses_go_out_in_request_order_when_an_earlier_one_completes_later() -> None:
    broker = unstarted_broker()
    pending: list[defer.Deferred[dict]] = []

    def answer(broker_: object, header: object, body: dict) -> object:
        if not pending:  # the first request waits (like a long-poll fetch); later ones answer at once
            pending.append(defer.Deferred())
            return pending[0]
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}

    dispatcher = Dispatcher([Handler(ApiKey.API_VERSIONS, 0, 2, answer)])
    connection, transport = connect(broker, dispatcher)
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1) + request(ApiKey.API_VERSIONS, 2, 2))
    assert transport.value() == b"", "the second response waits for the first"
    pending[0].callback({"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    assert [cid for cid, _ in responses(transport)] == [1, 2]


def test_a_handler_failure_closes_the_connection() -> None:
    def fail(broker_: object, header: object, body: dict) -> object:
        return defer.fail(RuntimeError("bug"))

    connection, transport = connect(unstarted_broker(), Dispatcher([Handler(ApiKey.API_VERSIONS, 0, 2, fail)]))
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    assert transport.disconnecting and transport.value() == b""


def test_a_handler_sees_the_clients_address_while_it_runs() -> None:
    """JoinGroup records the member's host from it: consumer-groups' HOST column."""
    seen: list[object] = []

    def answer(broker_: Broker, header: object, body: dict) -> object:
        seen.append(broker_.request_peer_host)
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}

    broker = unstarted_broker()
    connection, transport = connect(broker, Dispatcher([Handler(ApiKey.API_VERSIONS, 0, 2, answer)]))
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    assert seen == [transport.getPeer().host] and seen[0]
    assert broker.request_peer_host is None, "only while the request is dispatched"
