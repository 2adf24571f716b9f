"""Malformed input on the socket: each gets an error response or a closed connection, the
broker keeps serving other clients, and its logs hold nothing from the bad request."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from broker.client.connection import BrokerConnection, BrokerConnectionError
from broker.protocol.errors import ErrorCode
from broker.protocol.header import encode_request_header
from broker.protocol.messages import ApiKey
from broker.protocol.records import encode_batch, encode_message_set
from broker.protocol.records import layout as batch


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def _host_port(broker) -> tuple[str, int]:
    host, _, port = broker.bootstrap.rpartition(":")
    return host, int(port)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _closed_by_broker(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _still_serving(broker) -> None:
    with BrokerConnection(*_host_port(broker)) as conn:
        response = conn.request(ApiKey.API_VERSIONS, 2, {})
        assert response["error_code"] == 0


def _create_topic(broker, name: str) -> None:
    with BrokerConnection(*_host_port(broker)) as conn:
        response = conn.request(
            ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000}
        )
        assert response["topics"][0]["error_code"] == 0


def _end_offset(broker, topic: str) -> int:
    with BrokerConnection(*_host_port(broker)) as conn:
        response = conn.request(
            ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
        )
        part = response["topics"][0]["partitions"][0]
        assert part["error_code"] == 0
        return part["offset"]


def _produce(conn: BrokerConnection, topic: str, records: bytes, acks: int = 1) -> dict:
    return conn.request(
        ApiKey.PRODUCE,
        7,
        {"acks": acks, "timeout_ms": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]},
    )


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">i", 12) + b"\xde\xad\xbe\xef" * 3, id="garbage-frame"),
        pytest.param(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16, id="huge-size-prefix"),
        pytest.param(struct.pack(">i", -5), id="negative-size-prefix"),
        pytest.param(_frame(encode_request_header(77, 0, 1, "x")), id="unknown-api-key"),
        pytest.param(_frame(encode_request_header(ApiKey.METADATA, 99, 1, "x")), id="unserved-version"),
        pytest.param(_frame(encode_request_header(ApiKey.PRODUCE, 7, 1, "x") + b"\x00\x01"), id="short-body"),
        pytest.param(_frame(encode_request_header(ApiKey.PRODUCE, 7, 1, "x") + b"\x00" * 19), id="trailing-bytes"),
    ],
)
def test_malformed_frames_close_the_connection(broker, payload):
    sock = socket.create_connection(_host_port(broker))
    try:
        sock.sendall(payload)
        assert _closed_by_broker(sock)
    finally:
        sock.close()
    _still_serving(broker)


def test_truncated_frame_then_disconnect(broker):
    sock = socket.create_connection(_host_port(broker))
    sock.sendall(struct.pack(">i", 1000) + b"\x00" * 100)
    sock.close()
    _still_serving(broker)


def test_api_versions_above_served_answers_v0_with_unsupported_version(broker):
    with BrokerConnection(*_host_port(broker)) as conn:
        conn.send_frame(encode_request_header(ApiKey.API_VERSIONS, 9, 42, "future-client"))
        frame = conn.receive_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
    assert correlation_id == 42
    assert error_code == ErrorCode.UNSUPPORTED_VERSION
    assert count == 1
    api_key, low, high = struct.unpack_from(">hhh", frame, 10)
    assert (api_key, low, high) == (ApiKey.API_VERSIONS, 0, 2)


def test_api_versions_advertises_only_served_versions(broker):
    with BrokerConnection(*_host_port(broker)) as conn:
        response = conn.request(ApiKey.API_VERSIONS, 2, {})
    served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
    assert served[ApiKey.PRODUCE] == (0, 7)  # v0-2 carry the legacy message sets
    assert served[ApiKey.FETCH] == (0, 11)  # v0-3 answer legacy clients in the message format they read
    assert served[ApiKey.METADATA] == (0, 8)
    assert served[ApiKey.JOIN_GROUP] == (0, 5)  # the group coordinator (broker/coordinator)
    assert served[ApiKey.FIND_COORDINATOR] == (0, 2)  # served: librdkafka needs it for lz4


def test_bad_crc_is_corrupt_message_and_writes_nothing(broker):
    topic = f"crc-{uuid.uuid4().hex[:8]}"
    _create_topic(broker, topic)
    good = encode_batch([(b"k", b"good", [], 1_700_000_000_000)])
    bad = bytearray(encode_batch([(b"k", b"bad", [], 1_700_000_000_000)]))
    bad[-1] ^= 0xFF
    with BrokerConnection(*_host_port(broker)) as conn:
        response = _produce(conn, topic, bytes(bad))
        assert response["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.CORRUPT_MESSAGE
        # Two batches for one partition (a good one, then a bad one): refused whole, as Kafka does.
        response = _produce(conn, topic, good + bytes(bad))
        assert response["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.INVALID_RECORD
        assert _end_offset(broker, topic) == 0
        response = _produce(conn, topic, good)
        assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
    assert _end_offset(broker, topic) == 1


def test_wrong_record_count_and_bad_magic_are_refused(broker):
    topic = f"count-{uuid.uuid4().hex[:8]}"
    _create_topic(broker, topic)
    wrong_count = bytearray(encode_batch([(None, b"a", [], 0), (None, b"b", [], 0)]))
    struct.pack_into(">i", wrong_count, batch.RECORDS_COUNT_POS, 5)
    struct.pack_into(">I", wrong_count, batch.CRC_POS, batch.compute_crc(wrong_count, 0, len(wrong_count)))
    bad_magic = bytearray(encode_batch([(None, b"a", [], 0)]))
    bad_magic[batch.MAGIC_POS] = 7
    with BrokerConnection(*_host_port(broker)) as conn:
        for records in (bytes(wrong_count), bytes(bad_magic), b"\x00" * 20):
            response = _produce(conn, topic, records)
            assert response["responses"][0]["partition_responses"][0]["error_code"] != 0
    assert _end_offset(broker, topic) == 0
    _still_serving(broker)


def test_a_batch_length_near_two_to_the_31_is_refused_and_the_broker_lives(broker):
    """A length field the compiled check once added 12 to in 32 bits (wrapping negative, then
    reading past the buffer: a crash) is refused like any length that overruns the request."""
    topic = f"length-{uuid.uuid4().hex[:8]}"
    _create_topic(broker, topic)
    with BrokerConnection(*_host_port(broker)) as conn:
        for length in (0x7FFFFFFF, 0x7FFFFFF8, 0x7FFFFFF4, -1, -0x80000000):
            records = bytearray(encode_batch([(b"k", b"v", [], 1_700_000_000_000)]))
            struct.pack_into(">i", records, batch.LENGTH_POS, length)
            response = _produce(conn, topic, bytes(records))
            assert response["responses"][0]["partition_responses"][0]["error_code"] != 0, length
    assert _end_offset(broker, topic) == 0
    _still_serving(broker)


def test_unknown_topic_with_auto_create_off(broker_factory):
    broker = broker_factory(overrides={"auto.create.topics.enable": "false"})
    with BrokerConnection(*_host_port(broker)) as conn:
        metadata = conn.request(ApiKey.METADATA, 8, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": True})
        assert metadata["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        response = _produce(conn, "nope", encode_batch([(None, b"x", [], 0)]))
        assert response["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        invalid = conn.request(ApiKey.METADATA, 8, {"topics": [{"name": "bad/name"}], "allow_auto_topic_creation": True})
        assert invalid["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_connection_closed_mid_response_does_not_hurt_others(broker):
    with pytest.raises(BrokerConnectionError):
        with BrokerConnection(*_host_port(broker)) as conn:
            conn.send_raw(struct.pack(">i", 0x7FFFFFFF))
            conn.receive_frame()
    _still_serving(broker)


def test_a_damaged_legacy_message_set_is_refused_per_partition(broker):
    topic = f"legacy-{uuid.uuid4().hex[:8]}"
    _create_topic(broker, topic)
    message_set = encode_message_set([(None, b"old", [], 0)], magic=1)
    damaged = message_set[:-1] + bytes([message_set[-1] ^ 0xFF])

    def produce(records: bytes) -> dict:
        with BrokerConnection(*_host_port(broker)) as conn:
            response = conn.request(ApiKey.PRODUCE, 2, {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
        return response["responses"][0]["partition_responses"][0]

    assert produce(damaged)["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert produce(message_set[:-3])["error_code"] == ErrorCode.INVALID_RECORD
    assert _end_offset(broker, topic) == 0
    assert produce(message_set) == {"index": 0, "error_code": ErrorCode.NONE, "base_offset": 0, "log_append_time_ms": -1}
    assert _end_offset(broker, topic) == 1
