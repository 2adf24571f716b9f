"""The partitions this broker hosts: their logs and roles, driven by the state znodes, and the
append and read paths through them.

Every broker watches every partition's state znode (``cluster_watch``); each new version is
applied here on the reactor thread: the metadata cache is updated, and for a replica hosted
here the broker becomes leader (new epoch, followers tracked) or follower (fetcher to the new
leader, after truncation).

Produce and Fetch make one call each (``append_records``, ``fetch_messages``), as in Kafka's
ReplicaManager: the leader check, the append (with the partition's min.insync.replicas rule),
the high watermark and the purgatories where acks=all produces and long-poll fetches wait all
live here. Collaborators (clock, state store, metrics, follower fetchers) are injected.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from broker.cluster.zk import PartitionState, ZkSessionLostError
from broker.protocol.errors import (
    ErrorCode,
    InvalidRequiredAcksError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from broker.server.clock import Clock, millis
from broker.server.delayed_fetch import FetchPurgatory
from broker.server.delayed_produce import ProducePurgatory
from broker.server.fetch_parts import FetchedPartition, FetchResult, FetchWanted, answered_records
from broker.server.fetch_session import FetchContext, FetchSessionCache
from broker.server.metadata import MetadataCache, PartitionInfo
from broker.server.partition import ACKS_ALL, Partition
from broker.server.purgatory import TopicPartition
from broker.server.replication_quota import LEADER_REPLICAS, ReplicationQuota, is_throttled
from broker.server.turns import Turns
from broker.storage.config import LogConfig
from broker.storage.log import PartitionLog
from broker.storage.manager import LogManager

log = Logger()

VALID_ACKS = (0, 1, ACKS_ALL)
#: "wake every waiting consumer": the high watermark moved by an unknown number of bytes
WAKE_ALL_BYTES = 1 << 62
#: a lost ZooKeeper session is reported at most once per this many seconds
SESSION_LOST_WARN_S = 60.0
#: a fetch of more partitions is read this many per reactor turn (under 1 ms of work here)
READ_SLICE_PARTITIONS = 32


class PartitionStateStore(Protocol):
    """Where partition states live (ZooKeeper: partition_states.ZkPartitionStates)."""

    def write_isr(self, topic: str, partition: int, state: PartitionState) -> defer.Deferred[int]: ...

    def read_state(self, topic: str, partition: int) -> defer.Deferred[PartitionState | None]: ...


class ReplicaMetrics(Protocol):
    """What the replica manager counts (broker.server.metrics.BrokerMetrics)."""

    def isr_changed(self, old: list[int], new: list[int]) -> None: ...

    def appended(self, topic: str, size: int, records: int) -> None: ...


class FollowerFetchers(Protocol):
    """Fetches followed partitions from their leaders (replica_fetcher.ReplicaFetcherManager)."""

    def add(self, partition: Partition, leader_id: int, leader_epoch: int) -> None: ...

    def remove(self, tp: TopicPartition) -> None: ...

    def stop(self) -> None: ...


class _Read:
    """A fetch's read as it goes: the partitions read so far, their bytes, what is left of the
    fetch's max bytes, and whether any partition failed."""

    __slots__ = ("parts", "total", "remaining", "failed")

    def __init__(self, max_bytes: int) -> None:
        self.parts: list[FetchedPartition] = []
        self.total = 0
        self.remaining = max_bytes
        self.failed = False

    def result(self) -> FetchResult:
        return FetchResult(self.parts, self.total, self.failed)


ReadOrLater = FetchResult | defer.Deferred[FetchResult]


@dataclass(slots=True)
class AppendOutcome:
    """One partition's answer to a produce."""

    error_code: int = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1

    def replicated(self, code: int) -> None:
        """The acks=all wait ended with ``code``."""
        if code != ErrorCode.NONE:
            self.error_code = code
            self.base_offset = -1


@dataclass(eq=False)
class ReplicaManager:
    """Keeps local logs and roles in step with ZooKeeper, and appends to and reads from them.

    Built with this broker's id, its logs, the broker-wide log config, the metadata cache, and
    its collaborators: the clock, the partition-state store, the metrics, the fetchers."""

    broker_id: int
    logs: LogManager
    base_config: LogConfig
    metadata: MetadataCache
    clock: Clock
    states: PartitionStateStore
    metrics: ReplicaMetrics
    fetchers: FollowerFetchers
    leader_quota: ReplicationQuota = field(default_factory=ReplicationQuota)  # leader.replication.throttled.rate
    fetch_session_slots: int = 1000  # max.incremental.fetch.session.cache.slots
    fetch_session_rescan_s: float = 10.0  # see fetch_session: below replica.lag.time.max.ms

    def __post_init__(self) -> None:
        self.partitions: dict[TopicPartition, Partition] = {}
        self.versions: dict[TopicPartition, int] = {}
        self.fetches = FetchPurgatory(self.clock)  # consumers: woken when the high watermark moves
        self.replica_fetches = FetchPurgatory(self.clock)  # followers: woken by appends
        self.produces = ProducePurgatory(self.clock)  # acks=all: woken when the high watermark moves
        self.fetch_sessions = FetchSessionCache(self.fetch_session_slots, self.fetch_session_rescan_s, self.clock.seconds)
        self.turns = Turns(self.clock)  # large work a slice per reactor turn: fetches here, Metadata in its handler
        self.now_ms = millis(self.clock)
        self._session_lost_warned_at = float("-inf")
        self.topic_overrides: dict[str, dict[str, str]] = {}  # each topic's /config/topics overrides
        self.assignment_zxids: dict[str, int] = {}  # zxid of each topic's assignment applied last

    # -- topics -----------------------------------------------------------------------------

    def apply_topic(
        self, topic: str, assignment: dict[int, list[int]], overrides: dict[str, str], zxid: int | None = None
    ) -> None:
        """Record a topic's partitions (keeping known leaders) and create the hosted logs. The
        logs take the topic's config when it is first seen (logs loaded at start were opened with
        the broker defaults) and whenever its overrides change (a dynamic topic config).

        ``zxid`` is the assignment's last change: an assignment read before the one applied last
        (a config change's re-read finishing after a reassignment's watch) keeps the newer one."""
        config = self.base_config.with_overrides(overrides) if overrides else self.base_config
        changed = self.topic_overrides.get(topic) != overrides
        self.topic_overrides[topic] = dict(overrides)
        known = self.metadata.topics.get(topic, {})
        if zxid is not None:
            if zxid < self.assignment_zxids.get(topic, -1):
                assignment = {index: info.replicas for index, info in known.items()}
            else:
                self.assignment_zxids[topic] = zxid
        partitions: dict[int, PartitionInfo] = {}
        new_logs = self.logs.get_or_create_all(topic, sorted(
            index for index, replicas in assignment.items()
            if self.broker_id in replicas and (topic, index) not in self.partitions), config)
        for index, replicas in sorted(assignment.items()):
            info = known.get(index) or PartitionInfo(topic, index, list(replicas))
            info.replicas = list(replicas)
            partitions[index] = info
            hosted = self.partitions.get((topic, index))
            if self.broker_id not in replicas:
                if hosted is not None:
                    self._drop_replica(topic, index)  # reassigned away from this broker
                continue
            if hosted is None:
                plog = new_logs[index]
                self.partitions[(topic, index)] = Partition(topic, index, plog, self.broker_id, self, self.now_ms)
                if changed:
                    plog.update_config(config)
                if self.versions.pop((topic, index), None) is not None:
                    self.reload_state(topic, index)  # a state arrived before the replica was ours: take its role now
            else:
                if changed:
                    hosted.log.update_config(config)
                if hosted.replicas and hosted.replicas != replicas:
                    hosted.set_replicas(replicas)
        self.metadata.set_topic(topic, partitions)

    def _drop_replica(self, topic: str, partition: int) -> None:
        """This broker is no longer a replica (a reassignment moved it): stop and delete the log."""
        tp = (topic, partition)
        log.info("{t}-{p}: no longer a replica here; deleting the local log", t=topic, p=partition)
        self._stop_role(tp)
        p = self.partitions.pop(tp)
        self.versions.pop(tp, None)
        if p.is_leader:
            self._leadership_changed(p)
        if self.logs.get(topic, partition) is not None:
            self.logs.delete(topic, partition)

    def set_base_config(self, config: LogConfig) -> None:
        """New broker-wide log defaults (a dynamic broker config): every hosted log takes them,
        under its topic's overrides."""
        self.base_config = config
        by_topic: dict[str, LogConfig] = {}
        for (topic, _), p in list(self.partitions.items()):
            if topic not in by_topic:
                overrides = self.topic_overrides.get(topic)
                by_topic[topic] = config.with_overrides(overrides) if overrides else config
            p.log.update_config(by_topic[topic])

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic and delete its local logs."""
        self.topic_overrides.pop(topic, None)
        self.assignment_zxids.pop(topic, None)
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
        self.fetch_sessions.mark(tp)  # a new epoch or role: sessions read the partition again
        info.leader, info.leader_epoch, info.isr = state.leader, state.leader_epoch, list(state.isr)
        p = self.partitions.get(tp)
        if p is None:
            return
        if state.leader == self.broker_id:
            self.fetchers.remove(tp)
            if p.make_leader(info.replicas, state):
                self._leadership_changed(p)
        elif state.leader >= 0:
            was_leader = p.is_leader
            if p.make_follower(info.replicas, state):
                if was_leader:
                    self._leadership_changed(p)
                self.fetchers.add(p, state.leader, state.leader_epoch)
        else:
            was_leader = p.is_leader
            self._stop_role(tp)
            p.make_offline(info.replicas, state)
            if was_leader:
                self._leadership_changed(p)

    def reload_state(self, topic: str, partition: int) -> None:
        d = self.states.read_state(topic, partition)
        d.addCallbacks(
            lambda state: self.apply_state(topic, partition, state), self._reload_failed, errbackArgs=(topic, partition)
        )

    def _reload_failed(self, failure: Failure, topic: str, partition: int) -> None:
        """A lost ZooKeeper session (a paused, zombie leader) is one warning per SESSION_LOST_WARN_S,
        not a traceback per partition: the new session's topic reload repairs every partition."""
        if not failure.check(ZkSessionLostError):
            log.failure("reloading the state of {t}-{p}", failure, t=topic, p=partition)
            return
        now = self.clock.seconds()
        if now - self._session_lost_warned_at >= SESSION_LOST_WARN_S:
            self._session_lost_warned_at = now
            log.warn(
                "ZooKeeper session lost: partition states cannot be written or read until the new session "
                "({error}); leadership here may be stale",
                error=failure.getErrorMessage(),
            )

    def _stop_role(self, tp: TopicPartition) -> None:
        self.fetchers.remove(tp)
        self.fetch_sessions.mark(tp)

    def _leadership_changed(self, p: Partition) -> None:
        """This broker gained or lost leadership: parked requests answer now."""
        if not p.is_leader:
            self.produces.fail_all(p.tp)
        self.fetches.notify_append(p.tp, WAKE_ALL_BYTES)
        self.replica_fetches.notify_append(p.tp, WAKE_ALL_BYTES)
        for session in self.fetch_sessions.mark(p.tp):
            (self.replica_fetches if session.follower else self.fetches).notify_append(session.key, WAKE_ALL_BYTES)

    # -- PartitionListener --------------------------------------------------------------------

    def high_watermark_advanced(self, partition: Partition, appended_bytes: int | None) -> None:
        """The leader's high watermark moved: answer consumers' fetches and acks=all produces."""
        tp = partition.tp
        moved = appended_bytes if appended_bytes is not None else WAKE_ALL_BYTES
        self.fetches.notify_append(tp, moved)
        for session in self.fetch_sessions.mark(tp):  # followers learn it at their next fetch
            if not session.follower:
                self.fetches.notify_append(session.key, moved)
        self.produces.check(tp, partition.produce_completion)

    def write_isr(self, partition: Partition, state: PartitionState) -> defer.Deferred[int]:
        return self.states.write_isr(partition.topic, partition.partition, state)

    def isr_changed(self, partition: Partition, old: list[int], new: list[int], version: int) -> None:
        """Our own conditional ISR write succeeded at ``version``."""
        self.metrics.isr_changed(old, new)
        tp = partition.tp
        if self.versions.get(tp, -1) < version:
            self.versions[tp] = version
        info = self.metadata.partition(*tp)
        if info is not None:
            info.isr = list(new)

    def isr_write_failed(self, partition: Partition) -> None:
        self.reload_state(partition.topic, partition.partition)

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

    # -- appends ------------------------------------------------------------------------------

    def append_records(
        self, acks: int, timeout_ms: int, entries: list[tuple[str, int, Any]]
    ) -> list[AppendOutcome] | defer.Deferred[list[AppendOutcome]]:
        """Append each (topic, partition, records) as the leader: one outcome per entry, in
        order; at once (acks 0 and 1, or nothing to wait for), else a Deferred that fires once
        the high watermark covers every append (or its wait ends: timeout, lost leadership).
        A small Produce answered at once pays for no Deferred."""
        outcomes: list[AppendOutcome] = []
        waits: list[defer.Deferred[None]] = []
        for topic, partition, records in entries:
            outcome, required_offset = self._append_to_leader(topic, partition, records, acks)
            outcomes.append(outcome)
            if required_offset is not None:
                waits.append(self.produces.wait((topic, partition), required_offset, timeout_ms).addCallback(outcome.replicated))
        if not waits:
            return outcomes
        return defer.gatherResults(waits).addCallback(lambda _: outcomes)

    def _append_to_leader(self, topic: str, partition: int, records: Any, acks: int) -> tuple[AppendOutcome, int | None]:
        """One partition's outcome, and for acks=all the high watermark it must wait for
        (None when it can answer now)."""
        outcome = AppendOutcome()
        try:
            if acks not in VALID_ACKS:
                raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1, not {acks}")
            leader = self.leader_partition(topic, partition)
            result, size = leader.append_records_to_leader(records, acks)
        except KafkaError as exc:
            outcome.error_code = exc.code
            return outcome, None
        outcome.base_offset = result.first_offset
        outcome.log_append_time_ms = result.log_append_time
        outcome.log_start_offset = result.log_start_offset
        if not result.duplicate:
            self.metrics.appended(topic, size, result.last_offset - result.first_offset + 1)
            self.replica_fetches.notify_append((topic, partition), size)
            for session in self.fetch_sessions.mark((topic, partition)):
                if session.follower:
                    self.replica_fetches.notify_append(session.key, size)
        if acks == ACKS_ALL and leader.log.high_watermark <= result.last_offset:
            return outcome, result.last_offset + 1
        return outcome, None

    # -- reads --------------------------------------------------------------------------------

    def fetch_messages(
        self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int, wanted: list[FetchWanted],
        context: FetchContext | None = None,
    ) -> defer.Deferred[FetchResult]:
        """Read every wanted partition; when there is less than ``min_bytes``, wait (up to
        ``max_wait_ms``) for appends and read again.

        A follower (``replica_id`` >= 0) fetches from its log end offset: that moves the high
        watermark and the ISR; it reads up to the log end and waits on appends rather than on
        the high watermark. In a fetch session (``context``), a long poll waits on the session
        and reads what the session wants after it."""
        follower = replica_id >= 0
        if follower:
            self._record_follower_positions(replica_id, wanted)

        def wait_if_short(read: FetchResult) -> FetchResult | defer.Deferred[FetchResult]:
            if max_wait_ms <= 0 or read.size >= min_bytes or read.failed:
                return read
            key = context.wait_key if context is not None else None
            keys = frozenset([key]) if key is not None else frozenset((w.topic, w.partition) for w in wanted)
            if not keys:
                return read
            purgatory = self.replica_fetches if follower else self.fetches
            d = purgatory.wait(keys, min_bytes - read.size, max_wait_ms)
            return d.addCallback(lambda _: self._read_again(replica_id, context.wanted() if context else wanted, max_bytes))

        read = self._read(wanted, max_bytes, follower)
        if isinstance(read, defer.Deferred):
            return read.addCallback(wait_if_short)
        answer = wait_if_short(read)
        return answer if isinstance(answer, defer.Deferred) else defer.succeed(answer)

    def _read_again(self, replica_id: int, wanted: list[FetchWanted], max_bytes: int) -> ReadOrLater:
        """The read after a long poll: what the fetch wants now (a session's rescan names the
        follower's positions again, which keeps its caught-up times fresh)."""
        if replica_id >= 0:
            self._record_follower_positions(replica_id, wanted)
        return self._read(wanted, max_bytes, replica_id >= 0)

    def _record_follower_positions(self, replica_id: int, wanted: list[FetchWanted]) -> None:
        for item in wanted:
            p = self.partitions.get((item.topic, item.partition))
            if p is not None and p.is_leader and (item.leader_epoch < 0 or item.leader_epoch == p.leader_epoch):
                p.update_follower(replica_id, item.offset)

    def _read(self, wanted: list[FetchWanted], max_bytes: int, follower: bool) -> ReadOrLater:
        """Every wanted partition read: at once, or for more than READ_SLICE_PARTITIONS partitions
        a Deferred of it, read that many per reactor turn (small requests answered between)."""
        read = _Read(max_bytes)
        steps = self._read_steps(read, wanted, follower)
        if len(wanted) <= READ_SLICE_PARTITIONS:
            for _ in steps:
                pass
            return read.result()
        return self.turns.run(steps).addCallback(lambda _: read.result())

    def _read_steps(self, read: _Read, wanted: list[FetchWanted], follower: bool) -> Iterator[None]:
        """Read each wanted partition into ``read``: whole batches within its max bytes and what
        is left of the fetch's, below the high watermark for consumers; a step per
        READ_SLICE_PARTITIONS partitions."""
        parts = read.parts
        for n, item in enumerate(wanted, 1):
            if n % READ_SLICE_PARTITIONS == 0:
                yield None
            # an error after the leader check still answers the high watermark and log start
            high_watermark = log_start_offset = -1
            try:
                leader = self.leader_partition(item.topic, item.partition)
                leader.check_leader_epoch(item.leader_epoch)
                plog = leader.log
                high_watermark, log_start_offset = plog.high_watermark, plog.log_start_offset
                if item.offset == (plog.log_end_offset if follower else high_watermark):  # nothing to read
                    parts.append(FetchedPartition(item.topic, item.partition, ErrorCode.NONE, high_watermark,
                                                  log_start_offset, at_end=True))
                    continue
                limit = min(item.max_bytes, read.remaining)
                throttled = follower and self._leader_throttled(plog.config, item.partition)
                if throttled and self.leader_quota.exceeded():
                    limit = 0  # over leader.replication.throttled.rate: this replica waits
                if limit <= 0 and (read.total or throttled):
                    parts.append(FetchedPartition(item.topic, item.partition, ErrorCode.NONE, high_watermark, log_start_offset))
                    continue
                result = plog.read(
                    item.offset, max(limit, 0), max_offset=None if follower else high_watermark,
                    min_one_batch=read.total == 0,
                )
            except KafkaError as exc:
                parts.append(FetchedPartition(item.topic, item.partition, exc.code, high_watermark, log_start_offset))
                read.failed = True
                continue
            parts.append(
                FetchedPartition(
                    item.topic,
                    item.partition,
                    ErrorCode.NONE,
                    high_watermark,
                    log_start_offset,
                    None if result.records is None else answered_records(result.records),
                    result.records_after_fetch_offset,
                )
            )
            if result.records is not None:
                read.total += result.records.size
                read.remaining -= result.records.size
                if throttled:
                    self.leader_quota.record(result.records.size)

    def _leader_throttled(self, config: LogConfig, partition: int) -> bool:
        """Whether sending this replica to followers counts against leader.replication.throttled.rate."""
        return self.leader_quota.limited and is_throttled(config, LEADER_REPLICAS, partition, self.broker_id)

    # -- stop ---------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop fetching from leaders and answer every parked request now."""
        self.fetchers.stop()
        self.fetches.wake_all()
        self.replica_fetches.wake_all()
        self.produces.wake_all()

    def describe(self) -> Any:
        return {f"{t}-{p}": part.role for (t, p), part in sorted(self.partitions.items())}
