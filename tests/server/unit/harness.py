"""The server's unit-test harness: a ReplicaManager over real logs in tmp_path, a
task.Clock for time, partition states kept in memory with ZooKeeper's conditional-write rule.
No broker process, no ZooKeeper."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from broker.cluster.zk import PartitionState, ZkVersionConflictError
from broker.protocol.records import encode_batch
from broker.server.clock import millis
from broker.server.fetch_parts import FetchResult, FetchWanted
from broker.server.metadata import MetadataCache
from broker.server.metrics import BrokerMetrics
from broker.server.replica_manager import AppendOutcome, ReplicaManager
from broker.storage.config import LogConfig
from broker.storage.manager import LogManager

ME = 1
LAG_MAX_MS = 10_000
CONTROLLER_EPOCH = 1


class MemoryPartitionStates:
    """The state znodes in memory: a conditional write succeeds only at the current version."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, int], PartitionState] = {}

    def controller_writes(self, topic: str, leader: int, leader_epoch: int, isr: list[int]) -> PartitionState:
        old = self.states.get((topic, 0))
        state = PartitionState(leader, leader_epoch, list(isr), CONTROLLER_EPOCH, old.zk_version + 1 if old else 0)
        self.states[(topic, 0)] = state
        return state

    def write_isr(self, topic: str, partition: int, state: PartitionState) -> defer.Deferred[int]:
        current = self.states.get((topic, partition))
        if current is None or current.zk_version != state.zk_version:
            return defer.fail(ZkVersionConflictError(f"{topic}-{partition} is not at version {state.zk_version}"))
        written = replace(state, zk_version=state.zk_version + 1)
        self.states[(topic, partition)] = written
        return defer.succeed(written.zk_version)

    def read_state(self, topic: str, partition: int) -> defer.Deferred[PartitionState | None]:
        return defer.succeed(self.states.get((topic, partition)))


@dataclass
class RecordedFetchers:
    """Which leader each followed partition would fetch from (no fetching in unit tests)."""

    leaders: dict[tuple[str, int], int] = field(default_factory=dict)

    def add(self, partition: Any, leader_id: int, leader_epoch: int) -> None:
        self.leaders[partition.tp] = leader_id

    def remove(self, tp: tuple[str, int]) -> None:
        self.leaders.pop(tp, None)

    def stop(self) -> None:
        self.leaders.clear()


class Replicas:
    """A ReplicaManager for broker ``ME`` and what drives it in a test."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.states = MemoryPartitionStates()
        self.fetchers = RecordedFetchers()
        self.metrics = BrokerMetrics()
        self.logs = LogManager([str(tmp_path / "logs")], LogConfig(), time_ms=millis(self.clock))
        self.manager = ReplicaManager(
            ME, self.logs, LogConfig(), MetadataCache(), self.clock, self.states, self.metrics, self.fetchers
        )

    def lead(self, topic: str, replicas: list[int], isr: list[int] | None = None, **config: str) -> None:
        """Host ``topic``-0 on ``replicas`` and lead it with ``isr`` (default: all replicas)."""
        self.manager.apply_topic(topic, {0: replicas}, {k.replace("_", "."): v for k, v in config.items()})
        self.become(topic, ME, 0, isr if isr is not None else replicas)

    def become(self, topic: str, leader: int, leader_epoch: int, isr: list[int]) -> None:
        """The controller writes a new state and the watch delivers it."""
        self.manager.apply_state(topic, 0, self.states.controller_writes(topic, leader, leader_epoch, isr))

    def produce(self, topic: str, *values: bytes, acks: int = 1, timeout_ms: int = 30_000) -> defer.Deferred[list[AppendOutcome]]:
        now = int(self.clock.seconds() * 1000)
        batch = encode_batch([(None, v, [], now) for v in values])
        return defer.maybeDeferred(self.manager.append_records, acks, timeout_ms, [(topic, 0, batch)])

    def fetch(
        self, topic: str, offset: int, replica_id: int = -1, max_wait_ms: int = 0, min_bytes: int = 1
    ) -> defer.Deferred[FetchResult]:
        return self.manager.fetch_messages(replica_id, max_wait_ms, min_bytes, 1 << 20, [FetchWanted(topic, 0, offset, 1 << 20)])

    def partition(self, topic: str) -> Any:
        return self.manager.partitions[(topic, 0)]

    def close(self) -> None:
        self.manager.stop()
        self.logs.shutdown()


def result_of(d: defer.Deferred[Any]) -> Any:
    """The result of a Deferred that has fired (fails the test if it has not, or failed)."""
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "the Deferred has not fired"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]
