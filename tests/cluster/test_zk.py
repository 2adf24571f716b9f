"""ZkClient against the real ZooKeeper server: Kafka's paths and JSON, ephemerals, watches."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from broker.cluster.embedded_zk import EmbeddedZooKeeper, four_letter_word
from broker.cluster.zk import (
    BrokerIdInUseError,
    PartitionState,
    PartitionStateChange,
    ZkClient,
    ZkConnectionError,
    ZkVersionConflictError,
    split_connect_string,
)
from broker.config import Listener
from broker.protocol.errors import InvalidTopicError, TopicAlreadyExistsError

PLAIN = Listener("PLAINTEXT", "127.0.0.1", 9092)


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_embedded_server_answers(zookeeper: EmbeddedZooKeeper) -> None:
    assert zookeeper.running
    assert "Mode: standalone" in four_letter_word(zookeeper.host, zookeeper.port, "srvr")


def test_split_connect_string() -> None:
    assert split_connect_string("a:1,b:2/logbus/x") == ("a:1,b:2", "/logbus/x")
    assert split_connect_string("a:1") == ("a:1", "")
    assert split_connect_string("a:1/") == ("a:1", "")


def test_chroot_and_base_paths_are_created(zookeeper: EmbeddedZooKeeper, zk_chroot: str) -> None:
    chroot = split_connect_string(zk_chroot)[1] + "/nested"
    with ZkClient(zk_chroot + "/nested"):
        pass
    raw = KazooClient(hosts=zookeeper.connect_string)
    raw.start(timeout=10)
    try:
        assert raw.exists(chroot)
        assert sorted(raw.get_children(chroot)) == ["admin", "brokers", "config", "consumers"]
        assert sorted(raw.get_children(chroot + "/brokers")) == ["ids", "topics"]
        assert raw.exists(chroot + "/admin/delete_topics")
    finally:
        raw.stop()
        raw.close()


def test_unreachable_server_is_a_clear_error() -> None:
    from broker.cluster.net import free_port

    client = ZkClient(f"127.0.0.1:{free_port()}", session_timeout_ms=2000)
    with pytest.raises(ZkConnectionError, match="cannot connect to ZooKeeper"):
        client.start(timeout=1)


# ---------------------------------------------------------------- brokers


def test_registration_json_is_kafkas(zk_client: ZkClient) -> None:
    zk_client.register_broker(1, [PLAIN], rack="r1")
    raw, stat = zk_client.kazoo.get("/brokers/ids/1")
    data = json.loads(raw)
    assert stat.ephemeralOwner == zk_client.session_id
    assert data == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
        "jmx_port": -1,
        "host": "127.0.0.1",
        "timestamp": data["timestamp"],
        "port": 9092,
        "version": 4,
        "rack": "r1",
    }
    assert data["timestamp"].isdigit() and abs(int(data["timestamp"]) - time.time() * 1000) < 60_000
    info = zk_client.live_brokers()[1]
    assert (info.id, info.host, info.port, info.rack) == (1, "127.0.0.1", 9092, "r1")
    assert info.endpoints == [PLAIN]
    assert info.endpoint("PLAINTEXT") == PLAIN


def test_registration_with_several_listeners(zk_client: ZkClient) -> None:
    eps = [("INTERNAL", "10.0.0.1", 9093), PLAIN]
    zk_client.register_broker(4, eps, security_protocol_map={"INTERNAL": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"})
    data = json.loads(zk_client.kazoo.get("/brokers/ids/4")[0])
    assert data["endpoints"] == ["INTERNAL://10.0.0.1:9093", "PLAINTEXT://127.0.0.1:9092"]
    assert (data["host"], data["port"]) == ("127.0.0.1", 9092)


def test_live_id_cannot_register_twice(zk_chroot: str, zk_client: ZkClient) -> None:
    zk_client.register_broker(1, [PLAIN])
    zk_client.register_broker(1, [PLAIN])  # same session: just an update
    with ZkClient(zk_chroot) as other:
        with pytest.raises(BrokerIdInUseError) as e:
            other.register_broker(1, [Listener("PLAINTEXT", "127.0.0.1", 9093)])
    msg = str(e.value)
    assert msg == (
        f"broker.id 1 is already registered in ZooKeeper at {zk_chroot} by a live broker (PLAINTEXT://127.0.0.1:9092)"
    )


def test_registration_vanishes_when_session_closes(zk_chroot: str, zk_client: ZkClient) -> None:
    second = ZkClient(zk_chroot)
    second.start()
    second.register_broker(2, [Listener("PLAINTEXT", "127.0.0.1", 9093)])
    zk_client.register_broker(1, [PLAIN])
    assert sorted(zk_client.live_brokers()) == [1, 2]
    second.stop()
    assert sorted(zk_client.live_brokers()) == [1]


def test_stale_registration_is_waited_for(zk_chroot: str) -> None:
    first = ZkClient(zk_chroot)
    first.start()
    first.register_broker(3, [PLAIN])
    threading.Timer(0.3, first.stop).start()
    with ZkClient(zk_chroot) as second:
        second.register_broker(3, [PLAIN], stale_wait_s=10)
        assert second.kazoo.get("/brokers/ids/3")[1].ephemeralOwner == second.session_id


def test_expired_session_reregisters(zookeeper: EmbeddedZooKeeper, zk_chroot: str, zk_client: ZkClient) -> None:
    states: list[str] = []
    renewed = threading.Event()
    zk_client.add_state_listener(states.append)
    zk_client.add_new_session_callback(renewed.set)
    zk_client.register_broker(1, [PLAIN])
    old_session = zk_client.session_id

    # The classic way to expire a session: open it a second time from another client, then close that.
    session_id, password = zk_client.kazoo.client_id
    thief = KazooClient(hosts=zookeeper.connect_string, client_id=(session_id, password))
    thief.start(timeout=10)
    thief.stop()
    thief.close()

    assert renewed.wait(15), states
    assert "LOST" in states
    assert zk_client.session_id != old_session
    raw, stat = zk_client.kazoo.get("/brokers/ids/1")
    assert stat.ephemeralOwner == zk_client.session_id
    assert json.loads(raw)["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]


def test_watch_brokers(zk_chroot: str, zk_client: ZkClient) -> None:
    seen: list[list[int]] = []
    cancel = zk_client.watch_brokers(seen.append)
    assert seen == [[]]
    with ZkClient(zk_chroot) as other:
        other.register_broker(5, [PLAIN])
        wait_for(lambda: seen[-1] == [5])
    wait_for(lambda: seen[-1] == [])
    cancel()


# ---------------------------------------------------------------- topics


def test_create_read_delete_topic(zk_client: ZkClient) -> None:
    zk_client.create_topic("events", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    raw = json.loads(zk_client.kazoo.get("/brokers/topics/events")[0])
    assert raw == {"version": 1, "partitions": {"0": [1, 2], "1": [2, 1]}}
    assert json.loads(zk_client.kazoo.get("/config/topics/events")[0]) == {
        "version": 1, "config": {"retention.ms": "1000"}
    }
    assert zk_client.topic_assignment("events") == {0: [1, 2], 1: [2, 1]}
    assert zk_client.topic_config("events") == {"retention.ms": "1000"}
    assert zk_client.all_topics() == ["events"]

    with pytest.raises(TopicAlreadyExistsError):
        zk_client.create_topic("events", {0: [1]})

    zk_client.set_partition_state("events", 0, leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1)
    zk_client.request_topic_deletion("events")
    assert zk_client.pending_topic_deletions() == ["events"]
    zk_client.delete_topic("events")
    assert zk_client.all_topics() == []
    assert zk_client.topic_assignment("events") is None
    assert zk_client.topic_config("events") == {}
    assert zk_client.partition_state("events", 0) is None
    assert zk_client.pending_topic_deletions() == []
    zk_client.delete_topic("events")  # deleting again is harmless


def test_topic_without_config_and_ordering(zk_client: ZkClient) -> None:
    zk_client.create_topic("b", {i: [1] for i in range(12)})
    zk_client.create_topic("a", {0: [1]})
    assert zk_client.all_topics() == ["a", "b"]
    assert list(zk_client.topic_assignment("b") or {}) == list(range(12))
    assert zk_client.topic_config("a") == {}
    zk_client.set_topic_config("a", {"cleanup.policy": "delete"})
    assert zk_client.topic_config("a") == {"cleanup.policy": "delete"}


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "sp ace"])
def test_invalid_topic_names(zk_client: ZkClient, name: str) -> None:
    with pytest.raises(InvalidTopicError):
        zk_client.create_topic(name, {0: [1]})


def test_partition_state_conditional_set(zk_client: ZkClient) -> None:
    zk_client.create_topic("t", {0: [1, 2, 3]})
    assert zk_client.partition_state("t", 0) is None
    v0 = zk_client.set_partition_state("t", 0, leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1)
    state = zk_client.partition_state("t", 0)
    assert state == PartitionState(leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1, zk_version=v0)
    assert json.loads(zk_client.kazoo.get("/brokers/topics/t/partitions/0/state")[0]) == {
        "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]
    }

    v1 = zk_client.set_partition_state("t", 0, leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1, version=v0)
    assert v1 == v0 + 1
    with pytest.raises(ZkVersionConflictError, match="t-0"):
        zk_client.set_partition_state("t", 0, leader=2, leader_epoch=1, isr=[2], controller_epoch=1, version=v0)
    assert zk_client.partition_state("t", 0).isr == [1, 2]  # type: ignore[union-attr]
    with pytest.raises(ZkVersionConflictError):
        zk_client.set_partition_state("t", 7, leader=2, leader_epoch=1, isr=[2], controller_epoch=1, version=0)

    v2 = zk_client.set_partition_state("t", 0, leader=2, leader_epoch=1, isr=[2], controller_epoch=2)
    assert v2 == v1 + 1


def test_new_partition_states_in_transactions_and_pipelined_reads(zk_client: ZkClient) -> None:
    zk_client.create_topic("big", {p: [1, 2] for p in range(1200)})
    firsts = {p: (1 + p % 2, [1, 2]) for p in range(1200)}
    assert zk_client.create_partition_states("big", firsts, controller_epoch=3, chunk=500)  # three transactions
    states = zk_client.partition_states("big", range(1201))
    assert states[1200] is None
    assert all(states[p] == PartitionState(leader=1 + p % 2, leader_epoch=0, isr=[1, 2], controller_epoch=3, zk_version=0)
               for p in range(1200))
    # a state that exists already fails its transaction, and nothing of that chunk is written
    zk_client.create_topic("some", {p: [1] for p in range(4)})
    zk_client.create_partition_state("some", 2, 1, 0, [1], 3)
    assert not zk_client.create_partition_states("some", {p: (1, [1]) for p in range(4)}, controller_epoch=3)
    assert [p for p, st in zk_client.partition_states("some", range(4)).items() if st is not None] == [2]
    # changes pipelined, each conditional on the version it read
    changes = [PartitionStateChange("big", p, 2, 1, [2], version=0) for p in range(3)]
    zk_client.set_partition_state("big", 1, leader=1, leader_epoch=1, isr=[1], controller_epoch=3, version=0)
    assert zk_client.set_partition_states(changes, controller_epoch=4) == [True, False, True]
    after = zk_client.partition_states("big", range(3))
    assert [(after[p].leader, after[p].controller_epoch) for p in range(3)] == [(2, 4), (1, 3), (2, 4)]  # type: ignore[union-attr]
    # a deleted topic gets no states (the transaction checks the topic's znode)
    assert not zk_client.create_partition_states("gone", {0: (1, [1])}, controller_epoch=3)
    assert not zk_client.kazoo.exists("/brokers/topics/gone")


def test_states_are_read_by_multiread_and_written_in_transactions_with_a_fallback_for_each(zk_client: ZkClient) -> None:
    zk_client.create_topic("many", {p: [1, 2] for p in range(7)})
    assert zk_client.create_partition_states("many", {p: (1, [1, 2]) for p in range(6)}, controller_epoch=1)
    by_multiread = zk_client.partition_states("many", range(7))
    assert zk_client._multi_read  # the server (3.8) served multiRead: no path read one by one
    zk_client._multi_read = False  # as with a ZooKeeper before 3.6
    assert zk_client.partition_states("many", range(7)) == by_multiread
    assert by_multiread[6] is None and by_multiread[0] == PartitionState(1, 0, [1, 2], 1, 0)
    # three transactions of two; the second refused as a whole (partition 3 moved on), then
    # written change by change: only partition 3 stays as it was
    zk_client.set_partition_state("many", 3, leader=2, leader_epoch=1, isr=[2], controller_epoch=1, version=0)
    changes = [PartitionStateChange("many", p, 2, 1, [2, 1], version=0) for p in range(6)]
    assert zk_client.set_partition_states(changes, controller_epoch=2, chunk=2) == [True, True, True, False, True, True]
    after = zk_client.partition_states("many", range(6))
    assert [after[p].controller_epoch for p in range(6)] == [2, 2, 2, 1, 2, 2]  # type: ignore[union-attr]


def test_watch_topics_fires(zk_chroot: str, zk_client: ZkClient) -> None:
    seen: list[list[str]] = []
    cancel = zk_client.watch_topics(seen.append)
    assert seen == [[]]
    with ZkClient(zk_chroot) as admin:
        admin.create_topic("one", {0: [1]})
        wait_for(lambda: seen[-1] == ["one"])
        admin.create_topic("two", {0: [1]})
        wait_for(lambda: seen[-1] == ["one", "two"])
        admin.delete_topic("one")
        wait_for(lambda: seen[-1] == ["two"])
        cancel()
        admin.create_topic("three", {0: [1]})
        admin.delete_topic("two")
        time.sleep(0.3)
    assert seen[-1] == ["two"]  # nothing reaches the callback after cancel()
    assert all("three" not in names for names in seen)


def test_watch_callback_errors_do_not_stop_the_watch(zk_chroot: str, zk_client: ZkClient) -> None:
    seen: list[list[str]] = []

    def flaky(names: list[str]) -> None:
        seen.append(names)
        if len(seen) == 2:
            raise RuntimeError("boom")

    zk_client.watch_topic_deletions(flaky)
    zk_client.request_topic_deletion("x")
    wait_for(lambda: len(seen) >= 2)
    zk_client.request_topic_deletion("y")
    wait_for(lambda: seen[-1] == ["x", "y"])


def test_missing_zookeeper_jar_names_make_setup(tmp_path, monkeypatch) -> None:
    import broker.cluster.embedded_zk as ezk

    monkeypatch.setattr(ezk, "JAVA_DIR", tmp_path)
    with pytest.raises(ezk.ZooKeeperNotInstalledError, match="make setup"):
        EmbeddedZooKeeper(tmp_path / "zk").start()


def test_partition_state_watches_read_asynchronously_and_survive_a_session_expiry(
        zookeeper: EmbeddedZooKeeper, zk_client: ZkClient) -> None:
    """600 state watches: each sees the first state, a change, and (after a session expiry,
    which drops ZooKeeper's watches) the change made meanwhile; one partition's state is
    deleted and created again; a callback returning False ends its watch."""
    n = 600
    zk_client.create_topic("w", {p: [1, 2] for p in range(n)})
    zk_client.create_partition_states("w", {p: (1, [1, 2]) for p in range(n)}, controller_epoch=1)
    seen: dict[int, list[int | None]] = {p: [] for p in range(n)}
    lock = threading.Lock()

    def watcher(partition: int) -> Callable[[PartitionState | None], bool | None]:
        def on_state(state: PartitionState | None) -> bool | None:
            with lock:
                seen[partition].append(None if state is None else state.leader)
            return False if partition == 0 and state is not None and state.leader == 2 else None
        return on_state

    started = time.monotonic()
    for p in range(n):
        zk_client.watch_partition_state("w", p, watcher(p))
    assert time.monotonic() - started < 2, "setting up the watches waits on no read"

    def last_is(leader: int | None, partitions: range) -> Callable[[], bool]:
        return lambda: all(seen[p] and seen[p][-1] == leader for p in partitions)

    _wait(last_is(1, range(n)), 10)
    for p in range(n):
        zk_client.set_partition_state("w", p, leader=2, leader_epoch=1, isr=[2], controller_epoch=1)
    _wait(last_is(2, range(n)), 10)

    session_id, password = zk_client.kazoo.client_id  # expire the session (see above)
    thief = KazooClient(hosts=zookeeper.connect_string, client_id=(session_id, password))
    thief.start(timeout=10)
    thief.stop()
    thief.close()
    writer = ZkClient(zk_client.connect, session_timeout_ms=6000)
    writer.start(timeout=10)
    try:
        for p in range(1, n):
            writer.set_partition_state("w", p, leader=1, leader_epoch=2, isr=[1], controller_epoch=1)
        _wait(last_is(1, range(1, n)), 20)
        writer.kazoo.delete("/brokers/topics/w/partitions/5/state")
        _wait(last_is(None, range(5, 6)), 10)
        writer.set_partition_state("w", 5, leader=2, leader_epoch=3, isr=[2], controller_epoch=1)
        _wait(last_is(2, range(5, 6)), 10)
    finally:
        writer.stop()
    assert seen[0] == [1, 2], "the watch of partition 0 ended when its callback returned False"


def _wait(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
