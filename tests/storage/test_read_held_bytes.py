"""A read whose bytes lie inside the window its header walk already read carries them
(FileSlice.held): the slice's bytes then come without a second pread, and equal the file's."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.storage import file_slice
from broker.storage.segment import HEADER_CHUNK
from tests.storage.batches import build_batch
from tests.storage.helpers import open_log


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=25),
    value_size=st.integers(0, 2500),
    interval=st.sampled_from([1, 700, 4096]),
    segment_bytes=st.sampled_from([20000, 1 << 20]),
    data=st.data(),
)
def test_held_bytes_equal_the_files(tmp_path_factory, counts, value_size, interval, segment_bytes, data):
    log = open_log(tmp_path_factory.mktemp("t-0"), index_interval_bytes=interval, segment_bytes=segment_bytes)
    for n in counts:
        log.append(build_batch([b"v" * value_size] * n))
    offset = data.draw(st.integers(0, log.log_end_offset - 1))
    result = log.read(offset, data.draw(st.integers(0, 40000)), min_one_batch=data.draw(st.booleans()))
    records = result.records
    if records is None:
        return
    assert records.read_bytes() == os.pread(records.fileno(), records.size, records.position)
    if records.held is not None:
        assert records.size <= HEADER_CHUNK


def test_a_small_read_needs_no_second_pread_and_a_large_one_reads_the_file(tmp_path, monkeypatch):
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([b"a" * 100] * 3))
    preads: list[int] = []
    real_pread = os.pread

    def counted(fd: int, size: int, position: int) -> bytes:
        preads.append(size)
        return real_pread(fd, size, position)

    monkeypatch.setattr(file_slice.os, "pread", counted)
    small = log.read(0, 1000).records
    assert small is not None and small.held is not None and len(preads) == 1
    assert small.read_bytes() == real_pread(small.fileno(), small.size, small.position) and len(preads) == 1

    log.append(build_batch([b"b" * 40000]))
    large = log.read(3, 1 << 20).records
    assert large is not None and large.held is None and large.size > HEADER_CHUNK
    before = len(preads)
    assert len(large.read_bytes()) == large.size and len(preads) == before + 1
