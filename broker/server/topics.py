"""Topics in ZooKeeper: create, delete, and read them into the metadata cache.

ZooKeeper calls block, so they run in the reactor's thread pool; what they read is applied on
the reactor thread. Until the controller lands (replication issue), the broker that first reads
a partition without a state writes it: leader = first live replica.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from twisted.internet import defer, threads

from broker.cluster.assignment import assign_replicas
from broker.cluster.zk import ZkClient
from broker.protocol.errors import InvalidConfigError, InvalidPartitionsError, InvalidTopicError
from broker.server.metadata import PartitionInfo

if TYPE_CHECKING:
    from broker.server.broker import Broker

LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
INITIAL_CONTROLLER_EPOCH = 0


def validate_topic_name(name: str) -> None:
    """Kafka's rules for topic names; raises InvalidTopicError saying which one is broken."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be '{name}'")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    if not LEGAL_TOPIC_CHARS.match(name):
        raise InvalidTopicError(f"topic name '{name}' has characters other than ASCII alphanumerics, '.', '_' and '-'")


def read_topic(zk: ZkClient, name: str) -> tuple[dict[int, PartitionInfo], dict[str, str]] | None:
    """A topic's partitions (with leaders) and config overrides, or None if it does not exist."""
    assignment = zk.topic_assignment(name)
    if assignment is None:
        return None
    live: set[int] | None = None
    partitions = {}
    for index, replicas in sorted(assignment.items()):
        state = zk.partition_state(name, index)
        if state is None:
            if live is None:
                live = set(zk.live_brokers())
            leader = next((r for r in replicas if r in live), -1)
            isr = [r for r in replicas if r in live]
            zk.set_partition_state(name, index, leader, 0, isr, INITIAL_CONTROLLER_EPOCH)
            partitions[index] = PartitionInfo(name, index, list(replicas), leader, 0, isr)
        else:
            partitions[index] = PartitionInfo(name, index, list(replicas), state.leader, state.leader_epoch, list(state.isr))
    return partitions, zk.topic_config(name)


class TopicAdmin:
    """Creates and deletes topics for CreateTopics, DeleteTopics and auto-creation."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignment: dict[int, list[int]] | None = None,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> defer.Deferred[None]:
        """Create a topic; the Deferred fires once this broker serves it (or fails with a KafkaError)."""
        try:
            validate_topic_name(name)
            configs = dict(configs or {})
            self._validate_configs(configs)
            config = self.broker.config
            if num_partitions == -1:
                num_partitions = config.num_partitions
            if replication_factor == -1:
                replication_factor = config.default_replication_factor
            if not assignment and num_partitions <= 0:
                raise InvalidPartitionsError(f"number of partitions must be at least 1, not {num_partitions}")
        except Exception as exc:
            return defer.fail(exc)
        d = threads.deferToThread(
            self._create_in_zookeeper, name, num_partitions, replication_factor, assignment, configs, validate_only
        )
        if not validate_only:
            d.addCallback(lambda _: self.broker.refresh_topic(name))
        return d

    def _validate_configs(self, configs: dict[str, str]) -> None:
        try:
            self.broker.log_config.with_overrides(configs)
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc

    def _create_in_zookeeper(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: dict[int, list[int]] | None,
        configs: dict[str, str],
        validate_only: bool,
    ) -> None:
        zk = self.broker.zk
        if assignment is None:
            assignment = assign_replicas(sorted(zk.live_brokers()), num_partitions, replication_factor)
        if validate_only:
            return
        zk.create_topic(name, assignment, configs)

    def delete(self, name: str) -> defer.Deferred[None]:
        """Delete a topic from ZooKeeper and this broker's logs."""
        d = threads.deferToThread(self.broker.zk.delete_topic, name)
        d.addCallback(lambda _: self.broker.replicas.remove_topic(name))
        return d
