#!/usr/bin/env python3
"""Partition-count scale benchmark (issue 16): a 3-broker cluster at 1,000, 3,000, ... partitions.

    .venv/bin/python bench/scale.py [--partitions 1000,3000,10000] [--rf 3] [--timeout 180]
                                    [--idle-seconds 10] [--json out.json]

For each count, a fresh cluster (`LocalCluster`: an embedded ZooKeeper and 3 brokers,
``zookeeper.session.timeout.ms=6000``):

1. CreateTopics of one topic with that many partitions (RF ``--rf``), then Metadata from
   every broker until each one reports a leader for every partition: **create-to-led** seconds;
2. the brokers idle (no clients) for ``--idle-seconds``: their CPU, in cores, summed, and
   each one's RSS;
3. the controller (from ZooKeeper's ``/controller``) is SIGKILLed: seconds until a live
   broker's Metadata shows every partition led by a live broker: **failover**.

A step that does not finish within ``--timeout`` is reported with how far it got and the
next count is skipped. Everything started is stopped. Results to stdout and ``--json``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
from reporting import progress, report  # noqa: E402
from signals import stop_cleanly_on_signals  # noqa: E402

from broker.client.admin import AdminClient  # noqa: E402
from broker.cluster.local_cluster import LocalCluster  # noqa: E402
from broker.cluster.zk import ZkClient  # noqa: E402
from broker.cluster.zkdata import ControllerZNode  # noqa: E402

OVERRIDES = {"zookeeper.session.timeout.ms": "6000"}


def led(bootstrap: str, topic: str, live: set[int]) -> int:
    """Partitions of ``topic`` that ``bootstrap``'s Metadata shows led by a broker of ``live``."""
    try:
        with AdminClient(bootstrap, timeout=30) as admin:
            [desc] = admin.describe_topics([topic])
    except Exception:  # not there yet, or the broker is busy: count none
        return 0
    return sum(1 for p in desc.partitions if p.leader in live)


def wait_led(bootstraps: list[str], topic: str, partitions: int, live: set[int], timeout: float) -> tuple[float | None, int]:
    """Seconds until every broker of ``bootstraps`` shows every partition led by ``live`` (None: not
    within ``timeout``), and the least count seen last."""
    t0 = time.monotonic()
    least = 0
    while time.monotonic() - t0 < timeout:
        least = min(led(b, topic, live) for b in bootstraps)
        if least == partitions:
            return time.monotonic() - t0, least
        time.sleep(0.5)
    return None, least


def cpu_seconds(procs: list[psutil.Process]) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in procs)


def one_count(partitions: int, rf: int, timeout: float, idle_s: float) -> dict:
    out: dict = {"partitions": partitions, "replicas": partitions * rf}
    with tempfile.TemporaryDirectory(prefix="logbus-scale-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", progress=lambda line: None)
        cluster.up(brokers=3, overrides=OVERRIDES)
        try:
            brokers = {b.id: b for b in cluster.brokers if b.id is not None}
            procs = {bid: psutil.Process(b.pid) for bid, b in brokers.items() if b.pid}
            addresses = {bid: f"{b.host}:{b.port}" for bid, b in brokers.items()}
            topic = f"scale-{partitions}"
            progress(f"{partitions:,} partitions: CreateTopics (RF {rf})")
            t0 = time.monotonic()
            with AdminClient(cluster.bootstrap_servers, timeout=timeout) as admin:
                admin.create_topic(topic, partitions, rf)
            out["create_request_s"] = round(time.monotonic() - t0, 2)
            secs, least = wait_led(list(addresses.values()), topic, partitions, set(brokers), timeout)
            out["create_to_led_s"] = None if secs is None else round(secs + out["create_request_s"], 2)
            out["led_at_timeout"] = None if secs is not None else least
            progress(f"{partitions:,} partitions: led in {out['create_to_led_s']} s" if secs is not None
                     else f"{partitions:,} partitions: only {least:,} led after {timeout:.0f} s")
            if secs is None:
                return out

            time.sleep(2)  # let the creation's follow-up work (first fetches, checkpoints) settle
            before = cpu_seconds(list(procs.values()))
            time.sleep(idle_s)
            out["idle_cores"] = round((cpu_seconds(list(procs.values())) - before) / idle_s, 3)
            out["rss_mb"] = {str(bid): round(p.memory_info().rss / 2**20) for bid, p in procs.items()}
            progress(f"{partitions:,} partitions: idle {out['idle_cores']} cores, RSS {out['rss_mb']} MiB")

            zk = ZkClient(cluster.zookeeper_connect)
            zk.start(timeout=10)
            try:
                holder = zk.controller()
                assert holder is not None, "no controller registered"
                controller = holder[0]
                elected = threading.Event()
                elected_at = [0.0]

                def on_controller(data: bytes | None, *_: object) -> None:
                    if data and ControllerZNode.decode(data) != controller and not elected.is_set():
                        elected_at[0] = time.monotonic()
                        elected.set()

                zk.watch_controller(on_controller)
                progress(f"{partitions:,} partitions: SIGKILL of the controller, broker {controller}")
                os.kill(brokers[controller].pid or 0, signal.SIGKILL)
                t1 = time.monotonic()
                live = set(brokers) - {controller}
                secs, least = wait_led([a for bid, a in addresses.items() if bid in live], topic, partitions, live, timeout)
                if elected.is_set():  # the old session's expiry, and an election
                    out["failover_elected_s"] = round(elected_at[0] - t1, 2)
            finally:
                zk.stop()
            out["failover_s"] = None if secs is None else round(secs, 2)
            out["led_after_failover_timeout"] = None if secs is not None else least
            progress(f"{partitions:,} partitions: failover {out['failover_s']} s (new controller at "
                     f"{out.get('failover_elected_s')} s)" if secs is not None
                     else f"{partitions:,} partitions: only {least:,} led by live brokers {timeout:.0f} s after the kill")
            out["failover_elapsed_s"] = round(time.monotonic() - t1, 2)
        finally:
            cluster.down()
    return out


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_signals()
    ap = argparse.ArgumentParser(description="partition-count scale benchmark")
    ap.add_argument("--partitions", default="1000,3000,10000", help="comma-separated partition counts")
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    results = {"cpus": os.cpu_count(), "rf": args.rf, "runs": []}
    for count in (int(c) for c in args.partitions.split(",")):
        run = one_count(count, args.rf, args.timeout, args.idle_seconds)
        results["runs"].append(run)
        if run.get("create_to_led_s") is None or run.get("failover_s") is None:
            progress(f"stopping: {count:,} partitions did not finish within {args.timeout:.0f} s")
            break
    report(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
