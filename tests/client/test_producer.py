"""logbus's Producer against real broker processes, read back by confluent-kafka."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka import Producer as ConfluentProducer

from broker.client.admin import AdminClient
from broker.client.metadata import KafkaTimeoutError
from broker.client.partitioner import murmur2_partition
from broker.client.producer import Producer, ProducerClosedError
from broker.cluster.net import free_port
from broker.config import ConfigError
from broker.protocol.errors import MessageTooLargeError, UnknownTopicOrPartitionError
from tests.starting import QUICK_EXPIRY, start_together

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def broker(module_broker):
    """The module's one broker (tests/conftest.py): the tests taking it create topics of their own
    on it; those that stop the broker, or find it through its chroot, start one of their own."""
    return module_broker


def _topic(prefix: str = "p") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topic(topic, partitions, 1)


def consume(bootstrap: str, topic: str, count: int, partitions=(0,), timeout: float = 20) -> list:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 50}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    if msg.error().code() == -191:  # _PARTITION_EOF
                        continue
                    raise AssertionError(msg.error())
                messages.append(msg)
        # anything beyond `count` (duplicates) shows up within a short extra poll
        for msg in consumer.consume(1000, 0.3):
            if not msg.error():
                messages.append(msg)
    finally:
        consumer.close()
    return messages


# --------------------------------------------------------------------------- round trips

def test_every_codec_keys_headers_and_timestamps_read_by_confluent(broker):
    base_ts = int(time.time() * 1000) - 60_000
    for codec in CODECS:
        topic = _topic(codec)
        _create(broker.bootstrap, topic)
        sent = [
            (f"key-{i}".encode() if i % 3 else None, f"value-{codec}-{i}".encode() * (1 + i % 5), [("h", f"{i}".encode()), ("n", None)] if i % 2 else None, base_ts + i)
            for i in range(300)
        ]
        with Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20}) as producer:
            futures = [producer.send(topic, v, key=k, headers=h, timestamp=ts) for k, v, h, ts in sent]
            producer.flush(10)
            offsets = [f.get(0).offset for f in futures]
        assert offsets == list(range(300)), codec
        got = consume(broker.bootstrap, topic, 300)
        assert len(got) == 300
        for msg, (key, value, headers, ts) in zip(got, sent):
            assert (msg.key(), msg.value(), msg.timestamp()[1]) == (key, value, ts)
            assert (msg.headers() or None) == (headers or None)


def test_sync_mode_waits_for_each_record(broker):
    topic = _topic("sync")
    _create(broker.bootstrap, topic)
    with Producer({"bootstrap.servers": broker.bootstrap, "producer.type": "sync", "acks": "1"}) as producer:
        for i in range(5):
            future = producer.send(topic, f"v{i}", key="k")
            assert future.done()
            assert future.get(0).offset == i
            assert future.partition == 0
    with Producer(bootstrap_servers=broker.bootstrap, acks=0, compression_type="gzip") as producer:
        futures = [producer.send(topic, f"fire-{i}") for i in range(100)]
        producer.flush(10)
        assert {f.get(0).offset for f in futures} == {-1}  # acks=0: nobody answers
    got = consume(broker.bootstrap, topic, 105)
    assert [m.value() for m in got[5:]] == [f"fire-{i}".encode() for i in range(100)]


def test_async_batches_and_callbacks(broker):
    topic = _topic("async")
    _create(broker.bootstrap, topic, 3)
    done: list = []
    errors: list = []
    lock = threading.Lock()

    def on_delivery(metadata, exc):
        with lock:
            (errors if exc else done).append(exc or metadata)

    config = {"bootstrap.servers": broker.bootstrap, "queue.buffering.max.ms": 30, "batch.num.messages": 50}
    with Producer(config) as producer:
        assert producer.linger == 0.03 and producer.batch_count_limit == 50
        futures = [producer.send(topic, b"x" * 10, key=str(i % 7), callback=on_delivery) for i in range(1000)]
        chained = []
        futures[-1].add_callback(chained.append).add_errback(errors.append)
        producer.flush(10)
        assert not errors and len(done) == 1000
        assert chained == [futures[-1].get()]
        late = []
        futures[0].add_done_callback(late.append)  # already done: runs at once
        assert late == [futures[0]]
    # per partition, offsets are dense and in send order
    by_partition: dict[int, list[int]] = {}
    for f in futures:
        by_partition.setdefault(f.partition, []).append(f.get(0).offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    assert sum(len(o) for o in by_partition.values()) == 1000


def test_send_is_thread_safe(broker):
    topic = _topic("threads")
    _create(broker.bootstrap, topic, 2)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2}) as producer:
        results: list = []

        def worker(n: int) -> None:
            results.extend(producer.send(topic, f"{n}-{i}".encode()) for i in range(2000))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        producer.flush(10)
    coords = {(f.partition, f.get(0).offset) for f in results}
    assert len(coords) == 8000
    got = consume(broker.bootstrap, topic, 8000, partitions=(0, 1))
    assert sorted(m.value() for m in got) == sorted(f"{n}-{i}".encode() for n in range(4) for i in range(2000))


# --------------------------------------------------------------------------- partitioning

def test_default_partitioner_matches_the_java_client_and_librdkafka(broker):
    topic = _topic("keys")
    _create(broker.bootstrap, topic, 6)
    # Kafka's UtilsTest murmur2 vectors: partition = toPositive(murmur2) % 6
    vectors = {"21": -973932308, "foobar": -790332482, "abc": 479470107, "a-little-bit-long-string": -985981536}
    keys = list(vectors) + [f"user-{i}" for i in range(40)]
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        ours = {k: producer.send(topic, b"v", key=k).get(10).partition for k in keys}
        nulls = {producer.send(topic, b"v").get(10).partition for _ in range(5)}
    for key, hashed in vectors.items():
        assert ours[key] == (hashed & 0x7FFFFFFF) % 6
    rd = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    theirs = {}
    for k in keys:
        rd.produce(topic, b"v", key=k, on_delivery=lambda err, msg: theirs.__setitem__(msg.key().decode(), msg.partition()))
    rd.flush(10)
    assert theirs == ours
    assert all(0 <= p < 6 for p in nulls)


class EverythingToLast:
    def __init__(self):
        self.configured = None

    def configure(self, config):
        self.configured = config["client.id"]

    def partition(self, topic, key, partitions, available):
        return partitions[-1]


def test_custom_partitioner_class(broker):
    topic = _topic("custom")
    _create(broker.bootstrap, topic, 4)
    config = {"bootstrap.servers": broker.bootstrap, "partitioner.class": f"{__name__}.EverythingToLast", "client.id": "me"}
    with Producer(config) as producer:
        assert producer.partitioner.configured == "me"
        assert {producer.send(topic, b"v", key=str(i)).get(10).partition for i in range(20)} == {3}
        assert producer.send(topic, b"v", partition=1).get(10).partition == 1
        with pytest.raises(ValueError, match="partition 9"):
            producer.send(topic, b"v", partition=9)
    with pytest.raises(ConfigError, match="partitioner.class"):
        Producer({"bootstrap.servers": broker.bootstrap, "partitioner.class": "no.such.Partitioner"})


# --------------------------------------------------------------------------- discovery

def test_brokers_and_leaders_found_through_zookeeper(broker_factory, zk_chroot):
    broker = broker_factory()
    topic = _topic("zk")
    _create(broker.bootstrap, topic, 2)
    with Producer({"zookeeper.connect": zk_chroot, "linger.ms": 1}) as producer:
        assert producer.metadata.uses_zookeeper
        futures = [producer.send(topic, f"{i}".encode(), key=str(i)) for i in range(100)]
        producer.flush(10)
        assert producer.metadata.brokers() == {1: (broker.host, broker.port)}
        assert {f.get(0).partition for f in futures} == {0, 1}
        # a topic not yet in ZooKeeper is created by the broker (auto-create) and then found
        fresh = _topic("zk-auto")
        assert producer.send(fresh, b"first").get(10).offset == 0
    got = consume(broker.bootstrap, topic, 100, partitions=(0, 1))
    assert sorted(int(m.value()) for m in got) == list(range(100))


# --------------------------------------------------------------------------- failures

def test_idempotent_retries_survive_a_broker_kill_without_duplicates(broker_factory):
    broker = broker_factory(QUICK_EXPIRY)  # restarted right after the kill: waits for its old session to end
    topic = _topic("idem")
    _create(broker.bootstrap, topic, 2)
    config = {
        "bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 2000,
        "retry.backoff.ms": 50, "request.timeout.ms": 5000, "delivery.timeout.ms": 60000,
    }
    total = 20000
    futures = []
    with Producer(config) as producer:
        assert producer.idempotent
        for i in range(total):
            futures.append(producer.send(topic, f"{i}".encode(), key=str(i % 100)))
            if i == total // 3:
                while not futures[100].done():
                    time.sleep(0.01)
                broker.kill()
            if i == total // 2:
                broker.start()
        producer.flush(60)
    acked = [int(f.get(0).offset >= 0) for f in futures]
    assert all(acked), "every record is acknowledged after the restart"
    assert any(f._batch.attempts for f in futures), "the kill made the producer retry"
    got = consume(broker.bootstrap, topic, total, partitions=(0, 1), timeout=30)
    values = [int(m.value()) for m in got]
    assert len(values) == len(set(values)) == total, "no duplicates, no loss"
    coords = {(f.partition, f.get(0).offset) for f in futures}
    assert coords == {(m.partition(), m.offset()) for m in got}


def test_unknown_topic_without_auto_create_is_a_clear_error(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false"})
    with Producer({"bootstrap.servers": b.bootstrap, "max.block.ms": 10000}) as producer:
        start = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
            producer.send("no-such-topic", b"v")
        assert time.monotonic() - start < 5


def test_unreachable_brokers_fail_within_max_block(tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    with Producer({"bootstrap.servers": dead, "max.block.ms": 1500}) as producer:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="within 1.5 s.*cannot connect"):
            producer.send("t", b"v")
        assert time.monotonic() - start < 4
    with pytest.raises(ProducerClosedError):
        producer.send("t", b"v")


def test_records_fail_after_delivery_timeout_when_the_broker_is_gone(broker_factory):
    broker = broker_factory()
    topic = _topic("gone")
    _create(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "delivery.timeout.ms": 1500, "request.timeout.ms": 1000})
    try:
        assert producer.send(topic, b"before").get(10).offset == 0
        broker.stop()
        future = producer.send(topic, b"after")
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="delivery.timeout.ms"):
            future.get(10)
        assert time.monotonic() - start < 4
    finally:
        producer.close(2)


def test_message_over_the_broker_limit(broker_factory):
    b = broker_factory({"message.max.bytes": "2000"})
    topic = _topic("big")
    _create(b.bootstrap, topic)
    with Producer({"bootstrap.servers": b.bootstrap}) as producer:
        big = producer.send(topic, b"x" * 5000)
        with pytest.raises(MessageTooLargeError, match="MESSAGE_TOO_LARGE"):
            big.get(10)
        assert producer.send(topic, b"small").get(10).offset == 0
        with pytest.raises(MessageTooLargeError, match="max.request.size"):
            producer.send(topic, b"x" * 2_000_000)


def test_bad_configuration_is_one_clear_error():
    with pytest.raises(ConfigError, match="acks"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "acks": "some"})
    with pytest.raises(ConfigError, match="compression.type"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "compression.type": "brotli"})
    with pytest.raises(ConfigError, match="batch.size"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "batch.size": "big"})
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        Producer({})
    with pytest.raises(ConfigError, match="idempotence"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "acks": "1", "enable.idempotence": "true"})


def test_partitions_led_by_different_brokers(broker_factory, zk_chroot):
    first, second = start_together([broker_factory(start=False), broker_factory(start=False)])
    topic = _topic("two")
    with AdminClient(first.bootstrap) as admin:
        admin.create_topic(topic, 4, 1)
        leaders = {p.partition: p.leader for p in admin.describe_topics([topic])[0].partitions}
    assert set(leaders.values()) == {1, 2}
    for config in ({"bootstrap.servers": second.bootstrap}, {"zookeeper.connect": zk_chroot}):
        with Producer({**config, "linger.ms": 1}) as producer:
            futures = [producer.send(topic, f"{i}".encode(), key=f"k{i}") for i in range(400)]
            producer.flush(10)
        assert {f.get(0).partition for f in futures} == {0, 1, 2, 3}
        for f in futures[:20]:
            assert f.partition == murmur2_partition(f"k{futures.index(f)}".encode(), 4)
    got = consume(first.bootstrap, topic, 800, partitions=(0, 1, 2, 3))
    assert len(got) == 800
