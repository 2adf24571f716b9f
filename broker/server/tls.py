"""OpenSSL contexts for TLS listeners.

Built once per listener from its SslSettings (broker/security/listener_config.py): the PEM
keystore (key + certificate chain, perhaps encrypted with ssl.key.password), the PEM truststore
for client certificates, ssl.client.auth, ssl.enabled.protocols and ssl.cipher.suites. A file
that does not load is a ConfigError: one line at start-up.
"""

from __future__ import annotations

import weakref
from typing import Any

from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from zope.interface import implementer  # type: ignore[import-untyped]

from broker.configdef import ConfigError
from broker.security.listener_config import SslSettings

_VERSIONS = {"TLSv1.2": SSL.TLS1_2_VERSION, "TLSv1.3": SSL.TLS1_3_VERSION}
#: OpenSSL's X509_V_ERR_* codes a client certificate most often fails with, in words.
_VERIFY_ERRORS = {
    9: "client certificate is not yet valid", 10: "client certificate has expired",
    18: "client certificate is self-signed", 19: "self-signed certificate in the client's chain",
    20: "client certificate's issuer is not in ssl.truststore.location",
    21: "client certificate's issuer is not in ssl.truststore.location",
}
_verify_failures: weakref.WeakKeyDictionary[SSL.Connection, str] = weakref.WeakKeyDictionary()


def verify_failure(connection: Any) -> str | None:
    """Why the client certificate of ``connection`` (an OpenSSL connection) was refused, if it was."""
    try:
        return _verify_failures.get(connection)
    except TypeError:
        return None


def _check_client(conn: SSL.Connection, cert: Any, errno: int, depth: int, ok: int) -> bool:
    if not ok:
        _verify_failures[conn] = _VERIFY_ERRORS.get(errno, f"client certificate refused (X509 error {errno})")
    return bool(ok)


def _ssl_error(exc: Exception) -> str:
    """The readable part of an OpenSSL error."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], list) and args[0]:
        return "; ".join(str(item[-1]) for item in args[0] if item)
    return str(exc) or type(exc).__name__


def _base_context(settings: SslSettings) -> SSL.Context:
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE)
    versions = sorted(_VERSIONS[v] for v in settings.enabled_protocols)
    ctx.set_min_proto_version(versions[0])
    ctx.set_max_proto_version(versions[-1])
    if settings.cipher_suites:
        try:
            ctx.set_cipher_list(":".join(settings.cipher_suites).encode())
        except SSL.Error as exc:
            raise ConfigError(f"Invalid value {','.join(settings.cipher_suites)!r} for configuration ssl.cipher.suites: "
                              f"{_ssl_error(exc)}", "ssl.cipher.suites") from None
    return ctx


def _load_keystore(ctx: SSL.Context, settings: SslSettings) -> None:
    path = settings.keystore_location
    if path is None:
        return
    password = settings.key_password
    if password is not None:
        ctx.set_passwd_cb(lambda *_: password.encode())
    try:
        ctx.use_certificate_chain_file(path.encode())
        ctx.use_privatekey_file(path.encode())
        ctx.check_privatekey()
    except SSL.Error as exc:
        hint = "" if password is not None else " (an encrypted key needs ssl.key.password)"
        raise ConfigError(f"ssl.keystore.location {path}: cannot load the key and certificate chain: "
                          f"{_ssl_error(exc)}{hint}", "ssl.keystore.location") from None


def _load_truststore(ctx: SSL.Context, settings: SslSettings) -> None:
    path = settings.truststore_location
    if path is None:
        return
    try:
        ctx.load_verify_locations(path.encode())
    except SSL.Error as exc:
        raise ConfigError(f"ssl.truststore.location {path}: cannot load the CA certificates: {_ssl_error(exc)}",
                          "ssl.truststore.location") from None


@implementer(IOpenSSLServerConnectionCreator)
class ServerTlsContext:
    """A listener's server context: one OpenSSL connection per accepted client."""

    def __init__(self, settings: SslSettings, listener: str) -> None:
        ctx = _base_context(settings)
        _load_keystore(ctx, settings)
        _load_truststore(ctx, settings)
        if settings.client_auth != "none" and settings.truststore_location is not None:
            mode = SSL.VERIFY_PEER
            if settings.client_auth == "required":
                mode |= SSL.VERIFY_FAIL_IF_NO_PEER_CERT
            ctx.set_verify(mode, _check_client)
            ctx.load_client_ca(settings.truststore_location.encode())
        ctx.set_session_id(f"logbus-{listener}".encode()[:32])
        self._ctx = ctx

    def serverConnectionForTLS(self, tls_protocol: Any) -> SSL.Connection:  # noqa: N802 - Twisted's name
        return SSL.Connection(self._ctx, None)
