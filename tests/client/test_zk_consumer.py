"""The ZooKeeper consumer (ZookeeperConsumerConnector) against a real ZooKeeper and a real broker:
what librdkafka wrote is read identically, the group's owners znodes follow the range algorithm,
a killed member's partitions move to the survivors, nothing is lost, restarts resume from the
committed offsets, whitelists pick up new topics, two groups each get everything, and bad
setups fail clearly within a timeout."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from broker.client.admin import AdminClient
from broker.client.rebalance import Whitelist
from broker.client.simple_consumer import SimpleConsumer
from broker.client.zk_consumer import ConsumerTimeoutException, ZookeeperConsumerConnector
from broker.cluster.net import free_port
from broker.cluster.zk import ZkConnectionError
from broker.protocol.errors import UnknownTopicOrPartitionError
from tests.producing import produce

FAST = {
    "zookeeper.session.timeout.ms": "6000",
    "rebalance.backoff.ms": "200",
    "rebalance.max.retries": "50",
    "auto.offset.reset": "smallest",
    "auto.commit.interval.ms": "500",
}


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def connector(zk_chroot: str, group: str, **extra) -> ZookeeperConsumerConnector:
    return ZookeeperConsumerConnector({"zookeeper.connect": zk_chroot, "group.id": group, **FAST, **extra})


def create_topic(broker, topic: str, partitions: int) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions)


class Collector:
    """Drains streams on background threads into one list."""

    def __init__(self, streams) -> None:
        self.messages: list = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._drain, args=(s,), daemon=True) for s in streams]
        for t in self.threads:
            t.start()

    def _drain(self, stream) -> None:
        while True:
            try:
                for m in stream:
                    with self.lock:
                        self.messages.append(m)
                return
            except ConsumerTimeoutException:
                continue

    def values(self) -> set:
        with self.lock:
            return {m.value for m in self.messages}

    def wait_for(self, values: set, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if values <= self.values():
                return
            time.sleep(0.05)
        missing = values - self.values()
        raise AssertionError(f"{len(missing)} records never arrived, e.g. {sorted(missing)[:5]}")


def owners(zk_client, group: str, topic: str) -> dict[int, str]:
    zk = zk_client.client
    path = f"/consumers/{group}/owners/{topic}"
    if zk.exists(path) is None:
        return {}
    result = {}
    for p in zk.get_children(path):
        try:
            result[int(p)] = zk.get(f"{path}/{p}")[0].decode()
        except Exception:
            pass
    return result


def wait_owners(zk_client, group: str, topic: str, expected: dict[int, str], timeout: float) -> float:
    started = time.monotonic()
    while True:
        got = owners(zk_client, group, topic)
        if got == expected:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"owners {got} != expected {expected}")
        time.sleep(0.05)


def test_reads_what_librdkafka_wrote_every_codec(broker, zk_chroot):
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    topics = {c: f"zc-{c}-{_uid()}" for c in codecs}
    for codec, topic in topics.items():
        records = [{"key": f"k{i % 5}".encode() if i % 3 else None, "value": f"{codec}-{i}".encode(),
                    "headers": [("n", str(i).encode())], "timestamp": 1_700_000_000_000 + i, "partition": i % 2}
                   for i in range(300)]
        create_topic(broker, topic, 2)
        produce(broker.bootstrap, topic, records, **{"compression.type": codec})
    c = connector(zk_chroot, f"g-{_uid()}", **{"consumer.timeout.ms": "10000"})
    try:
        streams = c.create_message_streams({t: 1 for t in topics.values()})
        with SimpleConsumer(broker.host, broker.port) as simple:
            for topic in topics.values():
                got = []
                for m in streams[topic][0]:
                    got.append(m)
                    if len(got) == 300:
                        break
                got.sort(key=lambda m: (m.partition, m.offset))
                expected = []
                for p in (0, 1):
                    expected.extend(simple.fetch(topic, p, 0, 1 << 20))
                assert got == expected
                assert got[1].headers == [("n", b"2")] and got[1].key == b"k2" and got[1].timestamp == 1_700_000_000_002
        c.commit_offsets()
        zk = c.zk.client
        group = c.group
        committed = {int(zk.get(f"/consumers/{group}/offsets/{topics['lz4']}/{p}")[0]) for p in (0, 1)}
        assert committed == {150}
    finally:
        c.shutdown()


def test_group_rebalance_failover_no_loss_and_resume(broker, zk_chroot, zk_client):
    topic = f"grp-{_uid()}"
    group = f"g-{_uid()}"
    create_topic(broker, topic, 6)
    produced: set = set()
    counter = iter(range(10**9))

    def send(n: int) -> None:
        batch = [f"r{next(counter)}".encode() for _ in range(n)]
        produce(broker.bootstrap, topic, [{"value": v, "key": v} for v in batch])
        produced.update(batch)

    send(300)
    conns = {cid: connector(zk_chroot, group, **{"consumer.id": cid, "consumer.timeout.ms": "200"})
             for cid in ("c1", "c2", "c3")}
    try:
        collectors = {cid: Collector(c.create_message_streams({topic: 1})[topic]) for cid, c in conns.items()}
        wait_owners(zk_client, group, topic, {0: "c1-0", 1: "c1-0", 2: "c2-0", 3: "c2-0", 4: "c3-0", 5: "c3-0"}, 20)
        send(300)
        # c2 dies without any cleanup: its session ends, nothing committed, nothing released
        conns["c2"]._abort()
        took = wait_owners(zk_client, group, topic, {0: "c1-0", 1: "c1-0", 2: "c1-0", 3: "c3-0", 4: "c3-0", 5: "c3-0"}, 6)
        assert took < 6
        send(300)
        survivors = set().union(collectors["c1"].values(), collectors["c3"].values(), collectors["c2"].values())
        deadline = time.monotonic() + 20
        while not produced <= survivors and time.monotonic() < deadline:
            time.sleep(0.1)
            survivors = set().union(*(col.values() for col in collectors.values()))
        assert produced <= survivors, f"lost {len(produced - survivors)} records"
        # committed offsets then a clean shutdown of the survivors
        conns["c1"].shutdown()
        conns["c3"].shutdown()
        zk = zk_client.client
        committed = {p: int(zk.get(f"/consumers/{group}/offsets/{topic}/{p}")[0]) for p in range(6)}
        with SimpleConsumer(broker.host, broker.port) as simple:
            ends = {p: simple.latest_offset(topic, p) for p in range(6)}
        assert committed == ends
        # a restart resumes from the committed offsets: only the new records arrive
        before = set(produced)
        send(200)
        new = produced - before
        again = connector(zk_chroot, group, **{"consumer.timeout.ms": "200"})
        conns["again"] = again
        col = Collector(again.create_message_streams({topic: 2})[topic])
        col.wait_for(new)
        time.sleep(0.5)
        assert col.values() == new
    finally:
        for c in conns.values():
            c.shutdown()


def test_whitelist_consumes_a_topic_created_later(broker, zk_chroot):
    uid = _uid()
    first = f"wl-{uid}-a"
    create_topic(broker, first, 2)
    produce(broker.bootstrap, first, [{"value": b"a%d" % i} for i in range(50)])
    create_topic(broker, f"other-{uid}", 1)
    produce(broker.bootstrap, f"other-{uid}", [{"value": b"nope"}])
    c = connector(zk_chroot, f"g-{uid}", **{"consumer.timeout.ms": "200"})
    try:
        streams = c.create_message_streams_by_filter(Whitelist(f"wl-{uid}-.*"), 2)
        col = Collector(streams)
        col.wait_for({b"a%d" % i for i in range(50)})
        later = f"wl-{uid}-b"
        create_topic(broker, later, 3)
        produce(broker.bootstrap, later, [{"value": b"b%d" % i} for i in range(60)])
        col.wait_for({b"b%d" % i for i in range(60)})
        assert b"nope" not in col.values()
        assert {m.topic for m in col.messages} == {first, later}
        reg = c.zk.client.get(f"/consumers/{c.group}/ids/{c.consumer_id}")[0]
        assert b'"pattern":"white_list"' in reg
    finally:
        c.shutdown()


def test_two_groups_each_receive_every_record(broker, zk_chroot):
    topic = f"two-{_uid()}"
    create_topic(broker, topic, 3)
    values = {b"v%d" % i for i in range(500)}
    produce(broker.bootstrap, topic, [{"value": v} for v in values])
    conns = [connector(zk_chroot, f"g{i}-{_uid()}", **{"consumer.timeout.ms": "200"}) for i in range(2)]
    try:
        cols = [Collector(c.create_message_streams({topic: 2})[topic]) for c in conns]
        for col in cols:
            col.wait_for(values)
    finally:
        for c in conns:
            c.shutdown()


def test_unknown_topic_and_unreachable_brokers_fail_clearly(broker, zk_chroot, zk_client):
    c = connector(zk_chroot, f"g-{_uid()}", **{"consumer.timeout.ms": "1500"})
    try:
        with pytest.raises(UnknownTopicOrPartitionError, match="does not exist"):
            c.create_message_streams({f"missing-{_uid()}": 1})
    finally:
        c.shutdown()
    # a topic whose leader is registered at an address nobody listens on
    topic = f"dead-{_uid()}"
    zk_client.create_topic(topic, {0: [99]})
    dead_port = free_port()
    zk_client.client.create("/brokers/ids/99", (
        f'{{"version":4,"host":"127.0.0.1","port":{dead_port},"endpoints":["PLAINTEXT://127.0.0.1:{dead_port}"],'
        '"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"jmx_port":-1,"timestamp":"0"}'
        ).encode(), ephemeral=True)
    zk_client.set_partition_state(topic, 0, 99, 0, [99], 1)
    c = connector(zk_chroot, f"g-{_uid()}", **{"consumer.timeout.ms": "1500"})
    try:
        stream = c.create_message_streams({topic: 1})[topic][0]
        started = time.monotonic()
        with pytest.raises(ConsumerTimeoutException, match="cannot connect"):
            next(iter(stream))
        assert time.monotonic() - started < 5
    finally:
        c.shutdown()
    # ZooKeeper itself unreachable
    started = time.monotonic()
    with pytest.raises(ZkConnectionError):
        ZookeeperConsumerConnector({"zookeeper.connect": f"127.0.0.1:{free_port()}", "group.id": "g",
                                    "zookeeper.connection.timeout.ms": "1500"})
    assert time.monotonic() - started < 5


def test_session_expiry_re_registers_and_rebalances(broker, zk_chroot, zk_client):
    topic = f"exp-{_uid()}"
    create_topic(broker, topic, 2)
    produce(broker.bootstrap, topic, [{"value": b"a%d" % i} for i in range(100)])
    c = connector(zk_chroot, f"g-{_uid()}", **{"consumer.timeout.ms": "200", "consumer.id": "solo"})
    try:
        col = Collector(c.create_message_streams({topic: 1})[topic])
        col.wait_for({b"a%d" % i for i in range(100)})
        rebalances = c.rebalance_count
        # expire the connector's session the classic way: a second client on the same session, closed
        from kazoo.client import KazooClient
        session_id, password = c.zk.client.client_id
        twin = KazooClient(hosts=c.zk.connect, client_id=(session_id, password))
        twin.start(timeout=10)
        twin.stop()
        twin.close()
        deadline = time.monotonic() + 20
        while c.rebalance_count == rebalances and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.rebalance_count > rebalances
        assert c.zk.session_id != session_id
        wait_owners(zk_client, c.group, topic, {0: "solo-0", 1: "solo-0"}, 10)
        assert zk_client.client.exists(f"/consumers/{c.group}/ids/solo") is not None
        produce(broker.bootstrap, topic, [{"value": b"b%d" % i} for i in range(100)])
        col.wait_for({b"b%d" % i for i in range(100)})
    finally:
        c.shutdown()
