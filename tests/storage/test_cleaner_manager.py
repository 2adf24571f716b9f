"""Choosing the dirtiest compacted log, min.cleanable.dirty.ratio, min/max.compaction.lag.ms,
and the cleaner-offset-checkpoint of each log directory."""

from __future__ import annotations

from pathlib import Path

from broker.storage import LogConfig, LogManager
from broker.storage.checkpoint import CLEANER_OFFSET_FILE, read_checkpoint
from broker.storage.cleaner_manager import LogCleanerManager
from tests.storage.helpers import FakeClock
from tests.storage.test_cleaner import latest, produce, records, updates

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=16 * 1024)


def manager_over(tmp_path: Path, clock: FakeClock, **topic_configs: LogConfig) -> tuple[LogManager, LogCleanerManager]:
    logs = LogManager([str(tmp_path / "a"), str(tmp_path / "b")], LogConfig(), topic_configs, time_ms=clock)
    return logs, LogCleanerManager(logs, 2, 1 << 20, clock)


def test_dirtiest_first_then_checkpointed(tmp_path: Path) -> None:
    clock = FakeClock()
    logs, cleaner = manager_over(tmp_path, clock, hot=COMPACT, warm=COMPACT, plain=LogConfig(segment_bytes=16 * 1024))
    hot, warm, plain = (logs.get_or_create(t, 0) for t in ("hot", "warm", "plain"))
    produce(hot, updates(20, 100))
    produce(warm, updates(400, 5))  # few repeats: mostly live keys
    produce(plain, updates(20, 100))
    for plog in (hot, warm, plain):
        plog.roll()
    first = cleaner.grab_dirtiest()
    assert first is hot
    before = latest(records(hot))
    stats = cleaner.clean(hot)
    assert stats is not None and stats.end_offset == hot.log_end_offset
    assert latest(records(hot)) == before
    assert cleaner.totals.passes == 1 and cleaner.totals.bytes_read > cleaner.totals.bytes_written
    offsets = {}
    for d in logs.log_dirs:
        offsets.update(read_checkpoint(f"{d}/{CLEANER_OFFSET_FILE}"))
    assert offsets == {("hot", 0): hot.log_end_offset}
    assert cleaner.grab_dirtiest() is warm  # everything of a never-cleaned log is dirty
    assert cleaner.grab_dirtiest() is None  # warm is in progress, hot is clean, plain is not compacted
    logs.shutdown()
    logs2, cleaner2 = manager_over(tmp_path, clock, hot=COMPACT, warm=COMPACT)
    assert cleaner2.first_dirty(logs2.get("hot", 0)) == hot.log_end_offset  # type: ignore[arg-type]
    logs2.shutdown()


def test_ratio_and_compaction_lags(tmp_path: Path) -> None:
    clock = FakeClock(1_000_000)
    config = LogConfig(cleanup_policy="compact,delete", segment_bytes=16 * 1024, retention_ms=-1,
                       min_cleanable_dirty_ratio=0.9, min_compaction_lag_ms=60_000, max_compaction_lag_ms=600_000)
    logs, cleaner = manager_over(tmp_path, clock, t=config)
    plog = logs.get_or_create("t", 0)
    produce(plog, updates(50, 40), base_timestamp=clock.now)
    plog.roll()
    assert cleaner.grab_dirtiest() is None  # younger than min.compaction.lag.ms
    clock.advance(61_000)
    assert cleaner.grab_dirtiest() is plog
    cleaner.clean(plog)
    produce(plog, updates(50, 4), base_timestamp=clock.now)
    plog.roll()
    clock.advance(61_000)
    assert cleaner.grab_dirtiest() is None  # dirty ratio below 0.9
    gauges = {p.topic: (ratio, lag) for p, ratio, lag in cleaner.log_gauges()}
    assert 0 < gauges["t"][0] < 0.9 and gauges["t"][1] >= 60_000
    clock.advance(600_000)
    assert cleaner.grab_dirtiest() is plog  # max.compaction.lag.ms passed
    logs.shutdown()
