#!/usr/bin/env python3
"""A reassignment under ``--throttle``: how fast a new replica is filled, against the set rate.

    .venv/bin/python bench/throttle_bench.py [--rates 0,4000000,10000000] [--mb 40] [--partitions 1]

For each rate: a fresh 2-broker local cluster; librdkafka writes --mb MB of 1 KB records, round
robin, into a topic of --partitions partitions at RF 1 (spread over the two brokers);
`logbus reassign-partitions --execute [--throttle RATE]` adds the other broker as a replica of
every partition; --verify every 0.5 s until done. Prints the copy rate (bytes on the wire
over the time from --execute to --verify's completion, controller steps included) and its ratio
to the throttle (the issue's aim: within 20 %). 0: no throttle. Everything is stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from broker.cluster.local_cluster import LocalCluster
from broker.cluster.zk import ZkClient

RECORD = 1000
WIRE = RECORD + 70  # a record's bytes in a batch, roughly, and so on the replication wire


def logbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=120)


def one(rate: int, mb: int, partitions: int, home: Path) -> str:
    shutil.rmtree(home, ignore_errors=True)
    with LocalCluster(home) as cluster:
        cluster.up(2)
        bootstrap, zk_connect = cluster.bootstrap_servers, cluster.zookeeper_connect
        made = logbus("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "big", "--partitions", str(partitions),
                      "--replication-factor", "1")
        assert made.returncode == 0, made.stderr
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
        for i in range(mb * 1000):
            while True:
                try:
                    producer.produce("big", b"x" * RECORD, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(60) == 0
        zk = ZkClient(zk_connect)
        zk.start()
        try:
            assignment = zk.topic_assignment("big") or {}
        finally:
            zk.stop()
        plan = home / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": p, "replicas": [r[0], 3 - r[0]]}
                                                                 for p, r in sorted(assignment.items())]}))
        started = time.monotonic()
        throttle = ["--throttle", str(rate)] if rate > 0 else []
        out = logbus("reassign-partitions", "--zookeeper", zk_connect, "--execute", "--reassignment-json-file", str(plan),
                     *throttle)
        assert out.returncode == 0, out.stderr
        while logbus("reassign-partitions", "--zookeeper", zk_connect, "--verify",
                     "--reassignment-json-file", str(plan)).returncode != 0:
            time.sleep(0.5)
        took = time.monotonic() - started
    copied = mb * 1000 * WIRE / took
    ratio = f"{copied / rate:.2f}" if rate else "-"
    return f"| {rate or 'none'} | {partitions} | {mb} | {took:.1f} | {copied / 1e6:.2f} | {ratio} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0,4000000,10000000", help="bytes/s, comma-separated (0: no throttle)")
    parser.add_argument("--mb", type=int, default=40, help="MB in the partitions moved")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the topic, every one reassigned")
    args = parser.parse_args()
    print("| throttle B/s | partitions | MB | seconds | MB/s copied | copied / throttle |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="throttle-bench-") as tmp:
        for rate in (int(r) for r in args.rates.split(",")):
            print(one(rate, args.mb, args.partitions, Path(tmp) / "cluster"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
