"""One secured broker per test module: PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT and three more TLS
listeners (client certificates required; a certificate for another host; TLSv1.2 with one cipher),
certificates made for the run, SCRAM users in ZooKeeper, PLAIN users in the JAAS key."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import ConfigType
from broker.security.scram import make_credential
from tests.security.certs import KEY_PASSWORD, TestCerts, make_certs
from tests.teardown import delete_znodes
from tests.waiting import wait_until

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";')
#: user -> (password, SCRAM mechanism)
SCRAM_USERS = {"alice": ("alice-secret", "SCRAM-SHA-256"), "bob": ("bob-secret", "SCRAM-SHA-512")}


@dataclass
class SecuredBroker:
    process: BrokerProcess
    certs: TestCerts
    ports: dict[str, int]
    zk_connect: str

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log_text(self) -> str:
        return self.process.out_path.read_text(errors="replace")


def add_scram_users(zk_connect: str) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=6000)
    zk.start(timeout=10)
    try:
        zk.ensure_paths()
        for name, (password, mechanism) in SCRAM_USERS.items():
            zk.change_entity_config(ConfigType.USER, name,
                                    {mechanism: make_credential(mechanism, password).to_config()})
    finally:
        zk.stop()


@pytest.fixture(scope="module")
def secured(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    home = tmp_path_factory.mktemp("secured")
    certs = make_certs(home / "certs")
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    connect = f"{zookeeper.connect_string}{chroot}"
    add_scram_users(connect)
    names = ["PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT", "MTLS", "WRONGHOST", "TLS12"]
    ports = {name: free_port() for name in names}
    props = {
        "broker.id": "1",
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL,WRONGHOST:SSL,TLS12:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(home / "data"),
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": "6000",
        "group.initial.rebalance.delay.ms": "0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.wronghost.ssl.keystore.location": str(certs.wrong_host),
        "listener.name.wronghost.ssl.key.password": "",
        "listener.name.tls12.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.tls12.ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384",
    }
    process = BrokerProcess(props, home / "broker")
    process.start()
    for port in ports.values():  # start() waits for the first listener; the others open just after
        wait_until(lambda port=port: _accepts(port), 10, 0.05, what=f"listener on port {port}")
    try:
        yield SecuredBroker(process, certs, ports, connect)
    finally:
        process.stop()
        delete_znodes(zookeeper.connect_string, [chroot])


@dataclass
class SaslSslBroker:
    """A broker whose clients' listener is SASL_SSL (the SCRAM users above, PLAIN's JAAS users),
    with a plaintext inter-broker listener; its chroot is for the caller to delete."""

    process: BrokerProcess
    ca: Path
    zk_connect: str
    chroot: str
    address: str


def start_sasl_ssl_broker(zookeeper: EmbeddedZooKeeper, home: Path, **overrides: str) -> SaslSslBroker:
    """Certificates made in ``home``, SCRAM users in a new chroot, the broker started (``overrides``: more keys)."""
    certs = make_certs(home / "certs")
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    connect = f"{zookeeper.connect_string}{chroot}"
    add_scram_users(connect)
    ports = {"SASL_SSL": free_port(), "INTERNAL": free_port()}
    process = BrokerProcess({
        "broker.id": "1",
        "listeners": f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']},INTERNAL://127.0.0.1:{ports['INTERNAL']}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "log.dirs": str(home / "data"), "zookeeper.connect": connect, "zookeeper.session.timeout.ms": "6000",
        "group.initial.rebalance.delay.ms": "0",
        "ssl.keystore.location": str(certs.broker), "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.location": str(certs.ca),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        **overrides,
    }, home / "broker")
    process.start()
    for port in ports.values():
        wait_until(lambda port=port: _accepts(port), 10, 0.05, what=f"listener on port {port}")
    return SaslSslBroker(process, certs.ca, connect, chroot, f"127.0.0.1:{ports['SASL_SSL']}")


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def client_path(path: Path) -> str:
    return str(path)
