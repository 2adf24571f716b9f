"""`logbus producer-perf-test`: Kafka's kafka-producer-perf-test with logbus's Producer.

    logbus producer-perf-test --topic perf --num-records 1000000 --record-size 100 \\
        --throughput -1 --producer-props bootstrap.servers=127.0.0.1:9092 acks=1

Prints Kafka's lines: a progress line every 5 seconds and the summary
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th.`` Latency is from ``send`` to the
acknowledgement, measured for every record as Kafka does (in the completion callback).
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import threading
import time
from typing import Any

from broker.client.connection import BrokerConnectionError
from broker.client.metadata import KafkaTimeoutError
from broker.client.producer import Producer
from broker.config import ConfigError
from broker.protocol.errors import KafkaError
from broker.tools import CommandError, client_config

REPORTING_INTERVAL = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument("--num-records", type=int, required=True, help="how many records to send")
    payload = parser.add_mutually_exclusive_group()
    payload.add_argument("--record-size", type=int, help="bytes per record")
    payload.add_argument("--payload-file", help="records' values: the lines of this file, chosen at random")
    parser.add_argument("--payload-delimiter", default="\\n", help="separator of payloads in --payload-file")
    parser.add_argument(
        "--throughput", type=float, required=True, help="records per second at most; -1 for no limit"
    )
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE", help="producer settings")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="a producer.properties file")
    parser.add_argument("--bootstrap-server", help="the brokers (same as bootstrap.servers in --producer-props)")
    parser.add_argument("--print-metrics", action="store_true", help="print the producer's counters at the end")


class Stats:
    """Kafka's ProducerPerformance.Stats: windows of count/bytes/latency, sampled latencies."""

    def __init__(self, num_records: int, out: Any = None) -> None:
        self.out = out or sys.stdout
        self.start = time.monotonic()
        self.window_start = self.start
        self.sampling = max(1, num_records // min(max(num_records, 1), 500_000))
        self.latencies: list[int] = []
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.w_count = self.w_bytes = self.w_total_latency = self.w_max_latency = 0
        self.iteration = 0
        self.lock = threading.Lock()

    def record(self, latency_ms: int, size: int, now: float) -> None:
        """One record acknowledged after ``latency_ms``."""
        self.record_many([latency_ms], size, now)

    def record_many(self, latencies: list[int], size: int, now: float) -> None:
        """Records of ``size`` bytes each, acknowledged together (one batch)."""
        n = len(latencies)
        if not n:
            return
        total, peak = sum(latencies), max(latencies)
        with self.lock:
            self.count += n
            self.bytes += n * size
            self.total_latency += total
            self.max_latency = max(self.max_latency, peak)
            self.w_count += n
            self.w_bytes += n * size
            self.w_total_latency += total
            self.w_max_latency = max(self.w_max_latency, peak)
            first = (-self.iteration) % self.sampling
            self.latencies.extend(latencies[first :: self.sampling])
            self.iteration += n
            if now - self.window_start >= REPORTING_INTERVAL:
                self._print_window(now)

    def _print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        rate = self.w_count / elapsed
        mb = self.w_bytes / elapsed / (1024 * 1024)
        avg = self.w_total_latency / max(self.w_count, 1)
        print(
            f"{self.w_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
            f"{avg:.1f} ms avg latency, {float(self.w_max_latency):.1f} ms max latency.",
            file=self.out, flush=True,
        )
        self.window_start = now
        self.w_count = self.w_bytes = self.w_total_latency = self.w_max_latency = 0

    def summary(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.count / elapsed
        mb = self.bytes / elapsed / (1024 * 1024)
        avg = self.total_latency / max(self.count, 1)
        p50, p95, p99, p999 = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        return (
            f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{float(self.max_latency):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th."
        )


def percentiles(latencies: list[int], points: tuple[float, ...]) -> list[int]:
    """Kafka's way: sort, take the value at floor(p * n)."""
    ordered = sorted(latencies)
    if not ordered:
        return [0 for _ in points]
    return [ordered[min(int(p * len(ordered)), len(ordered) - 1)] for p in points]


class Throttler:
    """Kafka's ThroughputThrottler: sleep whenever we are ahead of the target rate."""

    def __init__(self, target: float, start: float) -> None:
        self.target = target
        self.start = start

    def throttle(self, sent: int, now: float) -> None:
        if self.target <= 0:
            return
        ahead = sent / self.target - (now - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


def build_config(args: argparse.Namespace) -> dict[str, Any]:
    """The producer config from the file, --producer-props and --bootstrap-server (in that order)."""
    config = client_config(args.producer_config, args.producer_props, args.bootstrap_server,
                           "give bootstrap.servers in --producer-props or --producer.config (or --bootstrap-server)")
    config.setdefault("client.id", "perf-producer-client")
    return config


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.payload_file:
        delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
        try:
            with open(args.payload_file, "rb") as f:
                items = [p for p in f.read().split(delimiter) if p]
        except OSError as exc:
            raise CommandError(f"cannot read --payload-file: {exc}") from exc
        if not items:
            raise CommandError(f"--payload-file {args.payload_file} holds no payloads")
        return items
    if args.record_size is None:
        raise CommandError("give --record-size or --payload-file")
    if args.record_size < 0:
        raise CommandError("--record-size must not be negative")
    rng = random.Random(0)
    return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]  # Kafka: random A-Z


def run(args: argparse.Namespace) -> int:
    if args.num_records < 0:
        raise CommandError("--num-records must not be negative")
    config = build_config(args)
    payloads = _payloads(args)
    try:
        producer = Producer(config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    stats = Stats(args.num_records)
    failures: list[BaseException] = []
    monotonic = time.monotonic

    # Latency is per record, but the bookkeeping is per batch: every record of a batch is
    # acknowledged at the same moment, so each batch gets one callback that accounts for the
    # send times of all its records (a per-record callback would cost more than the send).
    pending: dict[Any, list[float]] = {}

    def batch_done(batch: Any, times: list[float], size: int, future: Any) -> None:
        pending.pop(batch, None)
        now = monotonic()
        if batch.exception is not None:
            if not failures:
                print(f"ERROR: {batch.exception}", file=sys.stderr)
            failures.extend([batch.exception] * len(times))
            return
        stats.record_many([int((now - sent) * 1000) for sent in times], size, now)

    send = producer.send
    topic = args.topic
    single = payloads[0] if len(payloads) == 1 else None
    choice = random.Random(1).choice
    throttler = Throttler(args.throughput, stats.start)
    try:
        for i in range(args.num_records):
            value = single if single is not None else choice(payloads)
            now = monotonic()
            future = send(topic, value)
            batch = future._batch
            times = pending.get(batch)
            if times is None:
                times = pending[batch] = [now]
                size = len(value)
                future.add_done_callback(functools.partial(batch_done, batch, times, size))
            else:
                times.append(now)
            if args.throughput > 0:
                throttler.throttle(i + 1, now)
            if len(failures) > 1000:
                break
        producer.flush()
    except (KafkaError, KafkaTimeoutError, BrokerConnectionError) as exc:
        producer.close(5)
        raise CommandError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        if not producer._closed:
            producer.close(30)
    print(stats.summary(), flush=True)
    if args.print_metrics:
        for name, value in sorted(producer.metrics().items()):
            print(f"{name:<40} : {value}")
    if failures:
        print(f"{len(failures)} records failed; the first error: {failures[0]}", file=sys.stderr)
        return 1
    return 0
