"""Leader failover: acks=all + idempotent producer while the leader is killed with SIGKILL."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, state, wait_until
from tests.starting import QUICK_EXPIRY


def test_replicates_and_moves_hw(cluster, zk):
    brokers = cluster(3)
    topic = create_topic(brokers, partitions=2, rf=3, config={"min.insync.replicas": "2"})
    for p in (0, 1):
        s = state(zk, topic, p)
        assert s.leader in (1, 2, 3) and sorted(s.isr) == [1, 2, 3]
    producer = Producer({"bootstrap.servers": bootstrap(brokers), "acks": "all", "linger.ms": 5})
    errors = []
    for i in range(500):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0
    assert errors == []
    records = consume_all(bootstrap(brokers), topic, 0)
    assert [v for _, v in records] == [f"v{i}".encode() for i in range(0, 500, 2)]
    # every replica holds the same log
    first = brokers[0].log_dir / "data" / f"{topic}-0" / "00000000000000000000.log"
    for b in brokers:
        seg = b.log_dir / "data" / f"{topic}-0" / "00000000000000000000.log"
        wait_until(lambda seg=seg: seg.stat().st_size == first.stat().st_size, 10, what="replicas equal")


def test_leader_kill_loses_no_acknowledged_record(cluster, zk):
    brokers = cluster(3, **QUICK_EXPIRY)
    topic = create_topic(brokers, partitions=1, rf=3, config={"min.insync.replicas": "2"})
    first = state(zk, topic)
    acked: list[tuple[float, int, bytes]] = []
    failures: list[str] = []
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked.append((time.monotonic(), msg.offset(), msg.value()))
        else:
            failures.append(str(err))

    def produce() -> None:
        # one request in flight: see tests/admin/test_grow.py's producer (librdkafka issue 4953)
        producer = Producer({
            "bootstrap.servers": bootstrap(brokers), "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
            "max.in.flight.requests.per.connection": 1,
        })
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"{i:08d}".encode(), on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0.001 if i % 20 == 0 else 0)
            if i % 200 == 0:
                time.sleep(0.01)
        producer.flush(60)

    consumed: list[bytes] = []

    def consume() -> None:
        # a kafka-python consumer reading live across the leader change
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap(brokers), enable_auto_commit=False, auto_offset_reset="earliest",
            metadata_max_age_ms=1000, fetch_max_wait_ms=200, request_timeout_ms=15000,
        )
        consumer.assign([KafkaTopicPartition(topic, 0)])
        while not consumer_stop.is_set():
            for records in consumer.poll(200).values():
                consumed.extend(r.value for r in records)
        consumer.close()

    consumer_stop = threading.Event()
    reader = threading.Thread(target=consume)
    reader.start()
    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_until(lambda: len(acked) >= 2000, 30, what="2000 acks before the kill")
        leader = by_id(brokers, first.leader)
        killed_at = time.monotonic()
        leader.kill()
        acked_at_kill = len(acked)
        wait_until(lambda: any(t > killed_at + 0.05 for t, _, _ in acked[acked_at_kill:]), 60, what="a produce after failover")
        first_ok = min(t for t, _, _ in acked[acked_at_kill:] if t > killed_at + 0.05)
        print(f"\nfailover: kill -9 of leader {first.leader} -> first acknowledged produce after {first_ok - killed_at:.2f}s")
        count = len(acked)
        wait_until(lambda: len(acked) >= count + 1000, 30, what="1000 acks after failover")
    finally:
        stop.set()
        thread.join(90)
    new = state(zk, topic)
    assert new.leader != first.leader and new.leader_epoch > first.leader_epoch
    assert failures == [], failures[:5]
    live = [b for b in brokers if b.alive]
    stored = consume_all(bootstrap(live), topic)
    values = [v for _, v in stored]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert values == sorted(values), "records out of order"
    stored_set = set(values)
    missing = [v for _, _, v in acked if v not in stored_set]
    assert missing == [], f"{len(missing)} acknowledged records lost"
    try:
        wait_until(lambda: len(consumed) >= len(values), 30, what="the live consumer to catch up")
    finally:
        consumer_stop.set()
        reader.join(30)
    assert consumed[: len(values)] == values
    # the killed broker comes back, catches up, and rejoins the ISR
    by_id(brokers, first.leader).start()
    wait_until(lambda: sorted(state(zk, topic).isr) == [1, 2, 3], 30, what="isr back to 3")
