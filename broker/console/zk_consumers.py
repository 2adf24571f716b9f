"""ZooKeeper consumers of a group (``--zookeeper``): the registered members and each partition's
owner, read where Kafka 0.8's consumers write them. Their offsets need no ZooKeeper here: the
brokers' OffsetFetch reads the same store (``broker/cluster/offset_store.py``)."""

from __future__ import annotations

from broker.cluster.offset_store import ZkOffsetStore
from broker.cluster.zk import ZkClient
from broker.cluster.zkdata import ConsumerOwnersZNode
from broker.tools.consumer_groups import owner_of

TopicPartition = tuple[str, int]


class ZkConsumers:
    """Blocking reads of /consumers/<group>/ids and /owners on a started ``ZkClient``."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def members(self, group: str) -> list[str]:
        return ZkOffsetStore(self.zk.kazoo).zk_members(group)

    def owners(self, group: str) -> dict[TopicPartition, str]:
        """The consumer thread owning each owned partition of ``group``."""
        owned = [(t, int(p)) for t in self.zk.children(ConsumerOwnersZNode.path(group))
                 for p in self.zk.children(ConsumerOwnersZNode.path(group, t)) if p.isdigit()]
        return {tp: owner for tp in sorted(owned) if (owner := owner_of(self.zk, group, *tp)) != "-"}
