"""kafka-python against one broker process: its idempotent producer (the default), every
codec, headers and timestamps, offsets lookups and the admin client."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import MessageSizeTooLargeError, TopicAlreadyExistsError

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def _consume(bootstrap: str, topic: str, count: int, partition: int = 0) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=15000)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    messages = []
    try:
        for message in consumer:
            messages.append(message)
            if len(messages) >= count:
                break
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_round_trip_every_codec(broker, codec):
    topic = f"kp-{codec}-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, enable_idempotence=True, linger_ms=5)
    try:
        futures = [
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"1")], timestamp_ms=1_700_000_000_000 + i)
            for i in range(300)
        ]
        producer.flush(30)
        offsets = [f.get(timeout=10).offset for f in futures]
    finally:
        producer.close()
    assert offsets == list(range(300))
    messages = _consume(broker.bootstrap, topic, 300)
    assert [m.offset for m in messages] == list(range(300))
    assert [m.value for m in messages] == [f"v{i}".encode() for i in range(300)]
    assert messages[7].key == b"k7" and messages[7].headers == [("h", b"1")]
    assert messages[7].timestamp == 1_700_000_000_007


def test_acks_all_and_offset_lookups(broker):
    topic = f"kp-acks-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(5):
            producer.send(topic, value=b"x", timestamp_ms=1_700_000_000_000 + i * 1000).get(timeout=10)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 5
        assert consumer.offsets_for_times({tp: 1_700_000_002_500})[tp].offset == 3
    finally:
        consumer.close()


def test_oversized_message_refused(broker_factory):
    broker = broker_factory(overrides={"message.max.bytes": "50000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=1_000_000, retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(f"kp-big-{uuid.uuid4().hex[:8]}", value=b"y" * 100_000).get(timeout=20)
    finally:
        producer.close()


def test_admin_client(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    name = f"kp-admin-{uuid.uuid4().hex[:8]}"
    try:
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
        assert name in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
        admin.delete_topics([name])
        assert name not in admin.list_topics()
    finally:
        admin.close()
