"""librdkafka (confluent-kafka) against one broker process: every codec, keys, headers,
timestamps, acks levels, ListOffsets, large and oversized messages, admin operations."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.compression import codec_id
from broker.protocol.records import iter_batches

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def _topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, records: list[dict], **config) -> list:
    delivered: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for record in records:
        producer.produce(topic, on_delivery=lambda err, msg: delivered.append((err, msg)), **record)
    assert producer.flush(30) == 0
    return delivered


def _consume(bootstrap: str, topic: str, count: int, partition: int = 0, timeout: float = 30) -> list:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            messages.append(msg)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(broker, codec):
    topic = _topic(codec)
    records = [
        {
            "key": f"member-{i % 7}".encode(),
            "value": f"page-view {i} ".encode() * (i % 5 + 1),
            "headers": [("source", b"test"), ("n", str(i).encode())],
            "timestamp": 1_700_000_000_000 + i,
        }
        for i in range(500)
    ]
    delivered = _produce(broker.bootstrap, topic, records, **{"compression.type": codec})
    assert [err for err, _ in delivered if err is not None] == []
    assert sorted(msg.offset() for _, msg in delivered) == list(range(500))

    messages = _consume(broker.bootstrap, topic, 500)
    assert [m.offset() for m in messages] == list(range(500))
    for record, msg in zip(records, messages):
        assert msg.key() == record["key"]
        assert msg.value() == record["value"]
        assert msg.headers() == record["headers"]
        assert msg.timestamp()[1] == record["timestamp"]
    # The batches are stored as the client compressed them: the broker does not recompress
    # (librdkafka sends a batch that its codec would not shrink uncompressed).
    segment = (broker.log_dir / "data" / f"{topic}-0" / f"{0:020d}.log").read_bytes()
    codecs = {header.compression for _, header in iter_batches(segment)}
    assert codec_id(codec) in codecs and codecs <= {0, codec_id(codec)}


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_levels(broker, acks):
    topic = _topic(f"acks{acks}")
    _produce(broker.bootstrap, topic, [{"value": b"warm-up"}])  # creates the topic first
    delivered = _produce(broker.bootstrap, topic, [{"value": f"v{i}".encode()} for i in range(100)], acks=acks)
    assert all(err is None for err, _ in delivered)
    messages = _consume(broker.bootstrap, topic, 101)
    assert [m.value() for m in messages[1:]] == [f"v{i}".encode() for i in range(100)]


def test_list_offsets_earliest_latest_and_by_timestamp(broker):
    topic = _topic("offsets")
    base = 1_700_000_000_000
    for i in range(10):  # one batch per produce call: distinct time index entries
        _produce(broker.bootstrap, topic, [{"value": b"x", "timestamp": base + i * 1000}])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        past_end = consumer.offsets_for_times([TopicPartition(topic, 0, base + 60_000)], timeout=10)
        assert past_end[0].offset == -1
    finally:
        consumer.close()


def test_900kb_message_goes_through(broker):
    topic = _topic("large")
    value = bytes(range(256)) * (900_000 // 256)
    delivered = _produce(broker.bootstrap, topic, [{"value": value}], **{"message.max.bytes": 2_000_000})
    assert delivered[0][0] is None
    [msg] = _consume(broker.bootstrap, topic, 1)
    assert msg.value() == value


def test_message_over_max_bytes_is_refused(broker_factory):
    broker = broker_factory(overrides={"message.max.bytes": "100000"})
    topic = _topic("too-large")
    _produce(broker.bootstrap, topic, [{"value": b"small"}])
    started = time.monotonic()
    delivered = _produce(
        broker.bootstrap, topic, [{"value": b"x" * 200_000}], **{"message.max.bytes": 1_000_000, "retries": 0}
    )
    err = delivered[0][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert time.monotonic() - started < 10
    # Nothing of the refused batch is in the log.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 1)
    finally:
        consumer.close()


def test_admin_create_list_delete(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = [_topic("admin") for _ in range(2)]
    futures = admin.create_topics([NewTopic(n, num_partitions=3, replication_factor=1) for n in names])
    for future in futures.values():
        future.result(15)
    listed = admin.list_topics(timeout=10).topics
    for name in names:
        assert len(listed[name].partitions) == 3
    again = admin.create_topics([NewTopic(names[0], num_partitions=1, replication_factor=1)])
    with pytest.raises(Exception) as info:
        again[names[0]].result(15)
    assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    too_many = admin.create_topics([NewTopic(_topic("rf"), num_partitions=1, replication_factor=3)])
    with pytest.raises(Exception) as info:
        list(too_many.values())[0].result(15)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR

    for future in admin.delete_topics([names[0]]).values():
        future.result(15)
    deadline = time.monotonic() + 10
    while names[0] in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert names[0] not in admin.list_topics(timeout=10).topics
    assert names[1] in admin.list_topics(timeout=10).topics


def test_multi_partition_keys_stay_on_partition(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = _topic("keyed")
    for future in admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)]).values():
        future.result(15)
    delivered = _produce(broker.bootstrap, topic, [{"key": f"k{i % 20}".encode(), "value": b"v"} for i in range(600)])
    by_key: dict[bytes, set[int]] = {}
    for err, msg in delivered:
        assert err is None
        by_key.setdefault(msg.key(), set()).add(msg.partition())
    assert all(len(parts) == 1 for parts in by_key.values())
    per_partition: dict[int, list[int]] = {}
    for _, msg in delivered:
        per_partition.setdefault(msg.partition(), []).append(msg.offset())
    for offsets in per_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
