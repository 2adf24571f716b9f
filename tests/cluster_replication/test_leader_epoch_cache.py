"""The leader-epoch cache and its checkpoint file (unit tests, no processes)."""

from __future__ import annotations

from broker.storage.leader_epoch import LEADER_EPOCH_FILE, LeaderEpochCache


def test_end_offsets_and_checkpoint(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.end_offset_for(0, 0) == (-1, -1)
    cache.assign(0, 0)
    cache.assign(2, 100)
    cache.assign(1, 50)  # older epoch: ignored
    assert cache.entries == [(0, 0), (2, 100)]
    assert cache.end_offset_for(0, 130) == (0, 100)
    assert cache.end_offset_for(1, 130) == (0, 100)  # largest epoch <= 1 is 0
    assert cache.end_offset_for(2, 130) == (2, 130)
    assert cache.end_offset_for(5, 130) == (2, 130)
    assert (tmp_path / LEADER_EPOCH_FILE).read_text() == "0\n2\n0 0\n2 100\n"
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 0), (2, 100)]


def test_truncation_drops_later_epochs(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, offset in ((0, 0), (1, 40), (3, 90)):
        cache.assign(epoch, offset)
    cache.truncate_from_end(60)
    assert cache.entries == [(0, 0), (1, 40)]
    # a log recovered shorter than the checkpoint says
    assert LeaderEpochCache(str(tmp_path), log_end_offset=40).entries == [(0, 0)]
    # a new epoch starting where an old one did replaces it
    cache.assign(4, 40)
    assert cache.entries == [(0, 0), (4, 40)]
    cache.clear()
    assert cache.latest_epoch == -1
