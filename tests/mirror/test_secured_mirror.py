"""The mirror between two secured clusters with different credentials: a SASL_SSL source (alice,
SCRAM-SHA-256, its own CA) read through bootstrap.servers, copied into a SASL_SSL aggregate (bob,
SCRAM-SHA-512, another CA), then the same source found through its ZooKeeper. Copying, exact
resume's tail scan, target topic creation, the lag probe, group offset translation (the command)
and sync (the mirror) all log in; a wrong aggregate password stops the mirror with one line."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client.admin import AdminClient
from broker.client.group_consumer import GroupConsumer
from broker.client.producer import Producer
from broker.client.security import ClientSecurity
from broker.client.simple_consumer import SimpleConsumer
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess, write_properties
from broker.tools.access import ClusterAccess
from broker.tools.translate_offsets import target_group
from tests.mirror.conftest import wait_until
from tests.security.conftest import start_sasl_ssl_broker
from tests.teardown import delete_znodes

pytestmark = pytest.mark.integration


def _secured_broker(zk: EmbeddedZooKeeper, home: Path, chroots: list[str]) -> tuple[BrokerProcess, Path, str]:
    broker = start_sasl_ssl_broker(zk, home)
    chroots.append(broker.chroot)
    return broker.process, broker.ca, broker.zk_connect


@pytest.fixture
def two_secured(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[tuple[dict, dict]]:
    chroots: list[str] = []
    started: list[BrokerProcess] = []
    try:
        src, src_ca, src_zk = _secured_broker(zookeeper, tmp_path / "src", chroots)
        started.append(src)
        agg, agg_ca, _ = _secured_broker(zookeeper, tmp_path / "agg", chroots)
        started.append(agg)
        yield ({"bootstrap.servers": src.bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(src_ca),
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": "alice-secret",
                "zookeeper.connect": src_zk},
               {"bootstrap.servers": agg.bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(agg_ca),
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"})
    finally:
        for b in started:
            b.stop()
        delete_znodes(zookeeper.connect_string, chroots)


def _count(props: dict, topic: str) -> int:
    """Records in ``topic`` (its partitions' end offsets), 0 before it exists; read over SASL_SSL."""
    try:
        with SimpleConsumer.from_address(props["bootstrap.servers"], security=ClientSecurity.from_props(props)) as c:
            return sum(c.latest_offset(topic, p) for p in c.partitions_for(topic))
    except Exception:  # noqa: BLE001 - not created yet
        return 0


def test_mirror_between_two_secured_clusters_with_different_credentials(two_secured, mirrors, tmp_path) -> None:
    source, aggregate = two_secured
    topic = f"events.{uuid.uuid4().hex[:6]}"
    with AdminClient(source["bootstrap.servers"], security=ClientSecurity.from_props(source)) as admin:
        admin.create_topic(topic, 2, 1, {"retention.ms": "3600000"})
    with Producer({**source, "acks": "all"}) as producer:
        for i in range(200):
            producer.send(topic, b"v%d" % i, b"k%d" % (i % 5))
        producer.flush()
    args = ("--whitelist", r"events\..*", "--offset.commit.interval.ms", "500")
    bootstrap_source = {k: v for k, v in source.items() if k != "zookeeper.connect"}
    m = mirrors([{**bootstrap_source, "group.id": "secured-mirror", "mirror.source.name": "dc1"}], aggregate, *args)
    wait_until(lambda: _count(aggregate, topic) == 200, 40, 0.3, what="200 copies in the secured aggregate")
    assert m.stop() == 0, m.output()[-3000:]
    with AdminClient(aggregate["bootstrap.servers"], security=ClientSecurity.from_props(aggregate)) as admin:
        assert admin.topic_configs(topic).get("retention.ms") == "3600000"  # configs read over SASL_SSL too
    # a group's offsets at the source: translated by the command, and synced by the mirror, over SASL_SSL
    readers = f"readers-{uuid.uuid4().hex[:6]}"
    with GroupConsumer({**bootstrap_source, "group.id": readers}) as consumer:
        consumer.commit({(topic, 0): 3, (topic, 1): 3})
    files = {name: write_properties(tmp_path / f"{name}.properties", props)
             for name, props in (("src", bootstrap_source), ("agg", aggregate))}
    translated = subprocess.run([sys.executable, "-m", "broker.cli", "consumer-groups", "--bootstrap-server",
                                 aggregate["bootstrap.servers"], "--command-config", str(files["agg"]), "--group", readers,
                                 "--translate-from", str(files["src"]), "--dry-run"], capture_output=True, text=True, timeout=60)
    assert translated.returncode == 0, translated.stderr
    assert [line.split()[3] for line in translated.stdout.splitlines()[1:]] == ["3", "3"]
    # a restart scans the secured aggregate's tail; nothing is copied twice
    m2 = mirrors([{**bootstrap_source, "group.id": "secured-mirror", "mirror.source.name": "dc1"}], aggregate, *args,
                 "--sync.group.offsets", "--sync.group.offsets.interval.ms", "300")
    target = ClusterAccess(aggregate["bootstrap.servers"], ClientSecurity.from_props(aggregate))
    wait_until(lambda: target_group(target, readers)[1] == {(topic, 0): 3, (topic, 1): 3}, 20, 0.3,
               what="the group's offsets synced into the secured aggregate")
    with Producer({**source, "acks": "all"}) as producer:
        for i in range(200, 250):
            producer.send(topic, b"v%d" % i, b"k%d" % (i % 5))
        producer.flush()
    wait_until(lambda: _count(aggregate, topic) == 250, 40, 0.3, what="the new records copied after the restart")
    assert m2.stop() == 0, m2.output()[-3000:]
    assert _count(aggregate, topic) == 250
    # the same source found through its ZooKeeper: the fetchers pick its SASL_SSL listener and log in
    zk_source = {**source, "group.id": "zk-mirror", "mirror.source.name": "dc1zk"}
    m3 = mirrors([zk_source], aggregate, *args, prefixes=["zk."])
    wait_until(lambda: _count(aggregate, f"zk.{topic}") == 250, 40, 0.3, what="the ZooKeeper source's copies")
    assert m3.stop() == 0, m3.output()[-3000:]
    # a wrong password for the aggregate: one line, exit 1
    bad = mirrors([{**bootstrap_source, "group.id": "secured-mirror"}], {**aggregate, "sasl.password": "wrong"}, *args)
    assert bad.proc.wait(60) == 1
    lines = [line for line in bad.output().splitlines() if "SASL_AUTHENTICATION_FAILED" in line or "Authentication" in line]
    assert lines, bad.output()[-2000:]
    assert "Traceback" not in bad.output()
