"""Log cleaner benchmark (issue 21): cleaning throughput on one core, and the produce rate of
other partitions while a broker cleans.

    .venv/bin/python bench/cleaner_bench.py throughput [--mb 100] [--live 0.1]
    .venv/bin/python bench/cleaner_bench.py produce [--mb 150] [--seconds 6]

``throughput``: a log of 100-byte-value records in which ``--live`` of the keys are live (each
key written 1/live times), cleaned in this process by broker.storage.cleaner (one thread);
MB/s is log bytes read per second of the pass (the key map and the rewrite).

``produce``: one broker (log.cleaner.threads=1: one cleaner process); a compacted topic is filled with the cleaner
off, the broker restarted with it on (first pass after ``--delay-ms``); librdkafka then
produces to another topic throughout, and the acked rate is compared between 0.25 s windows
where a cleaner pass is writing (a ``.cleaned`` file exists in the compacted log) and windows
where none is. Same run, same broker process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from broker.protocol.records import encode_batch  # noqa: E402
from broker.storage.cleaner import OffsetMap, clean  # noqa: E402
from broker.storage.config import LogConfig  # noqa: E402
from broker.storage.log import PartitionLog  # noqa: E402

VALUE = b"v" * 100


def fill(log: PartitionLog, mb: int, live: float, per_batch: int = 200) -> int:
    """Append about ``mb`` MB of keyed records, keys cycling over live * records; returns records."""
    record_size = 100 + 20
    total = mb * 1_000_000 // record_size
    keys = max(1, int(total * live))
    n = 0
    while n < total:
        log.append(bytearray(encode_batch([(b"key-%09d" % ((n + i) % keys), VALUE, (), 1_700_000_000_000)
                                           for i in range(per_batch)])))
        n += per_batch
    log.roll()
    return n


def throughput(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="logbus-cleaner-bench-") as tmp:
        log = PartitionLog.open(os.path.join(tmp, "bench-0"), LogConfig(cleanup_policy="compact", segment_bytes=64 << 20))
        records = fill(log, args.mb, args.live)
        cpu0 = time.process_time()
        stats = clean(log.clean_task(0), OffsetMap(256 << 20), log.replace_segments)
        cpu = time.process_time() - cpu0
        log.close()
    return {"phase": "throughput", "records": records, "live_share": args.live, "bytes_read": stats.bytes_read,
            "bytes_written": stats.bytes_written, "seconds": round(stats.seconds, 3), "cpu_seconds": round(cpu, 3),
            "mb_per_s": round(stats.mb_per_second, 1), "segments": stats.segments_cleaned}


def produce_during_cleaning(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer

    from broker.client.admin import AdminClient
    from broker.cluster.embedded_zk import EmbeddedZooKeeper
    from broker.cluster.local import BrokerProcess
    from broker.cluster.net import free_port

    with tempfile.TemporaryDirectory(prefix="logbus-cleaner-bench-") as tmp:
        zk = EmbeddedZooKeeper(Path(tmp) / "zk")
        zk.start()
        props = {"broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", "log.dirs": f"{tmp}/data",
                 "zookeeper.connect": zk.connect_string}
        broker = BrokerProcess(props, Path(tmp) / "broker", {"log.cleaner.enable": "false"})
        try:
            broker.start()
            with AdminClient(broker.bootstrap) as admin:
                admin.create_topic("compacted", 1, 1, {"cleanup.policy": "compact", "segment.bytes": str(32 << 20)})
                admin.create_topic("plain", 4, 1, {})
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
            total = args.mb * 1_000_000 // 120
            keys = max(1, total // 10)
            for n in range(total):
                while True:
                    try:
                        producer.produce("compacted", key=b"key-%09d" % (n % keys), value=VALUE, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.05)
                if n % 10000 == 0:
                    producer.poll(0)
            producer.flush(120)
            broker.stop()
            restarted = BrokerProcess(props, Path(tmp) / "broker",
                                      {"log.cleaner.enable": "true", "log.cleaner.backoff.ms": str(args.delay_ms)})
            broker = restarted
            broker.start()
            first_wake = time.monotonic() + args.delay_ms / 1000  # the cleaner's first look (no earlier pass)
            return measure(broker.bootstrap, Path(tmp) / "data" / "compacted-0", args.seconds, first_wake)
        finally:
            broker.stop()
            zk.stop()


def measure(bootstrap: str, log_dir: Path, seconds: float, first_wake: float) -> dict:
    """Produce to ``plain`` for ``seconds``; acked records per 0.25 s window, split by cleaning:
    a window is "during" from the cleaner's first wake to the last moment a ``.cleaned`` file
    was seen (the pass maps keys before it writes one), "without" before and after."""
    from confluent_kafka import Producer
    acked = [0]

    def delivered(err, msg) -> None:
        if err is None:
            acked[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    stop = threading.Event()
    samples: list[tuple[float, int, bool]] = []

    def sample() -> None:
        while not stop.is_set():
            cleaning = any(n.endswith(".cleaned") for n in os.listdir(log_dir))
            samples.append((time.monotonic(), acked[0], cleaning))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        try:
            producer.produce("plain", value=VALUE, partition=n % 4, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            continue
        n += 1
        if n % 1000 == 0:
            producer.poll(0)
    producer.flush(30)
    stop.set()
    sampler.join()
    seen = [t for t, _, cleaning in samples if cleaning]
    if not seen:
        raise RuntimeError("no cleaner pass was seen: make --mb larger or --seconds longer")
    last_seen = seen[-1]
    rates: dict[bool, list[float]] = {True: [], False: []}
    for (t0, a0, _), (t1, a1, _) in zip(samples, samples[1:]):
        during = first_wake <= t0 and t1 <= last_seen + 0.25
        if during or t1 <= first_wake or t0 >= last_seen + 0.25:
            rates[during].append((a1 - a0) / (t1 - t0))
    mean = {k: (sum(v) / len(v) if v else 0.0) for k, v in rates.items()}
    return {"phase": "produce", "records_per_s_without_cleaning": round(mean[False]),
            "records_per_s_during_cleaning": round(mean[True]), "windows_without": len(rates[False]),
            "windows_during": len(rates[True]), "cleaning_seconds": round(last_seen - first_wake, 2),
            "ratio": round(mean[True] / mean[False], 3) if mean[False] else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="phase", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--mb", type=int, default=100)
    t.add_argument("--live", type=float, default=0.1)
    p = sub.add_parser("produce")
    p.add_argument("--mb", type=int, default=150)
    p.add_argument("--seconds", type=float, default=12)
    p.add_argument("--delay-ms", type=int, default=3000, help="log.cleaner.backoff.ms: the first pass starts after it")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = throughput(args) if args.phase == "throughput" else produce_during_cleaning(args)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
