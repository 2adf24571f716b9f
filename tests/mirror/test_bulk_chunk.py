"""The mirror's bulk path without clusters: one chunk -> one send_batch with the same record
bytes the per-record path makes (origin header appended, loop check, timestamps, positions)."""

from __future__ import annotations

import threading

from broker.client.accumulator import encode_headers
from broker.client.simple_consumer import MessageAndMetadata as M
from mirror.maker import MirrorMaker
from mirror.origin import HEADER, Origin, with_origin


class _Producer:
    def __init__(self) -> None:
        self.calls: list = []

    def send_batch(self, topic, partition, records, callback=None):
        self.calls.append((topic, partition, list(records)))
        return 1


class _Topics:
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

    def source_partition_count(self, topic, partition):
        return 3


def _maker() -> MirrorMaker:
    mm = MirrorMaker.__new__(MirrorMaker)
    mm.producer = _Producer()
    mm.topics = _Topics()
    mm.target_id = "AGG"
    mm.skipped_loop = 0
    mm._stats_lock = threading.Lock()
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
