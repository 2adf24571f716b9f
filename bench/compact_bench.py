#!/usr/bin/env python3
"""Compaction benchmark: an hour of 1,000 small files merged, next to the write-only rate.

    .venv/bin/python bench/compact_bench.py [--files 1000] [--rows-per-file 1000] [--partitions 4] [--json out.json]

1. write-only: the rows of --files ranges (bench/loader_bench.py's ~200-byte JSON events, one hour,
   --partitions partitions) built in memory as the reader yields them (not timed), then decoded
   and written exactly as a load task writes them (``Decoder`` + ``RangeWriter``), one range after
   the other in this process: rows/s, the rate of ``loader_bench``'s write-only half on one core;
   each range's files are recorded in a load manifest, as a load commits them;
2. write-only, large ranges: the same rows decoded and written as one range per partition, two
   writers at a time: loader_bench's write-only half on this machine's two cores;
3. compaction: ``pipelines.compaction.compact_hour`` of that hour (``--target-size``, default
   256MB): read, merge and write every file, commit, remove the small ones; rows/s and MB/s;
4. checks: the same rows, exactly once, through the manifests' live files.

Results to stdout and --json; the warehouse is a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.loader_bench import BASE_MS, SCHEMA, event_value  # noqa: E402
from bench.reporting import progress  # noqa: E402


def _messages(topic: str, part: int, start: int, end: int, partitions: int, step_ms: int) -> list:
    from broker.client.simple_consumer import MessageAndMetadata

    out = []
    for off in range(start, end):
        i = off * partitions + part
        value = event_value(part, i).replace(b'"ts":%d' % (BASE_MS + i * 10), b'"ts":%d' % (BASE_MS + i * step_ms))
        out.append(MessageAndMetadata(topic, part, off, None, value, [], BASE_MS + i * step_ms))
    return out


def write_large(spec, root: Path, partitions: int, rows: int, step_ms: int) -> tuple[float, int]:
    """Seconds to decode and write ``rows`` rows per partition as one range each, two at a time (chunks of
    5,000 records built first, not timed)."""
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.decoders import Decoder
    from pipelines.fs import LocalFS
    from pipelines.record_columns import RecordChunk
    from pipelines.writer import RangeWriter

    topic = spec.name
    chunks = {p: [RecordChunk.from_messages(topic, p, _messages(topic, p, s, min(s + 5000, rows), partitions, step_ms))
                  for s in range(0, rows, 5000)] for p in range(partitions)}
    fs = LocalFS(f"file://{root}")

    def one(p: int) -> int:
        decoder = Decoder(spec)
        writer = RangeWriter(fs, topic, p, 0, rows, decoder.schema, "snappy", 128 * 1024)
        n = 0
        for c in chunks[p]:
            batch, times, _ = decoder.decode(c)
            writer.add(batch, times)
            n += batch.num_rows
        writer.commit()
        return n

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        n = sum(pool.map(one, range(partitions)))
    return time.monotonic() - t0, n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="compaction benchmark")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rows-per-file", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--target-size", default="256MB")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    import pyarrow.parquet as pq

    from pipelines.compaction import compact_hour
    from pipelines.config import TopicSpec, parse_config, parse_size_bytes
    from pipelines.decoders import Decoder
    from pipelines.fs import LocalFS
    from pipelines.manifest import OffsetStore, build_manifest, new_run_id, now_ms
    from pipelines.record_columns import RecordChunk
    from pipelines.task_stats import TaskStats
    from pipelines.writer import HOUR_MS, RangeWriter

    topic = "compact-bench"
    hour = BASE_MS // HOUR_MS
    step_ms = HOUR_MS // (args.files * args.rows_per_file)
    cfg = parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:9"}, "warehouse": "file:///tmp/x",
                        "topics": [{"name": topic, "format": "json", "schema": SCHEMA, "time_field": "ts"}]})
    spec: TopicSpec = cfg.spec_for(topic)
    root = Path(tempfile.mkdtemp(prefix="logbus-compact-bench-"))
    fs = LocalFS(f"file://{root}")
    store = OffsetStore(fs)
    results: dict = {"files": args.files, "rows_per_file": args.rows_per_file, "partitions": args.partitions}
    try:
        progress(f"write-only: {args.files} ranges of {args.rows_per_file} rows, one hour, {args.partitions} partitions")
        decoder = Decoder(spec)
        write_s = 0.0
        rows = 0
        per_partition = args.files // args.partitions
        for f in range(args.files):
            part, k = f % args.partitions, f // args.partitions
            start = k * args.rows_per_file
            end = start + args.rows_per_file
            chunk = RecordChunk.from_messages(topic, part, _messages(topic, part, start, end, args.partitions, step_ms))
            w0 = time.monotonic()
            writer = RangeWriter(fs, topic, part, start, end, decoder.schema, "snappy", 128 * 1024)
            batch, times, _ = decoder.decode(chunk)
            writer.add(batch, times)
            files = writer.commit()
            write_s += time.monotonic() - w0
            rows += batch.num_rows
            run_id = new_run_id(store.all_run_ids(topic))
            plan = {"run_id": run_id, "topic": topic, "planned_ms": now_ms(), "spec": spec.to_dict(),
                    "partitions": [{"partition": part, "start": start, "end": end, "ranges": [[start, end]]}]}
            stats = TaskStats(index=0, topic=topic, partition=part, start=start, end=end, count=batch.num_rows,
                              files=tuple(files), bytes=sum(x["bytes"] for x in files))
            store.write_manifest(build_manifest(plan, [stats]))
        assert per_partition * args.partitions == args.files
        small = store.live_files(topic)
        in_bytes = sum(fs.size(p) for p in small)
        results["write_only"] = {"seconds": round(write_s, 2), "rows_per_s": round(rows / write_s),
                                 "files": len(small), "bytes": in_bytes}
        progress(f"write-only: {rows:,} rows in {write_s:.1f} s = {rows / write_s:,.0f} rows/s, {len(small)} files")
        progress("write-only, large ranges: the same rows as one range per partition, two writers at a time "
                 "(loader_bench's write-only half, on this machine's two cores)")
        big_s, big_rows = write_large(spec, root / "large", args.partitions, per_partition * args.rows_per_file,
                                      step_ms)
        results["write_only_large"] = {"seconds": round(big_s, 2), "rows_per_s": round(big_rows / big_s)}
        progress(f"write-only, large ranges: {big_rows:,} rows in {big_s:.1f} s = {big_rows / big_s:,.0f} rows/s")
        before = sorted(r for p in small for r in zip(*pq.read_table(root / p, columns=["partition", "offset"])
                                                       .to_pydict().values()))

        progress("compaction of the hour")
        t0 = time.monotonic()
        done = compact_hour(store, topic, hour, parse_size_bytes(args.target_size, "--target-size"))
        secs = time.monotonic() - t0
        live = store.live_files(topic)
        after = [r for p in live for r in zip(*pq.read_table(root / p, columns=["partition", "offset"]).to_pydict().values())]
        assert after == before, "compaction changed the rows"
        results["compaction"] = {"seconds": round(secs, 2), "rows": done.rows, "rows_per_s": round(done.rows / secs),
                                 "mb_per_s_read": round(in_bytes / secs / 1e6, 1), "files_after": len(live),
                                 "bytes_after": done.bytes_after}
        results["compaction_vs_write_only"] = round(results["compaction"]["rows_per_s"]
                                                    / results["write_only"]["rows_per_s"], 2)
        results["compaction_vs_write_only_large"] = round(results["compaction"]["rows_per_s"]
                                                          / results["write_only_large"]["rows_per_s"], 2)
        progress(f"compaction: {done.files_before} -> {done.files_after} files, {done.rows:,} rows in {secs:.1f} s = "
                 f"{done.rows / secs:,.0f} rows/s ({results['compaction_vs_write_only']}x write-only)")
        print(json.dumps(results, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
