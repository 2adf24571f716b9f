"""Audit across the mirror's hop: a mirrored topic's warehouse rows counted against the source clusters.

Every record the mirror copies names its birth in a ``logbus.origin`` header (cluster id, topic,
partition, offset). For each source partition the warehouse holds rows of, the births written span
``[first, last]``; every record of the source partition in that span must be in the warehouse
exactly once (the mirror copies a partition in order; the loader writes each birth once). So the
source cluster's records of the span, counted per event hour with the loader's own event-time
function (``pipelines.audit.audit_range``), must equal the warehouse rows of those births per hour.
Where the source's retention has removed the span's beginning, the comparison starts at its log start.
Only rows are compared: a record the loader could not decode (``_errors/``) or kept out of its hour
as late (``separate``, ``drop``) shows as missing.

Results: ``<warehouse>/_audit/<topic>/_sources/<cluster id>+<source topic>+<partition>.json``;
``pipelines.completeness`` holds an hour incomplete while a source's count of it differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from broker.protocol.origin import birth
from pipelines.audit import AUDIT, audit_range
from pipelines.config import LoaderConfig
from pipelines.errors import LoadError
from pipelines.fs import WarehouseFS, read_parquet
from pipelines.manifest import OffsetStore
from pipelines.task import PartitionReader, TaskContext
from pipelines.writer import hour_of_path

SOURCES = "_sources"


@dataclass(frozen=True)
class SourceCount:
    """One source partition: the span of its births in the warehouse, counted on both sides per event hour."""

    cluster_id: str
    topic: str            # the source topic (the warehouse topic may carry a prefix)
    partition: int
    start: int            # the span compared: [start, end) of source offsets
    end: int
    source: dict[int, int]     # records per event hour at the source cluster
    warehouse: dict[int, int]  # warehouse rows of those births per event hour

    @property
    def missing(self) -> int:
        """Source records of the span with no row (negative: rows the source does not have)."""
        return sum(self.source.values()) - sum(self.warehouse.values())

    def mismatched_hours(self) -> list[int]:
        return sorted(h for h in set(self.source) | set(self.warehouse) if self.source.get(h, 0) != self.warehouse.get(h, 0))

    def to_json(self) -> dict:
        return {"cluster_id": self.cluster_id, "topic": self.topic, "partition": self.partition, "start": self.start,
                "end": self.end, "source": {str(h): n for h, n in sorted(self.source.items())},
                "warehouse": {str(h): n for h, n in sorted(self.warehouse.items())}}

    @classmethod
    def from_json(cls, doc: dict) -> SourceCount:
        return cls(doc["cluster_id"], doc["topic"], int(doc["partition"]), int(doc["start"]), int(doc["end"]),
                   {int(h): int(n) for h, n in doc["source"].items()}, {int(h): int(n) for h, n in doc["warehouse"].items()})


def warehouse_births(store: OffsetStore, topic: str) -> dict[tuple[str, str, int], dict[int, int]]:
    """{(cluster id, source topic, partition): {birth offset: event hour}} of the topic's live rows."""
    out: dict[tuple[str, str, int], dict[int, int]] = {}
    for path in store.live_files(topic):
        hour = hour_of_path(path)
        if hour is None:
            continue
        headers = read_parquet(store.fs, path, columns=["headers"]).column("headers").to_pylist()
        for row in headers:
            origin = birth([(h["key"], h["value"]) for h in row or ()])
            if origin is not None:
                out.setdefault((origin.cluster_id, origin.topic, origin.partition), {})[origin.offset] = hour
    return out


def source_ids(bootstraps: list[str], config: LoaderConfig) -> dict[str, str]:
    """{cluster id: bootstrap} of the source clusters named by one broker address each."""
    from broker.client.admin import AdminClient
    from broker.client.connection import BrokerConnectionError

    out = {}
    for address in bootstraps:
        try:
            with AdminClient(address, timeout=config.request_timeout_ms / 1000) as admin:
                cluster_id = admin.describe_cluster().cluster_id
        except (BrokerConnectionError, OSError) as exc:
            raise LoadError(f"source cluster {address}: cannot reach it ({exc})") from None
        if not cluster_id:
            raise LoadError(f"source cluster {address}: its brokers report no cluster id")
        out[cluster_id] = address
    return out


def audit_sources(config: LoaderConfig, topic: str, sources: dict[str, str], say=None) -> list[SourceCount]:
    """Count every source partition of ``topic``'s births held by a cluster of ``sources`` ({cluster id:
    bootstrap}); each count is stored beside the topic's audit counts."""
    spec = config.spec_for(topic)
    if spec is None:
        raise LoadError(f"topic {topic!r} is not in the loader config's topics")
    fs = config.warehouse_fs()
    store = OffsetStore(fs)
    births = warehouse_births(store, topic)
    out = []
    for (cluster_id, src_topic, partition), rows in sorted(births.items()):
        bootstrap = sources.get(cluster_id)
        if bootstrap is None:
            continue
        ctx = TaskContext(brokers=(bootstrap,), warehouse=config.warehouse, request_timeout_ms=config.request_timeout_ms,
                          fetch_max_bytes=config.fetch_max_bytes, prefetch_chunks=0)
        reader = PartitionReader(ctx, src_topic, partition)
        try:
            log_start, _ = reader.bounds()
        finally:
            reader.close()
        start, end = max(min(rows), log_start), max(rows) + 1
        counted = audit_range(replace(ctx, out_of_range="earliest"), replace(spec, name=src_topic), src_topic, partition,
                              start, end) if end > start else None
        warehouse: dict[int, int] = {}
        for offset, hour in rows.items():
            if offset >= start:
                warehouse[hour] = warehouse.get(hour, 0) + 1
        count = SourceCount(cluster_id, src_topic, partition, start, end, dict(counted.hours) if counted else {}, warehouse)
        fs.write_bytes(f"{AUDIT}/{topic}/{SOURCES}/{cluster_id}+{src_topic}+{partition}.json",
                       json.dumps(count.to_json(), indent=1, sort_keys=True).encode())
        if say is not None:
            say(f"{topic} <- {cluster_id} {src_topic}-{partition} [{start}, {end}): source {sum(count.source.values()):,}, "
                f"warehouse {sum(count.warehouse.values()):,}")
        out.append(count)
    return out


def stored_source_counts(fs: WarehouseFS, topic: str) -> list[SourceCount]:
    """The source counts stored for ``topic`` (none when it was never audited across the mirror)."""
    out = []
    for name in fs.list(f"{AUDIT}/{topic}/{SOURCES}"):
        try:
            out.append(SourceCount.from_json(json.loads(fs.read_bytes(f"{AUDIT}/{topic}/{SOURCES}/{name}"))))
        except (FileNotFoundError, ValueError, KeyError):
            continue
    return out


__all__ = ["SourceCount", "audit_sources", "source_ids", "stored_source_counts", "warehouse_births"]
