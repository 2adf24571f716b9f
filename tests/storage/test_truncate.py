"""Truncation for replication: truncate_to and truncate_fully_and_start_at."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.errors import OffsetOutOfRangeError
from tests.storage.batches import build_batch
from tests.storage.helpers import open_log, read_from, segment_files


def _fill(log, n: int) -> list[tuple[int, bytes]]:
    out = []
    for i in range(n):
        r = log.append(build_batch([b"%03d-%d" % (i, j) for j in range(2)], base_timestamp=1000 + 10 * i))
        out += [(r.first_offset + j, b"%03d-%d" % (i, j)) for j in range(2)]
    return out


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 30), cut=st.integers(0, 70), reopen=st.booleans())
def test_truncate_to_any_offset(tmp_path_factory, n, cut, reopen) -> None:
    path = tmp_path_factory.mktemp("trunc") / "t-0"
    log = open_log(path, segment_bytes=400, index_interval_bytes=100)
    records = _fill(log, n)
    changed = log.truncate_to(cut)
    assert changed == (cut < 2 * n)
    end = min(cut - cut % 2, 2 * n)  # a batch holding the cut point goes whole
    assert log.log_end_offset == end
    assert log.recovery_point <= end and log.high_watermark == end
    if reopen:
        log.close()
        log = open_log(path, segment_bytes=400, index_interval_bytes=100)
    assert read_from(log, 0) == records[:end]
    assert all(int(f[:20]) <= max(end, 0) for f in segment_files(path))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(end + 1, 100)
    assert log.append(build_batch([b"new"], base_timestamp=5)).first_offset == end
    assert read_from(log, end) == [(end, b"new")]
    assert log.offset_for_timestamp(1000 + 10 * (end // 2)) in (None, (end, 5)) or end == 2 * n


def test_truncate_fully_and_start_at(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=300)
    _fill(log, 10)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (500, 500, 500)
    assert segment_files(path) == ["00000000000000000500.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.append(build_batch([b"x"])).first_offset == 500
    log.close()
    again = open_log(path)
    assert again.log_start_offset == 500 and read_from(again, 500) == [(500, b"x")]


def test_truncate_below_log_start_restarts_the_log(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=1)
    _fill(log, 10)
    log.delete_expired_segments(10**12)
    start = log.log_start_offset
    assert start > 2
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)


def test_high_watermark_modes(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    _fill(log, 3)
    assert log.high_watermark == 6  # no followers: what is appended is committed
    log.auto_high_watermark = False
    assert log.update_high_watermark(4) == 4 and log.high_watermark == 4
    assert log.update_high_watermark(100) == 6
    assert log.read(0, 10_000, max_offset=log.update_high_watermark(2)).first_offset == 0
