"""A ZooKeeper outage during consumption: a private ZooKeeper server is stopped and started again;
the connector keeps its streams, reconnects, still owns its partitions and delivers new records."""

from __future__ import annotations

import time
import uuid

import pytest

from broker.client.zk_consumer import ZookeeperConsumerConnector
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from tests.client.test_zk_consumer import Collector, create_topic, owners, produce

pytestmark = pytest.mark.integration  # starts its own ZooKeeper and broker


def test_zookeeper_outage_during_consumption(tmp_path):
    zk = EmbeddedZooKeeper(tmp_path / "zk")
    zk.start()
    broker = None
    c = None
    try:
        port = free_port()
        broker = BrokerProcess({
            "broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "data"),
            "zookeeper.connect": f"{zk.connect_string}/outage", "zookeeper.session.timeout.ms": "10000",
        }, tmp_path / "broker")
        broker.start()
        topic = f"out-{uuid.uuid4().hex[:8]}"
        create_topic(broker, topic, 2)
        produce(broker.bootstrap, topic, [{"value": b"a%d" % i} for i in range(100)])
        c = ZookeeperConsumerConnector({
            "zookeeper.connect": f"{zk.connect_string}/outage", "group.id": "g", "consumer.id": "c",
            "zookeeper.session.timeout.ms": "10000", "rebalance.backoff.ms": "200", "rebalance.max.retries": "50",
            "auto.offset.reset": "smallest", "consumer.timeout.ms": "200", "auto.commit.interval.ms": "300",
        })
        col = Collector(c.create_message_streams({topic: 1})[topic])
        col.wait_for({b"a%d" % i for i in range(100)})
        zk.stop()
        # fetching does not need ZooKeeper: records produced during the outage still arrive
        produce(broker.bootstrap, topic, [{"value": b"b%d" % i} for i in range(100)])
        col.wait_for({b"b%d" % i for i in range(100)})
        time.sleep(1.0)
        zk.start()
        deadline = time.monotonic() + 20
        while not c.zk.connected and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.zk.connected
        # a membership change after the outage makes the connector rebalance again
        rebalances = c.rebalance_count
        other = ZookeeperConsumerConnector({
            "zookeeper.connect": f"{zk.connect_string}/outage", "group.id": "g", "consumer.id": "d",
            "rebalance.backoff.ms": "200", "rebalance.max.retries": "50", "consumer.timeout.ms": "200",
            "auto.offset.reset": "smallest",
        })
        try:
            col2 = Collector(other.create_message_streams({topic: 1})[topic])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                got = owners(c.zk, "g", topic)
                if got == {0: "c-0", 1: "d-0"}:
                    break
                time.sleep(0.1)
            assert owners(c.zk, "g", topic) == {0: "c-0", 1: "d-0"}
            assert c.rebalance_count > rebalances
            produce(broker.bootstrap, topic, [{"value": b"c%d" % i, "partition": i % 2} for i in range(100)])
            want = {b"c%d" % i for i in range(100)}
            deadline = time.monotonic() + 20
            while not want <= (col.values() | col2.values()) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert want <= (col.values() | col2.values())
        finally:
            other.shutdown()
    finally:
        try:
            if c is not None:
                c.shutdown()
        finally:
            try:
                if broker is not None:
                    broker.stop()
            finally:
                zk.stop()
