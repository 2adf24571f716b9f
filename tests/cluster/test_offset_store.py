"""broker.cluster.offset_store against the real ZooKeeper: the one writer of /consumers/<g>/offsets."""

from __future__ import annotations

from broker.cluster.offset_store import Committed, ZkOffsetStore
from broker.cluster.zk import ZkClient
from broker.protocol.errors import ErrorCode


def test_commit_creates_missing_nodes_then_overwrites(zk_client: ZkClient) -> None:
    store = ZkOffsetStore(zk_client.kazoo)
    store.commit("g", {("ev", 0): 5, ("ev", 3): 7}, timeout=10)
    assert zk_client.kazoo.get("/consumers/g/offsets/ev/0")[0] == b"5"  # Kafka 0.8's bare decimal
    store.commit("g", {("ev", 0): 9})
    assert store.read("g", [("ev", 0), ("ev", 3), ("ev", 1)]) == {("ev", 0): Committed(9), ("ev", 3): Committed(7)}
    assert store.topics("g") == {"ev": [0, 3]} and store.groups() == ["g"]
    assert store.has_offsets("g") and not store.has_offsets("other")


def test_coordinator_writes_keep_metadata_beside_the_offset(zk_client: ZkClient) -> None:
    store = ZkOffsetStore(zk_client.kazoo)
    key = ("g", "ev", 1)
    assert store.write({key: Committed(3, "ckpt")}) == {key: ErrorCode.NONE}  # first write: one by one
    assert zk_client.kazoo.get("/consumers/g/offsets/ev/1/metadata")[0] == b"ckpt"
    known = {key: Committed(3, "ckpt")}
    assert store.write({key: Committed(4, "")}, known) == {key: ErrorCode.NONE}  # known: one multi transaction
    assert store.read("g", [("ev", 1)]) == {("ev", 1): Committed(4, "")}
    assert zk_client.kazoo.exists("/consumers/g/offsets/ev/1/metadata") is None
    store.commit("g", {("ev", 1): 8})  # a ZooKeeper consumer's commit of the same partition
    assert store.read("g", [("ev", 1)], with_metadata=False) == {("ev", 1): Committed(8)}


def test_unreadable_offsets_are_left_out(zk_client: ZkClient) -> None:
    zk_client.kazoo.create("/consumers/g/offsets/ev/0", b"not a number", makepath=True)
    assert ZkOffsetStore(zk_client.kazoo).read("g", [("ev", 0)]) == {}
