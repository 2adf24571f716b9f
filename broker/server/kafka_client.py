"""A Twisted client connection to another broker, speaking the Kafka protocol (replica fetchers).

``request(api_key, version, body)`` returns a Deferred of the decoded response dict; responses
are matched by correlation id. A lost connection fails every pending request.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.error import ConnectionLost
from twisted.protocols.basic import Int32StringReceiver

from broker.protocol.header import encode_request_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey

_CORRELATION = struct.Struct(">i")


class KafkaClientProtocol(Int32StringReceiver):
    MAX_LENGTH = 256 * 1024 * 1024

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[ApiKey, int, defer.Deferred[dict]]] = {}
        self.connected_ = False

    def connectionMade(self) -> None:
        self.connected_ = True
        transport: Any = self.transport
        if hasattr(transport, "setTcpNoDelay"):
            transport.setTcpNoDelay(True)

    def request(self, api_key: ApiKey, version: int, body: dict) -> defer.Deferred[dict]:
        if not self.connected_:
            return defer.fail(ConnectionLost("not connected"))
        correlation_id = next(self._ids)
        d: defer.Deferred[dict] = defer.Deferred()
        self._pending[correlation_id] = (api_key, version, d)
        payload = encode_request_header(api_key, version, correlation_id, self.client_id)
        self.sendString(payload + REQUESTS[api_key].encode_bytes(version, body))
        return d

    def stringReceived(self, frame: bytes) -> None:
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            self.close()
            return
        api_key, version, d = pending
        try:
            response = RESPONSES[api_key].decode(version, memoryview(frame)[4:])
        except Exception as exc:  # a response we cannot read: drop the connection
            d.errback(exc)
            self.close()
            return
        d.callback(response)

    def lengthLimitExceeded(self, length: int) -> None:
        self.close()

    def connectionLost(self, reason: Any = None) -> None:
        self.connected_ = False
        pending, self._pending = self._pending, {}
        for _, _, d in pending.values():
            if not d.called:
                d.errback(ConnectionLost(f"connection lost: {reason.getErrorMessage() if reason else ''}"))

    def close(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.loseConnection()


def connect(reactor: Any, host: str, port: int, client_id: str, timeout: float) -> defer.Deferred[KafkaClientProtocol]:
    endpoint = TCP4ClientEndpoint(reactor, host, port, timeout=timeout)
    return connectProtocol(endpoint, KafkaClientProtocol(client_id))
