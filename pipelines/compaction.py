"""Small-file compaction: a closed hour's files merged into files of about a target size.

Each load writes one file per range per hour, however small. ``compact_hour`` merges, per
partition, consecutive files of an hour into files of about ``target_size`` bytes, rows in
(partition, offset) order, each named after the offsets it spans
(``<topic>+<partition>+<first start>+<last end>.parquet``), written as the loader writes
(fixed row groups, one chunk per column: the same rows give the same bytes).

The manifests say which files are live (``OffsetStore.live_files``): a compaction commits as a
manifest of kind ``compact`` naming the files it replaced (with their sha256) and the ones it
wrote. The order makes a kill at any moment safe:

1. an intent, ``<topic>/_offsets/<id>.compacting.json``, lists the outputs to be;
2. the outputs are written to ``_staging/`` and renamed into the hour directory (not live yet);
3. the manifest is written: the commit point, from here on the outputs are live;
4. the replaced files are deleted, then the intent.

``recover`` (run first by every compaction) rolls a committed compaction forward (deletes what
it replaced) and an uncommitted one back (deletes its outputs). Readers that list directories
instead of reading through the manifests can see both sets between 2 and 4. Outputs are never
merged again, so a second compaction of the same hour changes nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.config import LoaderConfig
from pipelines.errors import LoadError
from pipelines.fs import WarehouseFS, read_parquet
from pipelines.manifest import OFFSETS, OffsetStore, new_run_id, now_ms
from pipelines.writer import file_name, hour_dir, hour_of_path, parse_file_name, range_metadata

COMPACT = "compact"
THREADS = 2  # merges computed at once (each holds its output in memory until it is written)
INTENT = "compacting"


@dataclass
class Merge:
    """Files of one partition in one hour merged into one output."""

    partition: int
    inputs: list[dict]          # {"path", "start", "end", "bytes"} in offset order
    output: str = ""

    @property
    def start(self) -> int:
        return int(self.inputs[0]["start"])

    @property
    def end(self) -> int:
        return int(self.inputs[-1]["end"])


@dataclass
class HourCompaction:
    """What compacting one hour did (or, with ``dry_run``, would do)."""

    topic: str
    hour: int
    files_before: int = 0
    files_after: int = 0
    rows: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0
    merges: list[Merge] = field(default_factory=list)


def _sha256(fs: WarehouseFS, path: str) -> str:
    return hashlib.sha256(fs.read_bytes(path)).hexdigest()


def plan_merges(store: OffsetStore, topic: str, hour: int, target_size: int) -> tuple[list[Merge], list[str]]:
    """(merges, the hour's live files): per partition, consecutive files that are not outputs of an earlier
    compaction, grouped greedily up to ``target_size`` bytes; a group of one file is left alone."""
    prefix = hour_dir(topic, hour) + "/"
    live = [f for f in store.live_files(topic) if f.startswith(prefix)]
    compacted = store.compacted_files(topic)
    by_partition: dict[int, list[dict]] = {}
    for path in live:
        parsed = parse_file_name(path)
        if parsed is None or path in compacted:
            continue
        by_partition.setdefault(parsed[1], []).append(
            {"path": path, "start": parsed[2], "end": parsed[3], "bytes": store.fs.size(path)})
    merges = []
    for partition in sorted(by_partition):
        group: list[dict] = []
        for item in sorted(by_partition[partition], key=lambda f: f["start"]):
            if group and sum(f["bytes"] for f in group) + item["bytes"] > target_size:
                if len(group) > 1:
                    merges.append(Merge(partition, group))
                group = []
            group.append(item)
        if len(group) > 1:
            merges.append(Merge(partition, group))
    for m in merges:
        m.output = f"{prefix}{file_name(topic, m.partition, m.start, m.end)}"
    return merges, live


def _merged_bytes(fs: WarehouseFS, merge: Merge, topic: str, compression: str | None, row_group_size: int) -> tuple[bytes, int]:
    tables = [read_parquet(fs, f["path"]) for f in merge.inputs]
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables], promote_options="permissive")
    table = table.combine_chunks()
    meta = {b"logbus.range": range_metadata(topic, merge.partition, merge.start, merge.end),
            b"logbus.compacted": json.dumps([[f["start"], f["end"]] for f in merge.inputs]).encode()}
    table = table.replace_schema_metadata(meta)
    out = io.BytesIO()
    pq.write_table(table, out, compression=compression, row_group_size=row_group_size, use_dictionary=True,
                   write_statistics=True)
    return out.getvalue(), table.num_rows


def compact_hour(store: OffsetStore, topic: str, hour: int, target_size: int, compression: str = "snappy",
                 row_group_size: int = 128 * 1024, dry_run: bool = False,
                 step: Callable[[str], None] = lambda name: None) -> HourCompaction:
    """Compact one closed hour of ``topic`` (see the module's docstring for the commit order)."""
    t0 = time.monotonic()
    fs = store.fs
    recover(store, topic)
    merges, live = plan_merges(store, topic, hour, target_size)
    result = HourCompaction(topic, hour, files_before=len(live), files_after=len(live), merges=merges)
    result.bytes_before = result.bytes_after = sum(fs.size(f) for f in live)
    if not merges or dry_run:
        result.files_after = len(live) - sum(len(m.inputs) - 1 for m in merges)
        return result
    taken = {f for f in live} - {f["path"] for m in merges for f in m.inputs}
    clash = [m.output for m in merges if m.output in taken]
    if clash:
        raise LoadError(f"{topic} {hour_dir(topic, hour)}: the merged file would replace live file(s) {', '.join(clash)}")
    run_id = new_run_id(store.all_run_ids(topic))
    intent = f"{topic}/{OFFSETS}/{run_id}.{INTENT}.json"
    fs.write_bytes(intent, json.dumps({"run_id": run_id, "outputs": [m.output for m in merges]}).encode())
    codec = None if compression == "none" else compression
    replaced: list[dict] = []
    written: list[dict] = []
    merge = lambda m: _merged_bytes(fs, m, topic, codec, row_group_size)  # noqa: E731
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="logbus-compact") as pool:
        for w in range(0, len(merges), THREADS):  # THREADS merges at a time: pyarrow reads and writes without the GIL
            window = merges[w:w + THREADS]
            for i, (m, (data, rows)) in enumerate(zip(window, pool.map(merge, window)), start=w):
                stage = f"{topic}/_staging/{run_id}.{i}.parquet"
                fs.write_bytes(stage, data)
                fs.rename(stage, m.output)
                written.append({"path": m.output, "partition": m.partition, "start": m.start, "end": m.end,
                                "rows": rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
                replaced += [{"path": f["path"], "bytes": f["bytes"], "sha256": _sha256(fs, f["path"])} for f in m.inputs]
                result.rows += rows
                step("after_rename")
    doc = {"version": 1, "kind": COMPACT, "run_id": run_id, "topic": topic, "status": "committed",
           "planned_ms": None, "committed_ms": now_ms(), "spec": None, "partitions": [],
           "compaction": {"hour": hour_dir(topic, hour), "replaced": replaced, "files": written},
           "totals": {"records": 0, "files": len(written), "bytes": sum(w["bytes"] for w in written)}}
    store.write_manifest(doc)
    step("after_manifest")
    for i, r in enumerate(replaced):
        fs.delete(r["path"])
        if i == 0:
            step("after_first_delete")
    fs.delete(intent)
    result.files_after = len(live) - len(replaced) + len(written)
    result.bytes_after = result.bytes_before - sum(r["bytes"] for r in replaced) + sum(w["bytes"] for w in written)
    result.seconds = round(time.monotonic() - t0, 3)
    return result


def recover(store: OffsetStore, topic: str) -> list[str]:
    """Finish or undo compactions a kill interrupted; returns what was done, one line each."""
    fs = store.fs
    done = []
    directory = f"{topic}/{OFFSETS}"
    suffix = f".{INTENT}.json"
    for name in sorted(fs.list(directory)):
        if not name.endswith(suffix):
            continue
        run_id = name[: -len(suffix)]
        manifest = store.manifest(topic, run_id)
        if manifest is not None:  # committed: roll forward
            for r in manifest["compaction"]["replaced"]:
                if fs.exists(r["path"]):
                    fs.delete(r["path"])
            done.append(f"compaction {run_id}: committed, replaced files removed")
        else:  # not committed: roll back
            try:
                outputs = json.loads(fs.read_bytes(posixpath.join(directory, name)))["outputs"]
            except (ValueError, KeyError):
                outputs = []
            for path in outputs:
                if fs.exists(path):
                    fs.delete(path)
            done.append(f"compaction {run_id}: not committed, its outputs removed")
        fs.delete(posixpath.join(directory, name))
    return done


def closed_hours(store: OffsetStore, topic: str, lateness_ms: int) -> int | None:
    """The first hour (epoch hour) not closed in every partition of ``topic``; None before any load."""
    closed = store.closed_below(topic, lateness_ms)
    return min(closed.values()) if closed else None


def hours_with_files(store: OffsetStore, topic: str) -> list[int]:
    """Epoch hours whose directory holds live files."""
    return sorted({h for h in map(hour_of_path, store.live_files(topic)) if h is not None})


def compact_topic(config: LoaderConfig, topic: str, hour: int | None = None, older_than_ms: int | None = None,
                  target_size: int | None = None, dry_run: bool = False,
                  step: Callable[[str], None] = lambda name: None) -> list[HourCompaction]:
    """Compact ``hour`` of ``topic`` (refused unless closed), or every closed hour that ended at least
    ``older_than_ms`` ago."""
    spec = config.spec_for(topic)
    if spec is None:
        raise LoadError(f"topic {topic!r} is not in the loader config's topics")
    store = OffsetStore(config.warehouse_fs())
    first_open = closed_hours(store, topic, spec.late_data.allowed_lateness_ms)
    if first_open is None:
        raise LoadError(f"{topic}: nothing loaded in {config.warehouse}")
    if hour is not None:
        if hour >= first_open:
            raise LoadError(f"{topic}: hour {hour_dir(topic, hour)} is not closed yet (loads may still add to it; "
                            f"hours before {hour_dir(topic, first_open)} are)")
        hours = [hour]
    else:
        newest = (now_ms() - (older_than_ms or 0)) // 3_600_000 - 1  # the hour must have ended older_than ago
        hours = [h for h in hours_with_files(store, topic) if h < first_open and h <= newest]
    size = target_size or config.compaction_target_bytes
    return [compact_hour(store, topic, h, size, config.parquet_compression, config.row_group_size, dry_run, step)
            for h in hours]


def reconcile_rerun(store: OffsetStore, topic: str, files: list[str]) -> int:
    """After a rerun: each rewritten file a committed compaction replaced is removed if it is byte-identical
    to the replaced one (its rows live in the compacted file); returns how many. A different file raises."""
    replaced = store.replaced_files(topic)
    removed = 0
    for path in files:
        if path not in replaced:
            continue
        if _sha256(store.fs, path) != replaced[path]:
            raise LoadError(f"{path}: the rerun wrote different bytes than the file compaction replaced "
                            f"(sha256 {replaced[path][:12]}...); the file is kept for inspection")
        store.fs.delete(path)
        removed += 1
    return removed


__all__ = ["compact_topic", "compact_hour", "plan_merges", "recover", "reconcile_rerun", "closed_hours", "hours_with_files",
           "HourCompaction", "Merge"]
