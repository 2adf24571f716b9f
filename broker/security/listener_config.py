"""The broker's TLS and SASL keys, and what each listener ends up with.

Kafka's names and resolution: a listener reads ``listener.name.<name>.<key>`` (name lower-cased)
before ``<key>``; PLAIN users and the broker's own login come from
``listener.name.<name>.<mechanism>.sasl.jaas.config``. The keys are declared here (one home) and
listed in the broker's table (broker/config.py). Everything is checked at start-up, one line per
problem.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.configdef import ConfigError, Key, OneOf, Range, Type
from broker.security.jaas import PLAIN_MODULE, JaasError, parse_jaas
from broker.security.sasl import PLAIN, check_mechanisms

SSL_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
LISTENER_PREFIX = "listener.name."

#: The TLS and SASL keys of the broker's table (server.properties); types and defaults are Kafka's,
#: except sasl.enabled.mechanisms and sasl.mechanism.inter.broker.protocol (Kafka's GSSAPI is not offered).
SECURITY_KEYS = [
    Key("security.inter.broker.protocol", Type.STRING, "PLAINTEXT", OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
        doc="Protocol brokers use between themselves (when inter.broker.listener.name is not set)"),
    Key("sasl.mechanism.inter.broker.protocol", Type.STRING, PLAIN, doc="SASL mechanism of broker-to-broker links"),
    Key("sasl.enabled.mechanisms", Type.LIST, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        doc="Mechanisms offered on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    Key("sasl.server.max.receive.size", Type.INT, 524288, Range(1),
        doc="The largest request a client may send on a SASL listener before its login"),
    Key("ssl.keystore.type", Type.STRING, "PEM", OneOf(("PEM",)), doc="Only PEM: key and certificate chain in one file"),
    Key("ssl.keystore.location", Type.STRING, None, doc="PEM file: the private key and the certificate chain"),
    Key("ssl.key.password", Type.STRING, None, doc="Password of an encrypted private key"),
    Key("ssl.truststore.type", Type.STRING, "PEM", OneOf(("PEM",)), doc="Only PEM"),
    Key("ssl.truststore.location", Type.STRING, None, doc="PEM file of trusted CA certificates (clients, brokers)"),
    Key("ssl.client.auth", Type.STRING, "none", OneOf(("none", "requested", "required")),
        doc="Ask TLS clients for a certificate"),
    Key("ssl.enabled.protocols", Type.LIST, list(TLS_VERSIONS), doc="TLS versions accepted (TLSv1.2, TLSv1.3)"),
    Key("ssl.cipher.suites", Type.LIST, [], doc="OpenSSL cipher names for TLSv1.2; empty: OpenSSL's defaults"),
    Key("ssl.endpoint.identification.algorithm", Type.STRING, "https", OneOf(("https", "")),
        doc="Check the broker's host name in its certificate (inter-broker links); empty: do not"),
]
_KEYS = {k.name: k for k in SECURITY_KEYS}


@dataclass(frozen=True)
class SslSettings:
    """One listener's (or one client's) TLS settings."""

    keystore_location: str | None
    key_password: str | None
    truststore_location: str | None
    client_auth: str = "none"
    enabled_protocols: list[str] = field(default_factory=lambda: list(TLS_VERSIONS))
    cipher_suites: list[str] = field(default_factory=list)
    endpoint_identification: str = "https"


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener asks of its clients."""

    name: str
    protocol: str
    ssl: SslSettings | None = None
    sasl_mechanisms: list[str] = field(default_factory=list)
    plain_users: dict[str, str] = field(default_factory=dict)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def listener_value(props: Mapping[str, str], listener: str, key: str) -> str | None:
    """``listener.name.<listener>.<key>``, else ``<key>``, else None (raw strings)."""
    scoped = f"{LISTENER_PREFIX}{listener.lower()}.{key}"
    if scoped in props:
        return props[scoped]
    return props.get(key)


def _typed(props: Mapping[str, str], listener: str, key: str) -> object:
    raw = listener_value(props, listener, key)
    definition = _KEYS[key]
    if raw is None:
        return definition.parse(definition.default) if definition.default is not None else None
    label = f"{LISTENER_PREFIX}{listener.lower()}.{key}" if f"{LISTENER_PREFIX}{listener.lower()}.{key}" in props else key
    return definition.parse(raw, label)


def _readable(path: str, key: str) -> str:
    if not os.access(path, os.R_OK):
        raise ConfigError(f"Invalid value {path!r} for configuration {key}: file not found or not readable", key)
    return path


def ssl_settings(props: Mapping[str, str], listener: str, server: bool = True) -> SslSettings:
    """The TLS settings of ``listener`` (a broker's keystore is required when ``server``)."""
    keystore = _typed(props, listener, "ssl.keystore.location")
    truststore = _typed(props, listener, "ssl.truststore.location")
    _typed(props, listener, "ssl.keystore.type")
    _typed(props, listener, "ssl.truststore.type")
    if server and not keystore:
        raise ConfigError(f"listener {listener} uses TLS: set ssl.keystore.location "
                          f"(or {LISTENER_PREFIX}{listener.lower()}.ssl.keystore.location)", "ssl.keystore.location")
    protocols = _typed(props, listener, "ssl.enabled.protocols")
    assert isinstance(protocols, list)
    bad = [p for p in protocols if p not in TLS_VERSIONS]
    if bad or not protocols:
        raise ConfigError(f"Invalid value {','.join(protocols)!r} for configuration ssl.enabled.protocols: "
                          f"use {', '.join(TLS_VERSIONS)}", "ssl.enabled.protocols")
    client_auth = str(_typed(props, listener, "ssl.client.auth"))
    if client_auth != "none" and not truststore:
        raise ConfigError(f"ssl.client.auth={client_auth} on listener {listener} needs ssl.truststore.location",
                          "ssl.truststore.location")
    ciphers = _typed(props, listener, "ssl.cipher.suites")
    assert isinstance(ciphers, list)
    return SslSettings(
        _readable(str(keystore), "ssl.keystore.location") if keystore else None,
        listener_value(props, listener, "ssl.key.password"),
        _readable(str(truststore), "ssl.truststore.location") if truststore else None,
        client_auth,
        protocols,
        ciphers,
        str(_typed(props, listener, "ssl.endpoint.identification.algorithm")),
    )


def jaas_key(listener: str, mechanism: str) -> str:
    return f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def listener_security(props: Mapping[str, str], name: str, protocol: str) -> ListenerSecurity:
    """Resolve and check one listener's security settings (ConfigError: one line)."""
    ssl = ssl_settings(props, name) if protocol in SSL_PROTOCOLS else None
    if protocol not in SASL_PROTOCOLS:
        return ListenerSecurity(name, protocol, ssl)
    raw = _typed(props, name, "sasl.enabled.mechanisms")
    assert isinstance(raw, list)
    try:
        mechanisms = check_mechanisms(raw)
    except ValueError as exc:
        raise ConfigError(f"Invalid value {','.join(raw)!r} for configuration sasl.enabled.mechanisms: {exc}",
                          "sasl.enabled.mechanisms") from None
    if not mechanisms:
        raise ConfigError(f"listener {name} is {protocol}: sasl.enabled.mechanisms is empty", "sasl.enabled.mechanisms")
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        key = jaas_key(name, PLAIN)
        text = props.get(key) or props.get(f"{PLAIN.lower()}.sasl.jaas.config") or props.get("sasl.jaas.config")
        if text:
            try:
                for module in parse_jaas(text):
                    if module.name == PLAIN_MODULE:
                        users.update(module.users())
            except JaasError as exc:
                raise ConfigError(f"Invalid value for configuration {key}: {exc}", key) from None
    return ListenerSecurity(name, protocol, ssl, mechanisms, users)


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How a broker reaches the others: the inter-broker listener's protocol, its TLS settings
    and the broker's own SASL login (sasl.mechanism.inter.broker.protocol, with the
    username/password of that listener's JAAS key)."""

    listener: str
    protocol: str = "PLAINTEXT"
    ssl: SslSettings | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)


def inter_broker_security(props: Mapping[str, str], listener: str, protocol: str, mechanism: str) -> InterBrokerSecurity:
    """Resolve and check (ConfigError, one line) the inter-broker link's settings."""
    ssl = ssl_settings(props, listener, server=False) if protocol in SSL_PROTOCOLS else None
    if protocol not in SASL_PROTOCOLS:
        return InterBrokerSecurity(listener, protocol, ssl)
    mechanism = mechanism.upper()
    if mechanism not in listener_security(props, listener, protocol).sasl_mechanisms:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism} is not enabled on listener {listener}",
                          "sasl.mechanism.inter.broker.protocol")
    credentials = inter_broker_login(props, listener, mechanism)
    if credentials is None:
        key = jaas_key(listener, mechanism)
        raise ConfigError(f"the inter-broker listener {listener} uses SASL: set username and password in {key}", key)
    return InterBrokerSecurity(listener, protocol, ssl, mechanism, *credentials)


def inter_broker_login(props: Mapping[str, str], listener: str, mechanism: str) -> tuple[str, str] | None:
    """The broker's own (username, password) for ``mechanism`` on ``listener``: the
    ``username``/``password`` options of that listener's JAAS config (Kafka's place for them)."""
    text = props.get(jaas_key(listener, mechanism)) or props.get("sasl.jaas.config")
    if not text:
        return None
    try:
        for module in parse_jaas(text):
            if "username" in module.options and "password" in module.options:
                return module.options["username"], module.options["password"]
    except JaasError:
        return None
    return None
