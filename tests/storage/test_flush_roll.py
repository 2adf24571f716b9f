"""Flush policy (flush.messages, flush.ms, after a roll) and roll policy (size, time, full index)."""

from __future__ import annotations

import os

from broker.storage.index import read_offset_index_entries
from tests.storage.batches import build_batch
from tests.storage.helpers import FakeClock, open_log, read_from, segment_files


def test_flush_messages_1_syncs_every_append(tmp_path, monkeypatch) -> None:
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    log = open_log(tmp_path / "t-0", flush_messages=1)
    for i in range(5):
        log.append(build_batch([b"a", b"b"]))
        assert log.recovery_point == log.log_end_offset == 2 * (i + 1)
    assert len(synced) >= 5


def test_flush_messages_counts_records(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", flush_messages=5)
    log.append(build_batch([b"a"] * 2))
    log.append(build_batch([b"a"] * 2))
    assert log.recovery_point == 0
    log.append(build_batch([b"a"] * 2))
    assert log.recovery_point == 6


def test_flush_ms_with_fake_clock(tmp_path) -> None:
    clock = FakeClock(10_000)
    log = open_log(tmp_path / "t-0", clock, flush_ms=1000)
    log.append(build_batch([b"a"]))
    assert not log.maybe_flush(clock.now + 999)
    assert log.recovery_point == 0
    assert log.maybe_flush(clock.now + 1000)
    assert log.recovery_point == 1
    clock.advance(1000)
    assert not log.maybe_flush()  # nothing new to flush
    log.append(build_batch([b"b"]))
    assert not log.maybe_flush(clock.now + 500)
    assert log.maybe_flush(clock.now + 1000)
    assert log.recovery_point == 2


def test_default_policy_relies_on_page_cache_but_flushes_rolled_segments(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for _ in range(3):
        log.append(build_batch([b"x" * 40]))
    assert log.recovery_point == 0 and not log.maybe_flush(10**15)
    for _ in range(5):
        log.append(build_batch([b"x" * 40]))
    bases = log.segment_base_offsets()
    assert len(bases) > 1
    assert log.maybe_flush()
    assert log.recovery_point == bases[-1]  # the rolled segments, not the active one


def test_flushed_indexes_are_on_disk(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, index_interval_bytes=0)
    for _ in range(10):
        log.append(build_batch([b"x"]))
    assert not (path / "00000000000000000000.index").exists()  # kept in memory until a flush, which makes the file
    log.flush()
    assert [rel for rel, _ in read_offset_index_entries(path / "00000000000000000000.index")] == list(range(1, 10))


def test_roll_on_size(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    batch = build_batch([b"y" * 100])
    for _ in range(10):
        log.append(bytearray(batch))
    per_segment = 500 // len(batch)
    assert log.segment_base_offsets() == list(range(0, 10, per_segment))
    assert all(os.path.getsize(path / f) <= 500 for f in segment_files(path))
    # each roll snapshots producer state at the new base
    assert segment_files(path, ".snapshot") == [f"{b:020d}.snapshot" for b in log.segment_base_offsets()[1:]]


def test_roll_on_time(tmp_path) -> None:
    clock = FakeClock(50_000)
    log = open_log(tmp_path / "t-0", clock, segment_ms=1000)
    log.append(build_batch([b"a"]))
    clock.advance(1000)
    log.append(build_batch([b"b"]))
    assert log.segment_base_offsets() == [0]
    clock.advance(1)
    log.append(build_batch([b"c"]))
    assert log.segment_base_offsets() == [0, 2]
    clock.advance(10_000)
    log.roll()  # explicit roll
    log.roll()  # an empty active segment is not rolled again
    assert log.segment_base_offsets() == [0, 2, 3]
    assert read_from(log, 0) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_roll_when_index_full(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_index_bytes=8 * 4, index_interval_bytes=0)
    for i in range(12):
        log.append(build_batch([b"%d" % i], base_timestamp=1000 + i))
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    assert read_from(log, 0) == [(i, b"%d" % i) for i in range(12)]


def test_flush_from_another_thread_while_appending(tmp_path) -> None:
    import threading

    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=2000, index_interval_bytes=64)
    stop = threading.Event()
    errors = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
                assert log.recovery_point <= log.log_end_offset
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(400):
            log.append(build_batch([b"%d" % i]))
    finally:
        stop.set()
        thread.join()
    assert not errors
    log.flush()
    assert log.recovery_point == 400
    log.abandon()
    again = open_log(path, clean=False, recovery_point=400, segment_bytes=2000, index_interval_bytes=64)
    assert read_from(again, 0) == [(i, b"%d" % i) for i in range(400)]


def test_roll_clock_restarts_from_the_first_batch_timestamp(tmp_path) -> None:
    clock = FakeClock(100_000)
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_ms=10_000, max_message_bytes=100_000)
    log.append(build_batch([b"x" * 50_000], base_timestamp=95_000))  # bigger than one header window
    log.close()
    clock.advance(6_000)  # 11 s after the first batch's timestamp
    again = open_log(path, clock, segment_ms=10_000, max_message_bytes=100_000)
    again.append(build_batch([b"y"], base_timestamp=clock.now))
    assert again.segment_base_offsets() == [0, 1]


def test_a_new_leader_epoch_is_written_at_once_and_synced_before_the_records_of_the_next_flush(tmp_path, monkeypatch) -> None:
    """KAFKA-15046's order: becoming leader writes the epoch file without an fsync (a killed
    process still leaves it, renamed whole); the log's flush syncs it before its segments, so a
    record that survives a power loss has its epoch on disk too."""
    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real(fd))
    log = open_log(tmp_path / "t-0")
    log.leader_epochs.assign(3, 0)
    assert synced == []
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n3 0\n"
    log.append(build_batch([b"a"]))
    log.flush()
    names = [os.path.basename(p) for p in synced]
    assert names[0] == "leader-epoch-checkpoint"
    assert any(n.endswith(".log") for n in names[1:])
    synced.clear()
    log.append(build_batch([b"b"]))
    log.flush()
    assert "leader-epoch-checkpoint" not in [os.path.basename(p) for p in synced]  # synced once per change


def test_a_new_log_makes_its_index_files_at_its_first_flush_or_close_and_reopens_without_a_rebuild(tmp_path, caplog) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    assert sorted(os.listdir(path)) == ["00000000000000000000.log"]  # a new partition: one file
    log.close()
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= set(os.listdir(path))
    reopened = open_log(path)
    reopened.append(build_batch([b"a"]))
    assert read_from(reopened, 0) == [(0, b"a")]
    assert "rebuilding" not in caplog.text
    killed = open_log(tmp_path / "t-1")  # never flushed, then the process dies: the segment is recovered
    killed.abandon()
    recovered = open_log(tmp_path / "t-1", clean=False)
    recovered.append(build_batch([b"b"]))
    recovered.flush()
    assert read_from(recovered, 0) == [(0, b"b")]


def test_a_roll_writes_the_producer_snapshot_and_the_next_flush_syncs_it(tmp_path, monkeypatch) -> None:
    """The roll runs inside an append (the broker's reactor): its producer snapshot is written
    there, renamed whole, and fsynced by the flush that follows in the flush thread."""
    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or real(fd))
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    seq = 0
    while len(log.segment_base_offsets()) < 2:
        log.append(build_batch([b"%04d" % seq] * 4, producer_id=7, producer_epoch=0, base_sequence=seq))
        seq += 4
    snapshot = tmp_path / "t-0" / f"{log.segment_base_offsets()[1]:020d}.snapshot"
    assert snapshot.exists() and '"id":7' in snapshot.read_text()
    assert not [p for p in synced if ".snapshot" in p]  # nor its .tmp
    assert log.maybe_flush()
    assert str(snapshot) in synced
    synced.clear()
    log.flush()
    assert not [p for p in synced if p.endswith(".snapshot")]  # synced once
