"""The leader's high watermark and ISR: the HW is the lowest log end offset in the ISR, followers'
positions come from their fetches, a follower that lags replica.lag.time.max.ms leaves the
ISR (on a task.Clock), one that catches up rejoins it, and acks=all is refused below
min.insync.replicas."""

from __future__ import annotations

from twisted.internet import defer

from broker.cluster.zkdata import PartitionState
from broker.protocol.errors import ErrorCode
from tests.server.unit.harness import LAG_MAX_MS, Replicas, result_of


def _follower_fetch(replicas: Replicas, topic: str, replica_id: int, offset: int) -> None:
    result_of(replicas.fetch(topic, offset, replica_id=replica_id))


def test_high_watermark_is_the_lowest_log_end_offset_in_the_isr(replicas: Replicas) -> None:
    replicas.lead("hw", [1, 2, 3])
    log = replicas.partition("hw").log
    result_of(replicas.produce("hw", b"a", b"b", b"c"))
    assert (log.log_end_offset, log.high_watermark) == (3, 0)  # no follower has fetched yet

    _follower_fetch(replicas, "hw", 2, 3)
    assert log.high_watermark == 0  # broker 3's position is still unknown
    _follower_fetch(replicas, "hw", 3, 2)
    assert log.high_watermark == 2
    _follower_fetch(replicas, "hw", 3, 3)
    assert log.high_watermark == 3


def test_a_leader_alone_in_the_isr_commits_what_it_appends(replicas: Replicas) -> None:
    replicas.lead("alone", [1, 2], isr=[1])
    [outcome] = result_of(replicas.produce("alone", b"x", b"y"))
    assert outcome.error_code == ErrorCode.NONE
    assert replicas.partition("alone").log.high_watermark == 2


def test_consumers_read_only_below_the_high_watermark_followers_to_the_log_end(replicas: Replicas) -> None:
    replicas.lead("below", [1, 2])
    result_of(replicas.produce("below", b"a"))
    consumer = result_of(replicas.fetch("below", 0))
    assert consumer.partitions[0].records is None and consumer.partitions[0].high_watermark == 0
    follower = result_of(replicas.fetch("below", 0, replica_id=2))
    assert follower.partitions[0].records is not None and follower.size > 0


def test_a_lagging_follower_leaves_the_isr_after_the_lag_time_and_rejoins_when_caught_up(replicas: Replicas) -> None:
    replicas.lead("lag", [1, 2, 3])
    manager, clock = replicas.manager, replicas.clock
    result_of(replicas.produce("lag", b"a"))
    _follower_fetch(replicas, "lag", 2, 1)  # broker 2 is caught up; broker 3 never fetches

    clock.advance(LAG_MAX_MS / 1000.0)
    manager.shrink_isrs(LAG_MAX_MS)
    assert replicas.partition("lag").isr == [1, 2, 3], "not before replica.lag.time.max.ms has passed"

    _follower_fetch(replicas, "lag", 2, 1)
    clock.advance(0.001)
    manager.shrink_isrs(LAG_MAX_MS)
    p = replicas.partition("lag")
    assert p.isr == [1, 2]
    assert replicas.states.states[("lag", 0)].isr == [1, 2], "the shrink is recorded in the state store"
    assert manager.metadata.partition("lag", 0).isr == [1, 2]
    assert replicas.metrics.isr_shrinks == 1
    assert p.log.high_watermark == 1, "the HW no longer waits for broker 3"

    _follower_fetch(replicas, "lag", 3, 1)
    assert p.isr == [1, 2, 3]
    assert replicas.metrics.isr_expands == 1


def test_an_isr_write_that_loses_a_race_rereads_the_state(replicas: Replicas) -> None:
    replicas.lead("race", [1, 2, 3])
    # the controller moves the state on without this broker's watch having fired yet
    newer = replicas.states.controller_writes("race", 1, 0, [1, 2, 3])
    replicas.clock.advance(LAG_MAX_MS / 1000.0 + 1)
    replicas.manager.shrink_isrs(LAG_MAX_MS)
    p = replicas.partition("race")
    assert p.isr == [1, 2, 3], "the conditional write failed: the ISR is what the controller wrote"
    assert p.zk_version == newer.zk_version


def test_acks_all_below_min_insync_replicas_is_not_enough_replicas_and_writes_nothing(replicas: Replicas) -> None:
    replicas.lead("minisr", [1, 2, 3], isr=[1], min_insync_replicas="2")
    [outcome] = result_of(replicas.produce("minisr", b"x", acks=-1))
    assert outcome.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert outcome.base_offset == -1
    assert replicas.partition("minisr").log.log_end_offset == 0
    [outcome] = result_of(replicas.produce("minisr", b"x", acks=1))
    assert outcome.error_code == ErrorCode.NONE, "acks=1 does not need min.insync.replicas"


def test_acks_all_whose_isr_shrinks_below_min_insync_replicas_is_not_enough_replicas_after_append(replicas: Replicas) -> None:
    replicas.lead("after", [1, 2], min_insync_replicas="2")
    waiting = replicas.produce("after", b"x", acks=-1)
    assert not waiting.called
    replicas.clock.advance(LAG_MAX_MS / 1000.0 + 1)
    replicas.manager.shrink_isrs(LAG_MAX_MS)  # broker 2 never fetched: the HW moves without it
    [outcome] = result_of(waiting)
    assert outcome.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert replicas.partition("after").log.log_end_offset == 1, "the record was appended"


def test_requests_to_a_partition_led_elsewhere_are_not_leader(replicas: Replicas) -> None:
    replicas.lead("moved", [1, 2])
    replicas.become("moved", 2, 1, [1, 2])
    assert replicas.fetchers.leaders == {("moved", 0): 2}
    [outcome] = result_of(replicas.produce("moved", b"x"))
    assert outcome.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result_of(replicas.fetch("moved", 0)).partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    [unknown] = replicas.manager.append_records(1, 1000, [("nope", 0, b"x")])
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    [bad_acks] = replicas.manager.append_records(2, 1000, [("moved", 0, b"x")])
    assert bad_acks.error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_an_isr_change_whose_own_write_arrives_first_by_the_watch_is_still_counted(replicas: Replicas) -> None:
    """The state watch can deliver the leader's own ISR write before the write's callback does
    (the cause of test_metrics' flaky ``logbus_isr_expands_total``): the change is still counted."""
    replicas.lead("watch", [1, 2, 3], isr=[1, 2])
    pending: list[tuple[defer.Deferred[int], int]] = []
    written = replicas.states.write_isr

    def write_delivered_by_watch_first(topic: str, partition: int, state: PartitionState) -> defer.Deferred[int]:
        version = result_of(written(topic, partition, state))
        replicas.manager.apply_state(topic, partition, replicas.states.states[(topic, partition)])
        d: defer.Deferred[int] = defer.Deferred()
        pending.append((d, version))
        return d

    replicas.states.write_isr = write_delivered_by_watch_first  # type: ignore[method-assign]
    _follower_fetch(replicas, "watch", 3, 0)
    assert replicas.partition("watch").isr == [1, 2, 3], "the watch applied the new state"
    [(d, version)] = pending
    d.callback(version)
    assert replicas.metrics.isr_expands == 1
    assert replicas.partition("watch").zk_version == version
