"""LogManager: creating, finding and deleting logs, checkpoints, locking, periodic passes."""

from __future__ import annotations

import pytest

from broker.protocol.errors import InvalidTopicError, KafkaStorageError
from broker.storage import CLEAN_SHUTDOWN_FILE, LogConfig, LogManager
from broker.storage.checkpoint import read_checkpoint, write_checkpoint
from tests.storage.batches import build_batch
from tests.storage.helpers import FakeClock, read_from


def test_create_get_delete(tmp_path) -> None:
    mgr = LogManager([str(tmp_path)], LogConfig())
    assert mgr.get("orders", 0) is None
    log = mgr.get_or_create("orders", 0)
    assert mgr.get_or_create("orders", 0) is log and mgr.get("orders", 0) is log
    assert (tmp_path / "orders-0" / "00000000000000000000.log").exists()
    log.append(build_batch([b"a"]))
    held = log.read(0, 100).records
    assert mgr.delete("orders", 0) and not mgr.delete("orders", 0)
    assert not (tmp_path / "orders-0").exists() and mgr.get("orders", 0) is None
    assert held.read_bytes()  # a fetch in flight still completes
    with pytest.raises(InvalidTopicError):
        mgr.get_or_create("bad/name", 0)
    mgr.shutdown()


def test_topic_configs_and_overrides(tmp_path) -> None:
    default = LogConfig(segment_bytes=10_000)
    mgr = LogManager([str(tmp_path)], default, {"small": LogConfig(segment_bytes=300)})
    assert mgr.get_or_create("small", 0).config.segment_bytes == 300
    assert mgr.get_or_create("other", 0).config.segment_bytes == 10_000
    explicit = default.with_overrides({"retention.ms": "5"})
    assert mgr.get_or_create("given", 0, explicit).config.retention_ms == 5
    mgr.set_topic_config("other", LogConfig(segment_bytes=500))
    assert mgr.get("other", 0).config.segment_bytes == 500
    mgr.shutdown()


def test_logs_spread_over_directories(tmp_path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = LogManager([str(d) for d in dirs], LogConfig())
    for p in range(4):
        mgr.get_or_create("t", p).append(build_batch([b"%d" % p]))
    assert sorted(len(list(d.glob("t-*"))) for d in dirs) == [2, 2]
    mgr.shutdown()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    again = LogManager([str(d) for d in dirs], LogConfig())
    assert [(log.topic, log.partition) for log in again.all_logs()] == [("t", p) for p in range(4)]
    assert read_from(again.get("t", 3), 0) == [(0, b"3")]
    again.shutdown()


def test_a_directory_is_locked_while_in_use(tmp_path) -> None:
    mgr = LogManager([str(tmp_path)], LogConfig())
    with pytest.raises(KafkaStorageError):
        LogManager([str(tmp_path)], LogConfig())
    mgr.shutdown()
    LogManager([str(tmp_path)], LogConfig()).shutdown()


def test_checkpoint_files(tmp_path) -> None:
    write_checkpoint(str(tmp_path / "cp"), {("a-b", 3): 17, ("a", 0): 5})
    assert (tmp_path / "cp").read_text() == "0\n2\na 0 5\na-b 3 17\n"
    assert read_checkpoint(str(tmp_path / "cp")) == {("a", 0): 5, ("a-b", 3): 17}
    (tmp_path / "bad").write_text("0\n3\na 0 5\n")
    assert read_checkpoint(str(tmp_path / "bad")) == {}
    assert read_checkpoint(str(tmp_path / "missing")) == {}


def test_retention_and_flush_passes(tmp_path) -> None:
    clock = FakeClock(1_000_000)
    mgr = LogManager([str(tmp_path)], LogConfig(segment_bytes=300, retention_ms=1000, flush_ms=500), time_ms=clock)
    log = mgr.get_or_create("t", 0)
    for _ in range(10):
        log.append(build_batch([b"x" * 30], base_timestamp=clock.now - 5000))
    assert mgr.flush_pass(clock.now + 499) == 1  # only the rolled segments are due
    assert log.recovery_point == log.segment_base_offsets()[-1]
    assert mgr.flush_pass(clock.now + 998) == 0  # flush.ms counts from the last flush of any kind
    assert mgr.flush_pass(clock.now + 999) == 1 and log.recovery_point == log.log_end_offset
    deleted = mgr.retention_pass(clock.now)
    assert deleted > 0 and len(log.segment_base_offsets()) == 1
    mgr.checkpoint()
    start = log.log_start_offset
    assert read_checkpoint(str(tmp_path / "log-start-offset-checkpoint")) == {("t", 0): start}
    mgr.abandon()
    again = LogManager([str(tmp_path)], LogConfig(segment_bytes=300), time_ms=clock)
    assert again.get("t", 0).log_start_offset == start
    again.shutdown()
