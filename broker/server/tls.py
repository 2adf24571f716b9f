"""OpenSSL contexts for TLS listeners, and the TLS options of a broker's links to other brokers.

Built once per listener from its SslSettings (broker/security/listener_config.py): the PEM
keystore (key + certificate chain, perhaps encrypted with ssl.key.password), the PEM truststore
for client certificates, ssl.client.auth, ssl.enabled.protocols and ssl.cipher.suites. A file
that does not load is a ConfigError: one line at start-up.
"""

from __future__ import annotations

import weakref
from typing import Any

from OpenSSL import SSL
from twisted.internet import ssl as tssl
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
        reasons = [str(item[-1]) for item in args[0] if item]
        return "; ".join(dict.fromkeys(r for r in reasons if r))  # in order, each once
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
    # Always a callback: without one OpenSSL would prompt on the terminal for an encrypted key.
    ctx.set_passwd_cb(lambda *_: (password or "").encode())
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


def _pem_blocks(data: bytes, kind: bytes) -> list[bytes]:
    begin, end = b"-----BEGIN " + kind + b"-----", b"-----END " + kind + b"-----"
    blocks, start = [], data.find(begin)
    while start >= 0:
        stop = data.index(end, start) + len(end)
        blocks.append(data[start:stop])
        start = data.find(begin, stop)
    return blocks


def client_tls_options(settings: SslSettings, host: str) -> Any:
    """How this broker connects over TLS to another broker at ``host``: trust the truststore's
    CAs, check the host name (unless ssl.endpoint.identification.algorithm is empty), present the
    keystore's certificate when there is one (for ssl.client.auth). ConfigError: a file that
    does not load."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from OpenSSL import crypto

    try:
        trust = None
        if settings.truststore_location is not None:
            with open(settings.truststore_location, "rb") as f:
                cas = [tssl.Certificate.loadPEM(block) for block in _pem_blocks(f.read(), b"CERTIFICATE")]
            trust = tssl.trustRootFromCertificates(cas)
        client_cert = None
        if settings.keystore_location is not None:
            with open(settings.keystore_location, "rb") as f:
                data = f.read()
            password = settings.key_password.encode() if settings.key_password else None
            key_block = next(b for b in _pem_blocks(data, b"PRIVATE KEY") + _pem_blocks(data, b"ENCRYPTED PRIVATE KEY"))
            key = crypto.PKey.from_cryptography_key(load_pem_private_key(key_block, password))  # type: ignore[arg-type]
            cert = tssl.Certificate.loadPEM(_pem_blocks(data, b"CERTIFICATE")[0])
            client_cert = tssl.PrivateCertificate.fromCertificateAndKeyPair(cert, tssl.KeyPair(key))
    except (OSError, ValueError, TypeError, StopIteration, IndexError, SSL.Error) as exc:
        raise ConfigError(f"inter-broker TLS: cannot load the keystore or truststore: {exc}", "ssl.truststore.location") from None
    minimum = tssl.TLSVersion.TLSv1_3 if settings.enabled_protocols == ["TLSv1.3"] else tssl.TLSVersion.TLSv1_2
    if settings.endpoint_identification:
        return tssl.optionsForClientTLS(host, trustRoot=trust, clientCertificate=client_cert,
                                        extraCertificateOptions={"raiseMinimumTo": minimum})
    options: dict[str, Any] = {"raiseMinimumTo": minimum, "trustRoot": trust}
    if client_cert is not None:
        options.update(privateKey=client_cert.privateKey.original, certificate=client_cert.original)
    return tssl.CertificateOptions(**options)
