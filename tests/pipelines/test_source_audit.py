"""Audit across the mirror's hop on a real broker and Spark: a source topic and its mirrored copy
(births in ``logbus.origin`` headers, one copy missing, some duplicated) are loaded and counted:
`logbus audit --source-cluster` finds the missing record in its hour, and the hour is incomplete
until the copy arrives; then every source record of the span is in the warehouse once."""

from __future__ import annotations

import yaml

from broker.cli import main as cli
from broker.client.admin import AdminClient
from broker.protocol.origin import HEADER, Origin
from pipelines.audit import audit_committed
from pipelines.completeness import COMPLETE, INCOMPLETE, Completeness, hour_name
from pipelines.config import parse_config
from pipelines.loader import Loader
from pipelines.writer import HOUR_MS
from tests.pipelines.helpers import create_topics, loader_config, new_topic, produce

H = 1_768_000_000_000 // HOUR_MS


def test_mirrored_rows_against_the_source_cluster(broker, spark, tmp_path, capsys):
    source, aggregate = new_topic("src"), new_topic("agg")
    create_topics(broker.bootstrap, [source, aggregate], 2)
    with AdminClient(broker.bootstrap) as admin:
        cluster_id = admin.describe_cluster().cluster_id
    originals = [(source, p, None, b"v%d-%d" % (p, i), H * HOUR_MS + i * 60_000) for p in (0, 1) for i in range(90)]
    produce(broker.bootstrap, originals, headers=False)  # 90 records per partition over hours H, H+1

    def copy(p: int, i: int) -> tuple:
        return (aggregate, p, None, b"v%d-%d" % (p, i), H * HOUR_MS + i * 60_000)

    def with_origin(records: list[tuple]) -> list[tuple]:
        return [r + (Origin(cluster_id, source, r[1], int(r[3].split(b"-")[1])).encode(),) for r in records]

    # the mirror's copies: partition 1's record 70 (hour H+1) not copied yet, records 10-19 of partition 0 twice
    copies = [copy(p, i) for p in (0, 1) for i in range(90) if (p, i) != (1, 70)] + [copy(0, i) for i in range(10, 20)]
    _produce_copies(broker.bootstrap, with_origin(copies))
    warehouse = tmp_path / "wh"
    raw = loader_config(broker.bootstrap, warehouse, [{"name": aggregate, "format": "utf8"}])
    config = tmp_path / "loader.yaml"
    config.write_text(yaml.safe_dump(raw))
    cfg = parse_config(raw)
    with Loader(cfg, spark=spark) as loader:
        [run] = loader.run()
    assert run.records == 179 and run.duplicates_dropped == 10
    audit_committed(cfg)

    assert cli(["audit", "--config", str(config), "--source-cluster", broker.bootstrap]) == 1
    out, err = capsys.readouterr()
    assert f"{cluster_id} {source}-0 [0, 90): source 90, warehouse 90  ok" in out
    assert f"{cluster_id} {source}-1 [0, 90): source 90, warehouse 89  MISMATCH in hour(s) {hour_name(H + 1)}" in out
    assert err.strip().endswith("1 source partition(s) differ from the warehouse (1 source records without a row)")
    statuses = {s.hour: s for s in Completeness(cfg.warehouse_fs(), aggregate, cfg.spec_for(aggregate)).statuses()}
    assert statuses[H].status == COMPLETE
    assert statuses[H + 1].status == INCOMPLETE and f"source {cluster_id} {source}-1: 30 record(s) of the hour, " \
        "29 in the warehouse" in statuses[H + 1].why

    _produce_copies(broker.bootstrap, with_origin([copy(1, 70)]))  # the copy arrives (late: its hour had closed)
    with Loader(cfg, spark=spark) as loader:
        loader.run()
    audit_committed(cfg)
    assert cli(["audit", "--config", str(config), "--source-cluster", broker.bootstrap]) == 0
    assert "every source record of the spans is in the warehouse once" in capsys.readouterr().out
    statuses = {s.hour: s.status for s in Completeness(cfg.warehouse_fs(), aggregate, cfg.spec_for(aggregate)).statuses()}
    assert statuses == {H: COMPLETE, H + 1: COMPLETE}


def _produce_copies(bootstrap: str, records: list[tuple]) -> None:
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True})
    for topic, partition, key, value, ts, origin in records:
        p.produce(topic, value=value, key=key, partition=partition, timestamp=ts, headers=[(HEADER, origin)],
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and errors == []
