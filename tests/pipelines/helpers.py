"""Helpers of the loader tests: topics, JSON event producers, configs, a warehouse reader."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from confluent_kafka import Producer

from broker.client.admin import AdminClient
from broker.cluster.local import BrokerProcess
from tests.scraping import scrape
from tests.waiting import wait_until

EVENT_SCHEMA = [
    {"name": "member_id", "type": "long", "required": True},
    {"name": "page", "type": "string", "required": True},
    {"name": "ts", "type": "timestamp", "required": True},
    {"name": "score", "type": "double"},
    {"name": "tags", "type": "json"},
]


def new_topic(prefix: str = "ev") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, topics: list[str], partitions: int = 4, configs: dict | None = None) -> None:
    with AdminClient(bootstrap) as admin:
        for t in topics:
            admin.create_topic(t, partitions, 1, configs)


def event(topic: str, partition: int, i: int, base_ms: int = 1_768_000_000_000) -> dict:
    return {"member_id": partition * 1_000_000 + i, "page": f"/{topic}/p{partition}/{i}",
            "ts": base_ms + i * 1000, "score": i / 7, "tags": {"i": i, "odd": i % 2 == 1}}


def produce(bootstrap: str, records: list[tuple[str, int, bytes | None, bytes | None, int | None]],
            headers: bool = True, **config) -> None:
    """records: (topic, partition, key, value, timestamp_ms)."""
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True, **config})
    for topic, partition, key, value, ts in records:
        kw = {"timestamp": ts} if ts is not None else {}
        if headers:
            kw["headers"] = [("source", b"test"), ("n", str(len(value or b"")).encode())]
        p.produce(topic, value=value, key=key, partition=partition,
                  on_delivery=lambda err, msg: err and errors.append(err), **kw)
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == []


def produce_events(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> dict:
    """Known JSON events; returns {(topic, partition, i): event} (i counts from ``start``)."""
    produced = {}
    records = []
    for p in range(partitions):
        for i in range(start, start + per_partition):
            e = event(topic, p, i)
            produced[(topic, p, i)] = e
            records.append((topic, p, str(e["member_id"]).encode(), json.dumps(e).encode(), e["ts"]))
    produce(bootstrap, records)
    return produced


def loader_config(bootstrap: str, warehouse: Path, topics: list, **extra) -> dict:
    raw = {
        "cluster": {"bootstrap.servers": bootstrap},
        "warehouse": f"file://{warehouse}",
        "topics": topics,
        "spark": {"master": "local[2,4]"},
        "parquet": {"row_group_size": 1000},
    }
    raw.update(extra)
    return raw


def json_topic(name: str, **kw) -> dict:
    return {"name": name, "format": "json", "schema": EVENT_SCHEMA, **kw}


def read_rows(warehouse: Path, topic: str) -> list[dict]:
    """Every committed row of ``topic`` (pyarrow dataset: skips _offsets, _errors, _staging)."""
    path = warehouse / topic
    if not path.exists():
        return []
    files = sorted(str(p) for p in path.rglob("*.parquet") if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts))
    if not files:
        return []
    return ds.dataset(files, format="parquet").to_table().to_pylist()


def data_files(warehouse: Path, topic: str) -> list[Path]:
    path = warehouse / topic
    return sorted(p for p in path.rglob("*.parquet") if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts))


def load_until_served(run: Callable[[], Any], broker: BrokerProcess, topic: str) -> tuple[threading.Thread, dict]:
    """``run`` (a load) started in a thread, returned once ``broker`` (its metrics.port on) has
    served it records of ``topic``: its tasks are fetching, so a kill now lands under one (a fixed
    sleep lost that race on a busy machine). The dict gets ``result`` or ``error`` when it ends."""
    outcome: dict = {}

    def load() -> None:
        try:
            outcome["result"] = run()
        except BaseException as exc:  # reported by the caller's assertions
            outcome["error"] = exc

    thread = threading.Thread(target=load)
    thread.start()
    served = f'logbus_topic_records_out_total{{topic="{topic}"}}'
    wait_until(lambda: outcome or scrape(int(broker.props["metrics.port"])).get(served, 0) > 0, 60, 0.05,
               f"the first records of {topic} served to the load by {broker.bootstrap}")
    assert thread.is_alive(), f"the load should still be fetching: {outcome}"
    return thread, outcome
