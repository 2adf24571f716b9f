"""One group, one set of offsets: what a standard client commits through the coordinator is
where the ZooKeeper consumer of the same group starts, and the other way round; the offset
znodes keep the ZooKeeper consumer's plain decimal format, metadata beside them."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from broker.client.zk_consumer import ConsumerTimeoutException, ZookeeperConsumerConnector
from tests.coordinator.conftest import SESSION_MS, create_topic, produce, unique

PARTITIONS = 3


def _confluent_read(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": SESSION_MS,
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
    })
    c.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                values.append(msg.value())
        time.sleep(0.5)  # nothing more arrives
        while (msg := c.poll(0.2)) is not None:
            if not msg.error():
                values.append(msg.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return values


def _zk_read(zk_connect: str, topic: str, group: str) -> list[bytes]:
    connector = ZookeeperConsumerConnector({
        "zookeeper.connect": zk_connect, "group.id": group, "auto.offset.reset": "smallest",
        "consumer.timeout.ms": "1500", "rebalance.backoff.ms": "200", "auto.commit.interval.ms": "100000",
    })
    values: list[bytes] = []
    try:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        try:
            for message in stream:
                values.append(message.message if hasattr(message, "message") else message.value)
        except ConsumerTimeoutException:
            pass
        connector.commit_offsets()
    finally:
        connector.shutdown()
    return values


def _ints(values: list[bytes]) -> list[int]:
    return sorted(int(v.split(b":")[1]) for v in values)


def test_offsets_shared_between_standard_and_zookeeper_consumers(group_broker, zk_client, zk_chroot):
    bootstrap = group_broker.bootstrap
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique("mixed")
    produce(bootstrap, topic, PARTITIONS, 10)
    assert _ints(_confluent_read(bootstrap, topic, group, PARTITIONS * 10)) == sorted(list(range(10)) * PARTITIONS)
    for p in range(PARTITIONS):  # the ZooKeeper consumer's own format
        raw, _ = zk_client.client.get(f"/consumers/{group}/offsets/{topic}/{p}")
        assert raw == b"10"

    produce(bootstrap, topic, PARTITIONS, 5, start=10)
    assert _ints(_zk_read(zk_chroot, topic, group)) == sorted(list(range(10, 15)) * PARTITIONS)

    produce(bootstrap, topic, PARTITIONS, 5, start=15)
    assert _ints(_confluent_read(bootstrap, topic, group, PARTITIONS * 5)) == sorted(list(range(15, 20)) * PARTITIONS)


def test_commit_metadata_round_trip(group_broker, zk_client):
    bootstrap = group_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    group = unique("meta")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 7, "loader run 42"), TopicPartition(topic, 1, 3)], asynchronous=False)
        got = {tp.partition: (tp.offset, tp.metadata) for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
        assert got[0] == (7, "loader run 42")
        assert got[1][0] == 3 and not got[1][1]
        raw, _ = zk_client.client.get(f"/consumers/{group}/offsets/{topic}/0")
        assert raw == b"7"
        # new metadata replaces, empty metadata clears
        c.commit(offsets=[TopicPartition(topic, 0, 8)], asynchronous=False)
        got = c.committed([TopicPartition(topic, 0)], timeout=10)[0]
        assert (got.offset, got.metadata or "") == (8, "")
    finally:
        c.close()
