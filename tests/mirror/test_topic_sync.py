"""Target topics kept in step with their sources while the mirror runs: a config override
changed, added or removed at the source, and partitions added at the source (copied into the
new target partitions, nothing lost)."""

from __future__ import annotations

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from mirror.origin import origins
from tests.mirror.conftest import by_origin, cluster_id, wait_until
from tests.mirror.test_mirror_maker import _uid

SYNC = ("--sync.topic.configs.interval.ms", "300", "--refresh.topics.interval.ms", "300")


def _configs(cluster, topic: str) -> dict[str, str]:
    with AdminClient(cluster.bootstrap) as admin:
        return admin.topic_configs(topic)


def _partitions(cluster, topic: str) -> int:
    with AdminClient(cluster.bootstrap) as admin:
        return len(admin.describe_topics([topic])[0].partitions)


def _put(cluster, topic: str, partition: int, n: int) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, b"k%d" % i, partition)
        p.flush()


def test_configs_and_partitions_follow_the_source(clusters, mirrors):
    src, agg = clusters("syncsrc"), clusters("syncagg")
    topic = f"events.{_uid()}"
    src.create_topic(topic, 2, configs={"retention.ms": "86400000", "cleanup.policy": "delete"})
    _put(src, topic, 0, 10)
    m = mirrors([src.consumer_props()], {"bootstrap.servers": agg.bootstrap}, "--whitelist", r"events\..*", *SYNC)
    wait_until(lambda: topic in agg.topics() and len(agg.read_all(topic)) == 10, 40, 0.3, what="the first copies")
    assert _configs(agg, topic)["retention.ms"] == "86400000"
    with AdminClient(src.bootstrap) as admin:
        admin.alter_topic_configs(topic, {"retention.ms": "3600000", "max.message.bytes": "2000000"},
                                  ["cleanup.policy"])
    wait_until(lambda: _configs(agg, topic).get("retention.ms") == "3600000", 20, 0.3, what="retention.ms followed")
    configs = _configs(agg, topic)
    assert configs.get("max.message.bytes") == "2000000" and "cleanup.policy" not in configs
    with AdminClient(src.bootstrap) as admin:
        admin.create_partitions(topic, 4)
    wait_until(lambda: src.partitions_ready(topic, 4), 20, what="source partitions")
    wait_until(lambda: _partitions(agg, topic) == 4, 20, 0.3, what="the target grown to 4 partitions")
    for p in (1, 2, 3):
        _put(src, topic, p, 5)
    wait_until(lambda: len(agg.read_all(topic)) == 25, 40, 0.3, what="records of the new partitions copied")
    recs = agg.read_all(topic)
    assert {o[2] for o in by_origin(recs, cluster_id(src))} == {0, 1, 2, 3}
    assert [(m.partition, origins(m.headers)[-1].partition) for m in recs if m.partition != origins(m.headers)[-1].partition] == []  # partitions kept again
    assert m.stop() == 0, m.output()[-3000:]
    out = m.output()
    assert "follows its source's configs" in out and "grown from 2 to 4 partitions" in out
