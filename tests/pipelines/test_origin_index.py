"""The loader's origin index (pipelines.origin_index): each birth written once, bounded per source,
the same after a round trip through JSON; and a range scan's dropping of copies, on chunks."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.origin import HEADER, Origin, birth
from pipelines.manifest import build_manifest
from pipelines.origin_index import BELOW_WINDOW, DUPLICATE, NEW, NO_ORIGIN, OriginIndex
from pipelines.record_columns import RecordChunk
from pipelines.task_stats import TaskStats


def headers(cluster: str, topic: str, partition: int, offset: int, *more: Origin) -> list:
    return [(HEADER, Origin(cluster, topic, partition, offset).encode())] + [(HEADER, o.encode()) for o in more]


def test_each_birth_once_and_only_repeats_dropped():
    index = OriginIndex(window=1000)
    assert index.check(headers("A", "t", 0, 5)) == NEW
    assert index.check(headers("A", "t", 0, 6)) == NEW
    assert index.check(headers("A", "t", 0, 5)) == DUPLICATE
    assert index.check(headers("A", "t", 1, 5)) == NEW      # another source partition
    assert index.check(headers("B", "t", 0, 5)) == NEW      # another cluster
    assert index.check(headers("A", "u", 0, 5)) == NEW      # another topic
    assert index.check(headers("A", "t", 0, 3)) == NEW      # a first copy out of order, inside the window
    assert index.check(headers("A", "t", 0, 3)) == DUPLICATE
    assert index.check(headers("A", "t", 0, 4)) == NEW      # fills the hole: runs join
    assert index.sources[("A", "t", 0)].window_runs(1000) == [[3, 7]]


def test_records_without_an_origin_are_never_dropped():
    index = OriginIndex(window=10)
    for _ in range(3):
        assert index.check([]) == NO_ORIGIN
        assert index.check(None) == NO_ORIGIN
        assert index.check([("other", b"A:t:0:1")]) == NO_ORIGIN
        assert index.check([(HEADER, b"not an origin")]) == NO_ORIGIN
        assert index.check([(HEADER, None)]) == NO_ORIGIN
    assert len(index) == 0


def test_the_birth_is_the_first_origin():
    """A copy of a copy (A -> B -> C) names A first: it is the same record as the copy A -> C."""
    direct = headers("A", "t", 0, 7)
    via_b = headers("A", "t", 0, 7, Origin("B", "t", 3, 99))
    assert birth(via_b) == Origin("A", "t", 0, 7)
    index = OriginIndex(window=100)
    assert index.check(direct) == NEW
    assert index.check(via_b) == DUPLICATE
    # a first header that does not parse: the next origin is the birth
    assert index.check([(HEADER, b"garbage"), (HEADER, b"A:t:0:8")]) == NEW


def test_bounded_by_the_window():
    window = 50
    index = OriginIndex(window=window)
    offsets = list(range(0, 100_000, 3))  # sparse: every offset its own run
    for o in offsets:
        assert index.check(headers("A", "t", 0, o)) == NEW
    written = index.sources[("A", "t", 0)]
    assert index.offsets_held() <= window
    assert len(written.runs) - written.first <= window  # in memory too, not only when stored
    assert len(written.runs) <= 2 * window + 64
    # anything at or below hi - window is taken as written (a mirror copies a source partition in order)
    assert index.check(headers("A", "t", 0, offsets[-1] - window)) == BELOW_WINDOW
    assert index.check(headers("A", "t", 0, offsets[-1] - 1)) == NEW  # inside the window, never written
    assert index.check(headers("A", "t", 0, offsets[-1] - 3)) == DUPLICATE
    doc = index.to_json()
    assert len(json.dumps(doc)) < 2_000


def test_round_trip_keeps_every_verdict():
    rng = random.Random(7)
    index = OriginIndex(window=200)
    seen = [(rng.choice("AB"), rng.randrange(3), o + rng.randrange(-30, 5)) for o in range(2_000)]
    for c, p, o in seen:
        index.check(headers(c, "t", p, o))
    doc = index.to_json()
    again = OriginIndex.from_json(json.loads(json.dumps(doc)))
    assert again.to_json() == doc
    probes = [(c, p, o) for c in "AB" for p in range(3) for o in range(1_700, 2_010)]
    left = OriginIndex.from_json(doc)
    assert [left.check(headers(c, "t", p, o)) for c, p, o in probes] == \
           [again.check(headers(c, "t", p, o)) for c, p, o in probes]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 400), max_size=300), st.integers(1, 120))
def test_against_a_plain_set(offsets, window):
    """Inside the window the index answers as the set of everything written; below it, as 'written'."""
    index = OriginIndex(window=window)
    written: set[int] = set()
    hi = -1
    for o in offsets:
        verdict = index.check(headers("A", "t", 0, o))
        if o <= hi - window:
            assert verdict == BELOW_WINDOW
        elif o in written:
            assert verdict == DUPLICATE
        else:
            assert verdict == NEW
            written.add(o)
            hi = max(hi, o)
    assert index.offsets_held() == len([o for o in written if o > hi - window])


def test_merge_and_a_smaller_window():
    a, b = OriginIndex(window=100), OriginIndex(window=100)
    for o in range(0, 50):
        a.check(headers("A", "t", 0, o))
    for o in range(60, 120):
        b.check(headers("A", "t", 0, o))
    b.check(headers("B", "t", 0, 1))
    merged = a.merge(b)
    assert merged.sources[("A", "t", 0)].hi == 119
    assert merged.sources[("A", "t", 0)].window_runs(100) == [[20, 50], [60, 120]]
    assert merged.check(headers("B", "t", 0, 1)) == DUPLICATE
    smaller = OriginIndex.from_json(merged.to_json(), window=10)
    assert smaller.to_json()["sources"][0]["runs"] == [[110, 120]]
    with pytest.raises(ValueError):
        OriginIndex(window=0)


def _chunk(offsets: list[int], hdrs: list[list]) -> RecordChunk:
    n = len(offsets)
    return RecordChunk("t", 0, np.array(offsets, np.int64), np.full(n, 1_000, np.int64), pa.nulls(n, pa.binary()),
                       pa.array([b"v%d" % o for o in offsets], pa.binary()), hdrs, offsets[-1] + 1)


def test_keep_cuts_every_column():
    chunk = _chunk([10, 11, 12, 13], [headers("A", "t", 0, 1), [], headers("A", "t", 0, 1), []])
    kept = chunk.keep(np.array([True, True, False, True]))
    assert kept.offsets.tolist() == [10, 11, 13]
    assert kept.values.to_pylist() == [b"v10", b"v11", b"v13"]
    assert kept.headers is not None and len(kept.headers) == 3
    assert kept.next_offset == 14
    assert chunk.keep(np.array([False, True, False, True])).headers is None  # none of the kept has headers


def test_manifest_counts_and_merges_ranges():
    """Two ranges of one partition: the manifest sums their drops, lists their offsets and merges
    their indexes into the one the next run starts from."""
    start = OriginIndex(window=1000)
    start.check(headers("A", "t", 0, 0))
    r1, r2 = OriginIndex.from_json(start.to_json()), OriginIndex.from_json(start.to_json())
    for o in range(1, 10):
        r1.check(headers("A", "t", 0, o))
    for o in range(10, 20):
        r2.check(headers("A", "t", 0, o))
    plan = {"run_id": "R", "topic": "t", "partitions": [
        {"partition": 0, "start": 0, "end": 40, "ranges": [[0, 20], [20, 40]], "origins": start.to_json()}]}
    results = [TaskStats(0, "t", 0, 0, 20, count=18, duplicates_dropped=2, duplicate_offsets=((3, 5),),
                         origins=r1.to_json()),
               TaskStats(1, "t", 0, 20, 40, count=17, duplicates_dropped=3, duplicate_offsets=((30, 33),),
                         origins=r2.to_json())]
    doc = build_manifest(plan, results)
    p = doc["partitions"][0]
    assert p["duplicates_dropped"] == 5 and doc["totals"]["duplicates_dropped"] == 5
    assert p["duplicate_offsets"] == [[3, 5], [30, 33]]
    assert p["origins"]["sources"][0]["runs"] == [[0, 20]]
    # a range that read no origin reports no index: the partition keeps the one it started from
    doc = build_manifest(plan, [TaskStats(0, "t", 0, 0, 20, count=20), TaskStats(1, "t", 0, 20, 40, count=20)])
    assert doc["partitions"][0]["origins"] == start.to_json()
    assert doc["totals"]["duplicates_dropped"] == 0


def test_range_scan_drops_copies_and_reports_them():
    from pipelines.task import RangeScan, RangeTask, TaskContext, new_stats, summary_extras

    start = OriginIndex(window=100)
    start.check(headers("A", "t", 0, 1))  # written by an earlier range
    task = RangeTask(0, "R", "t", 0, 10, 16, {"format": "raw", "schema": []}, origins=start.to_json())
    scan = RangeScan(task, TaskContext(brokers=(), warehouse="file:///nonexistent"))
    chunk = _chunk([10, 11, 12, 13, 14, 15], [headers("A", "t", 0, 1), headers("A", "t", 0, 2), [],
                                               headers("A", "t", 0, 2), headers("A", "t", 0, 3), []])
    kept = scan._drop_duplicates(chunk)
    assert kept.offsets.tolist() == [11, 12, 14, 15]
    stats = scan.stats(new_stats(task))
    scan.close()
    assert stats.duplicates_dropped == 2 and stats.duplicate_offsets == ((10, 11), (13, 14))
    assert stats.origins is not None and stats.origins["sources"][0]["runs"] == [[1, 4]]
    assert summary_extras(stats) == {"duplicates_dropped": 2, "duplicate_offsets": [[10, 11], [13, 14]],
                                     "origins": stats.origins, "hours": {}, "late_offsets": []}
    # no origin read: no index reported (the partition's stays as it was), no deduplication in the commit summary
    plain = RangeScan(task, TaskContext(brokers=(), warehouse="file:///nonexistent"))
    assert plain._drop_duplicates(_chunk([10, 11], [[("a", b"1")], []])).offsets.tolist() == [10, 11]
    assert plain.stats(new_stats(task)).origins is None
    assert "origins" not in summary_extras(plain.stats(new_stats(task)))
    plain.close()


def test_validation_counts_dropped_copies_as_read():
    """The suite's contiguity and coverage checks see dropped copies as read offsets, like gaps."""
    import pandas as pd

    from pipelines.validation.runner import _offset_steps
    from pipelines.validation.suite import expected_records

    p = {"partition": 0, "start": 0, "end": 10, "gaps": [], "duplicate_offsets": [[2, 4], [5, 6]]}
    frame = pd.DataFrame({"partition": [0] * 6, "offset": [0, 1, 4, 6, 7, 9]})
    assert _offset_steps(frame, {"partitions": [p]}).tolist() == [1, 1, 1, 1, 1, 2]  # 8 is missing: caught
    assert expected_records(p) == 7


def test_split_ranges_look_back_at_the_pieces_before_them():
    from pipelines.plan import Plan

    origins = OriginIndex(window=50).to_json()
    doc = {"topic": "t", "spec": {"format": "raw"}, "partitions": [
        {"partition": 0, "start": 100, "ranges": [[100, 140], [140, 180], [180, 260]], "origins": origins},
        {"partition": 1, "start": 0, "ranges": [[0, 10], [10, 20]]}]}
    tasks = Plan("R", 0, topics={"t": doc}).tasks()
    assert [(t.partition, t.start, t.lookback) for t in tasks] == [(0, 100, None), (0, 140, 100), (0, 180, 130),
                                                                   (1, 0, None), (1, 10, None)]
    assert tasks[1].origins == origins and tasks[3].origins is None


def test_committed_origins_latest_wins_and_a_reset_starts_afresh(tmp_path):
    from pipelines.fs import LocalFS
    from pipelines.manifest import OffsetStore

    store = OffsetStore(LocalFS(f"file://{tmp_path}"))
    a, b = OriginIndex(window=10), OriginIndex(window=10)
    a.check(headers("A", "t", 0, 1))
    b.check(headers("A", "t", 0, 2))

    def manifest(run_id: str, kind: str, origins: dict | None) -> None:
        p = {"partition": 0, "next": 5, **({"origins": origins} if origins else {})}
        store.write_manifest({"run_id": run_id, "topic": "t", "kind": kind, "partitions": [p]})

    manifest("R1", "load", a.to_json())
    manifest("R2", "load", b.to_json())
    manifest("R3", "reset", None)
    manifest("R4", "load", None)  # loaded without deduplication: nothing to say
    assert store.committed_origins("t", before="R2") == {0: a.to_json()}
    assert store.committed_origins("t", before="R3") == {0: b.to_json()}
    assert store.committed_origins("t") == {}
