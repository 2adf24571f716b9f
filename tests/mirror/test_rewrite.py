"""The mirror's raw path without clusters: fetched batches rewritten into target batches.

Each rewritten batch is built by the producer's own batch code (``ProducerBatch.of_records``),
so its CRC and header are checked and it decodes, with broker.protocol.records, to exactly the
source records plus the origin header."""

from __future__ import annotations

import threading

import pytest

from broker.client.accumulator import ProducerBatch
from broker.client.raw_chunk import RawChunk, scan
from broker.protocol.compression import CODEC_IDS
from broker.protocol.errors import CorruptRecordError, InvalidRecordError
from broker.protocol.records import Record, decode_batches, encode_batch
from broker.protocol.records import layout as B
from broker.protocol.types import INT64
from mirror.maker import MirrorMaker
from mirror.origin import HEADER
from mirror.rewrite import rewrite_chunk
from mirror.stats import RecordAges

PREFIX = b"SRC:ev:2:"
T0 = 1_700_000_000_000


def source_batch(records: list[Record], base_offset: int, **kw) -> bytes:
    """A batch as a broker stores it: offsets stamped, records' offsets ignored (deltas 0..n-1)."""
    return encode_batch(records, base_offset=base_offset, **kw)


def records(n: int, keys: bool = True, headers=(), ts_step: int = 1, value_size: int = 100) -> list[Record]:
    return [Record(0, T0 + i * ts_step, b"k%d" % i if keys else None, b"v%d-" % i + b"x" * value_size, list(headers))
            for i in range(n)]


def build(target, compression: int = 0) -> bytes:
    """The target batch as our producer sends it (producer id 7, epoch 0, sequence 0)."""
    batch = ProducerBatch.of_records("t", 0, target.records, target.records_count, target.base_ts, target.max_ts)
    batch.sequence = 0
    return batch.build(compression, 7, 0)


def copies(data: bytes, min_offset: int = 0, target: str = "AGG", **kw) -> tuple[list[Record], int, list]:
    """Rewrite, build, check and decode: (records, dropped, target batches)."""
    kw.setdefault("max_bytes", 1 << 20)
    compression = kw.pop("compression", 0)
    batches, dropped = rewrite_chunk(data, min_offset, PREFIX, target, **kw)
    out: list[Record] = []
    for tb in batches:
        encoded = build(tb, compression)
        header = B.check_batch(encoded)  # CRC, length, count vs lastOffsetDelta
        assert header.records_count == tb.records_count and header.compression == compression
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 0)
        (decoded,) = list(decode_batches(encoded))
        assert [r.offset for r in decoded.records] == list(range(tb.records_count))  # deltas 0..n-1
        assert header.max_timestamp == max(r.timestamp for r in decoded.records)
        out.extend(decoded.records)
    return out, dropped, batches


def expect(src: list[Record], base_offset: int) -> list[tuple]:
    return [(r.timestamp, r.key, r.value, list(r.headers) + [(HEADER, PREFIX + b"%d" % (base_offset + i))])
            for i, r in enumerate(src)]


def seen(out: list[Record]) -> list[tuple]:
    return [(r.timestamp, r.key, r.value, list(r.headers)) for r in out]


@pytest.mark.parametrize("keys", [True, False])
def test_records_with_and_without_keys(keys):
    src = records(300, keys=keys, ts_step=7)  # deltas and offsets past one varint byte
    out, dropped, batches = copies(source_batch(src, 1000))
    assert seen(out) == expect(src, 1000) and dropped == 0 and len(batches) == 1


def test_records_with_headers_of_their_own_and_an_origin_of_another_cluster():
    own = [("trace", b"abc"), ("empty", b""), ("null", None), (HEADER, b"OTHER:ev:0:5")]
    src = records(20, headers=own)
    out, dropped, _ = copies(source_batch(src, 0))
    assert seen(out) == expect(src, 0) and dropped == 0


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_source_batches(codec):
    src = records(500, headers=[("h", b"1")])
    data = source_batch(src, 40, compression=CODEC_IDS[codec])
    out, _, _ = copies(data)
    assert seen(out) == expect(src, 40)
    # and compressed again by the producer with its own codec
    out, _, _ = copies(data, compression=CODEC_IDS["lz4"])
    assert seen(out) == expect(src, 40)


def test_records_whose_origin_names_the_target_are_dropped():
    src = [Record(0, T0, b"a", b"1", []),
           Record(0, T0 + 1, b"b", b"2", [(HEADER, b"AGG:ev:0:9")]),  # came from the target: a loop
           Record(0, T0 + 2, b"c", b"3", [(HEADER, b"X:ev:0:1"), (HEADER, b"AGG:ev:1:4")]),  # further back
           Record(0, T0 + 3, b"d", b"4", [("x", b"AGG:ev:0:9")])]  # not an origin header
    out, dropped, _ = copies(source_batch(src, 10))
    assert dropped == 2
    assert seen(out) == [expect(src, 10)[0], expect(src, 10)[3]]
    assert [r.offset for r in out] == [0, 1]  # the copies' deltas close the gaps


def test_control_batches_are_skipped_and_offsets_below_min_are_left_out():
    first, marker, second = records(10), [Record(0, T0, None, b"\x00\x00\x00\x00", [])], records(5, ts_step=3)
    data = (source_batch(first, 100) + source_batch(marker, 110, control=True, transactional=True)
            + source_batch(second, 111, transactional=True))
    out, _, _ = copies(data, min_offset=104)
    assert seen(out) == expect(first[4:], 104) + expect(second, 111)
    end, next_offset, legacy = scan(data)
    assert (end, next_offset, legacy) == (len(data), 116, False)


def test_split_by_size_and_merged_source_batches_keep_timestamps():
    a, b = records(200, ts_step=2), [r._replace(timestamp=T0 - 5000 + i) for i, r in enumerate(records(50))]
    data = source_batch(a, 0) + source_batch(b, 200)  # the second batch starts 5 s earlier
    out, _, batches = copies(data, max_bytes=8000)
    assert len(batches) > 3
    assert seen(out) == expect(a, 0) + expect(b, 200)
    out, _, batches = copies(data, max_count=1000)  # both source batches in one target batch
    assert len(batches) == 1 and seen(out) == expect(a, 0) + expect(b, 200)
    _, _, batches = copies(data, max_count=30)
    assert [tb.records_count for tb in batches] == [30] * 8 + [10]


def test_log_append_time_and_missing_timestamps():
    src = records(5)
    log_append = source_batch(src, 0, timestamp_type=1)
    out, _, _ = copies(log_append)
    max_ts = B.read_header(log_append).max_timestamp
    assert [r.timestamp for r in out] == [max_ts] * 5  # what a consumer of the source saw
    no_ts = bytearray(source_batch(src, 0))
    INT64.pack_into(no_ts, B.BASE_TIMESTAMP_POS, -1)  # as an up-converted v0 batch has
    out, _, _ = copies(bytes(no_ts), now_ms=T0 + 99)
    assert {r.timestamp for r in out} == {T0 + 99}


def test_damaged_bytes_raise():
    good = source_batch(records(3), 0)
    with pytest.raises(InvalidRecordError):
        rewrite_chunk(good[:B.HEADER_SIZE] + b"\x7f" + good[B.HEADER_SIZE + 1:], 0, PREFIX, "AGG", 1 << 20)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        scan(bytes(corrupt))
    # a partial batch at the end (a fetch cut at max_bytes) is left for the next fetch
    assert scan(good + good[:30]) == (len(good), 3, False)


# --- the maker's raw path, without clusters ---------------------------------------------------


class _Producer:
    batch_size = 1 << 20
    max_request_size = 1 << 20
    batch_count_limit = 1 << 31

    def __init__(self) -> None:
        self.raw: list = []
        self.bulk: list = []

    def send_raw_batch(self, topic, partition, records, count, base_ts, max_ts, callback=None):
        self.raw.append((topic, partition, count))

    def send_batch(self, topic, partition, records, callback=None):
        self.bulk.append((topic, partition, len(records)))
        return 1


class _Topics:
    def __init__(self, count: int) -> None:
        self.count = count

    def follows(self, target):
        return False  # a target made with another partition count: not grown with its source

    def partition_count(self, target, zk, topic):
        return self.count


class _Source:
    name = "src"
    cluster_id = "SRC"
    zk = None

    class cfg:
        topic_prefix = ""

    def __init__(self) -> None:
        self.positions: dict = {}
        self.owned: set | None = None
        self.skip: dict = {}

    def source_partition_count(self, topic, partition):
        return 3


def _maker(target_partitions: int) -> MirrorMaker:
    mm = MirrorMaker.__new__(MirrorMaker)
    mm.producer = _Producer()
    mm.topics = _Topics(target_partitions)
    mm.target_id = "AGG"
    mm.skipped_loop = mm.raw_batches = mm.raw_records = 0
    mm._raw_lock = threading.Lock()
    mm.ages, mm._callbacks = RecordAges(), {}
    return mm


def _chunk() -> RawChunk:
    data = source_batch(records(10), 50) + source_batch([Record(0, T0, b"k", b"v", [(HEADER, b"AGG:ev:2:1")])], 60)
    return RawChunk("ev", 2, data, min_offset=52, next_offset=61)


def test_maker_sends_whole_batches_when_partitions_match():
    mm, src, counts = _maker(3), _Source(), {}
    mm._mirror_raw(src, _chunk(), counts)
    assert mm.producer.raw == [("ev", 2, 8)] and mm.producer.bulk == []
    assert (mm.raw_batches, mm.raw_records, mm.skipped_loop) == (1, 8, 1)
    assert src.positions[("ev", 2)] == 61 and counts[("src", "ev")] == 8


def test_maker_decodes_when_the_producer_must_place_records():
    mm, src, counts = _maker(4), _Source(), {}
    mm._mirror_raw(src, _chunk(), counts)
    assert mm.producer.raw == [] and mm.producer.bulk == [("ev", None, 8)]
    assert src.positions[("ev", 2)] == 61 and mm.skipped_loop == 1


def test_raw_stream_hands_over_chunks_and_iteration_decodes_them():
    from broker.client.zk_consumer import KafkaStream, PartitionTopicInfo

    stream = KafkaStream(None, "t-0", 10, -1, raw=True)  # type: ignore[arg-type]
    info = PartitionTopicInfo("ev", 2, stream, 50)
    data = source_batch(records(10), 50)
    stream.queue.put((info, RawChunk("ev", 2, data, min_offset=50, next_offset=60)))
    chunk = stream.next_chunk()
    assert type(chunk) is RawChunk and (chunk.min_offset, info.consumed_offset) == (50, 60)
    # a refetch overlapping what was handed out: only the rest comes, decoded when iterated
    info.consumed_offset = 55
    stream.queue.put((info, RawChunk("ev", 2, data, min_offset=50, next_offset=60)))
    assert [next(stream).offset for _ in range(5)] == [55, 56, 57, 58, 59] and info.consumed_offset == 60
    stream.queue.put((info, RawChunk("ev", 2, data, min_offset=50, next_offset=60)))  # all handed out: dropped
    stream.queue.put((info, RawChunk("ev", 2, source_batch(records(2), 60), min_offset=60, next_offset=62)))
    assert stream.next_chunk().min_offset == 60 and info.consumed_offset == 62


def test_plain_batches_take_the_array_path_with_the_same_copies():
    """Batches of PLAIN_MIN_RECORDS or more without headers of their own are copied from
    positions decoded for the whole batch at once: the same records, origin offsets across a
    digit boundary (9,999 -> 10,000), split by max_bytes and max_count with deltas 0..n-1 in
    every target batch, compressed sources too."""
    import mirror.rewrite as rewrite

    src = records(300, keys=True, ts_step=7)
    for data in (source_batch(src, 9_900), source_batch(src, 9_900, compression=CODEC_IDS["zstd"])):
        whole, _, batches = copies(data)
        assert seen(whole) == expect(src, 9_900) and len(batches) == 1
        split, _, batches = copies(data, max_bytes=5_000, max_count=40)
        assert seen(split) == expect(src, 9_900) and len(batches) > 8
        assert all(b.records_count <= 40 and (b.records_count == 1 or len(b.records) <= 5_000) for b in batches)
    # below the threshold, or starting inside the batch: the per-record path, same result
    small = records(rewrite.PLAIN_MIN_RECORDS - 1)
    assert seen(copies(source_batch(small, 5))[0]) == expect(small, 5)
    out, _, _ = copies(source_batch(src, 9_900), min_offset=9_950)
    assert seen(out) == expect(src, 9_900)[50:]
