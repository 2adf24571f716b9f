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
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)  # live brokers, on the inter-broker listener
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    listeners: dict[int, dict[str, BrokerEndpoint]] = field(default_factory=dict)  # every endpoint, by listener

    def set_brokers(self, endpoints: dict[int, dict[str, BrokerEndpoint]], inter_broker: str) -> None:
        """The live brokers and their endpoints; ``brokers`` holds each one's inter-broker endpoint
        (else its first), what followers and the controller connect to."""
        self.listeners = endpoints
        self.brokers = {
            broker_id: by_name.get(inter_broker) or next(iter(by_name.values()))
            for broker_id, by_name in endpoints.items() if by_name
        }

    def endpoint(self, broker_id: int, listener: str | None) -> BrokerEndpoint | None:
        """Broker ``broker_id`` as a client on ``listener`` reaches it (None: not live, or no such
        listener there); no listener (a request from inside the broker): its inter-broker endpoint."""
        if listener is None:
            return self.brokers.get(broker_id)
        return self.listeners.get(broker_id, {}).get(listener)

    def brokers_on(self, listener: str | None) -> list[BrokerEndpoint]:
        """The live brokers with an endpoint on ``listener`` (Kafka leaves the others out of Metadata)."""
        if listener is None:
            return list(self.brokers.values())
        return [e for by_name in self.listeners.values() if (e := by_name.get(listener)) is not None]

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        return self.topics.get(topic, {}).get(partition)

    def set_topic(self, topic: str, partitions: dict[int, PartitionInfo]) -> None:
        self.topics[topic] = partitions

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)
