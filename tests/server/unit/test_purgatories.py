"""Parked requests on a task.Clock: acks=all produces answer when the high watermark passes
them, time out with REQUEST_TIMED_OUT, or fail when leadership moves; long-poll fetches wake on
an append or answer empty at max_wait_ms."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from tests.server.unit.harness import Replicas, result_of


def test_acks_all_completes_when_the_high_watermark_passes_the_append(replicas: Replicas) -> None:
    replicas.lead("all", [1, 2])
    waiting = replicas.produce("all", b"a", b"b", acks=-1)
    assert not waiting.called
    assert len(replicas.manager.produces) == 1

    result_of(replicas.fetch("all", 1, replica_id=2))  # the follower has one of the two records
    assert not waiting.called
    result_of(replicas.fetch("all", 2, replica_id=2))
    [outcome] = result_of(waiting)
    assert (outcome.error_code, outcome.base_offset) == (ErrorCode.NONE, 0)
    assert len(replicas.manager.produces) == 0


def test_acks_all_times_out_with_request_timed_out(replicas: Replicas) -> None:
    replicas.lead("slow", [1, 2])
    waiting = replicas.produce("slow", b"a", acks=-1, timeout_ms=1500)
    replicas.clock.advance(1.499)
    assert not waiting.called
    replicas.clock.advance(0.001)
    [outcome] = result_of(waiting)
    assert (outcome.error_code, outcome.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, -1)
    assert len(replicas.manager.produces) == 0


def test_acks_all_fails_when_leadership_is_lost(replicas: Replicas) -> None:
    replicas.lead("lost", [1, 2])
    waiting = replicas.produce("lost", b"a", acks=-1)
    replicas.become("lost", 2, 1, [2])
    [outcome] = result_of(waiting)
    assert (outcome.error_code, outcome.base_offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)


def test_a_long_poll_fetch_is_woken_by_an_append(replicas: Replicas) -> None:
    replicas.lead("poll", [1], isr=[1])
    parked = replicas.fetch("poll", 0, max_wait_ms=30_000)
    assert not parked.called
    assert len(replicas.manager.fetches) == 1
    result_of(replicas.produce("poll", b"wake"))
    read = result_of(parked)
    assert read.size > 0 and read.partitions[0].records_after_fetch_offset == 1


def test_a_long_poll_fetch_answers_empty_at_max_wait(replicas: Replicas) -> None:
    replicas.lead("idle", [1], isr=[1])
    parked = replicas.fetch("idle", 0, max_wait_ms=500)
    replicas.clock.advance(0.499)
    assert not parked.called
    replicas.clock.advance(0.001)
    read = result_of(parked)
    assert read.size == 0 and read.partitions[0].records is None
    assert len(replicas.manager.fetches) == 0


def test_a_follower_long_poll_is_woken_by_an_append_before_the_high_watermark_moves(replicas: Replicas) -> None:
    replicas.lead("follow", [1, 2])
    parked = replicas.fetch("follow", 0, replica_id=2, max_wait_ms=30_000)
    consumer = replicas.fetch("follow", 0, max_wait_ms=30_000)
    result_of(replicas.produce("follow", b"a"))
    assert result_of(parked).size > 0
    assert not consumer.called, "a consumer waits for the high watermark, which waits for broker 2"


def test_stop_answers_every_parked_request(replicas: Replicas) -> None:
    replicas.lead("stop", [1, 2])
    produce = replicas.produce("stop", b"a", acks=-1)
    fetch = replicas.fetch("stop", 0, max_wait_ms=30_000)
    replicas.manager.stop()
    assert result_of(produce)[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result_of(fetch).size == 0
