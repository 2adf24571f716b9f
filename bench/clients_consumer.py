"""Consumer benchmark: logbus's SimpleConsumer and ZooKeeper consumer vs kafka-python's KafkaConsumer.

One embedded ZooKeeper and one broker; librdkafka writes N 100-byte records into a topic
(2 partitions); each consumer then reads all of them from the beginning, in the same run.

    .venv/bin/python bench/clients_consumer.py [--records 500000] [--partitions 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402

from broker.client.admin import AdminClient  # noqa: E402
from broker.client.zk_consumer import ConsumerTimeoutException, ZookeeperConsumerConnector  # noqa: E402
from broker.cluster.embedded_zk import EmbeddedZooKeeper  # noqa: E402
from broker.cluster.local import BrokerProcess  # noqa: E402
from broker.cluster.net import free_port  # noqa: E402
from broker.tools.console_consumer import bootstrap_messages  # noqa: E402


def ours_simple(bootstrap: str, topic: str, n: int) -> int:
    count = 0
    for _ in bootstrap_messages(bootstrap, [topic], None, True, fetch_size=1 << 20, timeout_ms=5000):
        count += 1
        if count >= n:
            break
    return count


def ours_zk(zk_connect: str, topic: str, n: int) -> int:
    c = ZookeeperConsumerConnector({"zookeeper.connect": zk_connect, "group.id": f"bench-{time.time_ns()}",
                                    "auto.offset.reset": "smallest", "auto.commit.enable": "false",
                                    "consumer.timeout.ms": "5000", "rebalance.backoff.ms": "200"})
    count = 0
    try:
        stream = c.create_message_streams({topic: 1})[topic][0]
        try:
            for _ in stream:
                count += 1
                if count >= n:
                    break
        except ConsumerTimeoutException:
            pass
    finally:
        c.shutdown()
    return count


def kafka_python(bootstrap: str, topic: str, n: int, partitions: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000,
                             max_partition_fetch_bytes=1 << 20, fetch_max_bytes=50 << 20)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    count = 0
    try:
        for _ in consumer:
            count += 1
            if count >= n:
                break
    finally:
        consumer.close()
    return count


def timed(label: str, fn, n: int) -> float:
    start = time.perf_counter()
    got = fn()
    secs = time.perf_counter() - start
    rate = got / secs
    print(f"{label:<34} {got:>9} records {secs:7.2f} s {rate:>11,.0f} records/s {rate * 100 / 1e6:7.1f} MB/s")
    if got != n:
        print(f"  warning: {label} read {got} of {n}")
    return rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="logbus-bench-"))
    zk = EmbeddedZooKeeper(tmp / "zk")
    zk.start()
    broker = BrokerProcess({"broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                            "log.dirs": str(tmp / "data"), "zookeeper.connect": f"{zk.connect_string}/bench"},
                           tmp / "broker")
    try:
        broker.start()
        topic = "bench"
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic(topic, partitions=args.partitions)
        time.sleep(0.5)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                             "queue.buffering.max.messages": 1_000_000})
        value = b"x" * 100
        for i in range(args.records):
            while True:
                try:
                    producer.produce(topic, value=value, partition=i % args.partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0
        print(f"{args.records} records of 100 bytes in {args.partitions} partitions (librdkafka, uncompressed)")
        n = args.records
        kp = timed("kafka-python KafkaConsumer", lambda: kafka_python(broker.bootstrap, topic, n, args.partitions), n)
        simple = timed("logbus SimpleConsumer (assign all)", lambda: ours_simple(broker.bootstrap, topic, n), n)
        zkc = timed("logbus ZookeeperConsumerConnector", lambda: ours_zk(f"{zk.connect_string}/bench", topic, n), n)
        print(f"ratio SimpleConsumer / kafka-python: {simple / kp:.1f}x; ZooKeeper consumer / kafka-python: {zkc / kp:.1f}x")
    finally:
        broker.stop()
        zk.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
