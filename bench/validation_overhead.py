#!/usr/bin/env python3
"""Produce throughput with the produce-path validation against a tree without it, same run;
and the records/s of a down-converting fetch (a librdkafka consumer in 0.8 mode).

    PYTHONPATH=$PWD .venv/bin/python bench/validation_overhead.py --baseline /tmp/base-tree \\
        [--records 1000000] [--rounds 2] [--json out.json]
    PYTHONPATH=$PWD .venv/bin/python bench/validation_overhead.py --per-batch

``--baseline`` is a checkout of the commit to compare with (``git archive <commit> | tar -x -C
DIR``). Each round starts, for each tree in turn, ZooKeeper and one broker running that
tree's code, and measures librdkafka's producer (acks=1, linger.ms=5, 100-byte values, the
settings of bench/produce_consume.py) for every combination of codec (none, lz4), partitions
(1, 6) and librdkafka batch.size (16 KiB, 1 MiB); then, for this tree only, a 0.8-mode
consumer (``api.version.request=false``, ``broker.version.fallback=0.8.2.2``: Fetch v0,
message format v0) reads a 1-partition topic from offset 0. Trees alternate within a round
so that a shared machine's load falls on both alike. Each tree's run is one child process
(``--worker``) whose PYTHONPATH is that tree. The table gives the best and the median of the
rounds, and the broker's CPU per produced record (its process's user + system time over the
phase), which the client's own speed does not blur.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

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


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


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
            broker_process = psutil.Process(cluster.broker.pid)
            for topic in topics:
                if topic == "old-fetch":
                    continue
                _, codec, _, size_name = topic.split("-")
                cpu0 = _cpu_seconds(broker_process)
                out = pc.produce_phase(cluster.bootstrap, topic, records, 120, cluster.check_alive,
                                       {"compression.type": codec, "batch.size": str(BATCH_SIZES[size_name])})
                broker_us = (_cpu_seconds(broker_process) - cpu0) / max(out["delivered"], 1) * 1e6
                results["produce"][topic] = {"records_s": out["records_s"], "delivered": out["delivered"],
                                             "errors": out["delivery_errors"],
                                             "broker_cpu_us_per_record": round(broker_us, 3)}
                pc.progress(f"{topic}: {out['records_s']:,} records/s, broker {broker_us:.3f} µs CPU per record")
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


def per_batch() -> dict[str, float]:
    """µs of ``validate_batch`` per batch, for batches shaped as librdkafka sends them in the
    produce phases (100-byte values, no key, timestamps a few ms apart)."""
    import timeit

    from broker.protocol.records import encode_batch
    from broker.protocol.records.layout import read_header
    from broker.storage import LogConfig
    from broker.storage.validator import policy_of, validate_batch

    now = int(time.time() * 1000)
    policy = policy_of(LogConfig())
    value = os.urandom(100)
    out = {}
    for name, count, codec in (("16KiB none", 148, 0), ("16KiB lz4", 148, 3), ("1MiB none", 9000, 0),
                               ("1MiB lz4", 9000, 3)):
        batch = bytearray(encode_batch([(None, value, None, now + i * 5 // count) for i in range(count)],
                                       compression=codec))
        header = read_header(batch)
        runs = max(20, 20000 // count)
        seconds = min(timeit.repeat(lambda b=batch, h=header: validate_batch(b, 0, h, policy, now), number=runs, repeat=5))
        out[name] = round(seconds / runs * 1e6, 2)
        print(f"{name:12} {count:>6} records: {out[name]:8.2f} µs per batch, {out[name] * 1000 / count:6.1f} ns per record")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="a checkout of the commit to compare with")
    ap.add_argument("--records", type=int, default=1_000_000, help="records per produce phase (default 1,000,000)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--per-batch", action="store_true",
                    help="only time the validation of one batch of each shape in this process")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--down-convert", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.per_batch:
        per_batch()
        return 0
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
    medians: dict[str, Any] = {}
    for topic in runs["validation"][0]["produce"]:
        row = {name: max(r["produce"][topic]["records_s"] for r in rs) for name, rs in runs.items()}
        middle = {name: statistics.median(r["produce"][topic]["records_s"] for r in rs) for name, rs in runs.items()}
        cpu = {name: statistics.median(r["produce"][topic]["broker_cpu_us_per_record"] for r in rs)
               for name, rs in runs.items()}
        middle["broker_cpu_us_per_record"] = cpu
        if "baseline" in row:
            row["ratio"] = round(row["validation"] / row["baseline"], 3)
            middle["ratio"] = round(middle["validation"] / middle["baseline"], 3)
        table[topic], medians[topic] = row, middle
    down = [r["down_convert_fetch"]["records_s"] for r in runs["validation"] if "down_convert_fetch" in r]
    summary = {"when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "records": args.records,
               "rounds": args.rounds, "cpus": os.cpu_count(), "load_avg": os.getloadavg(), "produce_best_of_rounds": table,
               "produce_median_of_rounds": medians,
               "down_convert_fetch_records_s": down, "runs": runs}
    print(f"{'topic (codec-partitions-batch)':34} {'validation':>12} {'baseline':>12} {'ratio':>7} {'median ratio':>13}"
          f" {'broker µs/record (median)':>26}")
    for topic, row in table.items():
        cpu = medians[topic]["broker_cpu_us_per_record"]
        print(f"{topic:34} {row['validation']:>12,} {row.get('baseline', 0):>12,} {row.get('ratio', ''):>7} "
              f"{medians[topic].get('ratio', ''):>13} {' / '.join(f'{v:.3f}' for v in cpu.values()):>26}")
    print(f"down-converting fetch (0.8-mode librdkafka consumer): {down} records/s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
