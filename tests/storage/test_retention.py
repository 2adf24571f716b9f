"""Retention: whole segments by time and by size, never the active one; open slices survive."""

from __future__ import annotations

import os
import threading

import pytest

from broker.protocol.errors import OffsetOutOfRangeError
from broker.storage.file_slice import deleted_files_closed
from tests.storage.batches import batch_of_size, build_batch, values_in
from tests.storage.helpers import FakeClock, open_log, read_from, segment_files


def _fill(log, count: int, ts_of=lambda i: 1_000 + i, keys: bool = False) -> None:
    for i in range(count):
        log.append(build_batch([b"%04d" % i] * 4, base_timestamp=ts_of(i), keys=[b"k"] * 4 if keys else None))


def test_retention_by_time(tmp_path) -> None:
    clock = FakeClock(100_000)
    log = open_log(tmp_path / "t-0", clock, segment_bytes=400, retention_ms=10_000)
    _fill(log, 20, ts_of=lambda i: 50_000 if i < 10 else 95_000)
    bases = log.segment_base_offsets()
    assert len(bases) >= 4
    deleted = log.delete_expired_segments(clock.now)
    remaining = log.segment_base_offsets()
    assert deleted == len(bases) - len(remaining) > 0
    # exactly the segments whose newest batch is older than now - retention.ms went
    assert remaining[0] <= 40 < (remaining[1] if len(remaining) > 1 else 10**9)
    assert log.log_start_offset == remaining[0]
    assert len(segment_files(tmp_path / "t-0")) == len(remaining)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(remaining[0] - 1, 1000)
    assert read_from(log, log.log_start_offset)[-1] == (79, b"0019")
    assert log.delete_expired_segments(clock.now) == 0


def test_retention_never_deletes_the_active_segment(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=1)
    _fill(log, 12)
    log.delete_expired_segments(10**12)
    assert len(log.segment_base_offsets()) == 1
    assert log.log_start_offset == log.segment_base_offsets()[0] > 0
    assert read_from(log, log.log_start_offset)[-1][0] == 47
    log.append(build_batch([b"more"]))
    assert log.log_end_offset == 49


def test_retention_forever_and_compact_keep_everything(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=-1)
    _fill(log, 12)
    assert log.delete_expired_segments(10**12) == 0
    compacted = open_log(tmp_path / "c-0", segment_bytes=400, retention_ms=1, cleanup_policy="compact")
    _fill(compacted, 12, keys=True)  # a compacted topic refuses keyless records
    assert compacted.delete_expired_segments(10**12) == 0


def test_retention_by_bytes(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=600, retention_bytes=1500)
    for _ in range(30):
        log.append(batch_of_size(190, base_timestamp=10**12))  # timestamps far in the future: size only
    sizes_before = [os.path.getsize(tmp_path / "t-0" / f) for f in segment_files(tmp_path / "t-0")]
    deleted = log.delete_expired_segments(0)
    assert deleted > 0
    kept = sizes_before[deleted:]
    # oldest first, only while what stays is still at least retention.bytes
    assert sum(kept) >= 1500
    assert sum(kept) - kept[0] < 1500 or len(kept) == 1
    assert log.size_bytes == sum(kept)
    assert log.log_start_offset == log.segment_base_offsets()[0]


def test_reader_of_deleted_segment_keeps_reading(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=1)
    _fill(log, 12)
    held = log.read(0, 10_000).records
    expected = held.read_bytes()
    first_file = tmp_path / "t-0" / "00000000000000000000.log"
    assert first_file.exists()
    assert log.delete_expired_segments(10**12) > 0
    assert not first_file.exists()
    assert held.read_bytes() == expected
    out_r, out_w = os.pipe()
    try:
        assert os.sendfile(out_w, held.fileno(), held.position, held.size) == held.size
        assert os.read(out_r, held.size) == expected
    finally:
        os.close(out_r)
        os.close(out_w)
    assert values_in(expected)[0] == (0, b"0000")


def test_deleted_segments_close_in_the_closer_thread_once_no_slice_holds_them(tmp_path, monkeypatch) -> None:
    """The last close of a deleted 1 GiB segment frees its blocks (most of a second here): it
    must not run in the thread that deleted the segment or dropped the last slice."""
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=1)
    _fill(log, 12)
    held = log.read(0, 10_000).records
    fd = held.fileno()
    closes: list[tuple[int, str]] = []
    real_close = os.close

    def close(descriptor: int) -> None:
        closes.append((descriptor, threading.current_thread().name))
        real_close(descriptor)

    monkeypatch.setattr(os, "close", close)
    deleted = log.delete_expired_segments(10**12)
    assert deleted > 1
    deleted_files_closed().result(10)
    assert fd not in [d for d, _ in closes]  # the slice still holds it
    assert os.readlink(f"/proc/self/fd/{fd}").endswith("00000000000000000000.log (deleted)")
    del held
    deleted_files_closed().result(10)
    assert fd in [d for d, _ in closes]
    assert len(closes) == deleted
    assert {thread for _, thread in closes} == {"deleted-segment-closer_0"}


def test_log_start_offset_survives_reopen(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=1)
    _fill(log, 12)
    log.delete_expired_segments(10**12)
    start = log.log_start_offset
    log.close()
    again = open_log(tmp_path / "t-0", segment_bytes=400)
    assert again.log_start_offset == start
    with pytest.raises(OffsetOutOfRangeError):
        again.read(0, 100)


def test_advancing_the_log_start_offset_deletes_records_below_it(tmp_path) -> None:
    """DeleteRecords: the log start moves (never past the high watermark), whole segments below
    it go, the offset survives a reopen through the checkpoint the manager writes."""
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    _fill(log, 20)  # offsets 0..79, 4 records a batch
    segments_before = len(log.segment_base_offsets())
    assert log.advance_log_start_offset(42)
    assert log.log_start_offset == 42
    assert log.segment_base_offsets()[0] <= 42 and len(log.segment_base_offsets()) < segments_before
    with pytest.raises(OffsetOutOfRangeError):
        log.read(41, 1000)
    assert read_from(log, 42)[-1] == (79, b"0019")
    assert not log.advance_log_start_offset(10), "the log start never moves back"
    assert log.advance_log_start_offset(10**6) and log.log_start_offset == log.high_watermark == 80
