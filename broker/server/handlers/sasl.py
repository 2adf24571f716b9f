"""SaslHandshake (17) and SaslAuthenticate (36) where no login is going on.

On a SASL listener the connection answers both itself until the login completes
(broker/server/sasl_login.py); a request that reaches the dispatcher came on a listener without
SASL, or after the login: Kafka answers ILLEGAL_SASL_STATE. Declared here so that ApiVersions
advertises them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.protocol.errors import ErrorCode
from broker.protocol.header import RequestHeader
from broker.protocol.messages import ApiKey
from broker.server.dispatch import Handler

if TYPE_CHECKING:
    from broker.server.broker import Broker


def handshake(broker: Broker, header: RequestHeader, request: dict) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


def authenticate(broker: Broker, header: RequestHeader, request: dict) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "no SASL login on this connection",
            "auth_bytes": b"", "session_lifetime_ms": 0}


HANDSHAKE = Handler(ApiKey.SASL_HANDSHAKE, 0, 1, handshake)
AUTHENTICATE = Handler(ApiKey.SASL_AUTHENTICATE, 0, 1, authenticate)
