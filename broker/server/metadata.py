"""What the broker knows of the cluster: live brokers, topics, partition leaders.

The cache is filled from ZooKeeper and read on the reactor thread by every Metadata, Produce
and Fetch request, so those never wait on ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker as clients reach it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionInfo:
    """One partition's replicas and leadership, as recorded in ZooKeeper."""

    topic: str
    partition: int
    replicas: list[int]
    leader: int = -1
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)


@dataclass
class MetadataCache:
    """Brokers and topics; replaced piecewise as ZooKeeper watches fire."""

    cluster_id: str = ""
    controller_id: int = -1
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.topics.get(topic, {}).get(partition)

    def set_topic(self, topic: str, partitions: dict[int, PartitionInfo]) -> None:
        self.topics[topic] = partitions

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)
