#!/usr/bin/env python3
"""Deduplication by origin: what it costs a load task per record, next to the task's other work.

    .venv/bin/python bench/dedup_bench.py [--records 200000] [--batch 1000] [--dup-share 0.1] [--window 100000]

Builds v2 batches of mirrored records (~100-byte JSON values, one ``logbus.origin`` header each,
a share of them repeating earlier births as a restarted mirror would), then times, per record,
the three steps a load task runs on each fetched chunk of 1 MiB: ``record_columns.decode_chunk``
(columns and headers), ``RangeScan._drop_duplicates`` (the origin index) and
``Decoder.decode`` (JSON, vectorised). No broker, no Spark: the numbers are the CPU cost in one
process. Also reports the index's size after the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from broker.protocol.origin import HEADER, Origin  # noqa: E402
from broker.protocol.records.batches import encode_batch  # noqa: E402
from pipelines.config import TopicSpec  # noqa: E402
from pipelines.decoders import Decoder  # noqa: E402
from pipelines.origin_index import OriginIndex  # noqa: E402
from pipelines.record_columns import decode_chunk  # noqa: E402
from pipelines.task import RangeScan, RangeTask, TaskContext, new_stats  # noqa: E402

SCHEMA = [{"name": "member_id", "type": "long", "required": True}, {"name": "page", "type": "string"}]


def births(n: int, dup_share: float) -> list[int]:
    """Birth offsets in load order: every ``1/dup_share``-th block of 500 is copied again."""
    out: list[int] = []
    nxt = 0
    block = 500
    every = int(1 / dup_share) if dup_share > 0 else 0
    while len(out) < n:
        out.extend(range(nxt, nxt + block))
        nxt += block
        if every and (nxt // block) % every == 0:
            out.extend(range(nxt - 2 * block, nxt - block))  # the block before: already written
    return out[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--dup-share", type=float, default=0.1)
    ap.add_argument("--window", type=int, default=100_000)
    args = ap.parse_args(argv)

    order = births(args.records, args.dup_share)
    data = bytearray()
    for b in range(0, len(order), args.batch):
        recs = [(b"%d" % o, json.dumps({"member_id": o, "page": f"/p/{o}/{'x' * 60}"}).encode(),
                 [(HEADER, Origin("Zq3_fkxTQGmh8Qp1wFv2Ag", "page-views", 3, o).encode())], 1_767_225_600_000 + i)
                for i, o in enumerate(order[b:b + args.batch])]
        data += encode_batch(recs, base_offset=b)
    chunk_bytes = 1 << 20
    pieces = []  # whole batches of about 1 MiB, as fetches return them
    pos = 0
    while pos < len(data):
        end = pos
        while end < len(data) and end - pos < chunk_bytes:
            end += int.from_bytes(data[end + 8:end + 12], "big") + 12
        pieces.append(bytes(data[pos:end]))
        pos = end

    spec = {"format": "json", "schema": SCHEMA}
    task = RangeTask(0, "bench", "agg", 0, 0, len(order), spec, origins=OriginIndex(args.window).to_json())
    scan = RangeScan(task, TaskContext(brokers=(), warehouse="file:///nonexistent"))
    decoder = Decoder(TopicSpec.from_dict("agg", spec))
    t_cols = t_dedup = t_decode = 0.0
    rows = 0
    for piece in pieces:
        t0 = time.perf_counter()
        chunk = decode_chunk("agg", 0, piece)
        t1 = time.perf_counter()
        kept = scan._drop_duplicates(chunk)
        t2 = time.perf_counter()
        batch, _, _ = decoder.decode(kept)
        t3 = time.perf_counter()
        t_cols, t_dedup, t_decode = t_cols + t1 - t0, t_dedup + t2 - t1, t_decode + t3 - t2
        rows += 0 if batch is None else batch.num_rows
    stats = scan.stats(new_stats(task))
    n = len(order)
    total = t_cols + t_dedup + t_decode
    result = {
        "records": n, "written": rows, "dropped": stats.duplicates_dropped, "chunks": len(pieces),
        "columns_us_per_record": round(t_cols / n * 1e6, 3), "dedup_us_per_record": round(t_dedup / n * 1e6, 3),
        "decode_us_per_record": round(t_decode / n * 1e6, 3),
        "dedup_share_of_cpu": round(t_dedup / total, 3),
        "records_per_s_without_dedup": round(n / (t_cols + t_decode)), "records_per_s_with_dedup": round(n / total),
        "index_offsets_held": OriginIndex.from_json(stats.origins).offsets_held() if stats.origins else 0,
        "index_json_bytes": len(json.dumps(stats.origins)), "window": args.window,
    }
    assert rows + stats.duplicates_dropped == n
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
