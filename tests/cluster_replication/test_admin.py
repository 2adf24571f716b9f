"""CreatePartitions / `logbus topics --alter`, --describe, and preferred-leader rebalancing."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, state, wait_until


def _topics_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", "topics", *args], capture_output=True, text=True, timeout=60)


def test_alter_adds_partitions_with_leaders(cluster, zk):
    brokers = cluster(3)
    topic = create_topic(brokers, partitions=2, rf=2)
    done = _topics_cli("--bootstrap-server", brokers[0].bootstrap, "--alter", "--topic", topic, "--partitions", "4")
    assert done.returncode == 0, done.stderr
    for p in range(4):
        s = state(zk, topic, p)
        assert s.leader in (1, 2, 3) and len(s.isr) == 2
    # third-party admin client, and shrinking is refused
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    assert state(zk, topic, 4).leader in (1, 2, 3)
    refused = _topics_cli("--bootstrap-server", brokers[0].bootstrap, "--alter", "--topic", topic, "--partitions", "3")
    assert refused.returncode != 0 and "INVALID_PARTITIONS" in refused.stderr
    producer = Producer({"bootstrap.servers": bootstrap(brokers), "acks": "all"})
    producer.produce(topic, value=b"into-4", partition=4)
    assert producer.flush(30) == 0
    assert [v for _, v in consume_all(bootstrap(brokers), topic, 4)] == [b"into-4"]
    described = _topics_cli("--bootstrap-server", brokers[0].bootstrap, "--describe", "--topic", topic)
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 5\tReplicationFactor: 2" in described.stdout
    assert f"\tTopic: {topic}\tPartition: 4\tLeader: {state(zk, topic, 4).leader}\t" in described.stdout


def test_preferred_leader_comes_back(cluster, zk):
    brokers = cluster(3, **{"leader.imbalance.check.interval.seconds": "2"})
    topic = create_topic(brokers, partitions=3, rf=3)
    preferred = {p: zk.topic_assignment(topic)[p][0] for p in range(3)}
    assert all(state(zk, topic, p).leader == preferred[p] for p in range(3))
    victim = by_id(brokers, preferred[0])
    victim.stop()
    assert state(zk, topic, 0).leader != preferred[0]
    victim.start()
    wait_until(lambda: all(state(zk, topic, p).leader == preferred[p] for p in range(3)), 30, what="preferred leaders restored")
