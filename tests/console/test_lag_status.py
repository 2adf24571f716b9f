"""The Burrow-like rules and the lag history the console keeps, as plain functions and objects."""

from __future__ import annotations

from broker.console.lag_history import LagHistory
from broker.console.lag_status import Sample, Status, group_status, partition_status


def samples(pairs: list[tuple[int, int]]) -> list[Sample]:
    return [Sample(float(i), c, e) for i, (c, e) in enumerate(pairs)]


def test_no_lag_is_ok_whatever_the_offsets_did():
    assert partition_status(samples([(5, 5)] * 10), 3, 100.0, 0.0, 50.0) == Status.OK


def test_fewer_samples_than_the_window_are_ok():
    assert partition_status(samples([(1, 5), (1, 9)]), 3, 2.0, 0.0, 50.0) == Status.OK


def test_lag_growing_while_committing_is_warn():
    assert partition_status(samples([(10, 20), (12, 25), (14, 30)]), 3, 2.0, 2.0, 50.0) == Status.WARN


def test_lag_shrinking_or_touching_zero_in_the_window_is_ok():
    assert partition_status(samples([(10, 30), (20, 30), (25, 30)]), 3, 2.0, 2.0, 50.0) == Status.OK
    assert partition_status(samples([(10, 10), (12, 20), (14, 30)]), 3, 2.0, 2.0, 50.0) == Status.OK


def test_a_committed_offset_that_does_not_move_while_lagging_is_stall():
    assert partition_status(samples([(10, 20), (10, 20), (10, 21)]), 3, 2.0, 0.0, 50.0) == Status.STALL


def test_no_commit_for_stop_after_while_lagging_is_stop():
    assert partition_status(samples([(10, 20), (10, 20), (10, 20)]), 3, 60.0, 0.0, 50.0) == Status.STOP
    assert partition_status(samples([(10, 20)]), 3, 60.0, 0.0, 50.0) == Status.STOP


def test_a_group_is_its_worst_partition():
    assert group_status([Status.OK, Status.WARN, Status.OK]) == Status.WARN
    assert group_status([Status.STALL, Status.STOP]) == Status.STOP
    assert group_status([]) == Status.OK


def test_history_turns_warn_then_ok_when_the_group_catches_up():
    history = LagHistory(keep=5, window=3, stop_after=100.0)
    tp = ("t", 0)
    for now, committed, end in [(0, 0, 10), (1, 5, 20), (2, 10, 30)]:
        history.record(now, "g", {tp: committed}, {tp: end})
    warn = history.evaluate("g", 2)
    assert warn.status == Status.WARN and warn.partitions[tp].lag == 20 and warn.total == 20
    history.record(3, "g", {tp: 30}, {tp: 30})
    assert history.view(3).group("g").status == Status.OK
    assert history.total_lag("g") == [(0, 10), (1, 15), (2, 20), (3, 0)]
    history.record(4, "g", {tp: 30}, {tp: 31})
    history.record(5, "g", {tp: 31}, {tp: 31})
    assert history.view(5).group("g").series == ((1, 15), (2, 20), (3, 0), (4, 1), (5, 0)), "the chart keeps `keep` rounds"


def test_history_keeps_a_window_of_samples_per_partition_and_forgets_what_is_gone():
    history = LagHistory(keep=4, window=2, stop_after=100.0)
    for now in range(10):
        history.record(now, "g", {("t", 0): now, ("t", 1): 0}, {("t", 0): now + 1})
    assert [s.time for s in history.partitions("g")[("t", 0)]] == [8, 9]
    assert [t for t, _ in history.total_lag("g")] == [6, 7, 8, 9]
    assert ("t", 1) not in history.partitions("g"), "no log end offset known: no sample"
    history.record(10, "g", {("t", 2): 0}, {("t", 2): 0})
    assert list(history.partitions("g")) == [("t", 2)], "partitions no longer committed are dropped"
    history.retain({"other"})
    assert history.groups() == [] and history.view(11).groups == {}


def test_stop_counts_from_the_last_move_of_the_committed_offset():
    history = LagHistory(keep=10, window=2, stop_after=5.0)
    tp = ("t", 0)
    history.record(0, "g", {tp: 1}, {tp: 9})
    history.record(4, "g", {tp: 2}, {tp: 9})
    history.record(8, "g", {tp: 2}, {tp: 9})
    assert history.evaluate("g", 8).status == Status.STALL
    history.record(9, "g", {tp: 2}, {tp: 9})
    assert history.evaluate("g", 9).status == Status.STOP
