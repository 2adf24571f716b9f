"""Fetch sessions (KIP-227): the broker's cache (``fetch_session``) and a follower's side of
one (``replica_fetcher.FetcherSession``), and the two agreeing over many fetches."""

from __future__ import annotations

import itertools
import random

import pytest

from broker.protocol.errors import ErrorCode, FetchSessionIdNotFoundError, InvalidFetchSessionEpochError
from broker.server.fetch_parts import FetchedPartition, FetchWanted
from broker.server.fetch_session import FetchSessionCache
from broker.server.replica_fetcher import FetcherSession, FetchPosition
from tests.server.unit.harness import LAG_MAX_MS, result_of


class _Time:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cache(slots: int = 10, time: _Time | None = None) -> FetchSessionCache:
    ids = itertools.count(101)
    return FetchSessionCache(slots, 5.0, time or _Time(), rng=lambda: next(ids))


def _wanted(*offsets: int, topic: str = "t") -> list[FetchWanted]:
    return [FetchWanted(topic, p, offset, 1024) for p, offset in enumerate(offsets)]


def _read(context, hws: dict[int, int], data: set[int] = frozenset()) -> list[FetchedPartition]:
    """What the replica manager would read for the context: ``data`` partitions have records,
    the others nothing more to send."""
    return context.answer([FetchedPartition(w.topic, w.partition, ErrorCode.NONE, hws[w.partition], 0,
                                            b"batch" if w.partition in data else None, at_end=w.partition not in data)
                           for w in context.wanted()])


def _read_partitions(context) -> list[int]:
    return [w.partition for w in context.wanted()]


def test_a_session_answers_only_news_and_reads_only_what_may_have_changed() -> None:
    time = _Time()
    cache = _cache(time=time)
    full = cache.context(0, 0, _wanted(5, 7, 9), [], follower=True)
    assert full.session_id == 101 and len(cache) == 1 and full.wait_key is None
    assert [p.partition for p in _read(full, {0: 5, 1: 7, 2: 9})] == [0, 1, 2]  # a full fetch answers all

    idle = cache.context(101, 1, [], [], follower=True)
    assert idle.wait_key == ("\x00fetch-session", 101)
    assert _read_partitions(idle) == [], "every partition was quiet: nothing is read"
    assert _read(idle, {}) == []

    moved = cache.context(101, 2, [FetchWanted("t", 1, 8, 1024)], [], follower=True)
    assert [(w.partition, w.offset) for w in moved.wanted()] == [(1, 8)], "only the partition named"
    assert cache.mark(("t", 2))[0].session_id == 101  # an append there
    assert _read_partitions(moved) == [1, 2]
    answered = _read(moved, {1: 8, 2: 11}, data={2})
    assert [p.partition for p in answered] == [1, 2]  # a new high watermark, records
    after = cache.context(101, 3, [], [], True)
    assert _read_partitions(after) == [2], "a partition that sent records is read again"
    assert _read(after, {2: 11}) == []  # the follower has not moved: nothing new, quiet again

    time.now += 5.0
    rescan = cache.context(101, 4, [], [], True)
    assert [(w.partition, w.offset) for w in rescan.wanted()] == [(0, 5), (1, 8), (2, 9)], \
        "every rescan_s all partitions are read, at the offsets the session keeps"
    assert cache.mark(("x", 0)) == []


def test_forgotten_and_added_partitions_and_errors() -> None:
    cache = _cache()
    cache.context(0, 0, _wanted(0, 0), [], follower=False)
    context = cache.context(101, 1, [FetchWanted("u", 0, 3, 10)], [("t", 0)], follower=False)
    assert [(w.topic, w.partition) for w in context.wanted()] == [("t", 1), ("u", 0)]
    assert cache.mark(("t", 0)) == [], "a forgotten partition leaves the session"
    parts = [FetchedPartition("t", 1, ErrorCode.NONE, 0, 0), FetchedPartition("u", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert context.answer(parts) == parts  # never answered before: answered once; an error: always
    again = cache.context(101, 2, [], [], follower=False)
    assert again.answer(parts) == [parts[1]]


def test_session_errors_and_closing() -> None:
    cache = _cache()
    cache.context(0, 0, _wanted(1), [], follower=True)
    with pytest.raises(InvalidFetchSessionEpochError):
        cache.context(101, 5, [], [], follower=True)
    with pytest.raises(FetchSessionIdNotFoundError):
        cache.context(999, 1, [], [], follower=True)
    closed = cache.context(101, -1, _wanted(1), [], follower=True)
    assert closed.session_id == 0 and len(cache) == 0
    with pytest.raises(FetchSessionIdNotFoundError):
        cache.context(101, 1, [], [], follower=True)
    sessionless = cache.context(0, -1, _wanted(1), [], follower=False)  # librdkafka, clients before v7
    assert sessionless.session_id == 0 and len(cache) == 0
    reopened = cache.context(101, 0, _wanted(1), [], follower=True)  # epoch 0 naming an old id: a new session
    assert reopened.session_id == 102


def test_full_slots_evict_consumers_before_followers_and_zero_slots_mean_no_sessions() -> None:
    cache = _cache(slots=2)
    follower = cache.context(0, 0, _wanted(1), [], follower=True).session_id
    consumer = cache.context(0, 0, _wanted(1), [], follower=False).session_id
    third = cache.context(0, 0, _wanted(1), [], follower=True).session_id
    assert len(cache) == 2
    cache.context(follower, 1, [], [], follower=True)
    cache.context(third, 1, [], [], follower=True)
    with pytest.raises(FetchSessionIdNotFoundError):
        cache.context(consumer, 1, [], [], follower=False)
    assert _cache(slots=0).context(0, 0, _wanted(1), [], follower=True).session_id == 0


def test_a_follower_and_the_cache_agree_over_many_fetches() -> None:
    """A FetcherSession drives the cache through random moves, removals and additions: after
    every fetch the broker reads exactly the positions the follower has."""
    rng = random.Random(7)
    cache, mine = _cache(), FetcherSession()
    positions = {("t", p): FetchPosition(0, 1, 0, 1024) for p in range(20)}
    for _ in range(200):
        moved = set()
        for tp in rng.sample(sorted(positions), 3):
            at = positions[tp]
            positions[tp] = at._replace(offset=at.offset + rng.randint(1, 5))
            moved.add(tp)
        if rng.random() < 0.2:
            tp = rng.choice(sorted(positions))
            positions.pop(tp)
            moved.add(tp)
        if rng.random() < 0.2:
            tp = ("u", rng.randint(0, 30))
            positions[tp] = FetchPosition(rng.randint(0, 9), 2, 0, 512)
            moved.add(tp)
        if mine.epoch == 0 or rng.random() < 0.5:
            changed, forgotten = mine.request(dict(positions))
        else:  # only what moved, as the fetcher tracks it between resyncs
            changed, forgotten = mine.request_changes({tp: positions.get(tp) for tp in moved})
        wanted = [FetchWanted(t, p, at.offset, at.max_bytes, at.leader_epoch) for (t, p), at in changed.items()]
        context = cache.context(mine.session_id, mine.epoch, wanted, forgotten, follower=True)
        session = context.session
        assert {tp: (p.offset, p.leader_epoch) for tp, p in session.partitions.items()} == \
            {tp: (at.offset, at.leader_epoch) for tp, at in positions.items()}
        assert {(w.topic, w.partition) for w in context.wanted()} >= set(changed)
        mine.answered(context.session_id)
    assert mine.epoch == 200  # one full fetch, then 199 incremental ones


def test_idle_session_long_polls_keep_a_follower_in_the_isr_and_an_append_wakes_them(replicas) -> None:
    """A follower's incremental fetches name nothing and read nothing while the partition is
    quiet, yet the session's rescans keep its caught-up time fresh (the ISR keeps it); an append
    wakes its parked fetch, which then reads the partition."""
    replicas.lead("quiet", [1, 2])
    manager, clock = replicas.manager, replicas.clock
    result_of(replicas.produce("quiet", b"a"))
    cache = manager.fetch_sessions

    def fetch(session_id: int, epoch: int, named: list[FetchWanted], wait_ms: int):
        context = cache.context(session_id, epoch, named, [], follower=True)
        d = manager.fetch_messages(2, wait_ms, 1, 1 << 20, context.wanted(), context)
        return context, d.addCallback(lambda read: context.answer(read.partitions))

    context, d = fetch(0, 0, [FetchWanted("quiet", 0, 1, 1 << 20)], 0)
    session = context.session_id
    assert [p.partition for p in result_of(d)] == [0]
    lag_s = LAG_MAX_MS / 1000.0
    for epoch in range(1, int(lag_s / 0.5) * 3):  # three lag times of idle 500 ms long polls
        context, d = fetch(session, epoch, [], 500)
        clock.advance(0.5)
        assert result_of(d) == []
        manager.shrink_isrs(LAG_MAX_MS)
    assert replicas.partition("quiet").isr == [1, 2], "the idle follower stayed in the ISR"

    context, d = fetch(session, epoch + 1, [], 10_000)
    result_of(replicas.produce("quiet", b"b"))  # wakes the session's parked fetch at once
    [part] = result_of(d)
    assert part.records  # the appended batch, read


def test_dropping_a_topic_takes_its_partitions_out_and_keeps_the_topic_counts() -> None:
    cache = _cache()
    context = cache.context(0, 0, _wanted(0, 0) + _wanted(4, topic="u"), [], follower=False)
    session = context.session
    assert session.topics == {"t": 2, "u": 1}
    cache.context(101, 1, [], [("t", 1)], follower=False)
    assert session.topics == {"t": 1, "u": 1}
    dropped = cache.drop_topics(session, {"u"})
    assert [(w.topic, w.partition, w.offset) for w in dropped] == [("u", 0, 4)]
    assert session.topics == {"t": 1} and list(session.partitions) == [("t", 0)]
    assert cache.mark(("u", 0)) == []
