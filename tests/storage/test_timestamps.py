"""offset_for_timestamp through the time index."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.records import encode_batch
from tests.storage.batches import build_batch
from tests.storage.helpers import FakeClock, open_log


def test_lookup_by_timestamp(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=500, index_interval_bytes=100)
    for i in range(20):
        log.append(build_batch([b"a", b"b", b"c"], timestamps=[1000 + 10 * i, 1003 + 10 * i, 1006 + 10 * i]))
    assert len(log.segment_base_offsets()) > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1003)  # exact record inside an uncompressed batch
    assert log.offset_for_timestamp(1007) == (3, 1010)
    assert log.offset_for_timestamp(1196) == (59, 1196)
    assert log.offset_for_timestamp(1197) is None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (60, -1)
    assert log.offset_for_timestamp(1100, max_offset=30) is None  # at or past the high watermark
    log.close()
    again = open_log(tmp_path / "t-0", segment_bytes=500, index_interval_bytes=100)
    assert again.offset_for_timestamp(1101) == (31, 1103)


def test_compressed_batches_answer_their_base_offset(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([b"a"], base_timestamp=100))
    log.append(bytearray(encode_batch([(None, b"b", None, 200), (None, b"c", None, 300)], compression=1)))  # gzip
    assert log.offset_for_timestamp(250) == (1, 300)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.lists(st.integers(0, 10_000), min_size=1, max_size=4), min_size=1, max_size=25),
    target=st.integers(-1, 10_100).filter(lambda t: t != -1),
    interval=st.sampled_from([0, 150, 4096]),
)
def test_first_record_at_or_after(tmp_path_factory, batches, target, interval) -> None:
    log = open_log(tmp_path_factory.mktemp("ts") / "t-0", FakeClock(), segment_bytes=600, index_interval_bytes=interval)
    records = []
    for stamps in batches:
        first = log.append(build_batch([b"v"] * len(stamps), timestamps=stamps)).first_offset
        records += [(first + i, ts) for i, ts in enumerate(stamps)]
    expected = next(((o, ts) for o, ts in records if ts >= target), None)
    assert log.offset_for_timestamp(target) == expected
