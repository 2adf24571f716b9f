"""A certificate authority made on the spot (the ``cryptography`` package): a CA and the leaf
certificates it signs, written as the PEM files brokers and clients read — for local clusters
and tests, where nobody has an organisation's CA at hand."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PrivateKey = ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_key() -> PrivateKey:
    """A P-256 key: small, fast, accepted by every TLS 1.2+ client."""
    return ec.generate_private_key(ec.SECP256R1())


def pem_key(key: PrivateKey, password: str | None = None) -> bytes:
    """The key as PKCS#8 PEM, encrypted when a password is given (``ssl.key.password``)."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA that signs leaf certificates for host names and IP addresses."""

    key: PrivateKey
    cert: x509.Certificate

    @staticmethod
    def create(name: str, days: int = 365) -> CertificateAuthority:
        now = datetime.datetime.now(datetime.UTC)
        key = new_key()
        cert = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        return CertificateAuthority(key, cert)

    def issue(self, common_name: str, hosts: list[str], days: int = 365) -> tuple[PrivateKey, x509.Certificate]:
        """A new key and its certificate for ``hosts`` (DNS names or IP addresses, as subject
        alternative names); ``days`` < 0 makes one that expired ``-days`` days ago."""
        now = datetime.datetime.now(datetime.UTC)
        key = new_key()
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        start = now - datetime.timedelta(days=10 if days < 0 else 1)
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(now + datetime.timedelta(days=days))
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return key, builder.sign(self.key, hashes.SHA256())
