"""Cluster-wide identifiers kept in ZooKeeper: the cluster id and blocks of producer ids.

Both live where Kafka keeps them (``/cluster/id``, ``/latest_producer_id_block``), so ids stay
unique across brokers and restarts.
"""

from __future__ import annotations

import base64
import threading
import uuid

from broker.cluster.zk import ZkClient, ZkVersionConflictError
from broker.cluster.zkdata import ClusterIdZNode, ProducerIdBlock, ProducerIdBlockZNode

PRODUCER_ID_BLOCK_SIZE = 1000


def get_or_create_cluster_id(zk: ZkClient) -> str:
    """The cluster's id, creating it (a url-safe base64 UUID, as Kafka does) on first start."""
    while True:
        found = zk.read(ClusterIdZNode.path())
        if found is not None:
            return ClusterIdZNode.decode(found[0])
        new_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if zk.create(ClusterIdZNode.path(), ClusterIdZNode.encode(new_id)):
            return new_id


class ProducerIdAllocator:
    """Hands out producer ids from blocks claimed in ZooKeeper with a conditional write."""

    def __init__(self, zk: ZkClient, broker_id: int) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._lock = threading.Lock()
        self._next = 0
        self._end = -1

    def next_id(self) -> int:
        """A producer id no other broker has handed out; blocks briefly on ZooKeeper per 1000 ids."""
        with self._lock:
            if self._next > self._end:
                self._next, self._end = self._claim_block()
            producer_id = self._next
            self._next += 1
            return producer_id

    def _claim_block(self) -> tuple[int, int]:
        path = ProducerIdBlockZNode.path()
        while True:
            found = self._zk.read(path)
            if found is None:
                block = self._block(0)
                if self._zk.create(path, ProducerIdBlockZNode.encode(block)):
                    return block.start, block.end
                continue
            raw, stat = found
            block = self._block(ProducerIdBlockZNode.decode(raw).end + 1)
            try:
                self._zk.set_data(path, ProducerIdBlockZNode.encode(block), version=stat.version)
                return block.start, block.end
            except ZkVersionConflictError:
                continue

    def _block(self, start: int) -> ProducerIdBlock:
        return ProducerIdBlock(self._broker_id, start, start + PRODUCER_ID_BLOCK_SIZE - 1)
