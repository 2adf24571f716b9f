"""Growing and shrinking a cluster as an operator does, with the tools' own flags: a fourth broker
joins and takes partitions (`reassign-partitions --generate/--execute/--verify`, then a preferred
leader election), then broker 1 is decommissioned (everything reassigned off it) and stopped;
every acknowledged record is still there, once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cluster.zk import ZkClient
from tests.starting import start_together
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FAST = {"replica.fetch.wait.max.ms": 100, "group.initial.rebalance.delay.ms": 0}
PARTITIONS = 6


def _logbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def _produce(bootstrap: str, topic: str, start: int, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    acked: list[bytes] = []

    def delivered(err, msg) -> None:
        if err is None:
            acked.append(msg.value())

    for i in range(start, start + count):
        producer.produce(topic, value=b"g%06d" % i, partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert len(acked) == count
    return acked


def _move(zk_connect: str, tmp_path: Path, topic: str, brokers: str) -> dict[int, list[int]]:
    """`--generate` over ``brokers``, `--execute` the proposal, `--verify` until it completes; the proposal."""
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = _logbus("reassign-partitions", "--zookeeper", zk_connect, "--generate",
                        "--topics-to-move-json-file", str(topics), "--broker-list", brokers)
    assert generated.returncode == 0, generated.stderr
    proposed_json = generated.stdout.split("Proposed partition reassignment configuration\n", 1)[1]
    plan = tmp_path / f"plan-{brokers}.json"
    plan.write_text(proposed_json)
    started = _logbus("reassign-partitions", "--zookeeper", zk_connect, "--execute", "--reassignment-json-file", str(plan))
    assert started.returncode == 0 and "Successfully started" in started.stdout, started.stdout + started.stderr
    verify = ("reassign-partitions", "--zookeeper", zk_connect, "--verify", "--reassignment-json-file", str(plan))
    wait_until(lambda: _logbus(*verify).returncode == 0, 60, 0.5, f"the move onto {brokers} to complete")
    return {p["partition"]: p["replicas"] for p in json.loads(proposed_json)["partitions"]}


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in meta.topics[topic].partitions.values()}


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Every partition from offset 0 until ``expected`` records (and a last poll that must add none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < expected and time.monotonic() < deadline:
        seen += [m.value() for m in consumer.consume(500, 0.5) if m.error() is None]
    seen += [m.value() for m in consumer.consume(500, 1.0) if m.error() is None]
    consumer.close()
    return seen


def test_a_fourth_broker_takes_partitions_and_a_decommissioned_broker_gives_all_back(broker_factory, zk_chroot, tmp_path):
    b1, b2, b3 = (broker_factory(FAST, start=False) for _ in range(3))
    start_together([b1, b2, b3])
    bootstrap = ",".join(b.bootstrap for b in (b1, b2, b3))
    topic = "grow"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 2)], operation_timeout=20)[topic].result(30)
    zk = ZkClient(zk_chroot)
    zk.start(timeout=10)
    try:
        assert {b for replicas in zk.topic_assignment(topic).values() for b in replicas} == {1, 2, 3}
        acked = _produce(bootstrap, topic, 0, 600)

        # a fourth broker joins: only new topics would reach it; a reassignment gives it its share
        b4 = broker_factory(FAST)
        wait_until(lambda: 4 in zk.live_brokers(), 20, what="broker 4 registered")
        proposal = _move(zk_chroot, tmp_path, topic, "1,2,3,4")
        assert zk.topic_assignment(topic) == proposal
        assert sum(4 in r for r in proposal.values()) >= PARTITIONS * 2 // 4  # its share of the 12 replicas
        assert _logbus("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                       "--all-topic-partitions").returncode == 0
        wait_until(lambda: _leaders(b4.bootstrap, topic) == {p: r[0] for p, r in proposal.items()}, 30, 0.2,
                   "every partition led by its preferred replica, broker 4 among them")
        acked += _produce(b4.bootstrap, topic, 600, 600)
        on_4 = [p for p, r in proposal.items() if 4 in r]
        data = Path(b4.props["log.dirs"])
        assert all(sum(f.stat().st_size for f in (data / f"{topic}-{p}").glob("*.log")) > 0 for p in on_4)

        # broker 1 is decommissioned: everything is reassigned off it, then it stops
        remaining = ",".join(b.bootstrap for b in (b2, b3, b4))
        proposal = _move(zk_chroot, tmp_path, topic, "2,3,4")
        assert all(1 not in r for r in zk.topic_assignment(topic).values())
        wait_until(lambda: all(leader != 1 for leader in _leaders(remaining, topic).values()), 30, 0.2,
                   "no partition led by broker 1")
        b1.stop()
        wait_until(lambda: 1 not in zk.live_brokers(), 20, what="broker 1 gone")
        acked += _produce(remaining, topic, 1200, 300)

        seen = _consume_all(remaining, topic, len(acked))
        assert sorted(seen) == sorted(acked), "every acknowledged record once, nothing else"
    finally:
        zk.stop()
