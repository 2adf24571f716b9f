"""A partition leader dies mid-load on a replicated cluster found through ZooKeeper: the tasks
follow the new leader (or Spark retries them) and the output is exactly the produced records."""

from __future__ import annotations

from broker.client.admin import AdminClient
from broker.client.simple_consumer import SimpleConsumer
from broker.cluster.net import free_port
from pipelines.config import parse_config
from pipelines.faults import LoadFaults
from pipelines.loader import Loader
from tests.pipelines.helpers import json_topic, load_until_served, loader_config, new_topic, produce, read_rows
from tests.starting import start_together

BASE_MS = 1_767_225_600_000


def test_leader_killed_mid_task_on_a_replicated_cluster(broker_factory, zk_chroot, spark, tmp_path):
    brokers = start_together([broker_factory(overrides={"replica.lag.time.max.ms": "3000", "metrics.port": free_port()},
                                             start=False) for _ in range(3)])
    topic = new_topic("leader")
    with AdminClient(brokers[0].bootstrap) as admin:
        admin.create_topic(topic, 2, 3, {"min.insync.replicas": "2"})
    records = [(topic, p, None, b'{"member_id":%d,"page":"/p%d","ts":%d}' % (i, p, BASE_MS + i * 60_000),
                BASE_MS + i * 60_000) for p in range(2) for i in range(300)]
    produce(brokers[0].bootstrap, records, headers=False, **{"acks": "all", "batch.num.messages": 10})
    expected = {(topic, p, i) for p in range(2) for i in range(300)}

    warehouse = tmp_path / "wh"
    raw = loader_config("", warehouse, [json_topic(topic)], fetch={"max.bytes": 1024})
    raw["cluster"] = {"zookeeper.connect": zk_chroot}  # brokers found through ZooKeeper, not a bootstrap list
    cfg = parse_config(raw)

    def run() -> list:
        with Loader(cfg, spark=spark, faults=LoadFaults(fetch_delay_ms=100)) as loader:
            return loader.run()

    host, _, port = brokers[0].bootstrap.rpartition(":")
    with SimpleConsumer(host, int(port)) as probe:
        _, _, leader_port = probe.find_leader(topic, 0)
    [leader] = [b for b in brokers if b.bootstrap.endswith(f":{leader_port}")]
    thread, outcome = load_until_served(run, leader, topic)
    leader.kill()
    thread.join(timeout=150)
    assert not thread.is_alive(), "the load did not finish after the leader died"
    assert "error" not in outcome, outcome.get("error")
    [result] = outcome["result"]
    assert result.records == 600
    assert any(r.leader_changes or r.attempt for r in result.results), "the leader died under a task"
    rows = read_rows(warehouse, topic)
    keys = [(r["topic"], r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)) and set(keys) == expected
