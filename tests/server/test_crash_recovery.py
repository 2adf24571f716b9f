"""kill -9 during produce loses no acknowledged record; a clean restart rescans nothing."""

from __future__ import annotations

import re
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition


def _consume_all(bootstrap: str, topic: str, timeout: float = 60) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        found: dict[int, bytes] = {}
        deadline = time.monotonic() + timeout
        while len(found) < high - low and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                found[msg.offset()] = msg.value()
        return found
    finally:
        consumer.close()


def test_kill_9_during_produce_keeps_every_acknowledged_record(broker_factory):
    broker = broker_factory(overrides={"log.flush.interval.messages": "1", "log.segment.bytes": "100000"})
    topic = f"crash-{uuid.uuid4().hex[:8]}"
    acked: dict[int, bytes] = {}
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "acks": "1", "message.timeout.ms": 3000})
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=f"record-{i}".encode(), on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001 if i % 50 == 0 else 0)
        producer.flush(10)

    thread = threading.Thread(target=produce)
    thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.kill()
    stop.set()
    thread.join(30)
    assert len(acked) >= 3000

    broker.start()
    stored = _consume_all(broker.bootstrap, topic)
    missing = [offset for offset in acked if stored.get(offset) != acked[offset]]
    assert missing == [], f"{len(missing)} acknowledged records lost or changed, e.g. offset {missing[:5]}"
    assert sorted(stored) == list(range(len(stored))), "offsets must stay contiguous after recovery"


def _recovery_line(broker) -> str:
    lines = [line for line in broker.out_path.read_text().splitlines() if "log recovery:" in line]
    assert lines, broker.log_tail()
    return lines[-1]


def test_clean_restart_does_not_rescan_segments(broker_factory):
    broker = broker_factory(overrides={"log.segment.bytes": "20000"})
    topic = f"segments-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 10})
    for i in range(5000):
        producer.produce(topic, value=b"v" * 100)
        if i % 500 == 0:
            producer.flush(10)
    assert producer.flush(30) == 0
    segments = list((broker.log_dir / "data" / f"{topic}-0").glob("*.log"))
    assert len(segments) > 20

    assert broker.stop() == 0
    broker.start()
    line = _recovery_line(broker)
    assert re.search(r"clean shutdown: True", line), line
    assert re.search(r"segments scanned: 0\b", line), line
    assert len(_consume_all(broker.bootstrap, topic)) == 5000

    broker.kill()
    broker.start()
    line = _recovery_line(broker)
    assert re.search(r"clean shutdown: False", line), line
    scanned = int(re.search(r"segments scanned: (\d+)", line).group(1))
    assert 0 < scanned < len(segments), "an unclean restart scans from the recovery point, not every segment"
    assert len(_consume_all(broker.bootstrap, topic)) == 5000
