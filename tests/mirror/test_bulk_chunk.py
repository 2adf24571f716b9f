"""The mirror's bulk path without clusters: one chunk -> one send_batch with the same record
bytes the per-record path makes (origin header appended, loop check, timestamps, positions), and
the exact-resume filters: a chunk trimmed to its partition's position, dropped once the partition
was given up, records already in the target skipped."""

from __future__ import annotations

import threading

from broker.client.accumulator import encode_headers
from broker.client.raw_chunk import RawChunk
from broker.client.simple_consumer import MessageAndMetadata as M
from mirror.maker import MirrorMaker, _unsent_part, _without_copied
from mirror.origin import HEADER, Origin, with_origin
from mirror.stats import RecordAges


class _Producer:
    def __init__(self) -> None:
        self.calls: list = []

    def send_batch(self, topic, partition, records, callback=None):
        self.calls.append((topic, partition, list(records)))
        return 1


class _Topics:
    def follows(self, target):
        return False  # a target made with another partition count: not grown with its source

    def partition_count(self, target, zk, topic):
        return 3


class _Cfg:
    topic_prefix = "dc1."


class _Source:
    name = "src"
    cluster_id = "SRC"
    cfg = _Cfg()
    zk = None

    def __init__(self) -> None:
        self.positions: dict = {}
        self.owned: set | None = None
        self.skip: dict = {}

    def source_partition_count(self, topic, partition):
        return 3


def _maker() -> MirrorMaker:
    mm = MirrorMaker.__new__(MirrorMaker)
    mm.producer = _Producer()
    mm.topics = _Topics()
    mm.target_id = "AGG"
    mm.skipped_loop = 0
    mm._stats_lock = threading.Lock()
    mm.ages, mm._callbacks = RecordAges(), {}
    return mm


def test_chunk_without_headers():
    mm, src, counts = _maker(), _Source(), {}
    chunk = [M("ev", 2, 10 + i, b"k%d" % i, b"v%d" % i, [], 1000 + i) for i in range(5)]
    mm._mirror_chunk(src, chunk, counts)
    (topic, partition, records), = mm.producer.calls
    assert (topic, partition) == ("dc1.ev", 2)  # partition kept: equal counts
    for m, (ts, key, value, hb) in zip(chunk, records):
        assert (ts, key, value) == (m.timestamp, m.key, m.value)
        assert hb == encode_headers(with_origin([], Origin("SRC", "ev", 2, m.offset)))
    assert src.positions[("ev", 2)] == 15 and counts[("src", "ev")] == 5


def test_chunk_with_headers_loop_check_and_missing_timestamps():
    mm, src, counts = _maker(), _Source(), {}
    looped = [(HEADER, b"AGG:ev:0:5")]
    chunk = [
        M("ev", 1, 0, None, b"a", [("trace", b"1")], 50),
        M("ev", 1, 1, None, b"b", looped, 51),  # came from the aggregate: skipped
        M("ev", 1, 2, b"k", None, [], -1),  # no timestamp: now
        M("ev", 1, 3, b"k", b"d", [], None),
    ]
    mm._mirror_chunk(src, chunk, counts)
    (_, _, records), = mm.producer.calls
    assert [r[2] for r in records] == [b"a", None, b"d"]
    assert records[0][3] == encode_headers([("trace", b"1"), (HEADER, b"SRC:ev:1:0")])
    assert records[1][3] == encode_headers([(HEADER, b"SRC:ev:1:2")])
    assert records[0][0] == 50 and records[1][0] > 1_000_000_000_000 and records[2][0] > 1_000_000_000_000
    assert mm.skipped_loop == 1 and src.positions[("ev", 1)] == 4 and counts[("src", "ev")] == 3


def test_chunk_all_looped_still_moves_the_position():
    mm, src, counts = _maker(), _Source(), {}
    chunk = [M("ev", 0, 7, None, b"x", [(HEADER, b"AGG:ev:0:1")], 1)]
    mm._mirror_chunk(src, chunk, counts)
    assert mm.producer.calls == [] and src.positions[("ev", 0)] == 8 and mm.skipped_loop == 1


def _records(first: int, n: int) -> list:
    return [M("t", 1, o, b"k", b"v%d" % o, [], 1000 + o) for o in range(first, first + n)]


def test_a_chunk_is_trimmed_to_its_position_and_dropped_when_given_up():
    source = _Source()
    assert _unsent_part(source, _records(10, 5)) == _records(10, 5)  # no position yet: all of it
    source.positions[("t", 1)] = 12
    assert [m.offset for m in _unsent_part(source, _records(10, 5))] == [12, 13, 14]
    assert _unsent_part(source, _records(5, 7)) is None  # all below the position: copied already
    raw = RawChunk("t", 1, b"batches", min_offset=10, next_offset=20)
    assert _unsent_part(source, raw) is raw and raw.min_offset == 12
    assert _unsent_part(source, RawChunk("t", 1, b"batches", min_offset=3, next_offset=12)) is None
    source.owned = {("t", 0)}  # a ZooKeeper source gave partition 1 up in a rebalance
    assert _unsent_part(source, _records(12, 3)) is None
    assert _unsent_part(source, RawChunk("t", 1, b"batches", min_offset=12, next_offset=20)) is None
    source.owned.add(("t", 1))
    assert [m.offset for m in _unsent_part(source, _records(12, 3))] == [12, 13, 14]


def test_records_already_in_the_target_are_skipped_until_past_the_last_one():
    source = _Source()
    source.skip[("t", 1)] = frozenset({10, 12, 15})
    kept = _without_copied(source, "t", 1, _records(10, 4), source.skip[("t", 1)])
    assert [m.offset for m in kept] == [11, 13] and ("t", 1) in source.skip
    kept = _without_copied(source, "t", 1, _records(14, 2), source.skip[("t", 1)])
    assert [m.offset for m in kept] == [14] and ("t", 1) not in source.skip  # past 15: the fast path again
    source.skip[("t", 1)] = frozenset({20, 21})
    assert _without_copied(source, "t", 1, _records(20, 2), source.skip[("t", 1)]) == []
    assert source.positions[("t", 1)] == 22  # all skipped: the position still moves


def test_the_chunk_path_skips_records_already_copied():
    mm = _maker()
    source = _Source()
    source.skip[("t", 1)] = frozenset({10, 11})
    mm._mirror_chunk(source, [tuple(m) for m in _records(10, 4)], {})
    [(_topic, _part, records)] = mm.producer.calls
    assert [r[2] for r in records] == [b"v12", b"v13"]
    assert source.positions[("t", 1)] == 14
