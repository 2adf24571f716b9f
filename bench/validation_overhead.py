#!/usr/bin/env python3
"""Produce throughput with the produce-path validation against a tree without it, same run;
and the records/s of a down-converting fetch (a librdkafka consumer in 0.8 mode).

    PYTHONPATH=$PWD .venv/bin/python bench/validation_overhead.py --baseline /tmp/base-tree \\
        [--records 1000000] [--rounds 2] [--json out.json]

``--baseline`` is a checkout of the commit to compare with (``git archive <commit> | tar -x -C
DIR``). Each round starts, for each tree in turn, ZooKeeper and one broker running that
tree's code, and measures librdkafka's producer (acks=1, linger.ms=5, 100-byte values, the
settings of bench/produce_consume.py) for every combination of codec (none, lz4), partitions
(1, 6) and librdkafka batch.size (16 KiB, 1 MiB); then, for this tree only, a 0.8-mode
consumer (``api.version.request=false``, ``broker.version.fallback=0.8.2.2``: Fetch v0,
message format v0) reads a 1-partition topic from offset 0. Trees alternate within a round
so that a shared machine's load falls on both alike. Each tree's run is one child process
(``--worker``) whose PYTHONPATH is that tree.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CODECS = ("none", "lz4")
PARTITIONS = (1, 6)
BATCH_SIZES = {"16KiB": 16384, "1MiB": 1 << 20}
OLD_CONSUMER = {"api.version.request": "false", "broker.version.fallback": "0.8.2.2"}


def _bench_module() -> Any:
    """bench/produce_consume.py of this tree (its phases), after ``broker`` was imported from
    the worker's own PYTHONPATH, so that it drives that tree's broker."""
    spec = importlib.util.spec_from_file_location("produce_consume", HERE / "produce_consume.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker(records: int, down_convert: bool) -> dict[str, Any]:
    """One tree: every produce combination, and the 0.8-mode fetch when asked."""
    import broker  # noqa: F401  (from this process's PYTHONPATH: the tree under test)

    pc = _bench_module()
    results: dict[str, Any] = {"tree": str(Path(broker.__file__).resolve().parent.parent), "produce": {}}
    with tempfile.TemporaryDirectory(prefix="logbus-valbench-", dir="/tmp") as data:
        cluster = pc.Cluster(Path(data), {})
        try:
            cluster.start(60)
            topics = {f"t-{codec}-{parts}-{name}": parts for codec in CODECS for parts in PARTITIONS for name in BATCH_SIZES}
            topics["old-fetch"] = 1
            pc.create_topics(cluster.bootstrap, topics)
            for topic in topics:
                if topic == "old-fetch":
                    continue
                _, codec, _, size_name = topic.split("-")
                out = pc.produce_phase(cluster.bootstrap, topic, records, 120, cluster.check_alive,
                                       {"compression.type": codec, "batch.size": str(BATCH_SIZES[size_name])})
                results["produce"][topic] = {"records_s": out["records_s"], "delivered": out["delivered"],
                                             "errors": out["delivery_errors"]}
                pc.progress(f"{topic}: {out['records_s']:,} records/s")
            if down_convert:
                pc.produce_phase(cluster.bootstrap, "old-fetch", records, 120, cluster.check_alive, {})
                out = pc.consume_phase(cluster.bootstrap, "old-fetch", 1, records, 120, cluster.check_alive,
                                       dict(OLD_CONSUMER))
                results["down_convert_fetch"] = {"records_s": out["records_s"], "records": out["records"],
                                                 "errors": out["errors"]}
                pc.progress(f"0.8-mode consumer: {out['records_s']:,} records/s")
        finally:
            cluster.close()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="a checkout of the commit to compare with")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per produce phase (default 1,000,000)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--down-convert", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.records, args.down_convert)))
        return 0
    trees = {"validation": REPO}
    if args.baseline:
        trees["baseline"] = args.baseline.resolve()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for rnd in range(args.rounds):
        order = list(trees.items()) if rnd % 2 == 0 else list(reversed(trees.items()))
        for name, tree in order:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--records", str(args.records)]
            if name == "validation":
                cmd.append("--down-convert")
            out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True, cwd=str(tree)).stdout
            runs[name].append(json.loads(out.decode().strip().splitlines()[-1]))
    table: dict[str, Any] = {}
    for topic in runs["validation"][0]["produce"]:
        row = {name: max(r["produce"][topic]["records_s"] for r in rs) for name, rs in runs.items()}
        if "baseline" in row:
            row["ratio"] = round(row["validation"] / row["baseline"], 3)
        table[topic] = row
    down = [r["down_convert_fetch"]["records_s"] for r in runs["validation"] if "down_convert_fetch" in r]
    summary = {"when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "records": args.records,
               "rounds": args.rounds, "cpus": os.cpu_count(), "load_avg": os.getloadavg(), "produce_best_of_rounds": table,
               "down_convert_fetch_records_s": down, "runs": runs}
    print(f"{'topic (codec-partitions-batch)':34} {'validation':>12} {'baseline':>12} {'ratio':>7}")
    for topic, row in table.items():
        print(f"{topic:34} {row['validation']:>12,} {row.get('baseline', 0):>12,} {row.get('ratio', ''):>7}")
    print(f"down-converting fetch (0.8-mode librdkafka consumer): {down} records/s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
