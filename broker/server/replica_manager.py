"""The partitions this broker hosts: their logs, and whether it leads them.

Produce and Fetch reach a log only through ``leader_log``, which answers Kafka's errors for a
partition that does not exist or that another broker leads.
"""

from __future__ import annotations

from broker.protocol.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from broker.server.metadata import MetadataCache, PartitionInfo
from broker.storage.config import LogConfig
from broker.storage.log import PartitionLog
from broker.storage.manager import LogManager


class ReplicaManager:
    """Keeps local logs in step with the topic metadata and finds the log a request targets."""

    def __init__(self, broker_id: int, logs: LogManager, base_config: LogConfig, metadata: MetadataCache) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.base_config = base_config
        self.metadata = metadata

    def apply_topic(self, topic: str, partitions: dict[int, PartitionInfo], overrides: dict[str, str]) -> None:
        """Record a topic's partitions and create the logs of those hosted here."""
        config = self.base_config.with_overrides(overrides) if overrides else self.base_config
        for info in partitions.values():
            if self.broker_id in info.replicas:
                self.logs.get_or_create(topic, info.partition, config)
        self.metadata.set_topic(topic, partitions)

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic and delete its local logs."""
        for partition in self.metadata.topics.get(topic, {}):
            if self.logs.get(topic, partition) is not None:
                self.logs.delete(topic, partition)
        self.metadata.remove_topic(topic)

    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads; Kafka's error otherwise."""
        info = self.metadata.partition(topic, partition)
        if info is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        if info.leader != self.broker_id:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {topic}-{partition}")
        log = self.logs.get(topic, partition)
        if log is None:
            raise NotLeaderOrFollowerError(f"{topic}-{partition} has no log on broker {self.broker_id}")
        return log
