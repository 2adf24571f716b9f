"""How logbus's clients reach a secured broker: TLS around the socket, then a SASL login.

One place for every client (Producer, SimpleConsumer, GroupConsumer, AdminClient, the tools):
``ClientSecurity.from_props`` reads Kafka's client keys (Java and librdkafka spellings), and
``BrokerConnection`` calls ``wrap_socket`` and ``login`` when it connects. SCRAM's arithmetic is
broker/security/scram.py, shared with the broker.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.configdef import ConfigError, Key, OneOf, Type
from broker.protocol.messages import ApiKey
from broker.security.jaas import JaasError, login_of
from broker.security.sasl import SUPPORTED_MECHANISMS
from broker.security.sasl_client import login_steps

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: The clients' security keys (Kafka's names; librdkafka's ssl.ca.location and friends too).
CLIENT_SECURITY_KEYS = [
    Key("security.protocol", Type.STRING, "PLAINTEXT", OneOf(tuple(p.lower() for p in PROTOCOLS), ignore_case=True,
                                                                 reason="expected one of " + ", ".join(PROTOCOLS)),
        doc="`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`."),
    Key("ssl.truststore.location", Type.STRING, None, doc="PEM file of the CA certificates to trust (ssl.truststore.type=PEM)."),
    Key("ssl.ca.location", Type.STRING, None, doc="librdkafka's name for `ssl.truststore.location`."),
    Key("ssl.truststore.type", Type.STRING, "PEM", OneOf(("PEM",)), doc="Only PEM."),
    Key("ssl.keystore.location", Type.STRING, None, doc="PEM file with the client's key and certificate (client auth)."),
    Key("ssl.keystore.type", Type.STRING, "PEM", OneOf(("PEM",)), doc="Only PEM."),
    Key("ssl.certificate.location", Type.STRING, None, doc="librdkafka: the client certificate (PEM)."),
    Key("ssl.key.location", Type.STRING, None, doc="librdkafka: the client key (PEM)."),
    Key("ssl.key.password", Type.STRING, None, doc="Password of an encrypted client key."),
    Key("ssl.endpoint.identification.algorithm", Type.STRING, "https", OneOf(("https", "none", "")),
        doc="`https`: the broker's certificate must name the host connected to; empty or `none`: not checked."),
    Key("sasl.mechanism", Type.STRING, "GSSAPI", doc="`PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (GSSAPI is not supported)."),
    Key("sasl.username", Type.STRING, None, doc="SASL user (librdkafka's key)."),
    Key("sasl.password", Type.STRING, None, doc="SASL password (librdkafka's key)."),
    Key("sasl.jaas.config", Type.STRING, None,
        doc="Java clients' form: `...LoginModule required username=\"u\" password=\"p\";`."),
]
SECURITY_KEY_NAMES = frozenset(k.name for k in CLIENT_SECURITY_KEYS)


@dataclass(frozen=True)
class ClientSecurity:
    """A client's TLS and SASL settings; PLAINTEXT (the default) means neither."""

    protocol: str = "PLAINTEXT"
    ca_location: str | None = None
    cert_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a repr or a log line

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @staticmethod
    def from_props(props: Mapping[str, Any]) -> ClientSecurity:
        """Read the security keys of a client config (others are ignored); ConfigError: one line."""
        keys = {k.name: k for k in CLIENT_SECURITY_KEYS}

        def get(name: str) -> Any:
            raw = props.get(name)
            if raw is None:
                return keys[name].parse(keys[name].default) if keys[name].default is not None else None
            return keys[name].parse(raw) if raw != "" or name == "ssl.endpoint.identification.algorithm" else None

        protocol = str(get("security.protocol")).upper()
        if protocol == "PLAINTEXT":
            return ClientSecurity()
        mechanism = username = password = None
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = str(get("sasl.mechanism")).upper()
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigError(f"Invalid value {mechanism!r} for configuration sasl.mechanism: use one of "
                                  f"{', '.join(SUPPORTED_MECHANISMS)}", "sasl.mechanism")
            username, password = get("sasl.username"), get("sasl.password")
            jaas = get("sasl.jaas.config")
            if (username is None or password is None) and jaas:
                try:
                    username, password = login_of(jaas)
                except JaasError as exc:
                    raise ConfigError(f"Invalid value for configuration sasl.jaas.config: {exc}", "sasl.jaas.config") from None
            if username is None or password is None:
                raise ConfigError(f"security.protocol={protocol} needs sasl.username and sasl.password "
                                  "(or sasl.jaas.config)", "sasl.username")
        keystore = get("ssl.keystore.location")
        return ClientSecurity(
            protocol=protocol,
            ca_location=get("ssl.truststore.location") or get("ssl.ca.location"),
            cert_location=get("ssl.certificate.location") or keystore,
            key_location=get("ssl.key.location") or keystore,
            key_password=get("ssl.key.password"),
            check_hostname=str(get("ssl.endpoint.identification.algorithm")).lower() == "https",
            mechanism=mechanism,
            username=username,
            password=password,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """TLS 1.2+; the CA file (else the system's CAs); the client certificate when given."""
        context = ssl.create_default_context(cafile=self.ca_location)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_hostname
        if self.cert_location:
            context.load_cert_chain(self.cert_location, self.key_location, self.key_password)
        return context


PLAINTEXT = ClientSecurity()


def wrap_socket(sock: socket.socket, host: str, security: ClientSecurity) -> socket.socket:
    """TLS around a connected socket (the handshake happens here: a bad certificate raises)."""
    return security.ssl_context().wrap_socket(sock, server_hostname=host)


Request = Callable[[ApiKey, int, dict], Any]


def login(request: Request, security: ClientSecurity) -> None:
    """The SASL login (broker/security/sasl_client.py) over a blocking ``request``; raises
    SaslAuthenticationFailedError (the broker closes the connection after it)."""
    assert security.mechanism and security.username is not None and security.password is not None
    steps = login_steps(security.mechanism, security.username, security.password)
    try:
        step = next(steps)
        while True:
            step = steps.send(request(*step))
    except StopIteration:
        return


def security_props(props: Mapping[str, Any]) -> dict[str, Any]:
    """Only the security keys of ``props`` (to pass a client's settings on to another)."""
    return {k: v for k, v in props.items() if k in SECURITY_KEY_NAMES}
