"""Unit tests: the origin header, the loop check and the mirror's config validation."""

from __future__ import annotations

import pytest

from broker.config import ConfigError
from mirror.config import build_config
from mirror.origin import HEADER, Origin, came_from, origins, parse_origin, with_origin
from mirror.topics import choose_partition


def test_origin_round_trip_and_chain():
    o = Origin("AbC-_1", "events.x", 3, 12345)
    assert parse_origin(o.encode()) == o
    h = with_origin([("trace", b"1")], o)
    h = with_origin(h, Origin("B", "events.x", 0, 7))
    assert h[0] == ("trace", b"1")
    assert [x.cluster_id for x in origins(h)] == ["AbC-_1", "B"]
    assert came_from(h, "AbC-_1") and came_from(h, "B") and not came_from(h, "C")
    assert not came_from([], "B") and parse_origin(b"junk") is None and origins([(HEADER, b"x:y")]) == []


def test_partition_choice():
    assert choose_partition(2, 4, 4) == 2
    assert choose_partition(2, 4, 8) is None


def test_config_validation(tmp_path):
    src = tmp_path / "src.properties"
    src.write_text("zookeeper.connect=127.0.0.1:1/a\n")
    dst = tmp_path / "dst.properties"
    dst.write_text("bootstrap.servers=127.0.0.1:1\n")
    cfg = build_config([str(src)], str(dst), whitelist="a.*", topic_prefixes=["dc1."])
    assert cfg.sources[0].topic_prefix == "dc1." and cfg.sources[0].consumer_props["auto.commit.enable"] == "false"
    assert cfg.producer_props["acks"] == "all"
    with pytest.raises(ConfigError):
        build_config([str(src)], str(dst))  # no filter
    with pytest.raises(ConfigError):
        build_config([str(src)], str(dst), whitelist="(")
    with pytest.raises(ConfigError):
        build_config([str(src), str(src)], str(dst), whitelist=".*")
    dst.write_text("bootstrap.servers=127.0.0.1:1\nacks=1\n")
    with pytest.raises(ConfigError, match="acks=all"):
        build_config([str(src)], str(dst), whitelist=".*")
