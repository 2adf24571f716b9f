"""Certificates made for a test with the ``cryptography`` package: a CA, a broker certificate for
127.0.0.1/localhost (its key optionally encrypted), an expired one, one for another host, and a
client certificate. Files are PEM, as the brokers and clients read them."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


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
    now = datetime.datetime.now(datetime.UTC)
    ca_key = _key()
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("logbus test CA")).issuer_name(_name("logbus test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, hosts: list[str], valid_days: int, client: bool = False) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = _key()
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        start = now - datetime.timedelta(days=10) if valid_days < 0 else now - datetime.timedelta(days=1)
        builder = (
            x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=valid_days))
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        return path

    broker_key, broker_cert = leaf("localhost", ["127.0.0.1", "localhost"], 30)
    expired_key, expired_cert = leaf("localhost", ["127.0.0.1", "localhost"], -2)
    wrong_key, wrong_cert = leaf("elsewhere.example", ["elsewhere.example", "10.9.8.7"], 30)
    client_key, client_cert = leaf("alice", [], 30, client=True)
    return TestCerts(
        ca=write("ca.pem", _pem(ca_cert)),
        broker=write("broker.pem", _pem_key(broker_key, KEY_PASSWORD) + _pem(broker_cert) + _pem(ca_cert)),
        broker_plain_key=write("broker-plain.pem", _pem_key(broker_key) + _pem(broker_cert)),
        broker_cert=write("broker-cert.pem", _pem(broker_cert)),
        broker_key=write("broker-key.pem", _pem_key(broker_key)),
        expired=write("expired.pem", _pem_key(expired_key) + _pem(expired_cert)),
        wrong_host=write("wrong-host.pem", _pem_key(wrong_key) + _pem(wrong_cert)),
        client=write("client.pem", _pem_key(client_key) + _pem(client_cert)),
        client_cert=write("client-cert.pem", _pem(client_cert)),
        client_key=write("client-key.pem", _pem_key(client_key)),
    )
