"""Followers clean their own logs (as Kafka's do): RF=3 compacted topic, every replica cleaned,
each holds the same latest value for every key; the leader killed, the new leader serves them."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from broker.protocol.records import decode_batches
from broker.storage.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint
from tests.cluster_replication.conftest import bootstrap, by_id, consume_all, create_topic, state, wait_until

KEYS, ROUNDS = 200, 20


def latest_on_disk(log_dir: Path) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Each key's last (offset, value) in a replica's segment files."""
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for path in sorted(log_dir.glob("*.log")):
        for batch in decode_batches(path.read_bytes()):
            for r in batch.records:
                out[r.key] = (r.offset, r.value)
    return out


def test_every_replica_compacts_to_the_same_latest_values(cluster, zk_client) -> None:
    brokers = cluster(3, log_cleaner_backoff_ms="50")
    topic = create_topic(brokers, config={"cleanup.policy": "compact", "segment.bytes": "16384",
                                          "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": bootstrap(brokers), "acks": "all", "linger.ms": 5, "batch.size": 8192})
    for r in range(ROUNDS):
        for k in range(KEYS):
            producer.produce(topic, key=b"k%03d" % k, value=b"v%03d-%02d" % (k, r) + b"x" * 40, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    expected = {b"k%03d" % k: b"v%03d-%02d" % (k, ROUNDS - 1) + b"x" * 40 for k in range(KEYS)}

    dirs = [b.log_dir / "data" for b in brokers]
    wait_until(lambda: all(read_checkpoint(str(d / CLEANER_OFFSET_FILE)).get((topic, 0), 0) > KEYS * (ROUNDS - 4)
                           for d in dirs), 30, what="every replica cleaned")
    on_disk = [latest_on_disk(d / f"{topic}-0") for d in dirs]
    assert on_disk[0] == on_disk[1] == on_disk[2]
    assert {k: v for k, (_, v) in on_disk[0].items()} == expected
    sizes = [sum(p.stat().st_size for p in (d / f"{topic}-0").glob("*.log")) for d in dirs]
    assert max(sizes) < KEYS * ROUNDS * 60 / 3  # each replica is compacted

    leader_id = state(zk_client, topic).leader
    by_id(brokers, leader_id).kill()
    wait_until(lambda: state(zk_client, topic).leader not in (leader_id, -1), 20, what="a new leader")

    def served() -> set[bytes]:
        """Each key's last value below the new leader's high watermark (which, as in Kafka, may
        trail the old leader's until the remaining follower has fetched from it)."""
        values = {}
        for offset, value in consume_all(bootstrap(brokers), topic):
            values[value[:4]] = (offset, value)  # b"vNNN": the key's number
        return {v for _, v in values.values()}

    wait_until(lambda: served() == set(expected.values()), 30, what="the new leader serving every key's latest value")
