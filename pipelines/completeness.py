"""Is hour H of topic T complete, and can we prove it? Per event hour of a topic:

- **closed**: every partition was read by a committed load planned at least ``allowed_lateness``
  after the hour's end (``OffsetStore.closed_below``). Records are ordered by offset, not time, so
  the bound is the plan's: everything appended before that plan was loaded; a record of the hour
  appended after it is *late* by definition, and handled by the topic's ``late_data`` policy.
- **audited**: every committed range has its audit count (``logbus audit``, taken from the
  cluster), and per partition the audit's count of the hour equals what the loads read of it.
- **accounted**: every record read of the hour is a row, an error, a dropped duplicate or a late
  record the policy moved (``pipelines.hours.unaccounted`` is 0).

An hour that is all three is complete. ``declare`` records it under
``<topic>/_completeness/<hour>.json`` after a Great Expectations check of the hour's rows against
the audit (``pipelines.validation.hour_check``), and the Airflow DAG emits an Asset event for each
hour declared. Late rows arriving after a declaration change the hour's counts: it is *reopened*
until declared again.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from pipelines import hours as hour_tally
from pipelines.audit import AuditStore
from pipelines.config import LoaderConfig, TopicSpec
from pipelines.errors import LoadError
from pipelines.event_time import NO_HOUR
from pipelines.fs import WarehouseFS
from pipelines.manifest import OffsetStore, now_ms
from pipelines.source_audit import stored_source_counts
from pipelines.writer import HOUR_MS, hour_dir

COMPLETENESS = "_completeness"
COMPLETE, INCOMPLETE, REOPENED = "complete", "incomplete", "reopened"
ASSET_SCHEME = "logbus"


def hour_name(hour: int) -> str:
    """``2026-01-13T05``: an epoch hour as the CLI and the declarations name it."""
    return f"{_dt.datetime.fromtimestamp(hour * 3600, _dt.UTC):%Y-%m-%dT%H}"


def parse_hour(text: str) -> int:
    """An epoch hour from ``2026-01-13T05`` (or any ISO-8601 time inside the hour)."""
    try:
        when = _dt.datetime.fromisoformat(text if len(text) != 13 else text + ":00")
    except ValueError:
        raise LoadError(f"{text!r} is not an hour (e.g. 2026-01-13T05)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return int(when.timestamp() * 1000) // HOUR_MS


def asset_uri(warehouse: str, topic: str, hour: int) -> str:
    """The Airflow Asset of a complete topic-hour: ``logbus://<warehouse path>/<topic>/dt=.../hour=..``."""
    base = warehouse.split("://", 1)[-1].strip("/")
    return f"{ASSET_SCHEME}://{base}/{hour_dir(topic, hour)}"


@dataclass
class HourStatus:
    """One event hour of a topic: its state, why, and its counts (summed over partitions)."""

    topic: str
    hour: int
    status: str
    why: list[str] = field(default_factory=list)
    read: int = 0          # records the loads read of the hour
    audited: int | None = None  # what the audit counted at the cluster (None: some range not audited)
    rows: int = 0          # rows in the hour's directory
    late: int = 0
    errors: int = 0
    duplicates: int = 0
    declared: int = 0      # times declared complete
    eligible: bool = False  # closed, audited and accounted for
    undeclared: bool = False  # eligible, but these counts are not declared yet (the next `declare` will)
    partitions: dict[int, int] = field(default_factory=dict)  # rows per partition

    @property
    def name(self) -> str:
        return hour_name(self.hour)

    def counts(self) -> dict:
        return {"read": self.read, "rows": self.rows, "late": self.late, "errors": self.errors,
                "duplicates": self.duplicates}

    def to_dict(self) -> dict:
        return asdict(self) | {"name": self.name}


class Completeness:
    """The completeness of a topic's hours, from its manifests, its audit counts and its declarations."""

    def __init__(self, fs: WarehouseFS, topic: str, spec: TopicSpec) -> None:
        self.fs, self.topic, self.spec = fs, topic, spec
        self.store = OffsetStore(fs)
        self.audits = AuditStore(fs)
        self._sources: list = []  # counts across the mirror, read by statuses()

    # --- declarations -------------------------------------------------------------------------------
    def _declaration_path(self, hour: int) -> str:
        return f"{self.topic}/{COMPLETENESS}/{hour_name(hour)}.json"

    def declarations(self, hour: int) -> list[dict]:
        try:
            doc = json.loads(self.fs.read_bytes(self._declaration_path(hour)))
        except (FileNotFoundError, ValueError):
            return []
        return list(doc.get("declarations", [])) if isinstance(doc, dict) else []

    def declare(self, status: HourStatus, validation: dict | None = None) -> dict:
        """Record ``status`` (a complete hour) as declared; returns the declaration."""
        entry = {"declared_ms": now_ms(), **status.counts(), "partitions": {str(p): n for p, n in status.partitions.items()},
                 "validation": validation}
        history = self.declarations(status.hour) + [entry]
        self.fs.write_bytes(self._declaration_path(status.hour), json.dumps(
            {"topic": self.topic, "hour": status.name, "declarations": history}, indent=1, sort_keys=True).encode())
        return entry

    # --- status -------------------------------------------------------------------------------------
    def statuses(self, since: int | None = None) -> list[HourStatus]:
        """Every event hour the loads or the audit saw (from ``since`` on), oldest first."""
        manifests = [m for m in self.store.manifests(self.topic) if m.get("kind") in ("load", "rebuilt")]
        closed = self.store.closed_below(self.topic, self.spec.late_data.allowed_lateness_ms)
        partitions = sorted({int(p["partition"]) for m in manifests for p in m.get("partitions", [])}
                            | {int(p) for m in manifests[-1:] for p in m.get("unavailable_partitions", [])})
        loaded: dict[int, hour_tally.HourCounts] = {}
        ranges: list[tuple[int, int, int]] = []
        for m in manifests:
            for p in m.get("partitions", []):
                if p.get("status") == "topic_deleted":
                    continue
                hour_tally.merge(loaded.setdefault(int(p["partition"]), {}), p.get("hours"))
                ranges += [(int(p["partition"]), int(s), int(e)) for s, e in p.get("ranges", []) if int(e) > int(s)]
        audit_counts = self.audits.counts(self.topic)
        unaudited = [r for r in ranges if r not in audit_counts]
        audited: dict[int, dict[int, int]] = {}
        for (partition, start, end), count in audit_counts.items():
            if (partition, start, end) in ranges:
                per = audited.setdefault(partition, {})
                for hour, n in count.hours.items():
                    per[int(hour)] = per.get(int(hour), 0) + int(n)
        self._sources = stored_source_counts(self.fs, self.topic)
        hours = sorted({int(h) for t in loaded.values() for h in t if h != hour_tally.NONE}
                       | {h for a in audited.values() for h in a if h != NO_HOUR})
        out = []
        for hour in hours:
            if since is not None and hour < since:
                continue
            out.append(self._status(hour, partitions, closed, loaded, audited, unaudited))
        return out

    def _status(self, hour: int, partitions: list[int], closed: dict[int, int], loaded: dict[int, hour_tally.HourCounts],
                audited: dict[int, dict[int, int]], unaudited: list) -> HourStatus:
        st = HourStatus(self.topic, hour, INCOMPLETE)
        policy = self.spec.late_data.policy
        open_parts = [p for p in partitions if closed.get(p, -1) <= hour]
        if open_parts:
            lateness = self.spec.late_data.allowed_lateness_ms
            st.why.append(f"open in partition(s) {_list(open_parts)}: no load planned after "
                          f"{hour_name(hour + 1)}:00" + (f" + {_duration(lateness)}" if lateness else "") + " yet")
        audit_total = 0
        for p in partitions:
            row = loaded.get(p, {}).get(str(hour), dict.fromkeys(hour_tally.COLUMNS, 0))
            for column in ("read", "rows", "late", "errors", "duplicates"):
                setattr(st, column, getattr(st, column) + row[column])
            if row["rows"]:
                st.partitions[p] = row["rows"]
            gap = hour_tally.unaccounted(row, policy)
            if gap:
                st.why.append(f"partition {p}: {gap} record(s) read but not accounted for")
            counted = audited.get(p, {}).get(hour, 0)
            audit_total += counted
            if not unaudited and counted != row["read"]:
                st.why.append(f"partition {p}: the audit counted {counted}, the loads read {row['read']}")
        for c in self._sources:  # across the mirror's hop (`logbus audit --source-cluster`)
            there, here = c.source.get(hour, 0), c.warehouse.get(hour, 0)
            if there != here:
                st.why.append(f"source {c.cluster_id} {c.topic}-{c.partition}: {there} record(s) of the hour, "
                              f"{here} in the warehouse")
        if unaudited:
            st.why.append(f"{len(unaudited)} loaded range(s) not audited yet (`logbus audit`)")
        else:
            st.audited = audit_total
        history = self.declarations(hour)
        st.declared = len(history)
        st.eligible = not st.why
        last = history[-1] if history else None
        st.undeclared = st.eligible and (last is None or any(last.get(k) != v for k, v in st.counts().items()))
        if last is not None and (not st.eligible or st.undeclared):
            st.status = REOPENED  # declared once; its counts changed since (late data)
            if st.late > int(last.get("late", 0)):
                st.why.append(f"{st.late - int(last.get('late', 0))} late record(s) since it was declared complete")
        elif st.eligible:
            st.status = COMPLETE
        return st

    def pending(self, since: int | None = None) -> list[HourStatus]:
        """Hours complete by their counts whose current counts are not declared yet."""
        return [st for st in self.statuses(since) if st.undeclared]

    def hour_files(self, hour: int) -> list[str]:
        """The data files of the hour's directory the committed manifests list."""
        prefix = hour_dir(self.topic, hour) + "/"
        live = getattr(self.store, "live_files", None)
        if live is not None:
            return [f for f in live(self.topic) if f.startswith(prefix)]
        return sorted({f for m in self.store.manifests(self.topic) for p in m.get("partitions", [])
                       for f in p.get("files", []) if f.startswith(prefix)})


def declare_complete(config: LoaderConfig, topics: Iterable[str] | None = None, since: int | None = None) -> list[dict]:
    """Validate and declare every hour that became complete (or complete again) since its last
    declaration; returns ``[{topic, hour, name, uri, rows, late, reopened}]`` for the Asset events.
    A failed validation raises ``ValidationFailed`` (the hour stays undeclared)."""
    from pipelines.validation.hour_check import validate_hour

    fs = config.warehouse_fs()
    store = OffsetStore(fs)
    declared = []
    for topic in sorted(topics if topics is not None else store.topics()):
        spec = config.spec_for(topic)
        if spec is None:
            continue
        comp = Completeness(fs, topic, spec)
        for st in comp.pending(since):
            result = validate_hour(fs, comp, st)
            comp.declare(st, result)
            declared.append({"topic": topic, "hour": st.hour, "name": st.name, "rows": st.rows, "late": st.late,
                             "reopened": st.declared > 0, "uri": asset_uri(config.warehouse, topic, st.hour)})
    return declared


def _list(items: list[int]) -> str:
    return ", ".join(str(i) for i in items[:8]) + (f" and {len(items) - 8} more" if len(items) > 8 else "")


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


__all__ = ["Completeness", "HourStatus", "declare_complete", "asset_uri", "hour_name", "parse_hour",
           "COMPLETE", "INCOMPLETE", "REOPENED"]
