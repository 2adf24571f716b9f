"""Crash recovery: damaged tails are cut at the first bad byte, indexes rebuilt; clean restarts scan nothing."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.records.layout import read_header
from broker.storage import CLEAN_SHUTDOWN_FILE, LogConfig, LogManager
from broker.storage.index import read_offset_index_entries, read_time_index_entries
from tests.storage.batches import build_batch
from tests.storage.helpers import FakeClock, open_log, read_from, segment_files


def batch_layout(log_file: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch in a segment file."""
    data = log_file.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, length + 12, base))
        pos += length + 12
    return out


def check_indexes(path: Path) -> None:
    """Every index entry points at a batch start with that offset; time entries are increasing."""
    for name in segment_files(path):
        base = int(name[:20])
        data = (path / name).read_bytes()
        starts = {pos: b for pos, _, b in batch_layout(path / name)}
        entries = list(read_offset_index_entries(path / f"{name[:20]}.index"))
        for rel, pos in entries:
            assert starts.get(pos) == base + rel, (name, rel, pos)
        times = list(read_time_index_entries(path / f"{name[:20]}.timeindex"))
        assert [t for t, _ in times] == sorted({t for t, _ in times})
        for ts, rel in times:
            assert base + rel in starts.values()
            pos = next(p for p, b in starts.items() if b == base + rel)
            assert read_header(data, pos).max_timestamp == ts  # the batch that first reached ts


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    values=st.lists(st.lists(st.binary(min_size=1, max_size=30), min_size=1, max_size=4), min_size=3, max_size=30),
    flush_after=st.integers(0, 30),
    mode=st.sampled_from(["cut", "flip"]),
    data=st.data(),
)
def test_damaged_tail_recovers_to_last_good_batch(tmp_path_factory, values, flush_after, mode, data) -> None:
    path = tmp_path_factory.mktemp("crash") / "events-0"
    config = dict(segment_bytes=700, index_interval_bytes=120)
    log = open_log(path, **config)
    appended = []  # (first offset, values)
    for i, vals in enumerate(values):
        result = log.append(build_batch(vals, base_timestamp=10_000 + i * 7))
        appended.append((result.first_offset, vals))
        if i + 1 == flush_after:
            log.flush()
    recovery_point = log.recovery_point
    log.abandon()

    last = path / segment_files(path)[-1]
    layout = batch_layout(last)
    size = last.stat().st_size
    raw = bytearray(last.read_bytes())
    if mode == "cut":
        damage = data.draw(st.integers(0, size), label="cut at")
        last.write_bytes(raw[:damage])
    else:
        pos, bsize, _ = data.draw(st.sampled_from(layout), label="damaged batch")
        # bytes outside the CRC that recovery cannot judge: base offset and leader epoch
        rel = data.draw(st.sampled_from([*range(8, 12), *range(16, bsize)]), label="byte")
        damage = pos + rel
        raw[damage] ^= data.draw(st.integers(1, 255), label="xor")
        for extra in data.draw(st.lists(st.integers(damage, size - 1), max_size=3), label="more flips"):
            raw[extra] ^= 0x5A
        last.write_bytes(raw)
    first_bad = next((p for p, s, _ in layout if p + s > damage), size)

    seg_base = int(last.name[:20])
    good_end = seg_base  # batches of earlier segments all survive; this one keeps those before the damage
    for pos, bsize, base in layout:
        if pos + bsize <= first_bad:
            good_end = base + len(next(v for b, v in appended if b == base))
    expected = [(first + i, v) for first, vals in appended for i, v in enumerate(vals) if first + i < good_end]

    reopened = open_log(path, clean=False, recovery_point=recovery_point, **config)
    assert reopened.log_end_offset == good_end
    assert read_from(reopened, 0) == expected
    assert last.stat().st_size == first_bad
    # every surviving batch is found exactly through the rebuilt indexes
    for first, _ in appended:
        if first < good_end:
            assert reopened.read(first, 1).first_offset == first
    r = reopened.append(build_batch([b"after"], base_timestamp=99_999))
    assert r.first_offset == good_end
    reopened.close()
    check_indexes(path)
    again = open_log(path, clean=True, **config)
    assert read_from(again, 0) == expected + [(good_end, b"after")]
    again.close()


def _manager(dirs: list[Path], clock=None) -> LogManager:
    return LogManager([str(d) for d in dirs], LogConfig(segment_bytes=500, index_interval_bytes=100), time_ms=clock or FakeClock())


def _fill(log, n: int) -> None:
    for i in range(n):
        log.append(build_batch([b"r%03d" % i] * 3, base_timestamp=1000 + i))


def test_clean_restart_scans_nothing(tmp_path) -> None:
    mgr = _manager([tmp_path])
    for p in range(3):
        _fill(mgr.get_or_create("many-segments", p), 40)
    segments = sum(len(log.segment_base_offsets()) for log in mgr.all_logs())
    assert segments > 20
    mgr.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    again = _manager([tmp_path])
    stats = again.load_stats
    assert stats.clean and stats.logs_loaded == 3 and stats.segments_loaded == segments
    assert stats.segments_recovered == 0 and stats.bytes_recovered == 0 and stats.indexes_rebuilt == 0
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # the next crash must recover
    log = again.get("many-segments", 1)
    assert log.log_end_offset == 120
    assert read_from(log, 0)[-1] == (119, b"r039")
    log.append(build_batch([b"next"]))
    assert read_from(log, 119)[-1] == (120, b"next")
    again.shutdown()


def test_unclean_restart_scans_from_recovery_point(tmp_path) -> None:
    mgr = _manager([tmp_path])
    log = mgr.get_or_create("t", 0)
    _fill(log, 40)
    log.flush()
    flushed_segments = len(log.segment_base_offsets())
    _fill(log, 20)
    bases = log.segment_base_offsets()
    assert len(bases) > flushed_segments
    mgr.checkpoint()
    rp = log.recovery_point
    assert rp == 120
    holding_rp = max(i for i, b in enumerate(bases) if b <= rp)
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == f"0\n1\nt 0 {rp}\n"
    mgr.abandon()

    again = _manager([tmp_path])
    stats = again.load_stats
    assert not stats.clean
    # the segment holding the recovery point and every later one; nothing before
    assert stats.segments_recovered == len(bases) - holding_rp < len(bases) - 3
    assert stats.bytes_truncated == 0
    assert again.get("t", 0).log_end_offset == 180
    assert again.get("t", 0).recovery_point == 180  # recovered data is synced
    again.shutdown()


def test_missing_checkpoint_recovers_everything(tmp_path) -> None:
    mgr = _manager([tmp_path])
    _fill(mgr.get_or_create("t", 0), 30)
    mgr.abandon()
    os.unlink(tmp_path / "recovery-point-offset-checkpoint")
    again = _manager([tmp_path])
    assert again.load_stats.segments_recovered == again.load_stats.segments_loaded
    assert again.get("t", 0).log_end_offset == 90
    again.shutdown()


def test_damage_in_middle_segment_drops_later_segments(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    _fill(log, 30)
    log.abandon()
    names = segment_files(path)
    victim = path / names[1]
    first_size = batch_layout(victim)[0][1]
    raw = bytearray(victim.read_bytes())
    raw[first_size + 30] ^= 1  # inside the second batch
    victim.write_bytes(raw)
    reopened = open_log(path, clean=False, segment_bytes=500)
    assert segment_files(path) == names[:2]
    assert victim.stat().st_size == first_size
    assert reopened.log_end_offset == int(names[1][:20]) + 3
    assert read_from(reopened, 0)[-1] == (reopened.log_end_offset - 1, b"r%03d" % (reopened.log_end_offset // 3 - 1))


def test_bad_index_file_is_rebuilt_on_clean_load(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=2000, index_interval_bytes=50)
    _fill(log, 40)
    log.close()
    index = path / "00000000000000000000.index"
    good = index.read_bytes()
    assert len(good) > 8
    index.write_bytes(good[:-3])  # not a whole number of entries
    again = open_log(path, segment_bytes=2000, index_interval_bytes=50)
    assert read_from(again, 0) == read_from(open_log(path, segment_bytes=2000), 0)
    again.close()
    assert index.read_bytes() == good
    # an index whose entries point past the log is caught when first used
    index.write_bytes(struct.pack(">ii", 5, 10**6) + good)
    lazy = open_log(path, segment_bytes=2000, index_interval_bytes=50)
    assert lazy.read(30, 10).first_offset == 30
    lazy.close()
    assert index.read_bytes() == good


def test_topic_names_with_dashes_and_stray_dirs(tmp_path) -> None:
    mgr = _manager([tmp_path])
    _fill(mgr.get_or_create("my-dashed-topic", 12), 3)
    mgr.shutdown()
    (tmp_path / "not_a_log").mkdir()
    (tmp_path / "old-0.abc123-delete").mkdir()
    again = _manager([tmp_path])
    assert [(log.topic, log.partition) for log in again.all_logs()] == [("my-dashed-topic", 12)]
    assert not (tmp_path / "old-0.abc123-delete").exists()
    again.shutdown()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunk=st.integers(30, 400), cut=st.integers(1, 150))
def test_recovery_reads_on_past_batches_its_chunk_cuts(tmp_path_factory, monkeypatch, chunk, cut) -> None:
    """Recovery reads the file in chunks; a batch a chunk cuts is read whole, not taken for damage."""
    import broker.storage.segment as segment

    monkeypatch.setattr(segment, "RECOVERY_CHUNK", chunk)
    path = tmp_path_factory.mktemp("chunks") / "events-0"
    log = open_log(path)
    for i in range(8):
        log.append(build_batch([b"v%d" % i * (10 + 20 * i)], base_timestamp=10_000 + i))
    log.abandon()
    last = path / segment_files(path)[-1]
    layout = batch_layout(last)
    last.write_bytes(last.read_bytes()[:-cut])  # the last batch is partial
    reopened = open_log(path, clean=False, recovery_point=0)
    assert reopened.log_end_offset == 7
    assert [o for o, _ in read_from(reopened, 0)] == list(range(7))
    assert last.stat().st_size == layout[-1][0]
