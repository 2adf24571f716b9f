"""Topics in ZooKeeper: create, delete, and read them into the metadata cache.

ZooKeeper calls block, so they run in the reactor's thread pool; what they read is applied on
the reactor thread. Partition states (leader, ISR) are written by the controller only
(broker/cluster/controller.py); a topic is created by writing its assignment, then waiting
until the controller has given its partitions leaders.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, NamedTuple

from twisted.internet import defer, threads

from broker.cluster.assignment import assign_replicas
from broker.cluster.zk import PartitionState, ZkClient
from broker.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from broker.server.broker import Broker

LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
STATE_WAIT_S = 10.0


class FoundTopic(NamedTuple):
    assignment: dict[int, list[int]]
    config: dict[str, str]
    states: dict[int, PartitionState | None]
    zxid: int  # of the assignment's last change


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


def read_topic(zk: ZkClient, name: str) -> FoundTopic | None:
    """A topic's assignment, config overrides and partition states (None where the controller
    has not written one yet), or None if the topic does not exist. Reads only."""
    found = zk.versioned_topic_assignment(name)
    if found is None:
        return None
    assignment, zxid = found
    return FoundTopic(assignment, zk.topic_config(name), zk.partition_states(name, assignment), zxid)


def wait_for_leaders(zk: ZkClient, name: str, partitions: list[int] | None = None, timeout_s: float = STATE_WAIT_S) -> None:
    """Block until the controller has given each partition (all, or ``partitions``) a state
    with a leader, or ``timeout_s`` passes (the topic is then served as it comes up)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assignment = zk.topic_assignment(name)
        if assignment is None:
            return
        wanted = partitions if partitions is not None else list(assignment)
        states = zk.partition_states(name, wanted).values()
        if all(s is not None and s.leader >= 0 for s in states):
            return
        time.sleep(0.05)


class PartitionBudget:
    """``max.partitions.per.request`` over one CreateTopics or CreatePartitions request: checked
    before any work, so an absurd count is refused at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, name: str, count: int) -> None:
        """Reserve ``count`` new partitions for topic ``name``, or raise Kafka's error."""
        if count > self.limit:
            raise InvalidPartitionsError(
                f"Topic '{name}': {count} new partitions exceed max.partitions.per.request ({self.limit})."
            )
        if self.used + count > self.limit:
            raise PolicyViolationError(
                f"Topic '{name}': the request creates more than max.partitions.per.request ({self.limit}) partitions."
            )
        self.used += count


def check_broker_partition_counts(hosted: dict[int, int], added: dict[int, list[int]], limit: int) -> None:
    """``max.broker.partition.count``: PolicyViolationError when ``added`` (partition -> replicas)
    would put more than ``limit`` replicas on a broker already hosting ``hosted[broker]``."""
    counts = dict(hosted)
    for replicas in added.values():
        for b in replicas:
            counts[b] = counts.get(b, 0) + 1
    over = sorted(b for b, n in counts.items() if n > limit and n > hosted.get(b, 0))
    if over:
        raise PolicyViolationError(f"Brokers {over} would host more than max.broker.partition.count ({limit}) partitions.")


class TopicAdmin:
    """Creates and deletes topics for CreateTopics, DeleteTopics and auto-creation."""

    def __init__(self, broker: Broker) -> None:
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
        self._check_broker_limits(assignment)
        if validate_only:
            return
        zk.create_topic(name, assignment, configs)
        wait_for_leaders(zk, name)

    def new_partition_count(self, name: str, num_partitions: int, assignment: dict | list | None) -> int:
        """How many partitions a CreateTopics entry creates (-1: num.partitions)."""
        if assignment:
            return len(assignment)
        return self.broker.config.num_partitions if num_partitions == -1 else max(num_partitions, 0)

    def _check_broker_limits(self, added: dict[int, list[int]]) -> None:
        hosted: dict[int, int] = {}
        for partitions in list(self.broker.metadata.topics.values()):
            for info in list(partitions.values()):
                for b in info.replicas:
                    hosted[b] = hosted.get(b, 0) + 1
        check_broker_partition_counts(hosted, added, self.broker.config.max_broker_partition_count)

    def delete(self, name: str) -> defer.Deferred[None]:
        """Delete a topic from ZooKeeper and this broker's logs."""
        d = threads.deferToThread(self.broker.zk.delete_topic, name)
        d.addCallback(lambda _: self.broker.replicas.remove_topic(name))
        return d

    def create_partitions(
        self, name: str, count: int, assignment: list[list[int]] | None = None, validate_only: bool = False
    ) -> defer.Deferred[None]:
        """Grow a topic to ``count`` partitions (CreatePartitions); the controller gives the new
        ones leaders. The Deferred fires once they have them (or fails with a KafkaError)."""
        d = threads.deferToThread(self._add_partitions_in_zookeeper, name, count, assignment, validate_only)
        if not validate_only:
            d.addCallback(lambda _: self.broker.refresh_topic(name))
        return d

    def _add_partitions_in_zookeeper(
        self, name: str, count: int, assignment: list[list[int]] | None, validate_only: bool
    ) -> None:
        zk = self.broker.zk
        current = zk.topic_assignment(name)
        if current is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        have = len(current)
        if count <= have:
            raise InvalidPartitionsError(
                f"Topic currently has {have} partitions, which is higher than the requested {count}."
                if count < have else f"Topic already has {have} partitions."
            )
        replication_factor = len(current[min(current)])
        live = sorted(zk.live_brokers())
        if assignment:
            if len(assignment) != count - have:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {count - have} but {len(assignment)} assignments provided."
                )
            for replicas in assignment:
                if len(set(replicas)) != replication_factor or any(b not in live for b in replicas):
                    raise InvalidReplicaAssignmentError(
                        f"Each new partition needs {replication_factor} distinct live brokers, got {replicas}."
                    )
            added = {have + i: list(r) for i, r in enumerate(assignment)}
        else:
            added = assign_replicas(live, count - have, replication_factor, start_partition=have)
        self._check_broker_limits(added)
        if validate_only:
            return
        zk.set_topic_assignment(name, {**current, **added})
        wait_for_leaders(zk, name, list(added))
