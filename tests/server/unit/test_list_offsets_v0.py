"""ListOffsets v0 (Kafka 0.8's OffsetRequest): up to max_num_offsets offsets, newest first."""

from __future__ import annotations

from types import SimpleNamespace

from broker.server.handlers.list_offsets import EARLIEST, LATEST, _offsets_before
from tests.storage.batches import build_batch
from tests.storage.helpers import open_log


def test_offsets_before_latest_earliest_and_a_time(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    for i in range(12):
        log.append(build_batch([b"x" * 40, b"y" * 40], timestamps=[1000 * i, 1000 * i + 1]))
    bases = log.segment_base_offsets()
    assert len(bases) > 3
    leader = SimpleNamespace(log=log)
    latest = _offsets_before(leader, {"timestamp": LATEST, "max_num_offsets": 100})["old_style_offsets"]
    assert latest == [24, *reversed(bases)]
    assert _offsets_before(leader, {"timestamp": LATEST, "max_num_offsets": 1})["old_style_offsets"] == [24]
    assert _offsets_before(leader, {"timestamp": EARLIEST, "max_num_offsets": 5})["old_style_offsets"] == [0]
    before = _offsets_before(leader, {"timestamp": 6000, "max_num_offsets": 100})["old_style_offsets"]
    assert before == sorted((b for b in bases if b <= 12), reverse=True)
