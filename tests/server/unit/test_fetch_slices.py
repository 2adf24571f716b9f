"""A fetch of many partitions is read a slice of partitions per reactor turn (issue 20): it
answers what the unsliced read answers, keeps the fetch's max bytes across the slices, and a
long poll's read after the wait takes turns too."""

from __future__ import annotations

import pytest
from twisted.internet import defer

from broker.cluster.zk import PartitionState
from broker.protocol.records import encode_batch
from broker.server import replica_manager
from broker.server.fetch_parts import FetchResult, FetchWanted
from broker.server.turns import Turns
from broker.storage.file_slice import FileSlice
from tests.server.unit.hand_turns import HandTurnedReactor
from tests.server.unit.harness import CONTROLLER_EPOCH, ME, Replicas, result_of

WIDE = 200  # partitions: a few slices of READ_SLICE_PARTITIONS


@pytest.fixture
def replicas(tmp_path):
    r = Replicas(tmp_path)
    r.manager.apply_topic("wide", {p: [ME] for p in range(WIDE)}, {})
    for p in range(WIDE):
        r.states.states[("wide", p)] = state = PartitionState(ME, 0, [ME], CONTROLLER_EPOCH, 0)
        r.manager.apply_state("wide", p, state)
    now = int(r.clock.seconds() * 1000)
    for p in range(WIDE):  # partition p holds p % 3 + 1 batches
        for n in range(p % 3 + 1):
            r.manager.append_records(1, 30_000, [("wide", p, encode_batch([(None, b"v%d-%d" % (p, n), [], now)]))])
    yield r
    r.close()


def _wanted(offset: int = 0) -> list[FetchWanted]:
    return [FetchWanted("wide", p, offset, 1 << 20) for p in range(WIDE)]


def _seen(read: FetchResult) -> list[tuple]:
    """A read as plain values (a FileSlice compares by identity)."""
    return [(p.topic, p.partition, p.error_code, p.high_watermark, p.log_start_offset,
             p.records if not isinstance(p.records, FileSlice) else p.records.read_bytes(),
             p.records_after_fetch_offset, p.at_end)
            for p in read.partitions] + [read.size, read.failed]


def _answered(d) -> list:
    """What ``d`` fires with, once it has (a list that is empty until then)."""
    got: list = []
    d.addBoth(got.append)
    return got


def _turned(hand: HandTurnedReactor, got: list) -> tuple[FetchResult, int]:
    """Turn the reactor until the fetch is answered; its read and the turns it took."""
    turns = 0
    while not got:
        assert turns < 100, "the sliced read never finished"
        hand.turn()
        turns += 1
    return result_of(defer.succeed(got[0])), turns


@pytest.fixture
def hand(replicas):
    reactor = HandTurnedReactor()
    replicas.manager.turns = Turns(reactor)
    return reactor


@pytest.mark.parametrize("max_bytes", [1 << 30, 3000], ids=["all", "max-bytes-runs-out-mid-way"])
def test_a_wide_fetch_takes_turns_and_answers_what_the_unsliced_read_does(replicas, hand, monkeypatch, max_bytes):
    got = _answered(replicas.manager.fetch_messages(-1, 0, 1, max_bytes, _wanted()))
    assert not got  # nothing answered in the turn that asked
    sliced, turns = _turned(hand, got)
    assert turns >= WIDE // replica_manager.READ_SLICE_PARTITIONS

    monkeypatch.setattr(replica_manager, "READ_SLICE_PARTITIONS", 10 * WIDE)
    whole = result_of(replicas.manager.fetch_messages(-1, 0, 1, max_bytes, _wanted()))  # at once
    assert _seen(sliced) == _seen(whole)
    assert [p.partition for p in sliced.partitions] == list(range(WIDE))
    assert sliced.size <= max(max_bytes, len(sliced.partitions[0].records))
    if max_bytes < 1 << 30:  # the fetch's max bytes ran out: later partitions answered without records
        assert sliced.partitions[-1].records is None and sliced.partitions[0].records is not None


def test_a_wide_long_poll_reads_again_in_turns_once_woken(replicas, hand):
    ends = [p % 3 + 1 for p in range(WIDE)]  # every partition read to its end: nothing new yet
    wanted = [FetchWanted("wide", p, ends[p], 1 << 20) for p in range(WIDE)]
    got = _answered(replicas.manager.fetch_messages(-1, 5_000, 1, 1 << 20, wanted))
    _turn_until_parked(hand)
    assert not got  # parked: nothing new
    now = int(replicas.clock.seconds() * 1000)
    replicas.manager.append_records(1, 30_000, [("wide", WIDE - 1, encode_batch([(None, b"late", [], now)]))])
    assert not got  # woken, reading again in turns
    read, turns = _turned(hand, got)
    assert turns >= WIDE // replica_manager.READ_SLICE_PARTITIONS
    [got] = [p for p in read.partitions if p.records is not None]
    assert got.partition == WIDE - 1 and got.records_after_fetch_offset == 1


def _turn_until_parked(hand: HandTurnedReactor) -> None:
    for _ in range(100):
        if not hand.pending:
            return
        hand.turn()
    raise AssertionError("the first read never finished")
