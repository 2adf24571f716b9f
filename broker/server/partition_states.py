"""Partition state znodes as the replica layer reads and writes them: on the thread pool, since
ZooKeeper calls block, answered on the reactor thread."""

from __future__ import annotations

from twisted.internet import defer, threads

from broker.cluster.zk import PartitionState, ZkClient


class ZkPartitionStates:
    """The ReplicaManager's PartitionStateStore over a ZkClient."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk

    def write_isr(self, topic: str, partition: int, state: PartitionState) -> defer.Deferred[int]:
        """Write ``state`` if the znode is still at ``state.zk_version``; fires with the new version."""
        return threads.deferToThread(
            self._zk.set_partition_state,
            topic,
            partition,
            state.leader,
            state.leader_epoch,
            state.isr,
            state.controller_epoch,
            version=state.zk_version,
        )

    def read_state(self, topic: str, partition: int) -> defer.Deferred[PartitionState | None]:
        return threads.deferToThread(self._zk.partition_state, topic, partition)
