"""Numbers for the group coordinator (not a test): settle times of a 3-member group and the
OffsetCommit rate one broker sustains with offsets in ZooKeeper.

    .venv/bin/python -m tests.coordinator.measure_groups [--seconds 10]

Starts its own ZooKeeper and broker on free ports, stops them at the end.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient

from broker.client.connection import BrokerConnection
from broker.cluster.embedded_zk import EmbeddedZooKeeper
from broker.cluster.local import BrokerProcess
from broker.cluster.net import free_port
from broker.protocol.messages import REQUESTS, ApiKey
from tests.coordinator.conftest import confluent_member, create_topic, settled, unique, wait_until


def settle_times(bootstrap: str, heartbeat_ms: int) -> tuple[float, float]:
    topic = create_topic(bootstrap, 6)
    group = unique("settle")
    members = [confluent_member(bootstrap, topic, group, **{"heartbeat.interval.ms": heartbeat_ms}) for _ in range(2)]
    wait_until(lambda: settled(members, 6) and all(m.assigned for m in members), 60)
    time.sleep(2)
    started = time.monotonic()
    members.append(confluent_member(bootstrap, topic, group, **{"heartbeat.interval.ms": heartbeat_ms}))
    wait_until(lambda: settled(members, 6) and all(m.assigned for m in members), 60, interval=0.01)
    joined = time.monotonic() - started
    time.sleep(2)
    started = time.monotonic()
    members[0].leave()
    wait_until(lambda: settled(members[1:], 6), 60, interval=0.01)
    left = time.monotonic() - started
    for m in members[1:]:
        m.leave()
    return joined, left


def commit_rate(bootstrap: str, topic: str, seconds: float, connections: int, depth: int, partitions: int) -> float:
    """Pipelined OffsetCommit requests (simple commits, generation -1), each of ``partitions``
    partitions, from ``connections`` sockets; returns partition-offsets committed per second."""
    done = [0] * connections
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        group = f"bench-{i}"
        conn = BrokerConnection.from_address(bootstrap)
        offset = 0

        def body() -> bytes:
            nonlocal offset
            offset += 1
            return REQUESTS[ApiKey.OFFSET_COMMIT].encode_bytes(7, {
                "group_id": group, "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1, "committed_metadata": ""}
                    for p in range(partitions)]}],
            })

        for _ in range(depth):  # groups are distinct per connection: i's partitions are its own keys
            conn.send_encoded(ApiKey.OFFSET_COMMIT, 7, body())
        while time.monotonic() < stop:
            _, r = conn.receive_response()
            assert all(p["error_code"] == 0 for t in r["topics"] for p in t["partitions"]), r
            done[i] += partitions
            conn.send_encoded(ApiKey.OFFSET_COMMIT, 7, body())
        for _ in range(depth):
            conn.receive_response()
        conn.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def zk_rate(connect: str, seconds: float, pipelined: bool) -> float:
    zk = KazooClient(hosts=connect)
    zk.start()
    zk.ensure_path("/bench/x")
    n = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        if pipelined:
            asks = [zk.set_async("/bench/x", str(n + i).encode()) for i in range(100)]
            for a in asks:
                a.get()
            n += 100
        else:
            zk.set("/bench/x", str(n).encode())
            n += 1
    zk.stop()
    zk.close()
    return n / seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk")
        zk.start()
        broker = BrokerProcess({
            "broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", "log.dirs": f"{tmp}/data",
            "zookeeper.connect": f"{zk.connect_string}/bench", "group.initial.rebalance.delay.ms": "0",
        }, Path(tmp) / "broker")
        broker.start()
        try:
            for hb in (3000, 500):
                trials = [settle_times(broker.bootstrap, hb) for _ in range(3)]
                print(f"3-member group (confluent-kafka), heartbeat.interval.ms={hb}: settled after a join in "
                      + ", ".join(f"{j:.2f}" for j, _ in trials) + "s; after a leave in "
                      + ", ".join(f"{leave:.2f}" for _, leave in trials) + "s")
            print(f"ZooKeeper alone: {zk_rate(zk.connect_string, args.seconds / 2, False):,.0f} sync sets/s, "
                  f"{zk_rate(zk.connect_string, args.seconds / 2, True):,.0f} pipelined sets/s")
            topic = create_topic(broker.bootstrap, 10)
            for conns, depth, parts in ((1, 1, 1), (8, 16, 1), (8, 16, 10), (50, 4, 10)):
                rate = commit_rate(broker.bootstrap, topic, args.seconds, conns, depth, parts)
                print(f"OffsetCommit, {conns} connections x {depth} in flight, {parts} partition(s)/request: "
                      f"{rate:,.0f} offsets/s ({rate / parts:,.0f} requests/s)")
        finally:
            broker.stop()
            zk.stop()
            print(next((line.split("group coordinator: ")[1] for line in broker.out_path.read_text().splitlines()
                        if "group coordinator: " in line), "no stats"))


if __name__ == "__main__":
    main()
