#!/usr/bin/env python3
"""A reassignment under ``--throttle``: how fast a new replica is filled, against the set rate.

    .venv/bin/python bench/throttle_bench.py [--rates 0,4000000,10000000] [--mb 40]

For each rate: a fresh 2-broker local cluster; librdkafka writes --mb MB of 1 KB records into one
partition on one broker; `logbus reassign-partitions --execute [--throttle RATE]` adds the other
broker as a replica; --verify every 0.5 s until done. Prints the copy rate (bytes on the wire
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


def one(rate: int, mb: int, home: Path) -> str:
    shutil.rmtree(home, ignore_errors=True)
    with LocalCluster(home) as cluster:
        cluster.up(2)
        bootstrap, zk_connect = cluster.bootstrap_servers, cluster.zookeeper_connect
        made = logbus("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "big", "--partitions", "1",
                      "--replication-factor", "1")
        assert made.returncode == 0, made.stderr
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
        for _ in range(mb * 1000):
            while True:
                try:
                    producer.produce("big", b"x" * RECORD, partition=0)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(60) == 0
        zk = ZkClient(zk_connect)
        zk.start()
        try:
            old = (zk.topic_assignment("big") or {})[0][0]
        finally:
            zk.stop()
        plan = home / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0,
                                                                  "replicas": [old, 3 - old]}]}))
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
    return f"| {rate or 'none'} | {mb} | {took:.1f} | {copied / 1e6:.2f} | {ratio} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0,4000000,10000000", help="bytes/s, comma-separated (0: no throttle)")
    parser.add_argument("--mb", type=int, default=40, help="MB in the partition moved")
    args = parser.parse_args()
    print("| throttle B/s | MB | seconds | MB/s copied | copied / throttle |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="throttle-bench-") as tmp:
        for rate in (int(r) for r in args.rates.split(",")):
            print(one(rate, args.mb, Path(tmp) / "cluster"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
