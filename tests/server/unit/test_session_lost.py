"""A zombie leader (paused past its ZooKeeper session) finds every ISR write and state read failing:
it logs one warning for the lost session, not a traceback per partition."""

from __future__ import annotations

from twisted.internet import defer
from twisted.logger import LogLevel, globalLogPublisher

from broker.cluster.zk import PartitionState, ZkSessionLostError
from tests.server.unit.harness import LAG_MAX_MS, Replicas

PARTITIONS = 20


class LostSession:
    """Partition states behind an expired session: every call fails as ZkPartitionStates reports it."""

    def write_isr(self, topic: str, partition: int, state: PartitionState) -> defer.Deferred[int]:
        return defer.fail(ZkSessionLostError("ZooKeeper session lost (SessionExpiredError)"))

    def read_state(self, topic: str, partition: int) -> defer.Deferred[PartitionState | None]:
        return defer.fail(ZkSessionLostError("ZooKeeper session lost (SessionExpiredError)"))


def test_a_lost_session_is_one_warning_not_a_traceback_per_partition(replicas: Replicas) -> None:
    topics = [f"t{i}" for i in range(PARTITIONS)]
    for topic in topics:
        replicas.lead(topic, [1, 2])
    replicas.manager.states = LostSession()
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    try:
        replicas.clock.advance(LAG_MAX_MS / 1000 + 1)  # every follower lags: every leader shrinks its ISR
        replicas.manager.shrink_isrs(LAG_MAX_MS)
        replicas.clock.advance(1)
        replicas.manager.shrink_isrs(LAG_MAX_MS)  # the next pass, still without a session
    finally:
        globalLogPublisher.removeObserver(events.append)
    problems = [e for e in events if e["log_level"] >= LogLevel.warn]
    assert len(problems) == 1, [e.get("log_format") for e in problems]
    assert "session lost" in problems[0]["log_format"] and "log_failure" not in problems[0]
    assert all(replicas.partition(t).is_leader for t in topics), "nothing is given up before the new session"
