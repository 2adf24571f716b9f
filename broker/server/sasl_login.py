"""One connection's SASL login on a SASL listener: SaslHandshake and SaslAuthenticate answered
below the dispatcher (as Kafka's SaslServerAuthenticator does), SCRAM credentials read from
ZooKeeper (/config/users/<user>) on the thread pool.

The state machine is broker/security/sasl.py; this module adds the request/response forms,
the ZooKeeper read and the one log line per refused login.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer, threads
from twisted.logger import Logger

from broker.cluster.zkdata import ConfigType, is_storable_name
from broker.protocol.errors import ErrorCode, KafkaError, ProtocolDecodeError
from broker.protocol.header import RequestHeader
from broker.protocol.messages import REQUESTS, ApiKey
from broker.security.listener_config import ListenerSecurity
from broker.security.sasl import NeedCredential, SaslServerExchange, State, stored_credential
from broker.security.scram import ScramCredential

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()

SASL_KEYS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: What a client may ask before its login completes (Kafka: anything else closes the connection).
BEFORE_LOGIN = SASL_KEYS | {ApiKey.API_VERSIONS}


class SaslLogin:
    """The login of one connection; ``failed`` means answer, then close."""

    def __init__(self, broker: Broker, security: ListenerSecurity, peer: str) -> None:
        self.broker = broker
        self.exchange = SaslServerExchange(security.sasl_mechanisms, security.plain_users)
        self.peer = peer
        self.listener = security.name

    @property
    def complete(self) -> bool:
        return self.exchange.state is State.COMPLETE

    @property
    def failed(self) -> bool:
        return self.exchange.state is State.FAILED

    @property
    def raw_tokens(self) -> bool:
        """After SaslHandshake v0 the tokens come bare, framed only by their size."""
        return self.exchange.raw_tokens and self.exchange.state is State.AUTHENTICATE

    def handle(self, header: RequestHeader, body: memoryview) -> dict | defer.Deferred[dict]:
        """Answer SaslHandshake or SaslAuthenticate (ProtocolDecodeError: the connection closes)."""
        key, version = header.api_key, header.api_version
        if not 0 <= version <= 1:
            raise ProtocolDecodeError(f"{ApiKey(key).name} v{version} is not served (versions 0-1)")
        request = REQUESTS[ApiKey(key)].decode(version, body)
        if key == ApiKey.SASL_HANDSHAKE:
            try:
                self.exchange.handshake(request["mechanism"], version)
                code: int = ErrorCode.NONE
            except KafkaError as exc:
                self._refused(exc)
                code = exc.code
            return {"error_code": code, "mechanisms": self.exchange.enabled}
        return self._authenticate(bytes(request["auth_bytes"]), raw=False)

    def raw_token(self, token: bytes) -> bytes | None | defer.Deferred[bytes | None]:
        """One bare token (SaslHandshake v0); None: refused, close without an answer (as Kafka)."""
        answer = self._authenticate(token, raw=True)

        def unwrap(response: dict) -> bytes | None:
            return None if response["error_code"] else bytes(response["auth_bytes"])

        if isinstance(answer, defer.Deferred):
            return answer.addCallback(unwrap)
        return unwrap(answer)

    def _authenticate(self, token: bytes, raw: bool) -> dict | defer.Deferred[dict]:
        try:
            step = self.exchange.authenticate(token)
        except KafkaError as exc:
            return self._refused(exc)
        if not isinstance(step, NeedCredential):
            return self._accepted(step)
        d: defer.Deferred[Any] = threads.deferToThread(self._read_credential, step)
        d.addErrback(self._lookup_failed)
        d.addCallback(self._with_credential)
        return d

    def _read_credential(self, wanted: NeedCredential) -> ScramCredential | None:
        """Blocking (thread pool): the user's stored credential, None when there is none."""
        if not is_storable_name(wanted.username):
            return None
        return stored_credential(self.broker.zk.entity_config(ConfigType.USER, wanted.username), wanted.mechanism)

    @staticmethod
    def _lookup_failed(failure: Any) -> None:
        log.failure("reading SCRAM credentials from ZooKeeper", failure)
        return None

    def _with_credential(self, credential: ScramCredential | None) -> dict:
        try:
            return self._accepted(self.exchange.credential(credential))
        except KafkaError as exc:
            return self._refused(exc)

    def _accepted(self, token: bytes) -> dict:
        if self.complete:
            log.info("{peer} logged in as {principal} ({mechanism}) on listener {listener}", peer=self.peer,
                     principal=self.exchange.principal, mechanism=self.exchange.mechanism, listener=self.listener)
        return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": token, "session_lifetime_ms": 0}

    def _refused(self, exc: KafkaError) -> dict:
        log.info("SASL login from {peer} on listener {listener} refused: {why}", peer=self.peer, listener=self.listener,
                 why=str(exc))
        return {"error_code": exc.code, "error_message": str(exc), "auth_bytes": b"", "session_lifetime_ms": 0}
