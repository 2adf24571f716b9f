"""GroupConsumer against real brokers and ZooKeeper: splitting partitions, sharing a group with
librdkafka, committed offsets (seen by the tools and by a restarted consumer), offset resets,
a dead coordinator, and console-consumer --group."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from broker.client import GroupConsumer, NoOffsetForPartitionError
from broker.client.assignors import range_assignor, roundrobin_assignor
from broker.config import ConfigError
from broker.coordinator.placement import coordinator_for
from broker.protocol.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, encode_subscription
from broker.protocol.errors import KafkaError
from tests.coordinator.conftest import (
    Member,
    confluent_member,
    create_topic,
    group_topic,
    kafka_python_member,
    produce,
    settled,
    three_brokers,
    unique,
    wait_until,
)
from tests.starting import QUICK_EXPIRY

# No initial rebalance delay and short sessions, so groups form and re-form in well under a second.
BROKER = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
FAST = {
    "session.timeout.ms": 3000, "heartbeat.interval.ms": 200, "max.poll.interval.ms": 10000,
    "fetch.max.wait.ms": 100, "retry.backoff.ms": 50, "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


def consumer(bootstrap: str, group: str, on_assign=None, on_revoke=None, **overrides) -> GroupConsumer:
    return GroupConsumer({"bootstrap.servers": bootstrap, "group.id": group, **FAST, **overrides},
                         on_assign=on_assign, on_revoke=on_revoke)


def member(bootstrap: str, topic: str, group: str, retry_commits: bool = False, **overrides) -> Member:
    """A GroupConsumer polling in a thread, committing synchronously after every poll. A failed
    commit fails the member, unless ``retry_commits``: then its records come again after the rejoin."""

    def make():
        c = consumer(bootstrap, group, **overrides)
        c.subscribe([topic])
        return c

    def poll(c):
        records = c.poll(0.2)
        if records:
            try:
                c.commit()
            except KafkaError:
                if not retry_commits:
                    raise
        return [(m.partition, m.offset, m.value) for m in records]

    m = Member(make, poll, lambda c: {p for _, p in c.assignment()}, lambda c: c.close())
    m.start()
    return m


def values(members) -> list[tuple[int, bytes]]:
    return sorted((p, v) for m in members for p, _, v in m.records)


def expected(partitions: int, per_partition: int, start: int = 0) -> list[tuple[int, bytes]]:
    return sorted((p, f"{p}:{i}".encode()) for p in range(partitions) for i in range(start, start + per_partition))


@pytest.fixture
def group_broker(broker_factory):
    return broker_factory(overrides=BROKER)


# --------------------------------------------------------------------------- unit: encoding, config


def test_consumer_protocol_round_trip_and_assignors():
    assert decode_subscription(encode_subscription(["b", "a"])).topics == ["a", "b"]
    assert decode_assignment(encode_assignment([("t", 1), ("t", 0), ("u", 2)])) == [("t", 0), ("t", 1), ("u", 2)]
    assert decode_assignment(b"") == []
    # byte layout of ConsumerProtocolSubscription v0: int16 version, [string], nullable bytes
    assert encode_subscription(["t"]) == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    subs = {"m1": ["t"], "m2": ["t", "u"]}
    assert range_assignor(subs, {"t": 5, "u": 2}) == {"m1": [("t", 0), ("t", 1), ("t", 2)],
                                                      "m2": [("t", 3), ("t", 4), ("u", 0), ("u", 1)]}
    assert roundrobin_assignor(subs, {"t": 5, "u": 2}) == {"m1": [("t", 0), ("t", 2), ("t", 4)],
                                                           "m2": [("t", 1), ("t", 3), ("u", 0), ("u", 1)]}


def test_bad_config_names_the_key():
    with pytest.raises(ConfigError, match="'group.idd'"):
        GroupConsumer({"bootstrap.servers": "127.0.0.1:1", "group.idd": "g"})
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        GroupConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "oldest"})
    with pytest.raises(ConfigError, match="group.id"):
        GroupConsumer({"bootstrap.servers": "127.0.0.1:1"})


# --------------------------------------------------------------------------- groups


def test_two_members_split_partitions_and_one_takes_over(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = group_topic(bootstrap, 4, 20, "split")
    events: list[tuple[str, frozenset]] = []
    a = member(bootstrap, topic, group, on_assign=lambda ps: events.append(("assign", frozenset(ps))),
               on_revoke=lambda ps: events.append(("revoke", frozenset(ps))))
    b = member(bootstrap, topic, group)
    try:
        wait_until(lambda: settled([a, b], 4) and a.assigned and b.assigned and len(values([a, b])) >= 80, 20,
                   what="two members splitting 4 partitions")
        b.leave()
        wait_until(lambda: a.assigned == {0, 1, 2, 3}, 20, what="the survivor to own every partition")
        produce(bootstrap, topic, 4, 10, start=20)
        wait_until(lambda: len(values([a, b])) >= 120, 20, what="records after the takeover")
        time.sleep(0.5)
    finally:
        a.leave()
    assert not a.errors and not b.errors
    assert values([a, b]) == expected(4, 30)  # every record exactly once
    # eager rebalancing: each generation's partitions are revoked whole before the next assignment
    assert [kind for kind, _ in events] == ["assign", "revoke"] * (len(events) // 2) and len(events) >= 4
    assert all(events[i][1] == events[i + 1][1] for i in range(0, len(events), 2))
    assert events[-1] == ("revoke", frozenset((topic, p) for p in range(4)))


@pytest.mark.parametrize("leader,other", [("logbus", "librdkafka"), ("librdkafka", "logbus"), ("kafka-python", "logbus")])
def test_shares_a_group_with_other_clients(group_broker, leader, other):
    """Whichever client leads the group, the other reads its assignment: the bytes are Kafka's."""
    bootstrap = group_broker.bootstrap
    topic, group = group_topic(bootstrap, 4, 10, "mixed")
    start = {"logbus": lambda: member(bootstrap, topic, group),
             "librdkafka": lambda: confluent_member(bootstrap, topic, group, **{"session.timeout.ms": 3000}),
             "kafka-python": lambda: kafka_python_member(bootstrap, topic, group)}
    first = start[leader]()
    members = [first]
    try:
        wait_until(lambda: first.assigned == {0, 1, 2, 3}, 20, what=f"{leader} to own the topic first")
        members.append(start[other]())
        wait_until(lambda: settled(members, 4) and all(len(m.assigned) == 2 for m in members), 30,
                   what="the two clients to share 4 partitions")
        produce(bootstrap, topic, 4, 10, start=10)
        wait_until(lambda: {v for _, v in values(members)} >= {v for _, v in expected(4, 20)}, 20,
                   what="every record")
    finally:
        for m in members:
            m.leave()


def test_committed_offsets_show_in_the_tool_and_survive_a_restart(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = group_topic(bootstrap, 3, 10, "resume")
    seen: list[bytes] = []
    with consumer(bootstrap, group) as c:
        c.subscribe([topic])
        wait_until(lambda: seen.extend(m.value for m in c.poll(0.2)) or len(seen) >= 30, 20, what="30 records")
        c.commit()
        assert c.committed() == {(topic, p): 10 for p in range(3)}
        assert all(c.position((topic, p)) == 10 for p in range(3))
    assert sorted(seen) == sorted(v for _, v in expected(3, 10))

    out = subprocess.run([sys.executable, "-m", "broker.cli", "consumer-groups", "--bootstrap-server", bootstrap,
                          "--describe", "--group", group], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith(group)]
    assert sorted((int(r[2]), r[3], r[4], r[5]) for r in rows) == [(p, "10", "10", "0") for p in range(3)]

    produce(bootstrap, topic, 3, 5, start=10)
    resumed: list[bytes] = []
    with consumer(bootstrap, group, **{"auto.offset.reset": "none"}) as c:
        c.subscribe(topic)
        wait_until(lambda: resumed.extend(m.value for m in c.poll(0.2)) or len(resumed) >= 15, 20, what="15 records")
        resumed.extend(m.value for m in c.poll(0.5))  # nothing more may come
    assert sorted(resumed) == sorted(v for _, v in expected(3, 5, start=10))


def test_auto_offset_reset(group_broker):
    bootstrap = group_broker.bootstrap
    topic = create_topic(bootstrap, 1)
    produce(bootstrap, topic, 1, 5)

    with consumer(bootstrap, unique("none"), **{"auto.offset.reset": "none"}) as c:
        c.subscribe([topic])
        with pytest.raises(NoOffsetForPartitionError, match=rf"no committed offset for {topic}-0 .*auto.offset.reset is none"):
            c.poll(5)

    with consumer(bootstrap, unique("latest"), **{"auto.offset.reset": "latest"}) as c:
        c.subscribe([topic])
        wait_until(lambda: c.poll(0.1) == [] and c.assignment() and c.position((topic, 0)) == 5, 20,
                   what="a position at the log end")
        produce(bootstrap, topic, 1, 2, start=5)
        got: list[bytes] = []
        wait_until(lambda: got.extend(m.value for m in c.poll(0.2)) or len(got) >= 2, 20, what="new records")
        assert got == [b"0:5", b"0:6"]

    group = unique("earliest")
    auto = {"auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 60000}
    with consumer(bootstrap, group, **auto) as c:
        c.subscribe(f"^{topic[:6]}.*")  # a pattern
        got = []
        wait_until(lambda: got.extend(m.value for m in c.poll(0.2)) or len(got) >= 7, 20, what="every record")
        assert got == [b"0:%d" % i for i in range(7)]
    with consumer(bootstrap, group) as c:  # auto commit: close committed the position
        assert c.committed([(topic, 0)]) == {(topic, 0): 7}


def test_pattern_picks_up_new_topics(group_broker):
    bootstrap = group_broker.bootstrap
    prefix = unique("pat")
    first = f"{prefix}-a"
    produce_topic = lambda name: (create(bootstrap, name), produce(bootstrap, name, 1, 3))  # noqa: E731
    produce_topic(first)
    with consumer(bootstrap, unique("pattern"), **{"metadata.max.age.ms": 300}) as c:
        c.subscribe(pattern=f"{prefix}-.*")
        got: set[tuple[str, bytes]] = set()
        wait_until(lambda: got.update((m.topic, m.value) for m in c.poll(0.2)) or len(got) >= 3, 20, what="topic a")
        produce_topic(f"{prefix}-b")
        wait_until(lambda: got.update((m.topic, m.value) for m in c.poll(0.2)) or len(got) >= 6, 20, what="topic b")
        assert c.subscription() == {first, f"{prefix}-b"}
        assert c.assignment() == {(first, 0), (f"{prefix}-b", 0)}


def create(bootstrap: str, name: str, partitions: int = 1, rf: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(30)


def test_coordinator_broker_dies(broker_factory, zk_client):
    brokers, bootstrap = three_brokers(broker_factory, {**BROKER, **QUICK_EXPIRY})
    topic, group = group_topic(bootstrap, 6, 10, "failover", rf=3)
    m = member(bootstrap, topic, group, retry_commits=True)
    try:
        wait_until(lambda: len(m.records) >= 60, 30, what="first records")
        committed = {p: zk_client.client.get(f"/consumers/{group}/offsets/{topic}/{p}")[0] for p in range(6)}
        assert set(committed.values()) == {b"10"}
        seen = len(m.records)
        coordinator = coordinator_for(group, [1, 2, 3])
        victim = next(b for b in brokers if str(b.broker_id) == str(coordinator))
        victim.kill()
        survivors = [b for b in brokers if b is not victim]
        produce(",".join(b.bootstrap for b in survivors), topic, 6, 10, start=10)
        wait_until(lambda: {v for _, _, v in m.records[seen:]} >= {v for _, v in expected(6, 10, start=10)}, 60,
                   what="records after the failover")
        # the committed offsets were kept: nothing before offset 10 was read again
        assert all(int(v.split(b":")[1]) >= 10 for _, _, v in m.records[seen:])
        wait_until(lambda: m.assigned == set(range(6)), 20, what="the member to own every partition again")
        assert m.consumer._membership.coordinator[0] != coordinator  # it found the new coordinator
    finally:
        m.leave()


def logbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)


def test_console_consumer_with_group_prints_and_commits(group_broker):
    bootstrap = group_broker.bootstrap
    topic, group = group_topic(bootstrap, 2, 10, "console")
    props = ["--consumer-property", "session.timeout.ms=3000", "--consumer-property", "heartbeat.interval.ms=200"]
    out = logbus("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                 "--from-beginning", "--max-messages", "15", "--property", "print.partition=true", *props)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()
    assert len(first) == 15 and "Processed a total of 15 messages" in out.stderr

    with consumer(bootstrap, group) as c:  # what the group committed: exactly what was printed
        committed = c.committed([(topic, 0), (topic, 1)])
    assert sum(v or 0 for v in committed.values()) == 15

    out = logbus("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                 "--timeout-ms", "1500", "--property", "print.partition=true", *props)
    assert out.returncode == 0, out.stderr
    rest = out.stdout.splitlines()
    assert sorted(first + rest) == sorted(f"Partition:{p}\t{p}:{i}" for p in range(2) for i in range(10))

    out = logbus("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                 "--consumer-property", "no.such.key=1")
    assert out.returncode != 0 and "no.such.key" in out.stderr and "Traceback" not in out.stderr
