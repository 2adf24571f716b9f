"""One hosted partition's replication state: its role, and as leader the followers' positions,
the ISR, the high watermark and the min.insync.replicas rule for appends.

Runs on the reactor thread. A Partition knows nothing of the broker: it reads time from the
injected ``now_ms`` and tells a ``PartitionListener`` what happened (the high watermark moved,
an ISR change to record). The ISR is recorded by a write conditional on the state znode's
version, so a leader that lost a race with the controller (or a newer leader) cannot overwrite
it; on a conflict the listener re-reads the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from broker.cluster.zk import PartitionState, ZkSessionLostError, ZkVersionConflictError
from broker.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    InvalidRecordError,
    NotEnoughReplicasError,
    UnknownLeaderEpochError,
)
from broker.protocol.records import iter_batches
from broker.protocol.records import layout as batch
from broker.storage.log import AppendResult, PartitionLog

log = Logger()

LEADER = "leader"
FOLLOWER = "follower"
OFFLINE = "offline"
ACKS_ALL = -1

class PartitionListener(Protocol):
    """What a Partition needs from the rest of the broker (the ReplicaManager, or a test)."""

    def high_watermark_advanced(self, partition: Partition, appended_bytes: int | None) -> None:
        """The leader's HW moved (by ``appended_bytes`` of one append, None when unknown)."""

    def write_isr(self, partition: Partition, state: PartitionState) -> defer.Deferred[int]:
        """Record ``state`` if the state znode is still at ``state.zk_version``; fires with the
        new version, or fails with ZkVersionConflictError."""

    def isr_changed(self, partition: Partition, old: list[int], new: list[int], version: int) -> None:
        """This leader's ISR change was recorded at ``version``."""

    def isr_write_failed(self, partition: Partition) -> None:
        """An ISR write failed (a lost race, ZooKeeper away): the state should be re-read."""


@dataclass
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    leo: int = -1
    caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0


def require_one_batch(records: bytearray) -> None:
    """Produce v3+ carries exactly one batch per partition (as Kafka requires)."""
    if len(records) >= batch.LOG_OVERHEAD:
        _, length = batch.read_prefix(records)
        if length + batch.LOG_OVERHEAD < len(records):
            raise InvalidRecordError("a produce request must carry exactly one record batch per partition")


class Partition:
    """A partition this broker hosts a replica of."""

    def __init__(
        self,
        topic: str,
        partition: int,
        log_: PartitionLog,
        broker_id: int,
        listener: PartitionListener,
        now_ms: Callable[[], int],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.log.auto_high_watermark = False
        self.me = broker_id
        self._listener = listener
        self._now_ms = now_ms
        self.epochs = log_.leader_epochs
        self.role = OFFLINE
        self.replicas: list[int] = []
        self.leader = -1
        self.leader_epoch = -1
        self.isr: list[int] = []
        self.zk_version = -1
        self.controller_epoch = 0
        self.leader_epoch_start_offset = 0
        self.followers: dict[int, FollowerState] = {}
        self._isr_change_pending = False

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.role == LEADER

    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    def check_leader_epoch(self, requested: int) -> None:
        """A request naming a leader epoch (-1: none) must name this one."""
        if requested >= 0 and requested != self.leader_epoch:
            if requested < self.leader_epoch:
                raise FencedLeaderEpochError(f"leader epoch {requested} is older than {self.leader_epoch}")
            raise UnknownLeaderEpochError(f"leader epoch {requested} is newer than {self.leader_epoch}")

    # -- role changes -------------------------------------------------------------------------

    def _record_state(self, replicas: list[int], state: PartitionState) -> None:
        self.replicas = list(replicas)
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr = list(state.isr)
        self.zk_version = state.zk_version
        self.controller_epoch = state.controller_epoch

    def make_leader(self, replicas: list[int], state: PartitionState) -> bool:
        """Lead under ``state``; True when this is a new leadership (new epoch)."""
        new = self.role != LEADER or state.leader_epoch != self.leader_epoch
        self._record_state(replicas, state)
        now = self._now_ms()
        if new:
            self.role = LEADER
            leo = self.log.log_end_offset
            self.epochs.assign(state.leader_epoch, leo)
            self.leader_epoch_start_offset = leo
            # Followers get one replica.lag.time.max.ms to show up before they leave the ISR.
            self.followers = {r: FollowerState(caught_up_ms=now) for r in self.replicas if r != self.me}
            log.info(
                "{tp}: leader at epoch {epoch}, log end {leo}, high watermark {hw}, isr {isr}",
                tp=self.name, epoch=state.leader_epoch, leo=leo, hw=self.log.high_watermark, isr=self.isr,
            )
        else:
            for r in self.replicas:
                if r != self.me:
                    self.followers.setdefault(r, FollowerState(caught_up_ms=now))
        self.maybe_advance_high_watermark()
        return new

    def set_replicas(self, replicas: list[int]) -> None:
        """The assignment changed (a reassignment): a leader tracks added followers at once and
        forgets removed ones, whichever of the assignment and the new state arrives first."""
        self.replicas = list(replicas)
        if self.role == LEADER:
            now = self._now_ms()
            self.followers = {r: self.followers.get(r) or FollowerState(caught_up_ms=now) for r in replicas if r != self.me}

    def make_follower(self, replicas: list[int], state: PartitionState) -> bool:
        """Follow under ``state``; True when the leader or epoch changed (refetch, truncate)."""
        changed = self.role != FOLLOWER or state.leader_epoch != self.leader_epoch or state.leader != self.leader
        self._record_state(replicas, state)
        self.role = FOLLOWER
        self.followers = {}
        if changed:
            log.info(
                "{tp}: follower of broker {leader} at epoch {epoch}", tp=self.name, leader=state.leader, epoch=state.leader_epoch
            )
        return changed

    def make_offline(self, replicas: list[int], state: PartitionState | None) -> None:
        if state is not None:
            self._record_state(replicas, state)
        self.role = OFFLINE
        self.followers = {}

    # -- leader: appends ------------------------------------------------------------------------

    def append_records_to_leader(self, records: bytes | bytearray | memoryview, acks: int) -> tuple[AppendResult, int]:
        """Append one produce batch as the leader (min.insync.replicas first for acks=all) and
        move the high watermark; returns the log's result and the bytes appended."""
        if not records:
            raise InvalidRecordError("produce request carries no record batch")
        if acks == ACKS_ALL and len(self.isr) < self.min_insync_replicas():
            raise NotEnoughReplicasError(
                f"{self.name}: {len(self.isr)} in-sync replicas, min.insync.replicas is {self.min_insync_replicas()}"
            )
        # Offsets are stamped into the batch in place: it needs a writable buffer.
        buffer = records if isinstance(records, bytearray) else bytearray(records)
        require_one_batch(buffer)
        result = self.log.append(buffer, leader_epoch=self.leader_epoch)
        if not result.duplicate:
            self.maybe_advance_high_watermark(appended_bytes=len(buffer))
        return result, len(buffer)

    def produce_completion(self, required_offset: int) -> int | None:
        """For an acks=all append waiting on ``required_offset``: its error code once the high
        watermark reaches it (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        min.insync.replicas meanwhile), None while it must wait."""
        if self.log.high_watermark < required_offset:
            return None
        if len(self.isr) >= self.min_insync_replicas():
            return ErrorCode.NONE
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    # -- leader: followers, high watermark, ISR -----------------------------------------------

    def update_follower(self, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched from ``fetch_offset``: that is its log end offset."""
        st = self.followers.get(replica_id)
        if st is None or not self.is_leader:
            return
        now = self._now_ms()
        leo = self.log.log_end_offset
        st.leo = fetch_offset
        if fetch_offset >= leo:
            st.caught_up_ms = now
        elif fetch_offset >= st.last_fetch_leader_leo >= 0:
            st.caught_up_ms = max(st.caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leo
        st.last_fetch_ms = now
        self._maybe_expand_isr(replica_id, st)
        self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self, appended_bytes: int | None = None) -> bool:
        """Move the high watermark to the lowest log end offset in the ISR."""
        if self.role != LEADER:
            return False
        log = self.log
        target = log.log_end_offset
        for r in self.isr:
            if r != self.me:
                st = self.followers.get(r)
                leo = st.leo if st is not None else -1
                if leo < target:
                    target = leo
        if target > log.high_watermark:
            log.update_high_watermark(target)
            self._listener.high_watermark_advanced(self, appended_bytes)
            return True
        return False

    def _maybe_expand_isr(self, replica_id: int, st: FollowerState) -> None:
        if replica_id in self.isr or self._isr_change_pending:
            return
        if st.leo >= self.log.high_watermark and st.leo >= self.leader_epoch_start_offset:
            self._change_isr(self.isr + [replica_id], f"broker {replica_id} caught up at offset {st.leo}")

    def maybe_shrink_isr(self, lag_max_ms: int) -> None:
        """Drop followers that have not caught up within ``lag_max_ms``."""
        if not self.is_leader or self._isr_change_pending:
            return
        now = self._now_ms()
        out = [
            r for r in self.isr
            if r != self.me and now - self.followers.get(r, FollowerState()).caught_up_ms > lag_max_ms
        ]
        if out:
            self._change_isr([r for r in self.isr if r not in out], f"brokers {out} lag more than {lag_max_ms} ms")

    def _change_isr(self, new_isr: list[int], why: str) -> None:
        self._isr_change_pending = True
        epoch, version, before = self.leader_epoch, self.zk_version, list(self.isr)
        d = self._listener.write_isr(self, PartitionState(self.me, epoch, list(new_isr), self.controller_epoch, version))

        def done(new_version: int) -> None:
            self._isr_change_pending = False
            if not (self.is_leader and self.leader_epoch == epoch):
                return
            # The state watch may deliver our own write before this callback: it is still our change.
            if self.zk_version not in (version, new_version):
                return
            log.info("{tp}: isr {old} -> {new} ({why})", tp=self.name, old=before, new=new_isr, why=why)
            self.isr = list(new_isr)
            self.zk_version = new_version
            self._listener.isr_changed(self, before, list(new_isr), new_version)
            self.maybe_advance_high_watermark()

        def failed(failure: Failure) -> None:
            self._isr_change_pending = False
            if failure.check(ZkVersionConflictError):
                log.info("{tp}: isr change lost a race; reloading the state", tp=self.name)
            elif failure.check(ZkSessionLostError):
                pass  # the listener's reload reports a lost session once for all partitions
            else:
                log.failure("{tp}: recording isr {isr}", failure, tp=self.name, isr=new_isr)
            self._listener.isr_write_failed(self)

        d.addCallbacks(done, failed)

    # -- follower ----------------------------------------------------------------------------

    def follower_appended(self, records: Any, leader_high_watermark: int) -> None:
        """Record epochs of batches just appended as a follower and take the leader's HW."""
        latest = self.epochs.latest_epoch
        for _, header in iter_batches(records):
            if header.partition_leader_epoch > latest:
                latest = header.partition_leader_epoch
                self.epochs.assign(latest, header.base_offset)
        self.update_follower_high_watermark(leader_high_watermark)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        if leader_high_watermark >= 0:
            self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            log.info("{tp}: truncating from {leo} to {offset}", tp=self.name, leo=self.log.log_end_offset, offset=offset)
            self.log.truncate_to(offset)
        self.epochs.truncate_from_end(self.log.log_end_offset)

    def start_at(self, offset: int) -> None:
        log.info("{tp}: restarting the log empty at offset {offset}", tp=self.name, offset=offset)
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.clear()
