"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

Credentials are stored as Kafka stores them in ZooKeeper (``/config/users/<user>``, one key per
mechanism: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``): salted, never the
password. The hashing is the standard library's (``hashlib.pbkdf2_hmac``, ``hmac``); this module
only carries RFC 5802's message flow. Both sides are here: the broker's ``ScramServer`` and the
clients' ``ScramClient``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass

from broker.protocol.errors import SaslAuthenticationFailedError

#: mechanism -> (hashlib name, minimum iterations, maximum iterations), as Kafka's ScramMechanism.
MECHANISMS: dict[str, tuple[str, int, int]] = {
    "SCRAM-SHA-256": ("sha256", 4096, 16384),
    "SCRAM-SHA-512": ("sha512", 4096, 16384),
}
DEFAULT_ITERATIONS = 4096
#: The mechanisms' ids on the wire (Kafka's ScramMechanism type byte; 0 is unknown).
MECHANISM_IDS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


class ScramFormatError(ValueError):
    """A SCRAM message or stored credential that does not parse."""


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ScramFormatError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramFormatError("invalid base64") from None


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 Hi(): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """The value Kafka keeps under the mechanism's key in /config/users/<user>."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @staticmethod
    def from_config(text: str) -> ScramCredential:
        fields = _attributes(text)
        try:
            return ScramCredential(_unb64(fields["salt"]), _unb64(fields["stored_key"]),
                                   _unb64(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError):
            raise ScramFormatError(f"not a SCRAM credential: {text[:40]!r}") from None


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A fresh credential (random salt) for ``password``; iterations within Kafka's bounds."""
    hash_name, low, high = MECHANISMS.get(mechanism, ("", 0, 0))
    if not hash_name:
        raise ScramFormatError(f"unknown SCRAM mechanism {mechanism!r}; use one of {', '.join(MECHANISMS)}")
    if not low <= iterations <= high:
        raise ScramFormatError(f"{mechanism} iterations must be between {low} and {high}, not {iterations}")
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(hash_name, password, salt, iterations), salt, iterations)


def salt_password(mechanism: str, password: str, iterations: int) -> tuple[bytes, bytes]:
    """(a fresh salt, the password salted with it): what AlterUserScramCredentials carries."""
    salt = secrets.token_bytes(32)
    return salt, salted_password(_hash_name(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a password already salted (AlterUserScramCredentials sends that,
    so the password itself never reaches the broker)."""
    hash_name = _hash_name(mechanism)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted, b"Server Key"), iterations)


def _attributes(text: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"} (a value may hold '='; none holds ',')."""
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramFormatError(f"malformed attribute {part[:40]!r}")
        out.setdefault(key, value)
    return out


def _saslname_decode(name: str) -> str:
    """RFC 5802 saslname: ',' and '=' arrive as '=2C' and '=3D'; any other '=' is an error."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramFormatError("invalid '=' in user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _saslname_encode(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


_NONCE_CHARS = string.ascii_letters + string.digits


def _random_nonce(length: int = 32) -> str:
    """A server nonce of letters and digits, as Kafka's are."""
    return "".join(secrets.choice(_NONCE_CHARS) for _ in range(length))


def _printable_nonce(nonce: str) -> bool:
    return bool(nonce) and all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce)


class ScramServer:
    """The broker's side of one SCRAM exchange: client-first -> (credential) -> client-final."""

    def __init__(self, mechanism: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._server_nonce = nonce or _random_nonce()
        self.username = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def client_first(self, message: bytes) -> str:
        """Parse the client-first message; returns the user whose credential is needed."""
        try:
            text = message.decode("utf-8")
            flag, authzid, bare = text.split(",", 2)
        except (UnicodeDecodeError, ValueError):
            raise ScramFormatError("client-first message is not gs2-header,client-first-bare") from None
        if flag not in ("n", "y"):
            raise ScramFormatError("channel binding is not supported")
        if authzid and not authzid.startswith("a="):
            raise ScramFormatError("malformed authzid")
        fields = _attributes(bare)
        if "m" in fields:
            raise ScramFormatError("mandatory extensions are not supported")
        username, nonce = _saslname_decode(fields.get("n", "")), fields.get("r", "")
        if not username or not _printable_nonce(nonce):
            raise ScramFormatError("client-first message needs n=<user> and r=<nonce>")
        if fields.get("tokenauth", "false").lower() == "true":
            raise ScramFormatError("delegation tokens are not supported")
        if authzid and _saslname_decode(authzid[2:]) != username:
            raise ScramFormatError("authorization id differs from the user name")
        self.username, self._gs2_header, self._client_first_bare = username, f"{flag},{authzid},", bare
        self._nonce = nonce + self._server_nonce
        return username

    def server_first(self, credential: ScramCredential) -> bytes:
        """The server-first message for the user's stored credential."""
        self._credential = credential
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def client_final(self, message: bytes) -> bytes:
        """Check the client's proof; the server-final message. Raises SaslAuthenticationFailedError."""
        credential = self._credential
        if credential is None:
            raise ScramFormatError("client-final message before server-first")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFormatError("client-final message is not UTF-8") from None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramFormatError("client-final message has no proof")
        fields = _attributes(without_proof)
        # Kafka's check: the nonce must end with the server-first one. librdkafka before 2.3 (Debian's
        # kcat) sends its own nonce once more in front of it; the proof covers what it sent.
        if not fields.get("r", "").endswith(self._nonce):
            raise ScramFormatError("nonce does not match")
        if _unb64(fields.get("c", "")) != self._gs2_header.encode():
            raise ScramFormatError("channel binding does not match the client-first message")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        proof = _unb64(proof_b64)
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramFormatError("proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise SaslAuthenticationFailedError(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}")
        return f"v={_b64(_hmac(self._hash, credential.server_key, auth_message))}".encode()


class ScramClient:
    """A client's side of one SCRAM exchange (logbus's own clients and inter-broker links)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_saslname_encode(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message (with proof) answering ``server_first``."""
        text = server_first.decode("utf-8", "replace")
        fields = _attributes(text)
        nonce, salt, iterations = fields.get("r", ""), _unb64(fields.get("s", "")), int(fields.get("i", "0") or 0)
        if not nonce.startswith(self._nonce) or iterations < 1:
            raise SaslAuthenticationFailedError("invalid server-first message")
        salted = salted_password(self._hash, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature: it knew the credential, so it is the real broker."""
        fields = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in fields:
            raise SaslAuthenticationFailedError(f"SCRAM authentication failed: {fields['e']}")
        if not hmac.compare_digest(_unb64(fields.get("v", "")), self._server_signature):
            raise SaslAuthenticationFailedError("the broker's SCRAM signature is wrong")
