"""What ``logbus cluster up --security`` adds to a local cluster: TLS with a CA made for it, SCRAM
logins (an ``admin`` super user for people and tools, a ``broker`` user for replication) and ACLs
enforced for everyone else. Passwords are random, kept in files only their owner can read."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from broker.config import load_properties
from broker.security.certificates import CertificateAuthority, pem_cert, pem_key

MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"
ADMIN = "admin"
INTER_BROKER = "broker"
AUTHORIZER = "broker.security.authorizer.AclAuthorizer"
CLIENT_PROPERTIES = "client.properties"


@dataclass(frozen=True)
class LocalSecurity:
    """The files of a secured local cluster, under ``<cluster dir>/security``."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def client_properties(self) -> Path:
        """The admin's client settings: for --command-config, --consumer.config, --producer.config."""
        return self.directory / CLIENT_PROPERTIES

    @property
    def broker_password_file(self) -> Path:
        return self.directory / "broker.password"

    @staticmethod
    def create(directory: Path, hosts: list[str]) -> LocalSecurity:
        """A new CA, a broker certificate for ``hosts``, and the two users' passwords."""
        directory.mkdir(parents=True, exist_ok=True)
        security = LocalSecurity(directory)
        ca = CertificateAuthority.create("logbus local cluster CA")
        key, cert = ca.issue(hosts[0], hosts)
        _private(security.ca, pem_cert(ca.cert))
        _private(security.keystore, pem_key(key) + pem_cert(cert) + pem_cert(ca.cert))
        _private(security.broker_password_file, secrets.token_urlsafe(24).encode())
        client = {"security.protocol": LISTENER, "ssl.ca.location": str(security.ca),
                  "sasl.mechanism": MECHANISM, "sasl.username": ADMIN, "sasl.password": secrets.token_urlsafe(24)}
        _private(security.client_properties, "".join(f"{k}={v}\n" for k, v in client.items()).encode())
        return security

    def passwords(self) -> dict[str, str]:
        """{user: password} of the admin and the inter-broker user."""
        return {ADMIN: load_properties(self.client_properties)["sasl.password"],
                INTER_BROKER: self.broker_password_file.read_text().strip()}

    def add_users(self, zookeeper_connect: str) -> None:
        """The SCRAM credentials of both users in ZooKeeper (/config/users), as Kafka stores them."""
        from broker.cluster.zk import ZkClient
        from broker.cluster.zkdata import ConfigType
        from broker.security.scram import make_credential

        zk = ZkClient(zookeeper_connect, session_timeout_ms=6000)
        zk.start(timeout=10)
        try:
            zk.ensure_paths()
            for user, password in self.passwords().items():
                zk.change_entity_config(ConfigType.USER, user, {MECHANISM: make_credential(MECHANISM, password).to_config()})
        finally:
            zk.stop()

    def broker_properties(self, host: str, port: int) -> dict[str, str]:
        """One SASL_SSL listener for clients and replication alike; ACLs on, admin and broker super users."""
        login = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{INTER_BROKER}" '
                 f'password="{self.passwords()[INTER_BROKER]}";')
        return {
            "listeners": f"{LISTENER}://{host}:{port}",
            "advertised.listeners": f"{LISTENER}://{host}:{port}",
            "security.inter.broker.protocol": LISTENER,
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": login,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{ADMIN};User:{INTER_BROKER}",
            "allow.everyone.if.no.acl.found": "false",
        }


def _private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by its owner only (keys and passwords)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
