"""Append and read: offsets, segment rolls, read bounds, validation before any write."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from broker.protocol.records.layout import TIMESTAMP_TYPE_MASK, check_batch, read_header
from tests.storage.batches import batch_of_size, build_batch, values_in
from tests.storage.helpers import FakeClock, open_log, read_from, segment_files


def test_offsets_are_assigned_in_order(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    r1 = log.append(build_batch([b"a", b"b", b"c"]))
    r2 = log.append(build_batch([b"d"]))
    assert (r1.first_offset, r1.last_offset, r1.log_append_time, r1.duplicate) == (0, 2, -1, False)
    assert (r2.first_offset, r2.last_offset) == (3, 3)
    assert log.log_end_offset == 4 and log.log_start_offset == 0
    assert read_from(log, 0) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_batches_stored_byte_for_byte(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    batch = build_batch([b"x" * 50, b"y"], base_offset=0)
    log.append(bytearray(batch))
    log.append(bytearray(batch))
    second = bytearray(batch)
    second[0:8] = (2).to_bytes(8, "big")  # only the base offset differs
    with open(tmp_path / "t-0" / "00000000000000000000.log", "rb") as f:
        assert f.read() == bytes(batch) + bytes(second)


def test_one_write_call_per_append(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([b"warm"]))
    calls = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: calls.append(len(data)) or real_write(fd, data))
    records = build_batch([b"a"] * 10) + build_batch([b"b"] * 5) + build_batch([b"c"])
    log.append(records)
    assert calls == [len(records)]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    appends=st.lists(
        st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=5), min_size=1, max_size=3),
        min_size=1,
        max_size=40,
    ),
    segment_bytes=st.integers(1000, 3000),
    index_interval=st.sampled_from([0, 64, 300, 4096]),
    data=st.data(),
)
def test_random_appends_read_back_from_any_offset(tmp_path_factory, appends, segment_bytes, index_interval, data) -> None:
    path = tmp_path_factory.mktemp("log") / "topic-0"
    log = open_log(path, segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    expected: list[tuple[int, bytes]] = []
    for batches in appends:  # each append: 1-3 batches in one buffer
        result = log.append(b"".join(build_batch(values) for values in batches))
        values = [v for b in batches for v in b]
        assert result.first_offset == len(expected)
        assert result.last_offset == len(expected) + len(values) - 1
        expected += [(result.first_offset + i, v) for i, v in enumerate(values)]
    assert log.log_end_offset == len(expected)
    assert all(os.path.getsize(path / f) <= segment_bytes for f in segment_files(path))

    for _ in range(4):
        offset = data.draw(st.integers(0, len(expected)))
        assert read_from(log, offset) == expected[offset:]
        small = data.draw(st.integers(1, 200))
        assert read_from(log, offset, max_bytes=small) == expected[offset:]  # min_one_batch keeps it moving

    log.close()
    for clean in (True, False):
        reopened = open_log(path, clean=clean, segment_bytes=segment_bytes, index_interval_bytes=index_interval)
        assert reopened.log_end_offset == len(expected)
        offset = data.draw(st.integers(0, len(expected)))
        assert read_from(reopened, offset) == expected[offset:]
        reopened.close()


def test_reads_stay_within_one_segment(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for i in range(10):
        log.append(batch_of_size(150, base_timestamp=i))
    assert len(log.segment_base_offsets()) > 1
    result = log.read(0, 10_000)
    assert result.records.size == os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log")


def test_read_edges(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    sizes = []
    for i in range(5):
        batch = build_batch([b"v%d" % i] * 2)
        sizes.append(len(batch))
        log.append(batch)
    end = log.read(10, 100)  # offset == log end: nothing, not an error
    assert end.records is None and end.log_end_offset == 10 and end.first_offset == -1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)

    mid = log.read(3, 10_000)  # offset inside a batch: from that batch's start
    assert mid.first_offset == 2 and mid.records.position == sizes[0]
    assert mid.records.size == sum(sizes[1:])

    # max_offset (the high watermark) is never crossed
    hw = log.read(0, 10_000, max_offset=6)
    assert [o for o, _ in values_in(hw.records.read_bytes())] == [0, 1, 2, 3, 4, 5]
    assert log.read(6, 10_000, max_offset=6).records is None
    assert log.read(7, 10_000, max_offset=6).records is None

    # min_one_batch returns a whole first batch bigger than max_bytes; otherwise a cut one
    assert log.read(0, 1).records.size == sizes[0]
    assert log.read(0, 1, min_one_batch=False).records.size == 1
    assert log.read(0, 0, min_one_batch=False).records is None
    # a cut last batch is allowed
    cut = log.read(0, sizes[0] + 5)
    assert cut.records.size == sizes[0] + 5
    assert values_in(cut.records.read_bytes()) == [(0, b"v0"), (1, b"v0")]


def test_bad_crc_in_second_of_three_batches_writes_nothing(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([b"first"]))
    size_before = os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log")
    bad = build_batch([b"two"])
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(build_batch([b"one"]) + bad + build_batch([b"three"]))
    assert log.log_end_offset == 1
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log") == size_before
    assert log.append(build_batch([b"next"])).first_offset == 1


@pytest.mark.parametrize(
    "mutate, error",
    [
        (lambda b: b[:-3], InvalidRecordError),  # trailing partial batch
        (lambda b: b + b"\x00" * 20, InvalidRecordError),  # garbage after the batch
        (lambda b: b[:16] + b"\x01" + b[17:], InvalidRecordError),  # magic 1
        (lambda b: bytearray(), InvalidRecordError),
    ],
)
def test_malformed_appends_are_rejected(tmp_path, mutate, error) -> None:
    log = open_log(tmp_path / "t-0")
    with pytest.raises(error):
        log.append(bytearray(mutate(build_batch([b"a", b"b"]))))
    assert log.log_end_offset == 0
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log") == 0


def test_size_limits(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", max_message_bytes=500, segment_bytes=1000)
    with pytest.raises(MessageTooLargeError):
        log.append(batch_of_size(600))
    with pytest.raises(RecordListTooLargeError):
        log.append(b"".join(batch_of_size(400) for _ in range(3)))
    assert log.log_end_offset == 0
    log.append(batch_of_size(450))


def test_log_append_time_restamps_and_reseals(tmp_path) -> None:
    clock = FakeClock(5_000_000)
    log = open_log(tmp_path / "t-0", clock, message_timestamp_type="LogAppendTime")
    result = log.append(build_batch([b"a", b"b"], base_timestamp=1))
    assert result.log_append_time == 5_000_000
    stored = log.read(0, 1000).records.read_bytes()
    header = check_batch(stored)  # the CRC was recomputed
    assert header.max_timestamp == 5_000_000 and header.attributes & TIMESTAMP_TYPE_MASK
    assert log.offset_for_timestamp(4_999_999) == (0, 5_000_000)


def test_leader_epoch_is_stamped(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([b"a"]), leader_epoch=7)
    stored = log.read(0, 1000).records.read_bytes()
    assert read_header(stored).partition_leader_epoch == 7
    check_batch(stored)


def test_follower_append_keeps_offsets(tmp_path) -> None:
    leader = open_log(tmp_path / "t-0")
    follower = open_log(tmp_path / "f-0")
    for i in range(4):
        leader.append(build_batch([b"%d" % i] * 3))
    data = leader.read(0, 1 << 20).records.read_bytes()
    result = follower.append_as_follower(data)
    assert (result.first_offset, result.last_offset) == (0, 11)
    assert read_from(follower, 0) == read_from(leader, 0)
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(data)  # offsets must move forward
    assert follower.log_end_offset == 12
