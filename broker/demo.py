"""The main job until the warehouse loader lands: an embedded ZooKeeper and one broker,
page-view events produced with librdkafka and read back with kafka-python, a summary printed,
everything stopped. Run with `make run` (or `python -m broker.demo`)."""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from broker.client.admin import AdminClient
from broker.cluster.embedded_zk import EmbeddedZooKeeper, ZooKeeperNotInstalledError
from broker.cluster.local import BrokerProcess, BrokerStartError
from broker.cluster.net import free_port

TOPIC = "page-views"
PARTITIONS = 3
PAGES = ["/home", "/jobs", "/feed", "/profile", "/messages", "/search", "/groups", "/learning"]


def page_views(count: int, seed: int = 7) -> list[tuple[bytes, bytes, int]]:
    """(member id key, JSON event, timestamp ms) for ``count`` page views of 500 members."""
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    events = []
    for i in range(count):
        member = rng.randrange(1, 501)
        ts = now - (count - i) * 10
        event = {"member_id": member, "page": rng.choice(PAGES), "time": ts, "session": f"s{member}-{i // 200}"}
        events.append((str(member).encode(), json.dumps(event).encode(), ts))
    return events


def produce(bootstrap: str, events: list[tuple[bytes, bytes, int]]) -> dict[int, list[int]]:
    """Send the events with librdkafka (acks=all, lz4); return the acknowledged offsets per partition."""
    from confluent_kafka import Producer

    acked: dict[int, list[int]] = {}
    failures = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failures.append(err)
        else:
            acked.setdefault(msg.partition(), []).append(msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 5})
    for key, value, ts in events:
        producer.produce(TOPIC, key=key, value=value, timestamp=ts, on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(30)
    if failures or remaining:
        raise SystemExit(f"demo: {len(failures)} sends failed ({failures[:1]}), {remaining} unsent")
    return acked


def consume(bootstrap: str, expected: int) -> list:
    """Read the topic from the beginning with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    messages = []
    try:
        for message in consumer:
            messages.append(message)
            if len(messages) >= expected:
                break
    finally:
        consumer.close()
    return messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000, help="page views to produce")
    parser.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="logbus-demo-"))
    print(f"[1/5] starting ZooKeeper (Debian's server) under {workdir}")
    with EmbeddedZooKeeper(workdir / "zookeeper") as zookeeper:
        port = free_port()
        broker = BrokerProcess(
            "conf/server.properties",
            workdir / "broker-1",
            overrides={
                "broker.id": "1",
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": str(workdir / "broker-1" / "data"),
                "zookeeper.connect": f"{zookeeper.connect_string}/logbus",
            },
        )
        print(f"[2/5] starting broker 1 on {broker.bootstrap} (zookeeper.connect={zookeeper.connect_string}/logbus)")
        with broker:
            with AdminClient(broker.bootstrap) as admin:
                admin.create_topic(TOPIC, PARTITIONS, 1)
                print(f"      created topic {TOPIC} with {PARTITIONS} partitions")

            events = page_views(args.events)
            print(f"[3/5] producing {len(events):,} page views keyed by member id with librdkafka (acks=all, lz4)")
            started = time.monotonic()
            acked = produce(broker.bootstrap, events)
            elapsed = time.monotonic() - started
            total = sum(len(v) for v in acked.values())
            print(f"      {total:,} acknowledged in {elapsed:.2f}s ({total / elapsed:,.0f} records/s)")

            print("[4/5] consuming them back from the beginning with kafka-python")
            started = time.monotonic()
            messages = consume(broker.bootstrap, total)
            elapsed = time.monotonic() - started
            print(f"      {len(messages):,} read in {elapsed:.2f}s")

            by_partition: dict[int, list[int]] = {}
            for message in messages:
                by_partition.setdefault(message.partition, []).append(message.offset)
            keys_seen = Counter((m.partition, m.key) for m in messages)
            keys_per_member = Counter(key for _, key in keys_seen)
            ok = len(messages) == total and all(n == 1 for n in keys_per_member.values())
            print("      partition  records  offsets")
            for partition in sorted(by_partition):
                offsets = sorted(by_partition[partition])
                contiguous = offsets == list(range(len(offsets)))
                ok = ok and contiguous and offsets == sorted(acked[partition])
                print(f"      {partition:>9}  {len(offsets):>7,}  {offsets[0]}..{offsets[-1]}{'' if contiguous else '  (GAP!)'}")
            pages = Counter(json.loads(m.value)["page"] for m in messages)
            print("      top pages: " + ", ".join(f"{p} {n:,}" for p, n in pages.most_common(3)))
            segment = next((broker.log_dir / "data" / f"{TOPIC}-0").glob("*.log"))
            print(f"      partition 0's segment: {segment} ({segment.stat().st_size:,} bytes; `logbus dump-log` prints it)")
            print("[5/5] stopping the broker (SIGTERM, clean shutdown) and ZooKeeper")
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    verdict = "OK: every acknowledged record read back once, in order, keys on one partition each" if ok else "FAILED"
    print(verdict)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (BrokerStartError, ZooKeeperNotInstalledError, OSError) as exc:
        raise SystemExit(f"demo failed: {exc}") from None
