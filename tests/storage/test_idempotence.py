"""Idempotent producers: retries dropped, gaps and fenced epochs rejected, state survives restarts."""

from __future__ import annotations

import os

import pytest

from broker.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from tests.storage.batches import build_batch
from tests.storage.helpers import open_log, read_from


def pbatch(seq: int, n: int = 3, pid: int = 42, epoch: int = 0, tag: bytes = b"v") -> bytearray:
    return build_batch([tag + b"%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def log_size(path) -> int:
    return sum(os.path.getsize(path / f) for f in os.listdir(path) if f.endswith(".log"))


def test_retry_is_answered_with_original_offsets(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([b"plain"]))
    first = log.append(pbatch(0))
    log.append(pbatch(3))
    size = log_size(tmp_path / "t-0")
    retry = log.append(pbatch(0))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset) == (1, 3)
    assert log.log_end_offset == 7 and log_size(tmp_path / "t-0") == size
    assert log.append(pbatch(6)).first_offset == 7


def test_sequence_gap_and_old_epoch_are_rejected(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(4))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(1))  # overlaps, not a retry of a whole batch
    assert log.log_end_offset == 3
    log.append(pbatch(7, epoch=1))  # a new epoch starts anywhere (logbus is lenient here)
    with pytest.raises(InvalidProducerEpochError):
        log.append(pbatch(10, epoch=0))
    log.append(pbatch(10, epoch=1))
    log.append(pbatch(50, pid=99))  # a new producer starts anywhere
    log.append(build_batch([b"no-producer"]))  # producer id -1 is never checked
    assert log.log_end_offset == 13


def test_only_the_last_five_batches_are_remembered(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(6):
        log.append(pbatch(i * 3))
    assert log.append(pbatch(3)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(0))


def test_sequence_wraps(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(2**31 - 3))
    assert log.append(pbatch(0)).first_offset == 3


def test_a_bad_batch_later_in_the_request_leaves_state_alone(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(pbatch(0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(pbatch(3) + pbatch(9))
    assert log.log_end_offset == 3
    assert log.append(pbatch(3) + pbatch(6)).first_offset == 3


@pytest.mark.parametrize("shutdown", ["clean", "crash"])
def test_state_survives_reopen(tmp_path, shutdown) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=250)
    originals = [log.append(pbatch(i * 3)) for i in range(8)]  # several rolls, snapshots
    assert len(log.segment_base_offsets()) > 2
    if shutdown == "clean":
        log.close()
    else:
        log.abandon()
    again = open_log(path, clean=shutdown == "clean", segment_bytes=250)
    retry = again.append(pbatch(21))
    assert retry.duplicate and retry.first_offset == originals[-1].first_offset
    assert again.append(pbatch(18)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        again.append(pbatch(30))
    assert again.append(pbatch(24)).first_offset == 24


def test_damaged_snapshot_is_ignored_and_state_replayed(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    log.append(pbatch(0))
    log.close()
    snapshot = path / "00000000000000000003.snapshot"
    assert snapshot.exists()
    snapshot.write_text("{not json")
    again = open_log(path)
    assert again.append(pbatch(0)).duplicate
    assert read_from(again, 0) == [(0, b"v0"), (1, b"v1"), (2, b"v2")]


def test_truncation_forgets_removed_batches(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for i in range(6):
        log.append(pbatch(i * 3))
    log.truncate_to(9)
    assert log.log_end_offset == 9
    result = log.append(pbatch(9))  # removed, so this is no longer a retry
    assert not result.duplicate and result.first_offset == 9


def test_idle_producers_expire(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", producer_id_expiration_ms=1000)
    log.append(pbatch(0))
    assert log.expire_producers(10**12) == 1
    log.append(pbatch(40))  # unknown again: any sequence
