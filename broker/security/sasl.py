"""The broker's side of one connection's SASL login, as a state machine (no I/O).

handshake (pick a mechanism) -> authenticate token by token -> complete (a principal) or failed.
A SCRAM login needs the user's stored credential between its first two tokens: ``authenticate``
then returns ``NeedCredential`` and the caller (which may read ZooKeeper) answers through
``credential``. Any failure leaves the exchange failed; the connection answers, then closes.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from broker.protocol.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from broker.security.principal import user
from broker.security.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.security.scram import ScramCredential, ScramFormatError, ScramServer

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
_PLAIN_FAILED = "Authentication failed: Invalid username or password"


class State(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class NeedCredential:
    """The exchange waits for ``username``'s stored SCRAM credential for ``mechanism``."""

    username: str
    mechanism: str


def check_mechanisms(names: list[str]) -> list[str]:
    """sasl.enabled.mechanisms, upper-cased; ValueError (one line) for one logbus does not offer."""
    mechanisms = [n.strip().upper() for n in names if n.strip()]
    unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unknown:
        raise ValueError(f"SASL mechanism {', '.join(unknown)} is not supported; use {', '.join(SUPPORTED_MECHANISMS)}")
    return mechanisms


def plain_login(token: bytes, users: Mapping[str, str]) -> str:
    """RFC 4616 ``authzid NUL authcid NUL passwd`` checked against ``users``; the user name."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise SaslAuthenticationFailedError("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, name, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not name or not password:
        raise SaslAuthenticationFailedError("Authentication failed: username or password not specified")
    if authzid and authzid != name:
        raise SaslAuthenticationFailedError("Authentication failed: Client requested an authorization id that is "
                                            "different from username")
    expected = users.get(name)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        raise SaslAuthenticationFailedError(_PLAIN_FAILED)
    return name


class SaslServerExchange:
    """One connection's login: which mechanism, how far, and who logged in."""

    def __init__(self, enabled: list[str], plain_users: Mapping[str, str] | None = None) -> None:
        self.enabled = list(enabled)
        self.plain_users = dict(plain_users or {})
        self.state = State.HANDSHAKE
        self.mechanism = ""
        self.raw_tokens = False  # SaslHandshake v0: tokens come framed without Kafka headers
        self.username = ""
        self._scram: ScramServer | None = None
        self._waiting = False

    @property
    def principal(self) -> str | None:
        """``User:<name>`` once complete."""
        return user(self.username) if self.state is State.COMPLETE else None

    def handshake(self, mechanism: str, version: int) -> None:
        """SaslHandshake: choose the mechanism (raises Unsupported.../IllegalSaslStateError)."""
        if self.state is not State.HANDSHAKE:
            self.state = State.FAILED
            raise IllegalSaslStateError(f"Unexpected handshake request with client mechanism {mechanism}")
        if mechanism not in self.enabled:
            self.state = State.FAILED
            raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
        self.mechanism, self.raw_tokens, self.state = mechanism, version == 0, State.AUTHENTICATE
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramServer(mechanism)

    def authenticate(self, token: bytes) -> bytes | NeedCredential:
        """One client token: the server's answer, or NeedCredential (SCRAM's first step)."""
        if self.state is not State.AUTHENTICATE or self._waiting:
            self.state = State.FAILED
            raise IllegalSaslStateError("Unexpected SaslAuthenticate request: no SASL handshake, or the login is over")
        try:
            if self._scram is None:
                self.username = plain_login(token, self.plain_users)
                self.state = State.COMPLETE
                return b""
            if not self.username:
                name = self._scram.client_first(token)
                self._waiting = True
                return NeedCredential(name, self.mechanism)
            answer = self._scram.client_final(token)
            self.state = State.COMPLETE
            return answer
        except ScramFormatError as exc:
            self.state = State.FAILED
            raise SaslAuthenticationFailedError(f"Authentication failed: invalid {self.mechanism} message: {exc}") from None
        except SaslAuthenticationFailedError:
            self.state = State.FAILED
            raise

    def credential(self, credential: ScramCredential | None) -> bytes:
        """Continue a SCRAM login with the user's stored credential (None: no such user)."""
        assert self._scram is not None and self._waiting
        self._waiting = False
        if credential is None:
            self.state = State.FAILED
            raise SaslAuthenticationFailedError(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}")
        self.username = self._scram.username
        return self._scram.server_first(credential)


def stored_credential(user_config: Mapping[str, str], mechanism: str) -> ScramCredential | None:
    """The credential for ``mechanism`` in a /config/users/<user> config; None when absent or unreadable."""
    text = user_config.get(mechanism)
    if not text:
        return None
    try:
        return ScramCredential.from_config(text)
    except ScramFormatError:
        return None
