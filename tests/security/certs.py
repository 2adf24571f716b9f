"""Certificates made for a test (broker/security/certificates.py): a CA, a broker certificate for
127.0.0.1/localhost (its key optionally encrypted), an expired one, one for another host, and a
client certificate. Files are PEM, as the brokers and clients read them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.security.certificates import CertificateAuthority, pem_cert, pem_key

KEY_PASSWORD = "key-secret"


@dataclass
class TestCerts:
    ca: Path  # the CA certificate (clients' and brokers' truststore)
    broker: Path  # key (encrypted with KEY_PASSWORD) + certificate for 127.0.0.1 and localhost
    broker_plain_key: Path  # the same, key not encrypted
    broker_cert: Path  # certificate only
    broker_key: Path  # key only, not encrypted
    expired: Path  # key + expired certificate for 127.0.0.1
    wrong_host: Path  # key + certificate for another host only
    client: Path  # key + client certificate (CN=alice)
    client_cert: Path
    client_key: Path


def make_certs(directory: Path) -> TestCerts:
    """Write every file into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create("logbus test CA", days=30)
    leaf = ca.issue

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        return path

    broker_key, broker_cert = leaf("localhost", ["127.0.0.1", "localhost"], 30)
    expired_key, expired_cert = leaf("localhost", ["127.0.0.1", "localhost"], -2)
    wrong_key, wrong_cert = leaf("elsewhere.example", ["elsewhere.example", "10.9.8.7"], 30)
    client_key, client_cert = leaf("alice", [], 30)
    ca_cert = ca.cert
    return TestCerts(
        ca=write("ca.pem", pem_cert(ca_cert)),
        broker=write("broker.pem", pem_key(broker_key, KEY_PASSWORD) + pem_cert(broker_cert) + pem_cert(ca_cert)),
        broker_plain_key=write("broker-plain.pem", pem_key(broker_key) + pem_cert(broker_cert)),
        broker_cert=write("broker-cert.pem", pem_cert(broker_cert)),
        broker_key=write("broker-key.pem", pem_key(broker_key)),
        expired=write("expired.pem", pem_key(expired_key) + pem_cert(expired_cert)),
        wrong_host=write("wrong-host.pem", pem_key(wrong_key) + pem_cert(wrong_cert)),
        client=write("client.pem", pem_key(client_key) + pem_cert(client_cert)),
        client_cert=write("client-cert.pem", pem_cert(client_cert)),
        client_key=write("client-key.pem", pem_key(client_key)),
    )
