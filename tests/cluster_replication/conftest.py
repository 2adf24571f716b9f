"""Helpers for replication tests: a cluster of real broker processes in one ZooKeeper chroot."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cluster.zk import PartitionState, ZkClient
from tests.starting import start_together
from tests.waiting import wait_until  # noqa: F401  (re-exported to the tests here)

#: Fast failure detection and ISR changes for tests.
FAST = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
}




@pytest.fixture
def cluster(broker_factory) -> Callable[..., list]:
    """``cluster(n, **overrides)``: n brokers (ids 1..n) of one cluster."""

    def make(n: int = 3, **overrides: str) -> list:
        props = {**FAST, **{k.replace("_", "."): v for k, v in overrides.items()}}
        return start_together([broker_factory(overrides=props, broker_id=i + 1, start=False) for i in range(n)])

    return make


def bootstrap(brokers: list) -> str:
    return ",".join(b.bootstrap for b in brokers if b.alive)


def create_topic(brokers: list, partitions: int = 1, rf: int = 3, config: dict | None = None, name: str | None = None) -> str:
    topic = name or f"rep-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    futures = admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})], operation_timeout=20)
    futures[topic].result(30)
    return topic


def state(zk: ZkClient, topic: str, partition: int = 0) -> PartitionState:
    s = zk.partition_state(topic, partition)
    assert s is not None
    return s


def by_id(brokers: list, broker_id: int):
    return next(b for b in brokers if b.broker_id == broker_id)


def isolate_leader(brokers: list, zk: ZkClient, topic: str):
    """Kill every follower of ``topic``-0 and wait until the ISR is the leader alone; returns
    (the leader, the killed followers)."""
    leader_id = state(zk, topic).leader
    leader = by_id(brokers, leader_id)
    followers = [b for b in brokers if b is not leader]
    for b in followers:
        b.kill()
    wait_until(lambda: state(zk, topic).isr == [leader_id], 20, what="isr down to the leader")
    return leader, followers


def consume_all(bootstrap_servers: str, topic: str, partition: int = 0, timeout: float = 60) -> list[tuple[int, bytes]]:
    """Every record of one partition below the high watermark, as (offset, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "unused", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
        consumer.assign([TopicPartition(topic, partition, low)])
        found: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while (not found or found[-1][0] < high - 1) and time.monotonic() < deadline and high > low:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                found.append((msg.offset(), msg.value()))
        return found
    finally:
        consumer.close()


@pytest.fixture
def zk(zk_client: ZkClient) -> Iterator[ZkClient]:
    yield zk_client
