#!/usr/bin/env python3
"""Consume a kept benchmark log with this checkout's broker: the read path alone, A/B between commits.

    .venv/bin/python bench/produce_consume.py --partitions 6 --data-dir /tmp/kept --keep-data
    PYTHONPATH=<checkout> .venv/bin/python <checkout>/bench/consume_kept_log.py --data-dir /tmp/kept [--reads 2]

Copies --data-dir (ZooKeeper and log dirs as produce_consume.py keeps them) to a scratch
directory, starts ZooKeeper and one broker of the checkout the script is run from on the copy,
and reads the kept `bench-p<N>-*` topic from the start with the benchmark's librdkafka consumer
--reads times. Every commit reads the same batches, so produce-phase differences (batch sizes,
timing) drop out of the comparison.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import produce_consume as pc  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="a data dir kept by produce_consume.py --keep-data")
    ap.add_argument("--partitions", type=int, default=6, help="which kept topic: bench-p<N>-* (default 6)")
    ap.add_argument("--reads", type=int, default=2, help="reads of the whole topic (default 2)")
    args = ap.parse_args(argv)
    logs = args.data_dir / "kafka-logs"
    prefix = f"bench-p{args.partitions}-"
    dirs = sorted(p for p in logs.glob(f"{prefix}*") if p.is_dir()) if logs.is_dir() else []
    if not dirs:
        print(f"consume_kept_log: error: no {prefix}* partitions under {logs}", file=sys.stderr)
        return 2
    topic = dirs[0].name.rsplit("-", 1)[0]
    with tempfile.TemporaryDirectory(prefix="logbus-kept-") as scratch:
        work = Path(scratch) / "data"
        shutil.copytree(args.data_dir, work, ignore=shutil.ignore_patterns("broker"))
        cluster = pc.Cluster(work, {})
        try:
            cluster.start(60)
            for i in range(args.reads):
                r = pc.consume_phase(cluster.bootstrap, topic, args.partitions, -1, 120, cluster.check_alive)
                print(f"read {i + 1}: {r['records']:,} of {r['log_records']:,} records, {r['records_s']:,} records/s, "
                      f"{r['client_stats']['fetch_requests']} Fetch requests", flush=True)
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
