"""The log cleaner on plain files: latest value per key, tombstones, producers' last batches,
offsets kept (gaps), the bounded key map, and recovery from a kill at every step of a swap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.protocol.records import decode_batches
from broker.storage import cleaner
from broker.storage.cleaner import CleanStats, OffsetMap, clean
from broker.storage.log import PartitionLog
from tests.storage.batches import build_batch
from tests.storage.helpers import FakeClock, open_log

SEGMENT = 16 * 1024
COMPACT = {"cleanup_policy": "compact", "segment_bytes": SEGMENT}


def produce(log: PartitionLog, items: list[tuple[bytes | None, bytes | None]], per_batch: int = 50, **kw) -> None:
    for i in range(0, len(items), per_batch):
        chunk = items[i : i + per_batch]
        log.append(build_batch([v for _, v in chunk], keys=[k for k, _ in chunk], **kw))  # type: ignore[misc]


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read through PartitionLog.read from the log start."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.records is not None
        data = result.records.read_bytes()
        for batch in decode_batches(data):
            out += [(r.offset, r.key, r.value) for r in batch.records if r.offset >= offset]
        assert result.next_offset > offset
        offset = result.next_offset
    return out


def run_pass(log: PartitionLog, first_dirty: int = 0, buffer_bytes: int = 1 << 20) -> CleanStats:
    return clean(log.clean_task(first_dirty), OffsetMap(buffer_bytes), log.replace_segments)


def latest(items: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {k: (o, v) for o, k, v in items}


def updates(keys: int, rounds: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(b"k%d" % k, b"v%d-%d" % (k, r)) for r in range(rounds) for k in range(keys)]


def test_each_key_keeps_its_last_value_at_its_original_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **COMPACT)
    produce(log, updates(1000, 50))
    before = records(log)
    stats = run_pass(log)
    after = records(log)
    active = log.segment_base_offsets()[-1]
    assert stats.segments_cleaned > 1 and stats.end_offset == active
    assert latest(after) == latest(before)
    cleaned = [(o, k) for o, k, _ in after if o < active]
    assert len({k for _, k in cleaned}) == len(cleaned)  # each key once below the active segment
    original = {o: (k, v) for o, k, v in before}
    assert all(original[o] == (k, v) for o, k, v in after)  # offsets as assigned
    assert log.log_end_offset == 50_000
    assert stats.bytes_written < stats.bytes_read / 5


def test_gaps_are_read_past(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **COMPACT)
    produce(log, updates(10, 200), per_batch=10)
    run_pass(log)
    kept = [-1] + [o for o, _, _ in records(log)]
    gaps = [o for a, b in zip(kept, kept[1:]) for o in range(a + 1, b)]
    assert gaps
    for gap in gaps[:: max(1, len(gaps) // 50)]:
        result = log.read(gap, 1 << 20)
        assert result.records is not None and result.next_offset > gap
        first = next(r.offset for b in decode_batches(result.records.read_bytes()) for r in b.records if r.offset >= gap)
        assert first == next(o for o in kept if o >= gap)


def test_tombstones_stay_for_delete_retention_then_go(tmp_path: Path) -> None:
    clock = FakeClock(10_000)
    log2 = open_log(tmp_path / "t-1", clock, delete_retention_ms=60_000, **COMPACT)
    produce(log2, updates(5, 2), base_timestamp=10_000)
    produce(log2, [(b"k3", None)], base_timestamp=10_000)
    produce(log2, [(b"k9", b"after")], base_timestamp=10_000)
    log2.roll()
    run_pass(log2)
    assert (b"k3", None) in [(k, v) for _, k, v in records(log2)]
    assert b"v3-1" not in {v for _, _, v in records(log2)}
    clock.advance(30_000)
    run_pass(log2, first_dirty=log2.log_end_offset)
    assert (b"k3", None) in [(k, v) for _, k, v in records(log2)]  # before delete.retention.ms
    clock.advance(90_000)
    run_pass(log2, first_dirty=log2.log_end_offset)
    assert b"k3" not in {k for _, k, _ in records(log2)}
    assert b"k4" in {k for _, k, _ in records(log2)}


def test_last_batch_of_a_producer_is_kept_empty_and_sequences_go_on(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **COMPACT)
    log.append(build_batch([b"a", b"b"], keys=[b"x", b"y"], producer_id=7, producer_epoch=0, base_sequence=0))
    produce(log, updates(2, 1) + [(b"x", b"new"), (b"y", b"new")] * 200)
    log.roll()
    run_pass(log)
    segment = Path(log.dir) / "00000000000000000000.log"
    headers = [b.header for b in decode_batches(segment.read_bytes())]
    mine = [h for h in headers if h.producer_id == 7]
    assert len(mine) == 1 and mine[0].records_count == 0 and mine[0].last_offset_delta == 1
    log.close()
    log = open_log(tmp_path / "t-0", clean=False, **COMPACT)
    nxt = log.append(build_batch([b"c"], keys=[b"z"], producer_id=7, producer_epoch=0, base_sequence=2))
    assert not nxt.duplicate and nxt.first_offset == log.log_end_offset - 1


def test_a_small_key_map_cleans_in_several_passes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **COMPACT)
    produce(log, updates(500, 10))
    log.roll()
    expected = latest(records(log))
    first_dirty, passes = 0, 0
    while first_dirty < log.log_end_offset and passes < 50:
        stats = run_pass(log, first_dirty, buffer_bytes=cleaner.ENTRY_BYTES * 400)
        assert stats.end_offset > first_dirty
        first_dirty, passes = stats.end_offset, passes + 1
    assert passes > 1
    after = records(log)
    assert latest(after) == expected and len(after) == 500


def test_a_follower_appends_cleaned_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "t-0", **COMPACT)
    produce(leader, updates(20, 30))
    leader.roll()
    run_pass(leader)
    follower = open_log(tmp_path / "f-0", **COMPACT)
    offset = 0
    while offset < leader.log_end_offset:
        result = leader.read(offset, 1 << 20)
        assert result.records is not None
        follower.append_as_follower(result.records.read_bytes())
        offset = result.next_offset
    assert records(follower) == records(leader) and follower.log_end_offset == leader.log_end_offset


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", range(1, 12))
def test_a_kill_at_any_step_of_a_swap_leaves_old_or_new_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  step: int) -> None:
    """Renames go: .cleaned -> .swap, each old .log -> .deleted, .swap -> .log; then the .deleted
    go. Stopping before rename ``step`` (or before the unlinks) and recovering loses nothing."""
    log = open_log(tmp_path / "t-0", segment_bytes=4096, cleanup_policy="compact")
    produce(log, updates(30, 40), per_batch=10)
    log.roll()
    run_pass(log)  # small cleaned segments: the next pass cleans several into one
    produce(log, updates(30, 3), per_batch=10)
    log.roll()
    before = records(log)
    bases = log.segment_base_offsets()
    calls = {"n": 0}
    real_rename, real_unlink = os.rename, cleaner.unlink_if_present

    def rename(src: str, dst: str) -> None:
        calls["n"] += 1
        if calls["n"] == step:
            raise Crash(f"killed before renaming {src}")
        real_rename(src, dst)

    def unlink(path: str) -> None:
        if path.endswith(cleaner.DELETED_SUFFIX) and step == 11:
            raise Crash("killed before removing the old segments")
        real_unlink(path)

    monkeypatch.setattr(cleaner.os, "rename", rename)
    monkeypatch.setattr(cleaner, "unlink_if_present", unlink)
    with pytest.raises(Crash):
        run_pass(log, first_dirty=log.segment_base_offsets()[-3])
    monkeypatch.undo()
    log.abandon()
    recovered = PartitionLog.open(log.dir, log.config, clean=False)
    after = records(recovered)
    assert latest(after) == latest(before)
    original = {o: (k, v) for o, k, v in before}
    assert all(original[o] == (k, v) for o, k, v in after)
    assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})  # no duplicate segment
    names = os.listdir(log.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert set(recovered.segment_base_offsets()) <= set(bases)
    run_pass(recovered)  # and it cleans on afterwards
    assert latest(records(recovered)) == latest(before)


def test_the_inlined_record_walk_matches_the_reference_codec() -> None:
    """cleaner._keys against broker.protocol.records.read_records: every length of key, value,
    offset delta and headers (varints of one to three bytes), null keys and values."""
    import hashlib
    import random

    from broker.protocol.records import encode_batch, read_records
    from broker.protocol.records.walker import records_of

    rng = random.Random(21)
    for _ in range(40):
        n = rng.randint(1, 300)
        items = []
        for _ in range(n):
            key = None if rng.random() < 0.1 else bytes(rng.randrange(256) for _ in range(rng.choice((0, 5, 16, 17, 70))))
            value = None if rng.random() < 0.2 else b"v" * rng.choice((0, 10, 100, 9000))
            headers = [("h", b"x" * rng.choice((1, 200)))] if rng.random() < 0.2 else []
            items.append((key, value, headers, 1000 + rng.randrange(10**7)))
        data = encode_batch(items, base_offset=rng.randrange(10**9), compression=rng.choice((0, 1)))
        header = next(iter(decode_batches(data))).header
        payload, start, end = records_of(data, 0, header)  # type: ignore[arg-type]
        reference = read_records(payload, start, end, header)  # type: ignore[arg-type]
        walked = cleaner._keys(payload, start, end, header)  # type: ignore[arg-type]
        assert [w[2] for w in walked] == [r.offset for r in reference]
        assert [w[4] for w in walked] == [r.value is None for r in reference]
        for w, r in zip(walked, reference):
            assert w[3] == (None if r.key is None else r.key if len(r.key) <= 16 else hashlib.md5(r.key).digest())


def test_a_truncation_under_the_cleaner_refuses_its_swap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", **COMPACT)
    produce(log, updates(100, 20))
    log.roll()
    task = log.clean_task(0)
    log.truncate_to(1500)  # a follower's truncation while the pass is under way
    produce(log, updates(100, 5))
    log.roll()
    before = records(log)
    stats = clean(task, OffsetMap(1 << 20), log.replace_segments)
    assert stats.aborted and stats.segments_cleaned == 0
    assert records(log) == before
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]


@pytest.mark.integration  # starts a cleaner process
def test_a_pass_in_a_cleaner_process_writes_what_a_pass_in_the_thread_writes(tmp_path: Path) -> None:
    logs = {}
    for name in ("thread", "process"):
        logs[name] = open_log(tmp_path / f"{name}-0", **COMPACT)
        produce(logs[name], updates(500, 20) + [(b"k7", None)])
        produce(logs[name], updates(500, 1))  # a second pass sees a first dirty offset inside a segment
    processes = cleaner.CleanerProcesses(1, 1 << 20)
    try:
        for first_dirty in (0, 7_000):
            in_thread = clean(logs["thread"].clean_task(first_dirty), OffsetMap(1 << 20), logs["thread"].replace_segments)
            in_process = processes.clean(logs["process"].clean_task(first_dirty), logs["process"].replace_segments)
            assert not in_process.aborted and in_process.segments_cleaned == in_thread.segments_cleaned > 0
            assert (in_process.end_offset, in_process.records_kept) == (in_thread.end_offset, in_thread.records_kept)
            assert records(logs["process"]) == records(logs["thread"])
    finally:
        processes.close()
        for log in logs.values():
            log.close()
    assert sorted(os.listdir(tmp_path / "process-0")) == sorted(os.listdir(tmp_path / "thread-0"))


@pytest.mark.integration  # starts a broker-like process and its cleaner process
def test_a_cleaner_process_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    import psutil

    code = """
import sys
from broker.storage.cleaner import CleanerProcesses
processes = CleanerProcesses(1, 1 << 20)
pool = processes._executor()
pool.submit(int, 1).result()  # the cleaner process is up
print(*[p.pid for p in pool._processes.values()], flush=True)
sys.stdin.read()
"""
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert parent.stdout is not None
        [child] = [int(pid) for pid in parent.stdout.readline().split()]
        assert psutil.pid_exists(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and psutil.pid_exists(child) and psutil.Process(child).status() != "zombie":
            time.sleep(0.02)
        assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    finally:
        parent.kill()
        parent.wait(10)
