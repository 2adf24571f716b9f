#!/usr/bin/env python3
"""A reassignment under ``--throttle``: how fast a new replica is filled, against the set rate.

    .venv/bin/python bench/throttle_bench.py [--rates 0,4000000,10000000] [--mb 40] [--partitions 1]

For each rate: a fresh 2-broker local cluster; librdkafka writes --mb MB of 1 KB records, round
robin, into a topic of --partitions partitions at RF 1 (spread over the two brokers);
`logbus reassign-partitions --execute [--throttle RATE]` adds the other broker as a replica of
every partition; --verify every 0.5 s until done. Prints the copy rate two ways, each with its
ratio to the throttle (the issue's aim: within 20 %):

- end to end: the partitions' bytes over the time from --execute to --verify's completion
  (the controller's steps, the new replicas joining the ISR and the polling included);
- while copying, per broker (the throttle is a rate per broker, as in Kafka, and each broker
  leads half the partitions): each leader's ``logbus_topic_replication_bytes_out_total``,
  sampled every 0.25 s from its metrics port, from 10 % to 90 % of the bytes it sent.

0: no throttle. Everything is stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from signals import stop_cleanly_on_signals

from broker.cluster.local_cluster import LocalCluster
from broker.cluster.net import free_port
from broker.cluster.zk import ZkClient

RECORD = 1000
WIRE = RECORD + 70  # a record's bytes in a batch, roughly, and so on the replication wire


def logbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=120)


COUNTER = 'logbus_topic_replication_bytes_out_total{topic="big"}'
SAMPLE_S = 0.25


def replicated(port: int) -> int:
    """Record bytes the broker serving metrics on ``port`` has sent to followers of topic big."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(COUNTER):
                return int(float(line.split()[-1]))
    return 0


def steady_rate(samples: list[tuple[float, int]], total: int) -> float | None:
    """Bytes/s between the samples where 10 % and 90 % of ``total`` had been copied."""
    low = next(((t, b) for t, b in samples if b >= total * 0.1), None)
    high = next(((t, b) for t, b in samples if b >= total * 0.9), None)
    if low is None or high is None or high[0] <= low[0]:
        return None
    return (high[1] - low[1]) / (high[0] - low[0])


def one(rate: int, mb: int, partitions: int, home: Path) -> str:
    shutil.rmtree(home, ignore_errors=True)
    with LocalCluster(home) as cluster:
        base = free_port()
        cluster.up(2, metrics_port_base=base)
        ports = [base, base + 1]
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
        samples: dict[int, list[tuple[float, int]]] = {port: [] for port in ports}
        done = threading.Event()

        def sample() -> None:
            while not done.wait(SAMPLE_S):
                for port in ports:
                    samples[port].append((time.monotonic(), replicated(port)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        throttle = ["--throttle", str(rate)] if rate > 0 else []
        out = logbus("reassign-partitions", "--zookeeper", zk_connect, "--execute", "--reassignment-json-file", str(plan),
                     *throttle)
        assert out.returncode == 0, out.stderr
        while logbus("reassign-partitions", "--zookeeper", zk_connect, "--verify",
                     "--reassignment-json-file", str(plan)).returncode != 0:
            time.sleep(0.5)
        took = time.monotonic() - started
        done.set()
        sampler.join()
        steady = [steady_rate(samples[port], replicated(port)) for port in ports]
    copied = mb * 1000 * WIRE / took
    ratio = f"{copied / rate:.2f}" if rate else "-"
    rates = [r for r in steady if r is not None]
    steady_text = ", ".join(f"{r / 1e6:.2f}" for r in rates) or "-"
    steady_ratio = ", ".join(f"{r / rate:.2f}" for r in rates) if rate and rates else "-"
    return (f"| {rate or 'none'} | {partitions} | {mb} | {took:.1f} | {copied / 1e6:.2f} | {ratio} | {steady_text} | "
            f"{steady_ratio} |")


def main() -> int:
    stop_cleanly_on_signals()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0,4000000,10000000", help="bytes/s, comma-separated (0: no throttle)")
    parser.add_argument("--mb", type=int, default=40, help="MB in the partitions moved")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the topic, every one reassigned")
    args = parser.parse_args()
    print("| throttle B/s | partitions | MB | seconds | MB/s end to end | / throttle | MB/s per broker while copying "
          "| / throttle |\n"
          "|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="throttle-bench-") as tmp:
        for rate in (int(r) for r in args.rates.split(",")):
            print(one(rate, args.mb, args.partitions, Path(tmp) / "cluster"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
