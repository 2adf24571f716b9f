"""Kafka frames for the connection tests: requests in, responses out of a StringTransport."""

from __future__ import annotations

import struct

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from broker.config import BrokerConfig
from broker.protocol.header import encode_request_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey
from broker.server.broker import Broker
from broker.server.connection import KafkaConnection
from broker.server.dispatch import Dispatcher

MAX_REQUEST_BYTES = 4096


def unstarted_broker() -> Broker:
    """A Broker that was never started: what ApiVersions and the framing read of it."""
    config = BrokerConfig.from_properties({
        "broker.id": "1",
        "zookeeper.connect": "localhost:2181",
        "log.dirs": "/nonexistent",
        "socket.request.max.bytes": str(MAX_REQUEST_BYTES),
    })
    return Broker(config, reactor=Clock())


def connect(broker: Broker, dispatcher: Dispatcher | None = None) -> tuple[KafkaConnection, StringTransport]:
    connection = KafkaConnection(broker, dispatcher or broker.dispatcher)
    transport = StringTransport()
    connection.makeConnection(transport)
    return connection, transport


def request(api_key: ApiKey, version: int, correlation_id: int, body: dict | None = None) -> bytes:
    payload = encode_request_header(api_key, version, correlation_id, "unit-test")
    if body is not None:
        payload += REQUESTS[api_key].encode_bytes(version, body)
    return struct.pack(">i", len(payload)) + payload


def responses(transport: StringTransport) -> list[tuple[int, bytes]]:
    """Every response frame written so far, as (correlation id, body)."""
    data = transport.value()
    frames = []
    pos = 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        frame = data[pos + 4 : pos + 4 + size]
        assert len(frame) == size, "a response frame was cut short"
        (correlation_id,) = struct.unpack_from(">i", frame)
        frames.append((correlation_id, frame[4:]))
        pos += 4 + size
    return frames


def decode(api_key: ApiKey, version: int, body: bytes) -> dict:
    return RESPONSES[api_key].decode(version, body)
