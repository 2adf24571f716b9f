"""Three brokers whose only listener is SASL_SSL: followers fetch over TLS with the broker's own
SCRAM login, acks=all records are on the in-sync replicas, and a leader SIGKILL loses none of them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from broker.client.admin import AdminClient
from broker.client.security import ClientSecurity
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import ConfigType
from broker.security.scram import make_credential
from tests.security.certs import KEY_PASSWORD, make_certs
from tests.teardown import delete_znodes, stopping

BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
               'password="broker-secret";')


def test_sasl_ssl_replication_survives_a_leader_kill(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    certs = make_certs(tmp_path / "certs")
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    connect = f"{zookeeper.connect_string}{chroot}"
    zk = ZkClient(connect, session_timeout_ms=6000)
    zk.start(timeout=10)
    try:
        zk.ensure_paths()
        for user in ("broker", "alice"):
            zk.change_entity_config(ConfigType.USER, user,
                                    {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", f"{user}-secret").to_config()})
    finally:
        zk.stop()
    client = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca), "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.username": "alice", "sasl.password": "alice-secret"}
    try:
        with stopping(BrokerProcess.stop) as keep:
            brokers = []
            for broker_id in (1, 2, 3):
                props = {
                    "broker.id": str(broker_id),
                    "listeners": f"SASL_SSL://127.0.0.1:{free_port()}",
                    "security.inter.broker.protocol": "SASL_SSL",
                    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
                    "ssl.keystore.location": str(certs.broker),
                    "ssl.key.password": KEY_PASSWORD,
                    "ssl.truststore.location": str(certs.ca),
                    "log.dirs": str(tmp_path / f"b{broker_id}"),
                    "zookeeper.connect": connect,
                    "zookeeper.session.timeout.ms": "6000",
                    "replica.fetch.wait.max.ms": "100",
                    "group.initial.rebalance.delay.ms": "0",
                }
                brokers.append(keep(BrokerProcess(props, tmp_path / f"home{broker_id}")).start())
            bootstrap = ",".join(b.bootstrap for b in brokers)
            topic = "replicated"
            with AdminClient(bootstrap, security=ClientSecurity.from_props(client)) as admin:
                admin.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
                deadline = time.monotonic() + 20
                while True:
                    [described] = admin.describe_topics([topic])
                    if sorted(described.partitions[0].isr) == [1, 2, 3] or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                leader = described.partitions[0].leader
            assert sorted(described.partitions[0].isr) == [1, 2, 3]
            producer = Producer({**client, "bootstrap.servers": bootstrap, "acks": "all"})
            acked: list[bytes] = []
            for i in range(200):
                producer.produce(topic, f"r{i}".encode(),
                                 on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
            assert producer.flush(30) == 0
            assert len(acked) == 200  # acks=all, min.insync.replicas=2: each on every in-sync replica
            survivor = next(b for b in brokers if b.broker_id != leader)
            next(b for b in brokers if b.broker_id == leader).kill()
            consumer = Consumer({**client, "bootstrap.servers": survivor.bootstrap, "group.id": "after-kill",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe([topic])
            got: list[bytes] = []
            try:
                deadline = time.monotonic() + 40
                while len(got) < len(acked) and time.monotonic() < deadline:
                    msg = consumer.poll(0.5)
                    if msg is not None and msg.error() is None:
                        got.append(msg.value())
            finally:
                consumer.close()
            assert sorted(got) == sorted(acked)
            assert "logged in as User:broker (SCRAM-SHA-512)" in next(
                b for b in brokers if b.broker_id == leader).out_path.read_text()
    finally:
        delete_znodes(zookeeper.connect_string, [chroot])
