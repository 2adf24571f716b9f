"""Offsets next to the data: plans and manifests under ``<warehouse>/<topic>/_offsets/``.

    <topic>/_offsets/<run_id>.plan.json       the plan, written before any data moves
    <topic>/_offsets/<run_id>.loaded.json     the load's task results (split plan/load/commit, e.g. Airflow)
    <topic>/_offsets/<run_id>.manifest.json   the committed manifest, written last

A run is committed for a topic when its manifest exists and parses. A plan without one is a
pending run: it is finished (rebuilt from its committed files, reloading any range that is
not complete) before anything new is planned. With no manifests at all but data files
present (``_offsets`` lost), the offsets are rebuilt from the committed file names and the
counts in their footers.
"""

from __future__ import annotations

import datetime as _dt
import json
import posixpath
import time
from collections.abc import Iterable

import pyarrow.parquet as pq

from pipelines import hours as hour_tally
from pipelines.fs import LocalFS, WarehouseFS
from pipelines.origin_index import OriginIndex
from pipelines.task_stats import TaskStats
from pipelines.writer import HOUR_MS, commit_record_path, parse_file_name

OFFSETS = "_offsets"


def new_run_id(after: Iterable[str] = ()) -> str:
    now = _dt.datetime.now(_dt.UTC)
    run_id = now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z"
    latest = max(after, default="")
    while run_id <= latest:  # strictly increasing even if clocks step back
        time.sleep(0.002)
        now = _dt.datetime.now(_dt.UTC)
        run_id = now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z"
        if run_id <= latest:
            run_id = latest[:-1] + "1Z" if not latest.endswith("1Z") else latest[:-1] + "2Z"
    return run_id


def now_ms() -> int:
    return int(time.time() * 1000)


def split_range(start: int, end: int, max_records: int) -> list[tuple[int, int]]:
    """[start, end) in pieces of at most ``max_records`` offsets; an empty range stays one piece."""
    if end <= start:
        return [(start, start)]
    out = []
    s = start
    while s < end:
        e = min(s + max_records, end)
        out.append((s, e))
        s = e
    return out


class OffsetStore:
    def __init__(self, fs: WarehouseFS) -> None:
        self.fs = fs

    # --- paths ------------------------------------------------------------------------------------
    @staticmethod
    def _dir(topic: str) -> str:
        return f"{topic}/{OFFSETS}"

    def _path(self, topic: str, run_id: str, kind: str) -> str:
        return f"{self._dir(topic)}/{run_id}.{kind}.json"

    def _read(self, path: str) -> dict | None:
        try:
            data = self.fs.read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(data)
        except ValueError:
            return None  # a partial write: treated as missing
        return doc if isinstance(doc, dict) else None

    def _write(self, path: str, doc: dict) -> None:
        self.fs.write_bytes(path, json.dumps(doc, indent=1, sort_keys=True).encode())

    # --- listing ----------------------------------------------------------------------------------
    def topics(self) -> list[str]:
        """Topics with an offsets directory or data in the warehouse."""
        return [name for name in self.fs.list("") if not name.startswith(("_", ".")) and self.fs.is_dir(name)]

    def run_ids(self, topic: str, kind: str) -> list[str]:
        suffix = f".{kind}.json"
        return sorted(n[: -len(suffix)] for n in self.fs.list(self._dir(topic)) if n.endswith(suffix))

    def manifests(self, topic: str) -> list[dict]:
        out = []
        for run_id in self.run_ids(topic, "manifest"):
            doc = self._read(self._path(topic, run_id, "manifest"))
            if doc is not None:
                out.append(doc)
        return out

    def manifest(self, topic: str, run_id: str) -> dict | None:
        return self._read(self._path(topic, run_id, "manifest"))

    def plan(self, topic: str, run_id: str) -> dict | None:
        return self._read(self._path(topic, run_id, "plan"))

    def loaded(self, topic: str, run_id: str) -> list[TaskStats] | None:
        """The task stats ``write_loaded`` saved for a loaded but uncommitted run, or None."""
        doc = self._read(self._path(topic, run_id, "loaded"))
        return None if doc is None else [TaskStats.from_json(r) for r in doc["results"]]

    def pending(self, topic: str) -> list[str]:
        """Run ids planned but not committed (no manifest, or one that does not parse)."""
        committed = {m["run_id"] for m in self.manifests(topic)}
        return [r for r in self.run_ids(topic, "plan") if r not in committed]

    def all_run_ids(self, topic: str) -> list[str]:
        return sorted(set(self.run_ids(topic, "plan")) | set(self.run_ids(topic, "manifest")))

    # --- writing ----------------------------------------------------------------------------------
    def write_plan(self, doc: dict) -> None:
        self._write(self._path(doc["topic"], doc["run_id"], "plan"), doc)

    def write_loaded(self, topic: str, run_id: str, results: list[TaskStats]) -> None:
        self._write(self._path(topic, run_id, "loaded"),
                    {"run_id": run_id, "topic": topic, "results": [r.to_json() for r in results]})

    def write_manifest(self, doc: dict) -> None:
        self._write(self._path(doc["topic"], doc["run_id"], "manifest"), doc)
        try:
            self.fs.delete(self._path(doc["topic"], doc["run_id"], "loaded"))
        except Exception:
            pass

    # --- offsets ----------------------------------------------------------------------------------
    def committed_offsets(self, topic: str) -> dict[int, int]:
        """{partition: next offset to load} from the committed manifests (latest wins)."""
        offsets: dict[int, int] = {}
        for m in self.manifests(topic):
            for p in m.get("partitions", []):
                offsets[int(p["partition"])] = int(p["next"])
        return offsets

    def committed_origins(self, topic: str, before: str | None = None) -> dict[int, dict]:
        """{partition: origin index (``pipelines.origin_index``)} of the committed manifests (latest
        wins; of the runs before ``before`` when given). A reset starts its partitions afresh."""
        found: dict[int, dict] = {}
        for m in self.manifests(topic):
            if before is not None and m["run_id"] >= before:
                continue
            for p in m.get("partitions", []):
                if m.get("kind") == "reset":
                    found.pop(int(p["partition"]), None)
                elif p.get("origins") is not None:
                    found[int(p["partition"])] = p["origins"]
        return found

    def closed_below(self, topic: str, lateness_ms: int) -> dict[int, int]:
        """{partition: the first hour (epoch hour) not closed}: an hour closes once a committed load planned at
        least ``lateness_ms`` after its end has read the partition (every record appended before that plan was
        loaded; one appended later for an hour that old is late). Partitions never loaded are absent."""
        last: dict[int, int] = {}
        for m in self.manifests(topic):
            if m.get("kind") != "load" or not m.get("planned_ms"):
                continue
            for p in m.get("partitions", []):
                if p.get("status") in ("loaded", "empty"):
                    last[int(p["partition"])] = max(last.get(int(p["partition"]), 0), int(m["planned_ms"]))
        return {p: (ms - lateness_ms) // HOUR_MS for p, ms in last.items()}

    def live_files(self, topic: str) -> list[str]:
        """The data files readers should read: those the load manifests list, less the ones committed
        compactions replaced, plus the files those compactions wrote (``pipelines.compaction``)."""
        files: dict[str, None] = {}
        for m in self.manifests(topic):
            if m.get("kind") == "compact":
                for r in m["compaction"]["replaced"]:
                    files.pop(r["path"], None)
                files.update(dict.fromkeys(f["path"] for f in m["compaction"]["files"]))
            else:
                files.update(dict.fromkeys(f if isinstance(f, str) else f["path"]
                                           for p in m.get("partitions", []) for f in p.get("files", [])))
        return sorted(files)

    def compacted_files(self, topic: str) -> set[str]:
        """Files committed compactions wrote."""
        return {f["path"] for m in self.manifests(topic) if m.get("kind") == "compact" for f in m["compaction"]["files"]}

    def replaced_files(self, topic: str) -> dict[str, str]:
        """{path: sha256} of the files committed compactions replaced."""
        return {r["path"]: r["sha256"] for m in self.manifests(topic) if m.get("kind") == "compact"
                for r in m["compaction"]["replaced"]}

    def has_history(self, topic: str) -> bool:
        return bool(self.run_ids(topic, "manifest"))

    # --- rebuilding from committed files ----------------------------------------------------------
    def scan_files(self, topic: str) -> dict[tuple[int, int, int], dict]:
        """Committed ranges of ``topic`` found from file names and footers:
        {(partition, start, end): {files, rows, errors, bytes, min_ts, max_ts, gaps, complete}}."""
        found: dict[tuple[int, int, int], dict] = {}
        paths = [p for p in self.fs.walk_files(topic) if p.endswith(".parquet")]
        paths += [f"{topic}/_errors/{n}" for n in self.fs.list(f"{topic}/_errors") if n.endswith(".parquet")]
        for path in paths:
            parsed = parse_file_name(path)
            if parsed is None or parsed[0] != topic:
                continue
            _, partition, start, end = parsed
            entry = found.setdefault((partition, start, end), {
                "files": [], "rows": 0, "errors": 0, "bytes": 0, "min_ts": None, "max_ts": None, "gaps": [],
                "expected_files": None, "has_errors_file": False, "expects_errors": False})
            try:
                meta, size = self._footer(path)
            except Exception:
                entry["expected_files"] = -1  # unreadable: incomplete
                continue
            commit = json.loads(meta.metadata.get(b"logbus.commit", b"{}")) if meta.metadata else {}
            if not commit:  # written by Spark's Parquet writer: the summary is a file of its own
                commit = self._commit_record(topic, partition, start, end)
            entry["expected_files"] = commit.get("files", entry["expected_files"])
            entry["expects_errors"] = bool(commit.get("errors"))
            entry["gaps"] = commit.get("gaps", [])
            entry["duplicates_dropped"] = commit.get("duplicates_dropped", 0)
            entry["duplicate_offsets"] = commit.get("duplicate_offsets", [])
            entry["origins"] = commit.get("origins")
            entry["hours"] = commit.get("hours")
            entry["late_offsets"] = commit.get("late_offsets", [])
            if "/_errors/" in path:
                entry["has_errors_file"] = True
                entry["errors"] = meta.num_rows
                continue
            entry["files"].append({"path": path, "rows": meta.num_rows, "bytes": size})
            entry["rows"] += meta.num_rows
            entry["bytes"] += size
            lo, hi = _ts_stats(meta)
            if lo is not None:
                entry["min_ts"] = lo if entry["min_ts"] is None else min(entry["min_ts"], lo)
                entry["max_ts"] = hi if entry["max_ts"] is None else max(entry["max_ts"], hi)
        for entry in found.values():
            entry["complete"] = (entry["expected_files"] is not None and entry["expected_files"] >= 0
                                 and len(entry["files"]) == entry["expected_files"]
                                 and entry["has_errors_file"] == entry["expects_errors"])
        return found

    def _commit_record(self, topic: str, partition: int, start: int, end: int) -> dict:
        try:
            doc = json.loads(self.fs.read_bytes(commit_record_path(topic, partition, start, end)))
        except (FileNotFoundError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _footer(self, path: str):
        if isinstance(self.fs, LocalFS):
            local = self.fs.local(path)
            import os

            return pq.read_metadata(local), os.path.getsize(local)
        import io

        data = self.fs.read_bytes(path)
        return pq.read_metadata(io.BytesIO(data)), len(data)

    def rebuild_manifest(self, topic: str) -> dict | None:
        """A manifest rebuilt from committed file names when ``_offsets`` has none; None if no data."""
        found = {k: v for k, v in self.scan_files(topic).items() if v["complete"]}
        if not found:
            return None
        partitions: dict[int, dict] = {}
        for (partition, start, end), entry in sorted(found.items()):
            p = partitions.setdefault(partition, _partition_result(partition, start, end, "rebuilt"))
            p["start"] = min(p["start"], start)
            p["end"] = max(p["end"], end)
            p["next"] = p["end"]
            p["ranges"].append([start, end])
            _add_entry(p, entry)
        run_id = new_run_id(self.all_run_ids(topic))
        doc: dict = {
            "version": 1, "kind": "rebuilt", "run_id": run_id, "topic": topic, "status": "committed",
            "planned_ms": None, "committed_ms": now_ms(), "spec": None,
            "partitions": [partitions[p] for p in sorted(partitions)],
            "note": "rebuilt from committed file names: the _offsets directory held no manifest",
        }
        doc["totals"] = totals(doc["partitions"])
        self.write_manifest(doc)
        return doc


def _ts_stats(meta) -> tuple[int | None, int | None]:
    lo = hi = None
    try:
        idx = meta.schema.to_arrow_schema().get_field_index("timestamp")
    except Exception:
        return None, None
    if idx < 0:
        return None, None
    for rg in range(meta.num_row_groups):
        col = meta.row_group(rg).column(idx)
        st = col.statistics
        if st is None or not st.has_min_max:
            continue
        a, b = st.min, st.max
        a = int(a.timestamp() * 1000) if hasattr(a, "timestamp") else int(a)
        b = int(b.timestamp() * 1000) if hasattr(b, "timestamp") else int(b)
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    return lo, hi


def _partition_result(partition: int, start: int, end: int, reason: str) -> dict:
    return {"partition": partition, "start": start, "end": end, "next": end, "reason": reason, "ranges": [],
            "count": 0, "errors": 0, "bytes": 0, "min_ts": None, "max_ts": None, "files": [], "gaps": [],
            "seconds": 0.0, "status": "loaded", "duplicates_dropped": 0, "duplicate_offsets": [], "hours": {},
            "late_offsets": [], "late_files": []}


def _add_entry(p: dict, entry: dict) -> None:
    p["count"] += entry["rows"]
    p["errors"] += entry["errors"]
    p["bytes"] += entry["bytes"]
    p["files"] += [f["path"] for f in entry["files"]]
    p["gaps"] += [list(g) for g in entry.get("gaps", [])]
    p["duplicates_dropped"] = p.get("duplicates_dropped", 0) + entry.get("duplicates_dropped", 0)
    p["duplicate_offsets"] = _joined(p.get("duplicate_offsets", []) + [list(r) for r in entry.get("duplicate_offsets", [])])
    if entry.get("origins") is not None:  # the ranges' indexes, merged (each holds the partition's index before it)
        before = p.get("origins")
        after = OriginIndex.from_json(entry["origins"])
        p["origins"] = (after if before is None else OriginIndex.from_json(before).merge(after)).to_json()
    p["hours"] = hour_tally.sorted_counts(hour_tally.merge(p.get("hours") or {}, entry.get("hours")))
    p["late_offsets"] = _joined(p.get("late_offsets", []) + [list(r) for r in entry.get("late_offsets", [])])
    p["late_files"] = p.get("late_files", []) + [f["path"] for f in entry.get("late_files", [])]
    p["seconds"] = round(p.get("seconds", 0.0) + (entry.get("seconds") or 0.0), 3)
    for k, fn in (("min_ts", min), ("max_ts", max)):
        if entry.get(k) is not None:
            p[k] = entry[k] if p[k] is None else fn(p[k], entry[k])


def _joined(runs: list[list[int]]) -> list[list[int]]:
    """Offset runs ``[a, b)`` sorted, touching ones joined (the ranges of one partition meet)."""
    out: list[list[int]] = []
    for a, b in sorted(runs):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def totals(partitions: list[dict]) -> dict:
    return {
        "records": sum(p["count"] for p in partitions),
        "errors": sum(p["errors"] for p in partitions),
        "bytes": sum(p["bytes"] for p in partitions),
        "offsets": sum(p["end"] - p["start"] for p in partitions),
        "files": sum(len(p["files"]) for p in partitions),
        "duplicates_dropped": sum(p.get("duplicates_dropped", 0) for p in partitions),
        "late": sum(row.get("late", 0) for p in partitions for row in (p.get("hours") or {}).values()),
        "seconds": round(sum(p.get("seconds") or 0.0 for p in partitions), 3),  # task-seconds, summed
    }


def build_manifest(plan_doc: dict, results: list[TaskStats], kind: str = "load", extra: dict | None = None) -> dict:
    """The committed manifest of one topic's run: its plan plus each range's results."""
    by_range = {(r.partition, r.start, r.end): r for r in results}
    partitions = []
    for pp in plan_doc["partitions"]:
        p = _partition_result(pp["partition"], pp["start"], pp["end"], pp.get("reason", ""))
        p["ranges"] = [list(r) for r in pp["ranges"]]
        p["gaps"] = [list(pp["gap"])] if pp.get("gap") else []
        p["latest"] = pp.get("latest")
        p["earliest"] = pp.get("earliest")
        p["closed_below"] = pp.get("closed_below")
        if pp.get("origins") is not None:
            p["origins"] = pp["origins"]  # the index the run started from; each range's merges into it
        statuses = set()
        for s, e in pp["ranges"]:
            r = by_range.get((pp["partition"], s, e))
            if r is None:
                if e > s:
                    raise KeyError(f"no result for {plan_doc['topic']}-{pp['partition']} [{s}, {e})")
                continue
            statuses.add(r.status)
            _add_entry(p, {"rows": r.count, "errors": r.errors, "bytes": r.bytes, "files": r.files, "gaps": r.gaps,
                           "min_ts": r.min_ts, "max_ts": r.max_ts, "seconds": r.seconds,
                           "duplicates_dropped": r.duplicates_dropped, "duplicate_offsets": r.duplicate_offsets,
                           "origins": r.origins, "hours": r.hours, "late_offsets": r.late_offsets,
                           "late_files": r.late_files})
        if "topic_deleted" in statuses:
            p["status"] = "topic_deleted"
            p["next"] = p["start"]
        elif pp["end"] <= pp["start"]:
            p["status"] = "empty"
        partitions.append(p)
    doc = {
        "version": 1, "kind": kind, "run_id": plan_doc["run_id"], "topic": plan_doc["topic"], "status": "committed",
        "planned_ms": plan_doc.get("planned_ms"), "committed_ms": now_ms(), "spec": plan_doc.get("spec"),
        "max_range_records": plan_doc.get("max_range_records"), "partitions": partitions,
        # partitions without a leader at plan time: not in this run, loaded by a later one
        "unavailable_partitions": list(plan_doc.get("unavailable_partitions", [])),
    }
    doc["totals"] = totals(partitions)
    # plan to commit (with Airflow: load and validation too; a resumed run: the time it waited)
    doc["duration_ms"] = doc["committed_ms"] - doc["planned_ms"] if doc["planned_ms"] else None
    if extra:
        doc.update(extra)
    return doc


def result_from_scan(topic: str, partition: int, start: int, end: int, entry: dict) -> TaskStats:
    """A task result reconstructed from a complete committed range."""
    return TaskStats(index=-1, topic=topic, partition=partition, start=start, end=end, count=entry["rows"],
                     errors=entry["errors"], bytes=entry["bytes"], files=tuple(entry["files"]), min_ts=entry["min_ts"],
                     max_ts=entry["max_ts"], gaps=tuple(tuple(g) for g in entry.get("gaps", [])), rebuilt=True,
                     duplicates_dropped=entry.get("duplicates_dropped", 0),
                     duplicate_offsets=tuple(tuple(r) for r in entry.get("duplicate_offsets", [])),
                     origins=entry.get("origins"), hours=entry.get("hours"),
                     late_offsets=tuple((int(a), int(b)) for a, b in entry.get("late_offsets", [])))


__all__ = ["OffsetStore", "build_manifest", "split_range", "new_run_id", "totals", "posixpath"]
