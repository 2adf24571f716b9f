"""A Twisted client connection to another broker, speaking the Kafka protocol (replica fetchers).

``request(api_key, version, body)`` returns a Deferred of the decoded response dict; responses
are matched by correlation id. A lost connection fails every pending request. ``InterBrokerLink``
connects on the inter-broker listener: TLS when it is SSL/SASL_SSL, then the broker's own SASL
login when it is SASL_* (the flow is broker/security/sasl_client.py, shared with the clients).
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol, wrapClientTLS
from twisted.internet.error import ConnectionLost
from twisted.protocols.basic import Int32StringReceiver

from broker.protocol.header import decode_response_header, encode_request_header
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey
from broker.security.listener_config import InterBrokerSecurity
from broker.security.sasl_client import login_steps
from broker.server.tls import client_tls_options

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
            body = decode_response_header(frame, 0, api_key, version).body_offset
            response = RESPONSES[api_key].decode(version, memoryview(frame)[body:])
        except Exception as exc:  # a response we cannot read: drop the connection
            d.errback(exc)
            self.close()
            return
        d.callback(response)

    @defer.inlineCallbacks
    def login(self, mechanism: str, username: str, password: str) -> Any:
        """The SASL login, request by request; fails with the broker's refusal."""
        steps = login_steps(mechanism, username, password)
        step = next(steps)
        while True:
            response = yield self.request(*step)
            try:
                step = steps.send(response)
            except StopIteration:
                return None

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


def connect(reactor: Any, host: str, port: int, client_id: str, timeout: float,
            tls: Any = None) -> defer.Deferred[KafkaClientProtocol]:
    """A connection (TLS with the ``tls`` client options when given)."""
    endpoint: Any = TCP4ClientEndpoint(reactor, host, port, timeout=timeout)
    if tls is not None:
        endpoint = wrapClientTLS(tls, endpoint)
    return connectProtocol(endpoint, KafkaClientProtocol(client_id))


class InterBrokerLink:
    """Connects this broker to the others on the inter-broker listener (BrokerConfig.inter_broker_security)."""

    def __init__(self, security: InterBrokerSecurity) -> None:
        self.security = security

    def connect(self, reactor: Any, host: str, port: int, client_id: str, timeout: float) -> defer.Deferred[Any]:
        """A connection to another broker, logged in when the listener asks for it."""
        security = self.security
        tls = client_tls_options(security.ssl, host) if security.ssl is not None else None
        d: defer.Deferred[Any] = connect(reactor, host, port, client_id, timeout, tls)
        mechanism = security.mechanism
        if mechanism is None:
            return d

        def log_in(conn: KafkaClientProtocol) -> defer.Deferred[Any]:
            def failed(failure: Any) -> Any:
                conn.close()
                return failure

            return conn.login(mechanism, security.username, security.password).addCallbacks(lambda _: conn, failed)

        return d.addCallback(log_in)
