"""A fetch answers a small file slice as its bytes and a large one as the slice, for sendfile
(fetch_parts.answered_records); a slice the log lost bytes of stays a slice, which the sender
refuses rather than answer short."""

from __future__ import annotations

from broker.server.fetch_parts import COPY_BELOW_BYTES, answered_records
from broker.storage.file_slice import FileSlice, SegmentFile


def _segment(tmp_path, size: int) -> tuple[SegmentFile, bytes]:
    data = bytes(range(256)) * (size // 256 + 1)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data[:size])
    return SegmentFile(str(path)), data[:size]


def test_a_small_slice_is_answered_as_its_bytes(tmp_path):
    file, data = _segment(tmp_path, 3 * COPY_BELOW_BYTES)
    assert answered_records(FileSlice(file, 100, COPY_BELOW_BYTES - 1)) == data[100:100 + COPY_BELOW_BYTES - 1]


def test_a_large_slice_is_answered_as_the_slice(tmp_path):
    file, _ = _segment(tmp_path, 3 * COPY_BELOW_BYTES)
    large = FileSlice(file, 0, COPY_BELOW_BYTES)
    assert answered_records(large) is large


def test_a_slice_past_the_end_of_its_file_stays_a_slice(tmp_path):
    file, _ = _segment(tmp_path, 1000)
    cut = FileSlice(file, 900, 200)  # the log was truncated under it
    assert answered_records(cut) is cut
