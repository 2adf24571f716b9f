"""Members and coordinators that die: a killed member is evicted after its session timeout;
a restarted broker and a killed coordinator lose no committed offset."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from broker.coordinator.placement import coordinator_for
from tests.coordinator.conftest import (
    GROUP_BROKER,
    SESSION_MS,
    confluent_member,
    create_topic,
    group_topic,
    produce,
    settled,
    three_brokers,
    unique,
    wait_until,
)
from tests.starting import QUICK_EXPIRY

MEMBER_SCRIPT = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[3], "session.timeout.ms": int(sys.argv[4]),
                  "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[2]])
    while True:
        c.poll(0.2)
        print(",".join(str(tp.partition) for tp in c.assignment()), flush=True)
    """
)


def _values(members, after: int = 0) -> set[tuple[int, bytes]]:
    return {(p, v) for m in members for p, _, v in m.records[after:]}


def test_killed_member_is_evicted_after_its_session_timeout(group_broker):
    bootstrap = group_broker.bootstrap
    topic = create_topic(bootstrap, 6)
    group = unique("kill")
    members = [confluent_member(bootstrap, topic, group) for _ in range(2)]
    proc = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, bootstrap, topic, group, str(SESSION_MS)], stdout=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len([p for m in members for p in m.assigned]) in (3, 4) and proc.stdout.readline().strip(), 40,
                   what="3 members")
        wait_until(lambda: len([p for m in members for p in m.assigned]) < 6, 20, what="the process to hold partitions")
        proc.kill()
        proc.wait()
        killed_at = time.monotonic()
        wait_until(lambda: settled(members, 6), SESSION_MS / 1000 + 20, what="the survivors to take over")
        took = time.monotonic() - killed_at
        assert took >= SESSION_MS / 1000 - 2, f"taken over after {took:.1f}s, before the session timeout"
    finally:
        proc.kill()
        proc.wait()
        for m in members:
            m.leave()


def test_commits_survive_a_broker_restart(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = group_topic(bootstrap, 3, 10, "restart")
    m = confluent_member(bootstrap, topic, group)
    wait_until(lambda: len(m.records) >= 30, 40, what="first records")
    time.sleep(1)  # auto commit
    m.leave()
    group_broker.stop()
    group_broker.start()
    produce(bootstrap, topic, 3, 5, start=10)
    m = confluent_member(bootstrap, topic, group)
    try:
        wait_until(lambda: len(m.records) >= 15, 40, what="records after the restart")
        time.sleep(1)
    finally:
        m.leave()
    assert sorted(int(v.split(b":")[1]) for _, _, v in m.records) == sorted(list(range(10, 15)) * 3)


def test_coordinator_broker_killed(broker_factory, zk_client):
    brokers, bootstrap = three_brokers(broker_factory, {**GROUP_BROKER, **QUICK_EXPIRY})
    topic, group = group_topic(bootstrap, 6, 10, "failover", rf=3)
    members = [confluent_member(bootstrap, topic, group) for _ in range(2)]
    try:
        wait_until(lambda: settled(members, 6) and len(_values(members)) >= 60, 40, what="first records")
        time.sleep(1)  # auto commit
        committed = {p: zk_client.client.get(f"/consumers/{group}/offsets/{topic}/{p}")[0] for p in range(6)}
        assert set(committed.values()) == {b"10"}
        seen = [len(m.records) for m in members]
        coordinator = coordinator_for(group, [1, 2, 3])
        victim = next(b for b in brokers if b.broker_id in (coordinator, str(coordinator)))
        victim.kill()
        survivors = [b for b in brokers if b is not victim]
        wait_until(lambda: zk_client.client.exists(f"/brokers/ids/{coordinator}") is None, 30, what="the session to expire")
        produce(",".join(b.bootstrap for b in survivors), topic, 6, 10, start=10)
        def after() -> set:
            return {(p, v) for m, n in zip(members, seen) for p, _, v in m.records[n:]}

        wait_until(lambda: len(after()) >= 60, 60, what="records after the failover")
        # committed offsets were kept: nothing before offset 10 was read again
        assert {int(v.split(b":")[1]) for _, v in after()} == set(range(10, 20))
        wait_until(lambda: settled(members, 6), 30, what="a settled group")
    finally:
        for m in members:
            m.leave()
