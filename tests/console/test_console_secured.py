"""`logbus console --command-config` on a SASL_SSL cluster: the console reads it as a client with
the properties file's security keys; a wrong password is one error line, before anything is served."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.client.security import ClientSecurity
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from tests.security.conftest import SaslSslBroker, start_sasl_ssl_broker
from tests.teardown import delete_znodes, terminate

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def secured(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[SaslSslBroker]:
    broker = start_sasl_ssl_broker(zookeeper, tmp_path)
    try:
        yield broker
    finally:
        broker.process.stop()
        delete_znodes(zookeeper.connect_string, [broker.chroot])


def _properties(path: Path, props: dict) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def test_the_console_reads_a_sasl_ssl_cluster_through_its_command_config(secured: SaslSslBroker, tmp_path: Path):
    props = {"bootstrap.servers": secured.address, "security.protocol": "SASL_SSL", "ssl.ca.location": str(secured.ca),
             "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret"}
    with AdminClient(secured.address, security=ClientSecurity.from_props(props)) as admin:
        admin.create_topic("payments", 2, 1)
    with Producer({**props, "acks": "all"}) as producer:
        for i in range(20):
            producer.send("payments", b"v%d" % i, partition=i % 2)
        producer.flush()
    consumer = Consumer({**props, "group.id": "auditors", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("payments", 0, 4), TopicPartition("payments", 1, 10)], asynchronous=False)
    consumer.close()

    wrong = _properties(tmp_path / "wrong.properties", {**props, "sasl.password": "not-it"})
    refused = subprocess.run([sys.executable, "-m", "broker.cli", "console", "--command-config", wrong, "--port", "0"],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("logbus console: error: cannot read the cluster at")

    config = _properties(tmp_path / "client.properties", props)
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "console", "--command-config", config, "--port", "0",
                             "--interval", "0.5"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline() if proc.stdout else "")
        assert found, proc.stderr.read() if proc.poll() is not None and proc.stderr else "no URL"
        url = found.group(1)

        def page(path: str) -> str:
            with urllib.request.urlopen(url + path, timeout=20) as answer:
                assert answer.headers["Content-Security-Policy"].startswith("default-src 'self'")
                return answer.read().decode()

        assert '<tr data-broker="1">' in page("/")
        topic = page("/topics/payments")
        assert '<td class="num end">10</td>' in topic
        group = page("/groups/auditors")
        assert 'id="total-lag">6<' in group
        assert 'logbus_consumer_group_lag{group="auditors",topic="payments",partition="0"} 6' in page("/metrics")
    finally:
        terminate(proc)
