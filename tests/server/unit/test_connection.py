"""Framing on one connection (a StringTransport, no socket): size-prefixed frames may be split
across reads or share one, an oversized or negative size closes the connection, and responses
go out in request order even when they complete out of order; a file slice through a
transport without sendfile (TLS) is written whole, or the connection aborted if the log lost it."""

from __future__ import annotations

import struct

from twisted.internet import defer

from broker.protocol.messages import ApiKey
from broker.protocol.records import encode_batch
from broker.server.broker import Broker
from broker.server.dispatch import Dispatcher, Handler
from broker.server.fetch_parts import FetchedPartition, FetchResult
from broker.server.handlers import fetch as fetch_handler
from broker.server.request_context import NO_REQUEST
from broker.storage.file_slice import FileSlice, SegmentFile
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


def test_a_stream_of_frames_cut_at_any_points_is_answered_whole_and_in_order() -> None:
    stream = b"".join(request(ApiKey.API_VERSIONS, v % 3, 20 + v) for v in range(6))
    frame_size = len(request(ApiKey.API_VERSIONS, 0, 20))
    for cuts in ([frame_size, 2 * frame_size + 3], [5, 9, 40, 41], list(range(7, len(stream), 7))):
        connection, transport = connect(unstarted_broker())
        for begin, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            connection.dataReceived(stream[begin:end])
        assert [cid for cid, _ in responses(transport)] == list(range(20, 26)), cuts
        assert not transport.disconnecting


def test_large_frames_cut_at_any_points_arrive_whole_between_small_ones() -> None:
    # frames of 64 KiB and more are received into a buffer of their own: its fill, and the bytes after it
    seen: list[list[str]] = []

    def answer(broker_: object, header: object, body: dict) -> object:
        seen.append([topic["name"] for topic in body["topics"]])
        return {"brokers": [], "controller_id": -1, "topics": []}

    def metadata(correlation_id: int, names: list[str]) -> bytes:
        return request(ApiKey.METADATA, 1, correlation_id, {"topics": [{"name": name} for name in names]})

    big = [f"{i}" * 20_000 for i in range(10)]  # a 200 KB request
    stream = metadata(1, big) + metadata(2, ["small"]) + metadata(3, big) + metadata(4, ["last"])
    size = len(metadata(1, big))
    for cuts in ([size], [3, 50_000, size + 5], list(range(65_536, len(stream), 65_536)), [size - 1, size + 20, 2 * size]):
        seen.clear()
        connection, transport = connect(unstarted_broker(), Dispatcher([Handler(ApiKey.METADATA, 0, 8, answer)]))
        connection.max_request_bytes = 1 << 20
        for begin, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            connection.dataReceived(stream[begin:end])
        assert seen == [big, ["small"], big, ["last"]], cuts
        assert [cid for cid, _ in responses(transport)] == [1, 2, 3, 4]


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


def test_a_request_followed_by_a_half_close_is_answered_then_the_connection_closes() -> None:
    pending: list[defer.Deferred[dict]] = []

    def answer(broker_: object, header: object, body: dict) -> object:
        pending.append(defer.Deferred())
        return pending[-1]

    connection, transport = connect(unstarted_broker(), Dispatcher([Handler(ApiKey.API_VERSIONS, 0, 2, answer)]))
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 5))
    connection.readConnectionLost()  # the client shut down its sending side
    assert not transport.disconnecting, "an unanswered request keeps the connection open"
    pending[0].callback({"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    assert [cid for cid, _ in responses(transport)] == [5]
    assert transport.disconnecting


def test_a_half_close_with_nothing_pending_closes_at_once() -> None:
    connection, transport = connect(unstarted_broker())
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    assert not transport.disconnecting
    connection.readConnectionLost()
    assert transport.disconnecting and [cid for cid, _ in responses(transport)] == [1]


def test_a_handler_sees_the_clients_address_while_it_runs() -> None:
    """JoinGroup records the member's host from it: consumer-groups' HOST column."""
    seen: list[object] = []

    def answer(broker_: Broker, header: object, body: dict) -> object:
        seen.append(broker_.request.peer_host)
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}

    broker = unstarted_broker()
    connection, transport = connect(broker, Dispatcher([Handler(ApiKey.API_VERSIONS, 0, 2, answer)]))
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    assert seen == [transport.getPeer().host] and seen[0]
    assert broker.request is NO_REQUEST, "only while the request is dispatched"


def _fetch_answering(records: FileSlice) -> Dispatcher:
    """A dispatcher whose Fetch v4 answers one partition with ``records``."""
    def answer(broker_: Broker, header: object, body: dict) -> object:
        read = FetchResult([FetchedPartition("t", 0, 0, 1, 0, records, 1)], records.size, False)
        return fetch_handler._answer(read, broker_, False, 0, 4)

    return Dispatcher([Handler(ApiKey.FETCH, 4, 4, answer)])


def _fetch_request() -> bytes:
    return request(ApiKey.FETCH, 4, 9, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                         "isolation_level": 0, "topics": []})


def test_a_slice_through_a_transport_without_sendfile_is_answered_whole(tmp_path) -> None:
    batch = encode_batch([(None, b"x" * 100, [], 0)])
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(batch)
    connection, transport = connect(unstarted_broker(), _fetch_answering(FileSlice(SegmentFile(str(path)), 0, len(batch))))
    connection.dataReceived(_fetch_request())  # a StringTransport has no socket: the TLS path, bytes written
    [(correlation_id, body)] = responses(transport)
    assert correlation_id == 9
    assert decode(ApiKey.FETCH, 4, body)["responses"][0]["partitions"][0]["records"] == batch
    assert not transport.disconnecting


def test_a_slice_the_log_lost_bytes_of_aborts_the_connection_rather_than_answer_short(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch([(None, b"x" * 100, [], 0)]))
    truncated = FileSlice(SegmentFile(str(path)), 0, path.stat().st_size + 50)  # truncated since the read
    connection, transport = connect(unstarted_broker(), _fetch_answering(truncated))
    connection.dataReceived(_fetch_request())
    assert transport.disconnected  # StringTransport.abortConnection sets it; loseConnection does not
    (size,) = struct.unpack_from(">i", transport.value())
    assert len(transport.value()) < 4 + size  # the frame was never completed with short bytes
    connection.dataReceived(request(ApiKey.API_VERSIONS, 2, 1))
    assert len(transport.value()) < 4 + size, "nothing more is answered on an aborted connection"
