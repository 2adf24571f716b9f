"""The sasl.jaas.config parser, the PLAIN check and the server's SASL state machine."""

from __future__ import annotations

import pytest

from broker.configdef import ConfigError
from broker.protocol.errors import IllegalSaslStateError, SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from broker.security.jaas import JaasError, login_of, parse_jaas
from broker.security.listener_config import listener_security
from broker.security.sasl import NeedCredential, SaslServerExchange, State
from broker.security.scram import ScramClient, make_credential


def test_parse_kafka_forms() -> None:
    [module] = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                          '  username="admin" password="admin-secret"\n  user_admin="admin-secret" user_alice=alice-pw;')
    assert module.flag == "required"
    assert module.users() == {"admin": "admin-secret", "alice": "alice-pw"}
    assert login_of('org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
                    'password="p;\\"q=";') == ("a", 'p;"q=')
    two = parse_jaas('A required x="1"; B optional y="2";')
    assert [(m.name, m.options) for m in two] == [("A", {"x": "1"}), ("B", {"y": "2"})]


@pytest.mark.parametrize("text", ["", "Module", 'Module required user="x"', 'Module maybe a="b";',
                                  'Module required a=;', 'Module required ="b";', 'Module required a "b";'])
def test_malformed_jaas(text: str) -> None:
    with pytest.raises(JaasError):
        parse_jaas(text)


def test_listener_config_resolution() -> None:
    props = {"sasl.enabled.mechanisms": "SCRAM-SHA-512",
             "listener.name.inside.sasl.enabled.mechanisms": "plain",
             "listener.name.inside.plain.sasl.jaas.config":
                 'org.apache.kafka.common.security.plain.PlainLoginModule required user_u="p";'}
    inside = listener_security(props, "INSIDE", "SASL_PLAINTEXT")
    assert inside.sasl_mechanisms == ["PLAIN"] and inside.plain_users == {"u": "p"}
    assert listener_security(props, "OUTSIDE", "SASL_PLAINTEXT").sasl_mechanisms == ["SCRAM-SHA-512"]
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        listener_security({"sasl.enabled.mechanisms": "GSSAPI"}, "X", "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        listener_security({}, "SECURE", "SSL")
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        listener_security({"listener.name.secure.ssl.client.auth": "sometimes", "ssl.keystore.location": __file__},
                          "SECURE", "SSL")


def test_plain_exchange() -> None:
    exchange = SaslServerExchange(["PLAIN"], {"carol": "pw"})
    exchange.handshake("PLAIN", 1)
    assert exchange.authenticate(b"\0carol\0pw") == b""
    assert exchange.state is State.COMPLETE and exchange.principal == "User:carol"
    for token in (b"\0carol\0wrong", b"\0nobody\0pw", b"carol\0pw", b"other\0carol\0pw"):
        failing = SaslServerExchange(["PLAIN"], {"carol": "pw"})
        failing.handshake("PLAIN", 1)
        with pytest.raises(SaslAuthenticationFailedError):
            failing.authenticate(token)
        assert failing.state is State.FAILED and failing.principal is None


def test_scram_exchange_needs_the_credential() -> None:
    exchange = SaslServerExchange(["SCRAM-SHA-512"])
    exchange.handshake("SCRAM-SHA-512", 1)
    client = ScramClient("SCRAM-SHA-512", "bob", "pw")
    need = exchange.authenticate(client.first())
    assert need == NeedCredential("bob", "SCRAM-SHA-512")
    with pytest.raises(IllegalSaslStateError):  # a second token before the credential came
        exchange.authenticate(b"again")
    exchange = SaslServerExchange(["SCRAM-SHA-512"])
    exchange.handshake("SCRAM-SHA-512", 1)
    exchange.authenticate(client.first())
    server_first = exchange.credential(make_credential("SCRAM-SHA-512", "pw"))
    client.verify(exchange.authenticate(client.final(server_first)))  # type: ignore[arg-type]
    assert exchange.principal == "User:bob"


def test_out_of_order_and_unknown_mechanism() -> None:
    exchange = SaslServerExchange(["PLAIN"])
    with pytest.raises(IllegalSaslStateError):
        exchange.authenticate(b"\0a\0b")
    exchange = SaslServerExchange(["PLAIN"])
    with pytest.raises(UnsupportedSaslMechanismError):
        exchange.handshake("SCRAM-SHA-256", 1)
    exchange = SaslServerExchange(["PLAIN"])
    exchange.handshake("PLAIN", 0)
    assert exchange.raw_tokens
    with pytest.raises(IllegalSaslStateError):
        exchange.handshake("PLAIN", 1)
    exchange = SaslServerExchange(["SCRAM-SHA-256"])
    exchange.handshake("SCRAM-SHA-256", 1)
    assert isinstance(exchange.authenticate(ScramClient("SCRAM-SHA-256", "nobody", "x").first()), NeedCredential)
    with pytest.raises(SaslAuthenticationFailedError):
        exchange.credential(None)
