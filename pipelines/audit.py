"""Audit counts: how many records the cluster holds per (topic, partition, event hour), counted
at the cluster independently of the load, as LinkedIn's Kafka audit and Uber's Chaperone did.

A count covers one offset range, the one a load planned (so the loader's per hour ``read`` of
the same range must equal it), and is exactly reproducible: the same range gives the same
counts and the same file, ``<warehouse>/_audit/<topic>/<topic>+<partition>+<start>+<end>.json``.
The reader is the loader's (``PartitionReader``: leader changes, retention gaps); the hours are
``pipelines.event_time``'s, so for a topic partitioned by record timestamp no value is parsed.
An audit can run while the range loads (Airflow's ``audit`` task runs beside ``load``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pipelines.config import LoaderConfig, TopicSpec
from pipelines.decoders import Decoder
from pipelines.errors import LoadError
from pipelines.event_time import NO_HOUR, event_hours, hour_counts
from pipelines.fs import WarehouseFS
from pipelines.manifest import OffsetStore
from pipelines.task import PartitionReader, TaskContext
from pipelines.writer import file_name

AUDIT = "_audit"
THREADS = 4
NONE_KEY = "none"


@dataclass(frozen=True)
class AuditCount:
    """The records of [start, end) of one partition per event hour (``NO_HOUR``: no event time)."""

    topic: str
    partition: int
    start: int
    end: int
    hours: dict[int, int]
    records: int
    gaps: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "end": self.end,
                "records": self.records, "gaps": [list(g) for g in self.gaps],
                "hours": {NONE_KEY if h == NO_HOUR else str(h): n for h, n in sorted(self.hours.items())}}

    @classmethod
    def from_json(cls, doc: dict) -> AuditCount:
        return cls(doc["topic"], int(doc["partition"]), int(doc["start"]), int(doc["end"]),
                   {NO_HOUR if h == NONE_KEY else int(h): int(n) for h, n in doc["hours"].items()}, int(doc["records"]),
                   tuple((int(a), int(b)) for a, b in doc.get("gaps", ())))


def audit_range(ctx: TaskContext, spec: TopicSpec, topic: str, partition: int, start: int, end: int) -> AuditCount:
    """Count [start, end) of ``topic``-``partition`` at the cluster, per event hour."""
    decoder = Decoder(spec)
    reader = PartitionReader(ctx, topic, partition)
    hours: dict[int, int] = {}
    gaps: list = []
    try:
        for chunk in reader.read(start, end, gaps):
            for hour, n in hour_counts(event_hours(decoder, chunk)).items():
                hours[hour] = hours.get(hour, 0) + n
    finally:
        reader.close()
    return AuditCount(topic, partition, start, end, hours, sum(hours.values()), tuple((int(a), int(b)) for a, b in gaps))


class AuditStore:
    """The audit counts beside the warehouse: ``<warehouse>/_audit/<topic>/``."""

    def __init__(self, fs: WarehouseFS) -> None:
        self.fs = fs

    @staticmethod
    def path(topic: str, partition: int, start: int, end: int) -> str:
        return f"{AUDIT}/{topic}/{file_name(topic, partition, start, end).removesuffix('.parquet')}.json"

    def write(self, count: AuditCount) -> None:
        self.fs.write_bytes(self.path(count.topic, count.partition, count.start, count.end),
                            json.dumps(count.to_json(), indent=1, sort_keys=True).encode())

    def read(self, topic: str, partition: int, start: int, end: int) -> AuditCount | None:
        try:
            return AuditCount.from_json(json.loads(self.fs.read_bytes(self.path(topic, partition, start, end))))
        except (FileNotFoundError, ValueError, KeyError):
            return None

    def counts(self, topic: str) -> dict[tuple[int, int, int], AuditCount]:
        """{(partition, start, end): count} of every audited range of ``topic``."""
        out = {}
        for name in self.fs.list(f"{AUDIT}/{topic}"):
            if not name.endswith(".json"):
                continue
            try:
                count = AuditCount.from_json(json.loads(self.fs.read_bytes(f"{AUDIT}/{topic}/{name}")))
            except (FileNotFoundError, ValueError, KeyError):
                continue  # a partial write: audited again
            out[(count.partition, count.start, count.end)] = count
        return out


def _context(config: LoaderConfig) -> TaskContext:
    from pipelines.plan import Cluster

    cluster = Cluster(config)
    try:
        return TaskContext(brokers=cluster.brokers, warehouse=config.warehouse, webhdfs_user=config.webhdfs_user,
                           fetch_max_bytes=config.fetch_max_bytes, request_timeout_ms=config.request_timeout_ms,
                           out_of_range=config.out_of_range, prefetch_chunks=0, security=config.security)
    finally:
        cluster.close()


def _audit_ranges(config: LoaderConfig, wanted: list[tuple[str, dict, int, int, int]], say=None) -> list[AuditCount]:
    """Audit ``(topic, spec dict, partition, start, end)`` ranges concurrently and store each count."""
    if not wanted:
        return []
    ctx = _context(config)
    store = AuditStore(config.warehouse_fs())

    def one(item: tuple[str, dict, int, int, int]) -> AuditCount:
        topic, spec, partition, start, end = item
        count = audit_range(ctx, TopicSpec.from_dict(topic, spec), topic, partition, start, end)
        store.write(count)
        if say is not None:
            say(f"{topic}-{partition} [{start}, {end}): {count.records:,} records in {len(count.hours)} hour(s)")
        return count

    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="logbus-audit") as pool:
        return list(pool.map(one, wanted))


def _ranges(doc: dict) -> Iterable[tuple[int, int, int]]:
    for p in doc.get("partitions", []):
        if p.get("status") == "topic_deleted":
            continue
        for s, e in p.get("ranges", []):
            if int(e) > int(s):
                yield int(p["partition"]), int(s), int(e)


def _topics(config: LoaderConfig, store: OffsetStore, topics: Iterable[str] | None) -> list[str]:
    return sorted(t for t in (topics if topics is not None else store.topics()) if config.spec_for(t) is not None)


def audit_run(config: LoaderConfig, run_id: str, topics: Iterable[str] | None = None, say=None) -> list[AuditCount]:
    """Audit every planned range of run ``run_id`` that has no count yet (it may still be loading)."""
    fs = config.warehouse_fs()
    store, audits = OffsetStore(fs), AuditStore(fs)
    wanted = []
    found = False
    for topic in _topics(config, store, topics):
        doc = store.plan(topic, run_id) or store.manifest(topic, run_id)
        if doc is None or doc.get("spec") is None:
            continue
        found = True
        done = audits.counts(topic)
        wanted += [(topic, doc["spec"], p, s, e) for p, s, e in _ranges(doc) if (p, s, e) not in done]
    if not found:
        raise LoadError(f"no run {run_id!r} in {config.warehouse} (see `logbus load history`)")
    return _audit_ranges(config, wanted, say)


def audit_committed(config: LoaderConfig, topics: Iterable[str] | None = None, say=None) -> list[AuditCount]:
    """Audit every range of the committed loads that has no count yet."""
    fs = config.warehouse_fs()
    store, audits = OffsetStore(fs), AuditStore(fs)
    wanted = []
    for topic in _topics(config, store, topics):
        done = audits.counts(topic)
        for m in store.manifests(topic):
            if m.get("kind") == "load" and m.get("spec") is not None:
                wanted += [(topic, m["spec"], p, s, e) for p, s, e in _ranges(m) if (p, s, e) not in done]
    return _audit_ranges(config, wanted, say)


__all__ = ["AuditCount", "AuditStore", "audit_range", "audit_run", "audit_committed"]
