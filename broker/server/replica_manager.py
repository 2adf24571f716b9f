"""The partitions this broker hosts: their logs and roles, driven by the state znodes.

Every broker watches every partition's state znode (``cluster_watch``); each new version is
applied here on the reactor thread: the metadata cache is updated, and for a replica hosted
here the broker becomes leader (new epoch, followers tracked) or follower (fetcher to the new
leader, after truncation). Produce and Fetch reach a log only through ``leader_partition`` /
``leader_log``, which answer Kafka's errors for a partition that does not exist or that
another broker leads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import threads
from twisted.logger import Logger

from broker.cluster.zk import PartitionState
from broker.protocol.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from broker.server.metadata import MetadataCache, PartitionInfo
from broker.server.partition import Partition
from broker.server.replica_fetcher import ReplicaFetcherManager
from broker.storage.config import LogConfig
from broker.storage.log import PartitionLog
from broker.storage.manager import LogManager

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = Logger()

TopicPartition = tuple[str, int]


class ReplicaManager:
    """Keeps local logs and roles in step with ZooKeeper and finds the log a request targets."""

    def __init__(self, broker: Broker, logs: LogManager, base_config: LogConfig, metadata: MetadataCache) -> None:
        self.broker = broker
        self.broker_id = broker.broker_id
        self.logs = logs
        self.base_config = base_config
        self.metadata = metadata
        self.partitions: dict[TopicPartition, Partition] = {}
        self.versions: dict[TopicPartition, int] = {}
        self.fetchers = ReplicaFetcherManager(broker)

    # -- topics -----------------------------------------------------------------------------

    def apply_topic(self, topic: str, assignment: dict[int, list[int]], overrides: dict[str, str]) -> None:
        """Record a topic's partitions (keeping known leaders) and create the hosted logs."""
        config = self.base_config.with_overrides(overrides) if overrides else self.base_config
        known = self.metadata.topics.get(topic, {})
        partitions: dict[int, PartitionInfo] = {}
        for index, replicas in sorted(assignment.items()):
            info = known.get(index) or PartitionInfo(topic, index, list(replicas))
            info.replicas = list(replicas)
            partitions[index] = info
            if self.broker_id in replicas and (topic, index) not in self.partitions:
                plog = self.logs.get_or_create(topic, index, config)
                self.partitions[(topic, index)] = Partition(self.broker, topic, index, plog)
        self.metadata.set_topic(topic, partitions)

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic and delete its local logs."""
        for partition in list(self.metadata.topics.get(topic, {})):
            tp = (topic, partition)
            self._stop_role(tp)
            self.partitions.pop(tp, None)
            self.versions.pop(tp, None)
            if self.logs.get(topic, partition) is not None:
                self.logs.delete(topic, partition)
        for tp in [tp for tp in self.partitions if tp[0] == topic]:
            self._stop_role(tp)
            del self.partitions[tp]
        self.metadata.remove_topic(topic)

    # -- partition state ----------------------------------------------------------------------

    def apply_state(self, topic: str, partition: int, state: PartitionState | None) -> None:
        """A state znode version arrived (watch, own write, reload): take up the role it says."""
        if state is None:
            return
        tp = (topic, partition)
        info = self.metadata.partition(topic, partition)
        if info is None:
            return  # topic not (yet, or any more) known here
        known = self.versions.get(tp)
        if known is not None and state.zk_version <= known:
            return
        self.versions[tp] = state.zk_version
        info.leader, info.leader_epoch, info.isr = state.leader, state.leader_epoch, list(state.isr)
        p = self.partitions.get(tp)
        if p is None:
            return
        if state.leader == self.broker_id:
            self.fetchers.remove(tp)
            if p.make_leader(info.replicas, state):
                self.broker.leadership_changed(topic, partition)
        elif state.leader >= 0:
            was_leader = p.is_leader
            if p.make_follower(info.replicas, state):
                if was_leader:
                    self.broker.leadership_changed(topic, partition)
                self.fetchers.add(p, state.leader, state.leader_epoch)
        else:
            was_leader = p.is_leader
            self._stop_role(tp)
            p.make_offline(info.replicas, state)
            if was_leader:
                self.broker.leadership_changed(topic, partition)

    def isr_written(self, topic: str, partition: int, isr: list[int], version: int) -> None:
        """Our own conditional ISR write succeeded at ``version``."""
        tp = (topic, partition)
        if self.versions.get(tp, -1) < version:
            self.versions[tp] = version
        info = self.metadata.partition(topic, partition)
        if info is not None:
            info.isr = list(isr)

    def reload_state(self, topic: str, partition: int) -> None:
        zk = self.broker.zk
        if zk is None:
            return
        d = threads.deferToThread(zk.partition_state, topic, partition)
        d.addCallbacks(
            lambda state: self.apply_state(topic, partition, state),
            lambda f: log.failure("reloading the state of {t}-{p}", f, t=topic, p=partition),
        )

    def _stop_role(self, tp: TopicPartition) -> None:
        self.fetchers.remove(tp)

    # -- leaders ------------------------------------------------------------------------------

    def leader_partition(self, topic: str, partition: int) -> Partition:
        """The partition, if this broker leads it; Kafka's error otherwise."""
        info = self.metadata.partition(topic, partition)
        if info is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        p = self.partitions.get((topic, partition))
        if p is None or not p.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {topic}-{partition}")
        return p

    def leader_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of a partition this broker leads; Kafka's error otherwise."""
        return self.leader_partition(topic, partition).log

    def shrink_isrs(self, lag_max_ms: int) -> None:
        for p in list(self.partitions.values()):
            p.maybe_shrink_isr(lag_max_ms)

    def led_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def stop(self) -> None:
        self.fetchers.stop()

    def describe(self) -> Any:
        return {f"{t}-{p}": part.role for (t, p), part in sorted(self.partitions.items())}
