"""ReadResult.next_offset: the offset after the last whole batch of a read, found from the
index and batch headers (what the broker counts as records out), equals what decoding the
returned bytes finds, for any batch sizes, cut, high watermark and index interval."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.records.layout import HEADER_SIZE, read_header
from tests.storage.batches import build_batch
from tests.storage.helpers import open_log


def whole_batches_end(data: bytes, default: int) -> int:
    """The offset after the last whole batch in ``data`` by decoding every header."""
    pos, end = 0, default
    while pos + HEADER_SIZE <= len(data):
        header = read_header(data, pos)
        if pos + header.size > len(data):
            break
        end = header.last_offset + 1
        pos += header.size
    return end


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=25),
    value_size=st.integers(0, 200),
    interval=st.sampled_from([1, 100, 700, 4096]),
    segment_bytes=st.sampled_from([2000, 5000, 1 << 20]),
    data=st.data(),
)
def test_next_offset_matches_the_decoded_batches(tmp_path_factory, counts, value_size, interval, segment_bytes, data):
    log = open_log(tmp_path_factory.mktemp("t-0"), index_interval_bytes=interval, segment_bytes=segment_bytes)
    for n in counts:
        log.append(build_batch([b"v" * value_size] * n))
    leo = log.log_end_offset
    offset = data.draw(st.integers(0, leo))
    max_bytes = data.draw(st.integers(0, 5000))
    hw = data.draw(st.none() | st.integers(offset, leo))
    one_batch = data.draw(st.booleans())

    result = log.read(offset, max_bytes, max_offset=hw, min_one_batch=one_batch)

    if result.records is None:
        assert result.next_offset == -1 and result.records_after_fetch_offset == 0
        return
    expected = whole_batches_end(result.records.read_bytes(), result.first_offset)
    assert result.next_offset == expected
    assert result.records_after_fetch_offset == max(0, expected - offset)
    assert result.next_offset <= (leo if hw is None else hw) or result.next_offset == result.first_offset


def test_records_after_fetch_offset_in_a_plain_case(tmp_path):
    log = open_log(tmp_path / "t-0")
    for _ in range(4):
        log.append(build_batch([b"a", b"b", b"c"]))  # offsets 0-2, 3-5, 6-8, 9-11
    assert log.read(4, 1 << 20).records_after_fetch_offset == 8  # 4..11: the first batch starts at 3
    assert log.read(0, 1 << 20, max_offset=6).records_after_fetch_offset == 6
    one = len(build_batch([b"a", b"b", b"c"]))
    assert log.read(0, one * 2 + 5).records_after_fetch_offset == 6  # a cut third batch is not counted
