"""A client's side of a SASL login as a generator of requests, so that the blocking clients
(broker/client/security.py) and the broker's own Twisted links (broker/server/kafka_client.py)
share one flow: SaslHandshake v1, then SaslAuthenticate v1 until the mechanism is done.

    steps = login_steps("SCRAM-SHA-256", "alice", "secret")
    request = next(steps)               # (api_key, version, body)
    request = steps.send(response)      # ... until StopIteration: logged in
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from broker.protocol.errors import ErrorCode, SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from broker.protocol.messages import ApiKey
from broker.security.sasl import PLAIN
from broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.security.scram import ScramClient

SASL_VERSION = 1
Request = tuple[ApiKey, int, dict[str, Any]]


def login_steps(mechanism: str, username: str, password: str) -> Generator[Request, dict[str, Any], None]:
    """Yield each request; receive its response. Raises SaslAuthenticationFailedError or
    UnsupportedSaslMechanismError when the broker refuses."""
    answer = yield ApiKey.SASL_HANDSHAKE, SASL_VERSION, {"mechanism": mechanism}
    if answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        raise UnsupportedSaslMechanismError(
            f"the broker does not offer {mechanism}; it offers {', '.join(answer['mechanisms'])}")
    if answer["error_code"]:
        raise SaslAuthenticationFailedError(f"SaslHandshake failed with error {ErrorCode(answer['error_code']).name}")

    def checked(reply: dict[str, Any]) -> bytes:
        if reply["error_code"]:
            raise SaslAuthenticationFailedError(reply.get("error_message") or ErrorCode(reply["error_code"]).name)
        return bytes(reply["auth_bytes"])

    if mechanism == PLAIN:
        checked((yield ApiKey.SASL_AUTHENTICATE, SASL_VERSION,
                 {"auth_bytes": b"\0" + username.encode() + b"\0" + password.encode()}))
        return
    if mechanism in SCRAM_MECHANISMS:
        client = ScramClient(mechanism, username, password)
        server_first = checked((yield ApiKey.SASL_AUTHENTICATE, SASL_VERSION, {"auth_bytes": client.first()}))
        server_final = checked((yield ApiKey.SASL_AUTHENTICATE, SASL_VERSION, {"auth_bytes": client.final(server_first)}))
        client.verify(server_final)
        return
    raise UnsupportedSaslMechanismError(f"SASL mechanism {mechanism} is not supported")
