"""Partition state znodes as the replica layer reads and writes them: on the thread pool, since
ZooKeeper calls block, answered on the reactor thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from twisted.internet import defer, threads

from broker.cluster.zk import PartitionState, ZkClient, ZkSessionLostError

T = TypeVar("T")
_SESSION_GONE = (SessionExpiredError, ConnectionClosedError, ConnectionLoss)


def _session_checked(call: Callable[[], T]) -> T:
    """Run ``call``; a lost session or closed connection becomes ZkSessionLostError (one type the
    replica layer reports once, not once per partition)."""
    try:
        return call()
    except _SESSION_GONE as exc:
        raise ZkSessionLostError(f"ZooKeeper session lost ({type(exc).__name__})") from None


class ZkPartitionStates:
    """The ReplicaManager's PartitionStateStore over a ZkClient."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk

    def write_isr(self, topic: str, partition: int, state: PartitionState) -> defer.Deferred[int]:
        """Write ``state`` if the znode is still at ``state.zk_version``; fires with the new version."""
        return threads.deferToThread(
            _session_checked,
            lambda: self._zk.set_partition_state(
                topic,
                partition,
                state.leader,
                state.leader_epoch,
                state.isr,
                state.controller_epoch,
                version=state.zk_version,
            ),
        )

    def read_state(self, topic: str, partition: int) -> defer.Deferred[PartitionState | None]:
        return threads.deferToThread(_session_checked, lambda: self._zk.partition_state(topic, partition))
