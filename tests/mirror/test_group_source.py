"""Sources given only ``bootstrap.servers`` (the standard group protocol, mirror.group_source):
config translation and the subscription pattern; against real clusters, a SIGKILL mid-stream
(nothing lost, per-key order kept, duplicates only within the uncommitted window), and a
ZooKeeper source next to a bootstrap source with a topic picked up live and partitions moving
between two mirror processes (commit on revoke: no duplicates from those rebalances)."""

from __future__ import annotations

import json
import re
import time

import pytest

from broker.client.group_consumer import GroupConsumer
from broker.client.producer import Producer
from broker.client.rebalance import Blacklist, Whitelist
from broker.cluster.net import free_port
from broker.config import ConfigError
from mirror.config import build_config
from mirror.group_props import group_consumer_props
from mirror.group_source import topic_pattern
from mirror.origin import origins
from tests.mirror.conftest import KeyedLoad, by_origin, cluster_id, wait_until
from tests.mirror.test_mirror_maker import _check_complete, _check_order_and_values, _uid
from tests.mirror.test_mirror_metrics import _scrape, sample

COMMIT_MS = "1000"
#: Quick group settings for tests: a killed mirror's members leave after 6 s, new topics seen in 1 s.
FAST_GROUP = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000", "metadata.max.age.ms": "1000"}


def _group_props(cluster, **extra: str) -> dict:
    """A source config with only bootstrap.servers (the source's ZooKeeper is not given)."""
    return {"bootstrap.servers": cluster.bootstrap, "group.id": "mirror", "mirror.source.name": cluster.name,
            **FAST_GROUP, **extra}


def _source_cluster(clusters, name: str):
    return clusters(name, group_initial_rebalance_delay_ms="200")


def _committed(cluster, topic: str, partitions: int, group: str = "mirror") -> dict[int, int]:
    c = GroupConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        return {tp.partition: off or 0 for tp, off in c.committed([(topic, p) for p in range(partitions)]).items()}
    finally:
        c.close()


def _put(cluster, topic: str, start: int, n: int, tag: str) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        for i in range(start, start + n):
            p.send(topic, f"{tag}-{i}".encode(), b"k%d" % (i % 7))
        p.flush()


# ---------------------------------------------------------------------------- no clusters


def test_config_accepts_bootstrap_sources_and_translates_zookeeper_keys(tmp_path):
    dst = tmp_path / "dst.properties"
    dst.write_text("bootstrap.servers=127.0.0.1:1\n")
    a, b, c = (tmp_path / f"{n}.properties" for n in "abc")
    a.write_text("bootstrap.servers=127.0.0.1:9092\nenable.auto.commit=true\nfetch.message.max.bytes=2048\n")
    b.write_text("bootstrap.servers=127.0.0.1:9093\nauto.offset.reset=largest\nmax.partition.fetch.bytes=4096\n"
                 "fetch.message.max.bytes=2048\n")
    c.write_text("zookeeper.connect=127.0.0.1:2181/c\n")
    cfg = build_config([str(a), str(b), str(c)], str(dst), whitelist=".*")
    pa, pb = (group_consumer_props(s.consumer_props) for s in cfg.sources[:2])
    assert pa["enable.auto.commit"] == "false" and pa["auto.offset.reset"] == "earliest"  # mirror default smallest
    assert pa["max.partition.fetch.bytes"] == "2048" and pb["max.partition.fetch.bytes"] == "4096"  # native wins
    assert pb["auto.offset.reset"] == "latest"
    assert not any(k.startswith(("zookeeper.", "rebalance.", "queued.")) or k == "consumer.timeout.ms" for k in pa)
    a.write_text("bootstrap.servers=127.0.0.1:9092\nfetch.bogus.ms=5\n")
    with pytest.raises(ConfigError, match="fetch.bogus.ms"):
        build_config([str(a)], str(dst), whitelist=".*")
    a.write_text("bootstrap.servers=127.0.0.1:9092,127.0.0.1:9094\n")
    b.write_text("bootstrap.servers=127.0.0.1:9094\n")
    with pytest.raises(ConfigError, match="same source cluster"):
        build_config([str(a), str(b)], str(dst), whitelist=".*")


def test_subscription_pattern_of_whitelist_and_blacklist():
    white, black = topic_pattern(Whitelist(r"events\..*,logs")), topic_pattern(Blacklist(r".*\.secret"))
    assert isinstance(white, re.Pattern)
    assert [t for t in ("events.a", "logs", "logs2", "xevents.a") if white.fullmatch(t)] == ["events.a", "logs"]
    assert [t for t in ("a.secret", "a.secret2", "b", "secret") if black.fullmatch(t)] == ["a.secret2", "b", "secret"]


# ---------------------------------------------------------------------------- real clusters


def test_bootstrap_source_sigkill_mid_stream(clusters, mirrors, capsys):
    src, agg = _source_cluster(clusters, "gsrc"), clusters("agg")
    topic = f"events.{_uid()}"
    src.create_topic(topic, 3, configs={"retention.ms": "86400000"})
    ids = {src.name: cluster_id(src)}
    load = KeyedLoad(src, topic, rate=1500)
    load.start()
    args = ("--whitelist", r"events\..*", "--num.streams", "2", "--offset.commit.interval.ms", COMMIT_MS,
            "--stats.interval.ms", "500")
    sources, target = [_group_props(src)], {"bootstrap.servers": agg.bootstrap}
    m1 = mirrors(sources, target, *args)
    wait_until(lambda: topic in agg.topics() and len(agg.read_all(topic)) > 2000, 60, 0.5, what="mirroring to start")
    time.sleep(1.5)
    m1.kill()  # SIGKILL: no final flush or commit, the members stay in the group until their session ends
    before = agg.read_all(topic)
    committed = _committed(src, topic, 3)
    window = sum(1 for o in by_origin(before) if o[3] >= committed[o[2]])
    port = free_port()
    m2 = mirrors(sources, target, *args, "--metrics.port", str(port), "--metrics.host", "127.0.0.1")

    def lag_known():
        try:
            status = json.loads(m2.status_file.read_text())
        except (OSError, ValueError):
            return None
        row = status.get("sources", {}).get(src.name, {}).get(topic)
        return row if status.get("pid") == m2.proc.pid and row and row.get("lag") is not None else None

    row = wait_until(lag_known, 40, 0.5, what="lag of the group source in the status file")
    scraped = wait_until(lambda: (got := _scrape(port)) and sample(got, "logbus_mirror_lag_records", source=src.name,
                                                                  topic=topic) is not None and got,
                         20, 0.5, what="the group source's lag on the metrics endpoint")
    assert sample(scraped, "logbus_mirror_source_info", source=src.name, cluster_id=ids[src.name]) == 1
    load.stop()
    assert not load.errors
    recs, grouped = _check_complete(agg, topic, [load], ids)
    assert m2.stop() == 0, m2.output()[-3000:]
    dups = _check_order_and_values(recs, grouped, [load], ids)
    assert all(origins(m.headers)[0].partition == m.partition for m in recs)  # partitions kept (equal counts)
    before_pos = {(m.partition, m.offset) for m in before}
    restart_dups = 0
    for origin, copies in grouped.items():
        if len(copies) > 1:
            assert origin[3] >= committed[origin[2]], f"{origin} copied twice below the committed offset"
            restart_dups += any((c.partition, c.offset) in before_pos for c in copies)
    with capsys.disabled():
        print(f"\n[group source SIGKILL] {len(load.acked)} source records, {len(before)} copied before the kill, "
              f"uncommitted window {window}, duplicates {dups} ({restart_dups} across the restart); lag row {row}")
    assert dups == restart_dups == 0  # exact resume: the window is not copied again
    assert window <= 3 * 1500 * int(COMMIT_MS) / 1000  # at most ~3 commit intervals of the 1,500 rec/s load
    assert _committed(src, topic, 3) == {p: max(o for (pp, o) in load.acked if pp == p) + 1 for p in range(3)}


def test_zookeeper_and_bootstrap_sources_together(clusters, mirrors, capsys):
    dc1, dc2, agg = clusters("zkdc"), _source_cluster(clusters, "bsdc"), clusters("agg")
    u = _uid()
    topic, late = f"mix.{u}", f"mix.{u}.late"
    dc1.create_topic(topic, 2)
    dc2.create_topic(topic, 3)
    _put(dc1, topic, 0, 300, "zk")
    _put(dc2, topic, 0, 300, "bs")
    ids = {c.name: cluster_id(c) for c in (dc1, dc2)}
    args = ("--whitelist", r"mix\..*", "--num.streams", "2", "--offset.commit.interval.ms", "500")
    target = {"bootstrap.servers": agg.bootstrap}
    m1 = mirrors([dc1.consumer_props(), _group_props(dc2)], target, *args, prefixes=["zk.", "bs."])
    wait_until(lambda: {f"zk.{topic}", f"bs.{topic}"} <= set(agg.topics()) and len(agg.read_all(f"zk.{topic}")) == 300
               and len(agg.read_all(f"bs.{topic}")) == 300, 60, 0.5, what="both sources copied")
    dc2.create_topic(late, 2, configs={"retention.ms": "3600000"})  # created while the mirror runs
    _put(dc2, late, 0, 100, "late")
    wait_until(lambda: f"bs.{late}" in agg.topics() and len(agg.read_all(f"bs.{late}")) == 100, 60, 0.5,
               what="a new topic of the bootstrap source picked up without restart")
    from broker.client.admin import AdminClient

    with AdminClient(agg.bootstrap) as admin:  # made like its source: partitions and the config override
        assert len(admin.describe_topics([f"bs.{late}"])[0].partitions) == 2
        assert admin.topic_configs(f"bs.{late}").get("retention.ms") == "3600000"
    # a second mirror process joins the bootstrap source's group, then the first one stops: the
    # partitions move twice while records keep coming; commit on revoke leaves no duplicates
    m2 = mirrors([_group_props(dc2)], target, *args, prefixes=["bs."])
    for i in range(6):
        _put(dc2, topic, 300 + 50 * i, 50, "bs")
        time.sleep(0.5)
    assert m1.stop() == 0, m1.output()[-3000:]
    _put(dc2, topic, 600, 100, "bs")
    wait_until(lambda: len(agg.read_all(f"bs.{topic}")) >= 700, 60, 0.5, what="copies after the moves")
    time.sleep(1.0)
    assert m2.stop() == 0, m2.output()[-3000:]
    recs = agg.read_all(f"bs.{topic}")
    grouped = by_origin(recs)
    assert set(grouped) == {(ids["bsdc"], topic, p, o) for p in range(3) for o in range(_end(dc2, topic, p))}
    assert len(recs) == 700, f"{len(recs) - 700} duplicates from the rebalances"
    assert {m.value for m in recs} == {f"bs-{i}".encode() for i in range(700)}
    assert len(agg.read_all(f"zk.{topic}")) >= 300
    assert all(origins(m.headers)[0].cluster_id == ids["zkdc"] for m in agg.read_all(f"zk.{topic}"))
    out = m1.output()
    assert "group protocol" in out and "rebalance: committed" in m2.output() + out
    with capsys.disabled():
        print(f"\n[mixed sources] bootstrap source: 700 records, {len(recs)} copies after two moves")


def _end(cluster, topic: str, partition: int) -> int:
    return sum(1 for m in cluster.read_all(topic) if m.partition == partition)
