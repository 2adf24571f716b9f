#!/usr/bin/env python3
"""Audit counter benchmark: records counted per event hour per second of CPU, on 100-byte records.

    .venv/bin/python bench/audit_bench.py [--records 4000000] [--partitions 4] [--json out.json]

1. an embedded ZooKeeper and one broker; a topic of --partitions partitions; --records records
   of 100 bytes produced with librdkafka (acks=1, linger 20 ms), record timestamps spread over
   six hours;
2. the audit: ``pipelines.audit.audit_range`` of every partition, one after the other in this
   process (fetch from the broker -> record columns -> event hours -> counts), wall and CPU time
   of this process (the broker's is not counted), records per CPU second = per core;
3. the counting alone: the same partitions' fetched bytes held in memory, then
   ``record_columns.decode_chunk`` + ``event_time.event_hours`` + ``hour_counts`` over them;
4. checks that the counts add up to what was produced, per hour.

Everything it starts is stopped on exit. Results to stdout and --json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.feeding import produce_waiting  # noqa: E402
from bench.reporting import progress  # noqa: E402

BASE_MS = 1_767_225_600_000
HOURS = 6
VALUE = b"x" * 100


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> dict[int, int]:
    """Records with timestamps spread evenly over HOURS hours; returns {hour: records}."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    step = HOURS * 3_600_000 // per_partition
    expected: dict[int, int] = {}
    for i in range(per_partition):
        ts = BASE_MS + i * step
        for part in range(partitions):
            produce_waiting(p, topic, VALUE, 0.05, partition=part, timestamp=ts)
        expected[ts // 3_600_000] = expected.get(ts // 3_600_000, 0) + partitions
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    return expected


def counting_only(ctx, spec, topic: str, partitions: int, ends: dict[int, int]) -> tuple[float, int]:
    """CPU seconds of decode_chunk + event_hours + hour_counts over fetched bytes held in memory."""
    from pipelines.decoders import Decoder
    from pipelines.event_time import event_hours, hour_counts
    from pipelines.record_columns import decode_chunk
    from pipelines.task import PartitionReader

    fetched = []
    for part in range(partitions):
        reader = PartitionReader(ctx, topic, part)
        offset = 0
        consumer = reader.consumer_()
        while offset < ends[part]:
            raw = consumer.fetch_raw(topic, part, offset, ctx.fetch_max_bytes)
            chunk = decode_chunk(topic, part, raw.records, offset)
            fetched.append((part, offset, bytes(raw.records)))
            offset = chunk.next_offset
        reader.close()
    decoder = Decoder(spec)
    n = 0
    c0 = time.process_time()
    for part, offset, data in fetched:
        chunk = decode_chunk(topic, part, data, offset)
        hour_counts(event_hours(decoder, chunk))
        n += len(chunk)
    return time.process_time() - c0, n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="audit counter benchmark")
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    from broker.client.admin import AdminClient
    from broker.cluster.embedded_zk import EmbeddedZooKeeper
    from broker.cluster.local import BrokerProcess
    from broker.cluster.net import free_port
    from pipelines.audit import audit_range
    from pipelines.config import TopicSpec
    from pipelines.task import TaskContext

    data_dir = Path(tempfile.mkdtemp(prefix="logbus-audit-bench-"))
    zk = EmbeddedZooKeeper(data_dir / "zk")
    broker = None
    results: dict = {"records": args.records, "partitions": args.partitions, "value_bytes": len(VALUE),
                     "cpus": os.cpu_count()}
    try:
        zk.start()
        props = {"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                 "log.dirs": str(data_dir / "kafka-logs"), "zookeeper.connect": f"{zk.connect_string}/logbus",
                 "log.segment.bytes": str(512 << 20)}
        broker = BrokerProcess(props, data_dir / "broker", {})
        broker.start()
        topic = "audit-bench"
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topic(topic, args.partitions, 1)
        per = args.records // args.partitions
        progress(f"producing {per * args.partitions:,} records of {len(VALUE)} bytes over {HOURS} hours")
        expected = produce(broker.bootstrap, topic, args.partitions, per)
        ctx = TaskContext(brokers=(broker.bootstrap,), warehouse="file:///nonexistent", prefetch_chunks=0)
        spec = TopicSpec(name=topic, format="raw")

        progress("audit: every partition, one after the other")
        w0, c0 = time.monotonic(), time.process_time()
        counts = [audit_range(ctx, spec, topic, part, 0, per) for part in range(args.partitions)]
        wall, cpu = time.monotonic() - w0, time.process_time() - c0
        total: dict[int, int] = {}
        for c in counts:
            for hour, n in c.hours.items():
                total[hour] = total.get(hour, 0) + n
        assert total == expected, (total, expected)
        results["audit"] = {"seconds": round(wall, 2), "cpu_seconds": round(cpu, 2),
                            "records_per_s": round(args.records / wall),
                            "records_per_cpu_s": round(args.records / cpu)}
        progress(f"audit: {args.records:,} in {wall:.1f} s wall, {cpu:.1f} s CPU = "
                 f"{args.records / cpu:,.0f} records per CPU second")

        progress("counting alone (fetched bytes in memory)")
        c_cpu, c_n = counting_only(ctx, spec, topic, args.partitions, dict.fromkeys(range(args.partitions), per))
        results["counting_only"] = {"cpu_seconds": round(c_cpu, 2), "records": c_n,
                                    "records_per_cpu_s": round(c_n / c_cpu)}
        progress(f"counting alone: {c_n / c_cpu:,.0f} records per CPU second")
        print(json.dumps(results, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return 0
    finally:
        if broker is not None:
            broker.stop()
        zk.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
