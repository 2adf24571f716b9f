"""SimpleConsumer against one broker process: records produced by librdkafka (every codec,
keys, headers, null values) read back identically, offsets inside a batch, partial batches,
offset lookups, and the distinct errors (out of range, unknown topic, unreachable broker)."""

from __future__ import annotations

import time
import uuid

import pytest

from broker.client.admin import AdminClient
from broker.client.connection import BrokerConnectionError
from broker.client.simple_consumer import (
    EARLIEST_TIME,
    LATEST_TIME,
    MessageAndMetadata,
    SimpleConsumer,
    decode_message_set,
)
from broker.cluster.net import free_port
from broker.protocol.errors import CorruptRecordError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from broker.protocol.records import Record, encode_batch
from tests.producing import produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): every test here creates topics of its own on it,
    and none stops or reconfigures it."""
    return module_broker


def _topic(prefix: str = "sc") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _consumer(broker) -> SimpleConsumer:
    return SimpleConsumer(broker.host, broker.port, timeout=10)


def _read_all(consumer: SimpleConsumer, topic: str, partition: int, start: int, end: int, max_bytes: int = 1 << 20) -> list:
    messages: list = []
    offset = start
    while offset < end:
        ms = consumer.fetch(topic, partition, offset, max_bytes)
        messages.extend(ms)
        assert ms.next_offset > offset, "no progress"
        offset = ms.next_offset
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_reads_what_librdkafka_wrote_every_codec(broker, codec):
    topic = _topic(codec)
    records = [
        {
            "key": None if i % 11 == 0 else f"member-{i % 7}".encode(),
            "value": None if i % 13 == 0 else f"page-view {i} ".encode() * (i % 5 + 1),
            "headers": [("source", b"test"), ("n", str(i).encode())] if i % 2 else None,
            "timestamp": 1_700_000_000_000 + i,
            "partition": 0,
        }
        for i in range(600)
    ]
    produce(broker.bootstrap, topic, records, **{"compression.type": codec, "batch.num.messages": 100})
    with _consumer(broker) as consumer:
        assert consumer.get_offsets_before(topic, 0, LATEST_TIME, 1) == [600]
        messages = _read_all(consumer, topic, 0, 0, 600)
    assert [m.offset for m in messages] == list(range(600))
    for record, m in zip(records, messages):
        assert isinstance(m, MessageAndMetadata)
        assert (m.topic, m.partition) == (topic, 0)
        assert m.key == record["key"]
        assert m.value == record["value"]
        assert m.headers == (record["headers"] or [])
        assert m.timestamp == record["timestamp"]


def test_offsets_inside_a_batch_and_partial_batches(broker):
    topic = _topic("mid")
    produce(broker.bootstrap, topic, [{"value": b"x%04d" % i, "partition": 0} for i in range(500)],
            **{"compression.type": "lz4", "linger.ms": 50})
    with _consumer(broker) as consumer:
        # an offset in the middle of a batch: the batch is sent whole, earlier records skipped
        ms = consumer.fetch(topic, 0, 123, 1 << 20)
        assert ms[0].offset == 123 and ms[0].value == b"x0123"
        assert ms.high_watermark == 500 and ms.log_start_offset == 0
        # small max_bytes: whole batches only (the broker sends at least one), never a broken record
        messages = _read_all(consumer, topic, 0, 0, 500, max_bytes=64)
        assert [m.value for m in messages] == [b"x%04d" % i for i in range(500)]
        # at the log end: nothing, and next_offset stays
        ms = consumer.fetch(topic, 0, 500, 1 << 20)
        assert list(ms) == [] and ms.next_offset == 500


def test_trailing_partial_batch_and_corruption_locally():
    one = encode_batch([Record(0, 1000 + i, b"k", b"v%d" % i, [("h", b"1")]) for i in range(5)], base_offset=10)
    two = encode_batch([Record(0, 2000, None, b"w", [])], base_offset=15)
    messages, next_offset = decode_message_set("t", 3, one + two[:30], min_offset=12)
    assert [m.offset for m in messages] == [12, 13, 14]
    assert next_offset == 15
    assert messages[0] == MessageAndMetadata("t", 3, 12, b"k", b"v2", [("h", b"1")], 1002)
    bad = bytearray(one)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_message_set("t", 3, bytes(bad))


def test_offsets_before_time_and_out_of_range(broker):
    topic = _topic("time")
    base = 1_700_000_000_000
    produce(broker.bootstrap, topic, [{"value": b"v", "timestamp": base + i * 1000, "partition": 0} for i in range(10)],
            **{"linger.ms": 0, "batch.num.messages": 1})
    with _consumer(broker) as consumer:
        assert consumer.get_offsets_before(topic, 0, EARLIEST_TIME, 1) == [0]
        assert consumer.get_offsets_before(topic, 0, LATEST_TIME, 1) == [10]
        assert consumer.get_offsets_before(topic, 0, base + 4500, 1) == [5]
        assert consumer.get_offsets_before(topic, 0, base + 99_000, 1) == []
        with pytest.raises(OffsetOutOfRangeError):
            consumer.fetch(topic, 0, 11, 1024)
        # the connection stays usable after a partition error
        assert len(consumer.fetch(topic, 0, 9, 1024)) == 1
        results = consumer.multifetch([(topic, 0, 0, 1 << 20), (topic, 0, 0), (topic, 5, 0, 1024)])
        assert len(results[(topic, 0)]) == 10
        assert isinstance(results[(topic, 5)].error, UnknownTopicOrPartitionError)


def test_find_leader_and_unknown_topic(broker):
    topic = _topic("leader")
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions=3)
    with _consumer(broker) as consumer:
        deadline = time.monotonic() + 10
        while True:
            try:
                leader = consumer.find_leader(topic, 2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert leader == (int(broker.broker_id), broker.host, broker.port)
        assert consumer.partitions_for(topic) == [0, 1, 2]
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.find_leader(f"missing-{uuid.uuid4().hex[:6]}", 0)
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.fetch(f"missing-{uuid.uuid4().hex[:6]}", 0, 0, 1024)


def test_unreachable_broker_fails_fast():
    consumer = SimpleConsumer("127.0.0.1", free_port(), timeout=2)
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError):
        consumer.fetch("t", 0, 0, 1024)
    assert time.monotonic() - started < 5
