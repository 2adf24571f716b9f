"""Every reader handles a compacted log's gaps: batches with fewer records than offsets, empty
batches kept for a producer, offsets that skip. The SimpleConsumer's decoder, the loader's
columnar reader, the mirror's raw scan and rewrite, and dump-log, on bytes a cleaner wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.client.raw_chunk import scan
from broker.client.simple_consumer import decode_message_set
from broker.protocol.records import decode_batches, encode_batch
from broker.protocol.records.layout import build_batch
from broker.storage.log import PartitionLog
from mirror.origin import HEADER as ORIGIN
from tests.storage.helpers import open_log
from tests.storage.test_cleaner import records, run_pass, updates

GZIP = 1



@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> PartitionLog:
    log = open_log(tmp_path_factory.mktemp("c") / "t-0", cleanup_policy="compact", segment_bytes=8 * 1024)
    log.append(bytearray(encode_batch([(b"p", b"first", (), 1000)], producer_id=5, producer_epoch=0, base_sequence=0)))
    items = updates(40, 12)
    for i in range(0, len(items), 20):
        chunk = items[i : i + 20]
        log.append(bytearray(encode_batch([(k, v, (), 1000) for k, v in chunk], compression=GZIP if i % 40 else 0)))
    log.append(bytearray(encode_batch([(b"k%d" % k, b"last", (), 1000) for k in range(0, 40, 3)], compression=GZIP)))
    log.append(bytearray(encode_batch([(b"p", b"second", (), 1000)])))
    log.roll()
    run_pass(log)
    return log


def log_bytes(log: PartitionLog) -> bytes:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.records is not None
        out.append(result.records.read_bytes())
        offset = result.next_offset
    return b"".join(out)


def test_the_log_has_gaps_and_an_empty_producer_batch(compacted: PartitionLog) -> None:
    headers = [b.header for b in decode_batches(log_bytes(compacted))]
    assert any(h.records_count == 0 and h.producer_id == 5 for h in headers)
    assert any(0 < h.records_count < h.last_offset_delta + 1 for h in headers)
    assert sum(h.records_count for h in headers) == 41


def test_simple_consumer_decoder(compacted: PartitionLog) -> None:
    expected = records(compacted)
    data = log_bytes(compacted)
    messages, next_offset = decode_message_set("t", 0, data, 0)
    assert [(m.offset, m.key, m.value) for m in messages] == expected
    assert next_offset == compacted.log_end_offset
    gap = next(o for o in range(compacted.log_end_offset) if o not in {e[0] for e in expected})
    from_gap, _ = decode_message_set("t", 0, data, gap)
    assert [m.offset for m in from_gap] == [o for o, _, _ in expected if o >= gap]
    # an empty batch alone (its producer's last) still moves the reader on
    empty = next(b for b in iter_raw(data) if b[1] == 0)
    assert decode_message_set("t", 0, empty[0], 0) == ([], empty[2])


def iter_raw(data: bytes) -> list[tuple[bytes, int, int]]:
    from broker.protocol.records import Tail, iter_batches
    return [(data[p : p + h.size], h.records_count, h.next_offset) for p, h in iter_batches(data, Tail.STOP)]


def test_loader_columns(compacted: PartitionLog) -> None:
    from pipelines.record_columns import decode_chunk
    expected = records(compacted)
    chunk = decode_chunk("t", 0, log_bytes(compacted), 0)
    assert chunk.offsets.tolist() == [o for o, _, _ in expected]
    assert chunk.values.to_pylist() == [v for _, _, v in expected]
    assert chunk.next_offset == compacted.log_end_offset


def test_mirror_raw_path(compacted: PartitionLog) -> None:
    from mirror.rewrite import rewrite_chunk
    expected = records(compacted)
    data = log_bytes(compacted)
    assert scan(data) == (len(data), compacted.log_end_offset, False)  # where the raw fetch goes on
    batches, dropped = rewrite_chunk(data, 0, b"src:t:0:", "target", 1 << 20)
    assert dropped == 0 and sum(b.records_count for b in batches) == len(expected)
    origins = []
    for tb in batches:
        batch = build_batch(tb.records, count=tb.records_count, base_ts=tb.base_ts, max_ts=tb.max_ts)
        for decoded in decode_batches(batch):
            origins += [(dict(r.headers)[ORIGIN], r.value) for r in decoded.records]
    assert origins == [(b"src:t:0:%d" % o, v) for o, _, v in expected]


def test_dump_log_shows_the_gaps(compacted: PartitionLog) -> None:
    segment = Path(compacted.dir) / "00000000000000000000.log"
    out = subprocess.run([sys.executable, "-m", "broker.cli", "dump-log", str(segment)], capture_output=True, text=True,
                         check=True).stdout
    assert "count: 0" in out and "gap:" in out
