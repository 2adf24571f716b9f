"""Offset translation's search (mirror.translate) over in-memory target partitions: copies of two
source clusters interleaved at random, a mirror behind the group, retention, the bound, and
partitions placed by key. The property: a consumer starting at the translated offset never skips
a copy it has not consumed, and (exact) re-reads none it has when the copies are there."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.resume import ScanBoundExceeded
from mirror.translate import BOUND, EXACT, MIRROR_BEHIND, NO_COPY, search, translate_topic

Copy = tuple[str, int, int]  # (cluster, source partition, origin offset) ; None: a record without origin


def probe_of(log: list[Copy | None], wanted: tuple[str, int], start: int = 0, bound: int = 10**9, reads: list | None = None):
    """A Probe over ``log`` (target offset = start + index)."""
    def probe(lo: int, hi: int):
        read = 0
        for t in range(lo, hi):
            rec = log[t - start]
            read += 1
            if reads is not None:
                reads.append(t)
            if rec is not None and rec[:2] == wanted:
                return t, rec[2]
            if read >= bound:
                raise ScanBoundExceeded("bound")
        return None
    return probe


def interleave(draw, sources: dict[tuple[str, int], list[int]], noise: int) -> list[Copy | None]:
    """Copies of each source partition in origin order, merged in a random order, plus records of nobody."""
    queues = {k: list(v) for k, v in sources.items()}
    items: list = [k for k, v in queues.items() for _ in v] + [None] * noise
    order = draw(st.permutations(items))
    out: list[Copy | None] = []
    for k in order:
        out.append(None if k is None else (k[0], k[1], queues[k].pop(0)))
    return out


def copies_from(log: list[Copy | None], offset: int, wanted: tuple[str, int], start: int = 0) -> list[int]:
    return [rec[2] for rec in log[offset - start:] if rec is not None and rec[:2] == wanted]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_never_ahead_and_exact_with_two_sources_interleaved(data) -> None:
    n1 = data.draw(st.integers(0, 60))
    n2 = data.draw(st.integers(0, 60))
    first1 = data.draw(st.integers(0, 20))  # dc1's copies start at some source offset (earlier ones deleted)
    dc1 = list(range(first1, first1 + n1))
    dc2 = list(range(n2))
    log = interleave(data.draw, {("dc1", 0): dc1, ("dc2", 0): dc2}, data.draw(st.integers(0, 10)))
    start = data.draw(st.integers(0, 1000))  # the log start offset
    end = start + len(log)
    committed = data.draw(st.integers(0, first1 + n1 + 10))
    t = search(probe_of(log, ("dc1", 0), start), start, end, committed)
    assert start <= t.offset <= end
    read = copies_from(log, t.offset, ("dc1", 0), start)
    wanted = [o for o in dc1 if o >= committed]
    assert set(wanted) <= set(read), "a copy the group has not consumed would be skipped"
    if wanted:
        assert t.how == EXACT and read == wanted  # exactly the rest, starting at the first such copy
        assert log[t.offset - start] == ("dc1", 0, wanted[0])
    elif dc1:
        assert t.how == MIRROR_BEHIND and read == []  # just after the last copy below the committed offset
        assert log[t.offset - start - 1] == ("dc1", 0, dc1[-1])
    else:
        assert (t.how, t.offset) == (NO_COPY, end)


def test_the_search_reads_little_and_a_bound_gives_the_lower_end() -> None:
    log: list[Copy | None] = []
    for o in range(100_000):
        log.append(("dc1", 0, o))
        log.append(("dc2", 3, o))
    reads: list[int] = []
    t = search(probe_of(log, ("dc1", 0), reads=reads), 0, len(log), 61_234)
    assert (t.offset, t.how) == (2 * 61_234, EXACT)
    assert len(reads) < 100, len(reads)  # log2(200k) probes of 1-2 records
    # dc1's copies only in the last 10 records, a bound of 1000: the search stops at its lower end
    sparse: list[Copy | None] = [("dc2", 0, o) for o in range(5000)] + [("dc1", 0, o) for o in range(10)]
    t = search(probe_of(sparse, ("dc1", 0), bound=1000), 0, len(sparse), 4)
    assert t.how == BOUND and t.offset <= 5004
    assert set(range(4, 10)) <= set(copies_from(sparse, t.offset, ("dc1", 0)))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_key_placed_partitions_take_the_minimum_and_never_skip(data) -> None:
    """Three source partitions spread by key over two target partitions, each in origin order."""
    source_count, targets = 3, 2
    sizes = [data.draw(st.integers(0, 30)) for _ in range(source_count)]
    placed: dict[int, dict[tuple[str, int], list[int]]] = {tp: {} for tp in range(targets)}
    for sp, n in enumerate(sizes):
        for o in range(n):
            tp = data.draw(st.integers(0, targets - 1))
            placed[tp].setdefault(("dc1", sp), []).append(o)
    logs = {tp: interleave(data.draw, {**placed[tp], ("dc2", 0): list(range(5))}, 2) for tp in range(targets)}
    committed = {sp: data.draw(st.integers(0, sizes[sp] + 3)) for sp in range(source_count)
                 if data.draw(st.booleans())}
    bounds = {tp: (0, len(logs[tp])) for tp in range(targets)}
    result = translate_topic(lambda tp, sp: probe_of(logs[tp], ("dc1", sp)), bounds, "t", source_count, committed)
    if not committed:
        assert result == {}
        return
    assert set(result) == {0, 1}
    for tp, t in result.items():
        for sp in range(source_count):
            c = committed.get(sp, 0)
            read = copies_from(logs[tp], t.offset, ("dc1", sp))
            assert set(o for o in placed[tp].get(("dc1", sp), []) if o >= c) <= set(read), (tp, sp, t)
        if not any(placed[tp].values()):
            assert (t.offset, t.how) == (len(logs[tp]), NO_COPY)


def test_kept_partitions_translate_only_the_committed_ones() -> None:
    logs = {p: [("dc1", p, o) for o in range(10)] for p in range(3)}
    bounds = {p: (0, 10) for p in range(3)}
    result = translate_topic(lambda tp, sp: probe_of(logs[tp], ("dc1", sp)), bounds, "t", 3, {0: 4, 2: 10})
    assert {p: (t.offset, t.how, t.source_partition, t.committed) for p, t in result.items()} == {
        0: (4, EXACT, 0, 4), 2: (10, MIRROR_BEHIND, 2, 10)}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_copies_written_twice_by_an_old_crash_still_never_ahead(data) -> None:
    """Before exact resume a crash made the mirror copy again from its last commit: the origins of
    one source partition run 0..a, then again from some r <= a + 1 on (each run without a gap).
    The answer always follows a copy below the committed offset, so nothing is skipped: read now,
    or copied later by the last run, which goes on from its last origin offset."""
    runs: list[int] = []
    for _ in range(data.draw(st.integers(1, 4))):
        restart = data.draw(st.integers(0, runs[-1] + 1 if runs else 0))  # at or before where the last run got
        runs += list(range(restart, restart + data.draw(st.integers(1, 40))))
    top = max(runs) + 1
    log = interleave(data.draw, {("dc1", 0): runs, ("dc2", 0): list(range(30))}, 3)
    committed = data.draw(st.integers(0, top + 2))
    t = search(probe_of(log, ("dc1", 0)), 0, len(log), committed)
    still_to_come = runs[-1] + 1
    assert set(o for o in runs if committed <= o < still_to_come) <= set(copies_from(log, t.offset, ("dc1", 0)))
