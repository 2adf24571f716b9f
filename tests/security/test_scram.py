"""SCRAM against RFC 7677's SCRAM-SHA-256 example, both sides, and the stored form Kafka uses."""

from __future__ import annotations

import base64

import pytest

from broker.protocol.errors import SaslAuthenticationFailedError
from broker.security.scram import ScramClient, ScramCredential, ScramFormatError, ScramServer, make_credential

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_client_matches_rfc_7677() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first() == CLIENT_FIRST
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)
    with pytest.raises(SaslAuthenticationFailedError):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


def test_server_matches_rfc_7677() -> None:
    server = ScramServer("SCRAM-SHA-256", nonce=SERVER_NONCE)
    assert server.client_first(CLIENT_FIRST) == "user"
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, salt=SALT)
    assert server.server_first(credential) == SERVER_FIRST
    assert server.client_final(CLIENT_FINAL) == SERVER_FINAL


def test_server_refuses_a_wrong_proof() -> None:
    server = ScramServer("SCRAM-SHA-256", nonce=SERVER_NONCE)
    server.client_first(CLIENT_FIRST)
    server.server_first(make_credential("SCRAM-SHA-256", "not-pencil", 4096, salt=SALT))
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
        server.client_final(CLIENT_FINAL)


@pytest.mark.parametrize("message", [
    b"\xff\xfe", b"garbage", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=user", b"n,,n=us=er,r=abc",
    b"n,,m=ext,n=user,r=abc", b"n,a=other,n=user,r=abc", b"n,,n=user,r=abc,tokenauth=true",
])
def test_server_refuses_malformed_client_first(message: bytes) -> None:
    with pytest.raises(ScramFormatError):
        ScramServer("SCRAM-SHA-256").client_first(message)


def test_server_refuses_a_changed_nonce_or_binding() -> None:
    for final in (CLIENT_FINAL.replace(b"r=rOpr", b"r=xOpr"), CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), b"c=biws"):
        server = ScramServer("SCRAM-SHA-256", nonce=SERVER_NONCE)
        server.client_first(CLIENT_FIRST)
        server.server_first(make_credential("SCRAM-SHA-256", "pencil", 4096, salt=SALT))
        with pytest.raises(ScramFormatError):
            server.client_final(final)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_and_stored_form(mechanism: str) -> None:
    credential = make_credential(mechanism, "secret", 8192)
    text = credential.to_config()
    assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text and text.endswith(",iterations=8192")
    assert "secret" not in text
    stored = ScramCredential.from_config(text)
    assert stored == credential
    client, server = ScramClient(mechanism, "a,b=c", "secret"), ScramServer(mechanism)
    assert server.client_first(client.first()) == "a,b=c"
    client.verify(server.client_final(client.final(server.server_first(stored))))


def test_iterations_within_kafkas_bounds() -> None:
    with pytest.raises(ScramFormatError, match="between 4096 and 16384"):
        make_credential("SCRAM-SHA-256", "x", 1000)
    with pytest.raises(ScramFormatError, match="unknown SCRAM mechanism"):
        make_credential("SCRAM-SHA-1", "x")
