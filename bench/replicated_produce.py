"""Replicated produce throughput: three brokers on this machine, RF=3, librdkafka producer,
100-byte records, acks=all and acks=1 (the aims of the replication issue).

    .venv/bin/python bench/replicated_produce.py [--records 2000000] [--partitions 6] [--json out.json]

Uses produce_phase from bench/produce_consume.py, so the producer settings are the same as in
the single-broker benchmark (linger.ms=5, default batching, delivery reports on errors only).
Stops the cluster it started, even on failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from produce_consume import CpuMeter, produce_phase  # noqa: E402
from signals import stop_cleanly_on_signals  # noqa: E402

from broker.cluster.local_cluster import LocalCluster  # noqa: E402


def create_replicated_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and all(len(p.isrs) == 3 and p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic}: partitions did not get a leader and a full ISR in 30 s")


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_signals()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    results = []
    with tempfile.TemporaryDirectory(prefix="logbus-repl-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", progress=lambda m: print(f"[cluster] {m}", file=sys.stderr))
        cluster.up(3, overrides={"min.insync.replicas": "2"})
        try:
            bootstrap = cluster.bootstrap_servers
            pids = [b.pid for b in cluster.brokers]
            for acks in ("all", "1"):
                topic = f"bench-rf3-acks{acks}"
                create_replicated_topic(bootstrap, topic, args.partitions)
                print(f"producing {args.records:,} records to {topic} (RF=3, acks={acks})", file=sys.stderr)
                meters = [CpuMeter(pid).start() for pid in pids]
                phase = produce_phase(bootstrap, topic, args.records, 300.0, lambda: None, {"acks": acks})
                cpu = [meter.stop() for meter in meters]
                phase["cpu"] = {
                    "broker_cores": [c["broker_cores"] for c in cpu],
                    "client_cores": cpu[0]["client_cores"],
                    "machine_busy_pct": cpu[0]["machine_busy_pct"],
                }
                phase["acks"] = acks
                results.append(phase)
                print(
                    f"RF=3 acks={acks:<3} {phase['records_s']:>10,} records/s {phase['mb_s']:>7.1f} MB/s  "
                    f"errors {phase['delivery_errors']}  broker CPU {phase['cpu']}",
                )
        finally:
            cluster.down()
    if args.json:
        args.json.write_text(json.dumps({"records": args.records, "partitions": args.partitions, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
