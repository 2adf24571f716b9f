#!/usr/bin/env python3
"""Per-request cost and latency of one broker (issue 20): the scenarios where every request is small.

    .venv/bin/python bench/latency.py [--rounds 3] [--batch1-records 100000] [--sync-requests 3000]
                                      [--e2e-seconds 10] [--burner-cores 0.3] [--costs-seconds 2]
                                      [--wide-partitions 1000] [--fetch-every-s 0.5] [--paced-seconds 5]
                                      [--only costs,batch1,...] [--json out.json]

A `LocalCluster` of ZooKeeper and one broker (its metrics port on), a topic of one partition
(and one of 1,000 for Metadata). Each scenario runs ``--rounds`` times and reports the median
(and every round):

0. **costs**: the broker's CPU per request by API and size (Produce of 1, 100 and 1,000
   records, Fetch of one batch and of 1 MiB, Metadata of 1 and 1,000 partitions, ApiVersions):
   one request encoded once and sent pipelined, 64 in flight, over a bare socket;

1. **batch-1 pipelined**: librdkafka with ``batch.num.messages=1``, ``linger.ms=0``, acks=1,
   100-byte records, as fast as it goes: records/s, and the broker's CPU per Produce request
   (its process CPU over the requests it counted, ``logbus_requests_total{api="PRODUCE"}``);
2. **synchronous produce round trip**: one 100-byte record per Produce v7, the next sent when
   the answer is in, over a plain socket with the request encoded once (the broker's round trip
   with no client library in it): p50/p99; and librdkafka's ``produce`` + ``flush`` per record
   (what an application that waits for each ack sees);
3. **end to end**: `produce_consume.latency_phase` (a producer with ``linger.ms=0`` paced at
   10,000 records/s, a consumer process long-polling; receive time - send time): p50/p99/p99.9
   on a quiet machine, and again with a burner process taking ``--burner-cores`` of a core;
4. **beside large**: the synchronous round trips of (2), bare socket, while another process
   asks for the metadata of the 1,000-partition topic without pause (two requests in flight):
   p50/p99/p99.9, how long a small request waits behind large ones;
5. **beside produce**: the same beside 1 MiB Produce requests (one batch of 10,000 100-byte
   records to another topic, two in flight);
6. **beside fetch**: the same beside Fetch requests of the 1,000-partition topic (one small
   batch in each partition), one started every 500 ms (``--fetch-every-s``), one at a time: the
   same offered load whatever a fetch costs; then ``--paced-seconds`` of one-record Produce
   requests sent 1,000 a second whatever the answers do (open loop: a stall delays every
   request due during it, which the synchronous round trips hide), p50/p99/p99.9/max;
7. **beside retention** (only when named: it sets the broker's log.retention.check.interval.ms
   to 500): (5)'s 1 MiB Produces go to a topic that keeps one 1 GiB segment, so retention
   deletes a whole segment every few seconds; then the paced requests of (6).
Each "beside" scenario also reports how many large requests a second were answered.

Everything started is stopped on exit. Results to stdout and ``--json``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import psutil  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from produce_consume import _percentile, latency_phase  # noqa: E402
from reporting import progress, report  # noqa: E402
from signals import stop_cleanly_on_signals  # noqa: E402

from broker.client.admin import AdminClient  # noqa: E402
from broker.client.connection import BrokerConnection  # noqa: E402
from broker.cluster.local_cluster import LocalCluster  # noqa: E402
from broker.cluster.net import free_port  # noqa: E402
from broker.protocol.header import encode_request_header  # noqa: E402
from broker.protocol.messages import REQUESTS, RESPONSES, ApiKey  # noqa: E402
from broker.protocol.records.batches import encode_batch  # noqa: E402

RECORD = b"x" * 100
TOPIC = "lat"
PRODUCE_VERSION = 7


class Broker:
    """The one broker's CPU and request counters."""

    def __init__(self, pid: int, metrics_port: int) -> None:
        self.proc = psutil.Process(pid)
        self.metrics_port = metrics_port

    def cpu_s(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def requests(self, api: str) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(f'logbus_requests_total{{api="{api}"}}'):
                    return int(float(line.split()[-1]))
        return 0


def per_request_us(broker: Broker, api: str, cpu0: float, n0: int) -> float | None:
    requests = broker.requests(api) - n0
    return round((broker.cpu_s() - cpu0) / requests * 1e6, 1) if requests else None


def batch1(bootstrap: str, broker: Broker, records: int) -> dict[str, Any]:
    """librdkafka, one record per batch and per request, pipelined."""
    p = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1, "linger.ms": 0, "acks": 1,
                  "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000})
    p.list_topics(TOPIC, timeout=10)
    cpu0, n0 = broker.cpu_s(), broker.requests("PRODUCE")
    me = psutil.Process()
    mine0 = sum(me.cpu_times()[:2])
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(TOPIC, RECORD, partition=0)
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    if p.flush(60):
        raise RuntimeError("batch-1: records left unsent after 60 s")
    took = time.perf_counter() - t0
    return {"records_per_s": round(records / took), "broker_us_per_produce": per_request_us(broker, "PRODUCE", cpu0, n0),
            "produce_requests": broker.requests("PRODUCE") - n0,
            "broker_cores": round((broker.cpu_s() - cpu0) / took, 2),
            "producer_cores": round((sum(me.cpu_times()[:2]) - mine0) / took, 2)}  # this process: Python and librdkafka


def sync_round_trips(bootstrap: str, broker: Broker, requests: int) -> dict[str, Any]:
    """One Produce of one record at a time: over a bare socket, then through librdkafka."""
    frame = _produce_frame(1)
    conn = BrokerConnection.from_address(bootstrap)
    try:
        for _ in range(200):  # warm-up
            conn.send_frame(frame)
            conn.receive_frame()
        cpu0, n0 = broker.cpu_s(), broker.requests("PRODUCE")
        took = []
        for _ in range(requests):
            t = time.perf_counter_ns()
            conn.send_frame(frame)
            conn.receive_frame()
            took.append(time.perf_counter_ns() - t)
        wire_us = per_request_us(broker, "PRODUCE", cpu0, n0)
    finally:
        conn.close()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, "enable.idempotence": False})
    p.list_topics(TOPIC, timeout=10)
    for _ in range(100):
        p.produce(TOPIC, RECORD, partition=0)
        p.flush(10)
    client = []
    for _ in range(requests // 3):
        t = time.perf_counter_ns()
        p.produce(TOPIC, RECORD, partition=0)
        p.flush(10)
        client.append(time.perf_counter_ns() - t)
    took.sort()
    client.sort()
    return {"wire_p50_ms": round(_percentile(took, 50) / 1e6, 3), "wire_p99_ms": round(_percentile(took, 99) / 1e6, 3),
            "broker_us_per_produce": wire_us,
            "librdkafka_p50_ms": round(_percentile(client, 50) / 1e6, 3),
            "librdkafka_p99_ms": round(_percentile(client, 99) / 1e6, 3)}


COSTS_TOPIC = "lat-wide"
COSTS_PARTITIONS = 1000


PACED_PER_S = 1000  # beside_fetch's paced small requests a second
FETCH_EVERY_S = 0.5  # beside_fetch: a Fetch of 1,000 partitions started this often (the old path kept up)
LARGE_TOPIC = "lat-large"
LARGE_PRODUCE_RECORDS = 10_000  # one batch of about 1 MiB
#: the large topic's max.message.bytes: its one batch of 10,000 records (1.06 MiB) is above
#: Kafka's default of 1 MiB, which would answer MESSAGE_TOO_LARGE without appending anything
LARGE_MAX_MESSAGE_BYTES = 2 << 20
#: beside_retention: 1 MiB Produces into a topic that keeps one segment of this size, so
#: retention deletes a whole segment every few seconds (its check every RETENTION_CHECK_MS)
RETAINED_TOPIC = "lat-retained"
RETAINED_SEGMENT_BYTES = 1 << 30  # Kafka's default segment.bytes
RETENTION_CHECK_MS = 500


def _produce_frame(records: int, topic: str = TOPIC) -> bytes:
    batch = encode_batch([(None, RECORD, [], i) for i in range(records)])
    body = REQUESTS[ApiKey.PRODUCE].encode_bytes(PRODUCE_VERSION, {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return encode_request_header(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "latency-bench") + body


def _fetch_frame(max_bytes: int, topic: str = TOPIC, partitions: int = 1) -> bytes:
    wanted = [{"partition": i, "fetch_offset": 0, "partition_max_bytes": max_bytes} for i in range(partitions)]
    body = REQUESTS[ApiKey.FETCH].encode_bytes(11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes * partitions, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": topic, "partitions": wanted}]})
    return encode_request_header(ApiKey.FETCH, 11, 1, "latency-bench") + body


def _metadata_frame(topic: str) -> bytes:
    body = REQUESTS[ApiKey.METADATA].encode_bytes(8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return encode_request_header(ApiKey.METADATA, 8, 1, "latency-bench") + body


def _fill_wide_topic(bootstrap: str, partitions: int) -> None:
    """One batch of one record in each partition of the wide topic, for its Fetch."""
    batch = encode_batch([(None, RECORD, [], 0)])
    body = REQUESTS[ApiKey.PRODUCE].encode_bytes(PRODUCE_VERSION, {
        "transactional_id": None, "acks": 1, "timeout_ms": 30000,
        "topic_data": [{"name": COSTS_TOPIC, "partition_data": [
            {"index": i, "records": batch} for i in range(partitions)]}]})
    conn = BrokerConnection.from_address(bootstrap)
    try:
        conn.send_frame(encode_request_header(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "latency-bench") + body)
        conn.receive_frame()
    finally:
        conn.close()


def refused_codes(frame: bytes, answer: bytes) -> set[int]:
    """The non-zero error codes anywhere in ``answer``, the response to the request ``frame``
    (its header v0/v1 and the body after the correlation id)."""
    api_key, version = struct.unpack_from(">hh", frame)
    codes: set[int] = set()
    todo: list[Any] = [RESPONSES[ApiKey(api_key)].decode(version, answer[4:])]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            codes.add(value.get("error_code", 0))
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return codes - {0}


def require_accepted(label: str, frame: bytes, answer: bytes) -> None:
    """A request the broker refuses would measure the refusal, not the work: stop instead."""
    codes = refused_codes(frame, answer)
    if codes:
        raise RuntimeError(f"{label}: the broker answered error codes {sorted(codes)}")


def api_costs(bootstrap: str, broker: Broker, seconds: float, partitions: int) -> dict[str, Any]:
    """The broker's CPU per request by API and size: one request encoded once, sent pipelined
    (64 in flight) over a bare socket for ``seconds``, so the client's cost is not in it."""
    cases = {
        "PRODUCE 1 record": ("PRODUCE", _produce_frame(1)),
        "PRODUCE 100 records": ("PRODUCE", _produce_frame(100)),
        "PRODUCE 1,000 records": ("PRODUCE", _produce_frame(1000)),
        "PRODUCE 1 MiB (10,000 records)": ("PRODUCE", _produce_frame(LARGE_PRODUCE_RECORDS, LARGE_TOPIC)),
        "FETCH 1 batch": ("FETCH", _fetch_frame(1)),
        "FETCH 16 KiB": ("FETCH", _fetch_frame(16 << 10)),
        "FETCH 64 KiB": ("FETCH", _fetch_frame(64 << 10)),
        "FETCH 256 KiB": ("FETCH", _fetch_frame(256 << 10)),
        "FETCH 1 MiB": ("FETCH", _fetch_frame(1 << 20)),
        f"FETCH {partitions:,} partitions, 1 batch each": ("FETCH", _fetch_frame(1, COSTS_TOPIC, partitions)),
        "METADATA 1 partition": ("METADATA", _metadata_frame(TOPIC)),
        f"METADATA {partitions:,} partitions": ("METADATA", _metadata_frame(COSTS_TOPIC)),
        "API_VERSIONS": ("API_VERSIONS", encode_request_header(ApiKey.API_VERSIONS, 2, 1, "latency-bench")),
    }
    found: dict[str, Any] = {}
    conn = BrokerConnection.from_address(bootstrap)
    try:
        for label, (api, frame) in cases.items():
            window = 64
            for _ in range(window):  # warm-up
                conn.send_frame(frame)
            require_accepted(label, frame, conn.receive_frame())
            for _ in range(window - 1):
                conn.receive_frame()
            cpu0, n0 = broker.cpu_s(), broker.requests(api)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                conn.send_raw((len(frame).to_bytes(4, "big") + frame) * window)
                for _ in range(window):
                    conn.receive_frame()
            found[label] = per_request_us(broker, api, cpu0, n0)
    finally:
        conn.close()
    return found


def _large_requests(bootstrap: str, frame: bytes, stop: Any, every_s: float, answered: Any) -> None:
    """Child process until ``stop``: one large request after another, two in flight, or with
    ``every_s`` one at a time, one started every ``every_s`` seconds; counts the answers."""
    conn = BrokerConnection.from_address(bootstrap)
    try:
        if every_s:
            due = time.perf_counter()
            while not stop.is_set():
                conn.send_frame(frame)
                conn.receive_frame()
                answered.value += 1
                due += every_s
                time.sleep(max(0.0, due - time.perf_counter()))
            return
        conn.send_frame(frame)
        while not stop.is_set():
            conn.send_frame(frame)
            conn.receive_frame()
            answered.value += 1
        conn.receive_frame()
    finally:
        conn.close()


def paced_round_trips(bootstrap: str, seconds: float, per_s: int) -> list[int]:
    """One-record Produce requests sent at a fixed pace over a bare socket, whatever the answers
    do (open loop): each one's time from when it was due to be sent to its answer, in ns. Unlike
    the synchronous round trips, a stall of the broker delays every request due during it."""
    frame = _produce_frame(1)
    count = int(seconds * per_s)
    conn = BrokerConnection.from_address(bootstrap)
    answered_at: list[int] = []

    def receive() -> None:
        for _ in range(count):
            conn.receive_frame()
            answered_at.append(time.perf_counter_ns())

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    start = time.perf_counter_ns()
    gap = 1_000_000_000 // per_s
    try:
        for i in range(count):
            wait = start + i * gap - time.perf_counter_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            conn.send_frame(frame)
        receiver.join(60)
    finally:
        conn.close()
    return sorted(t - (start + i * gap) for i, t in enumerate(answered_at))


def beside_large(bootstrap: str, requests: int, large: bytes, every_s: float = 0.0,
                 paced_s: float = 0.0) -> dict[str, Any]:
    """Synchronous one-record Produce round trips over a bare socket while another connection
    sends the ``large`` request (without pause, or one every ``every_s``): how long a small
    request waits behind large ones on the one reactor thread; and how many large ones a
    second were answered meanwhile. With ``paced_s``, then as many seconds of PACED_PER_S
    one-record Produce requests sent at a fixed pace (``paced_round_trips``)."""
    checking = BrokerConnection.from_address(bootstrap)
    try:
        checking.send_frame(large)
        require_accepted("the large request", large, checking.receive_frame())
    finally:
        checking.close()
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    answered = ctx.Value("l", 0)
    load = ctx.Process(target=_large_requests, args=(bootstrap, large, stop, every_s, answered), daemon=True)
    load.start()
    frame = _produce_frame(1)
    conn = BrokerConnection.from_address(bootstrap)
    took = []
    try:
        time.sleep(1.0)  # the load under way
        answered0, t0 = answered.value, time.perf_counter()
        for _ in range(requests):
            t = time.perf_counter_ns()
            conn.send_frame(frame)
            conn.receive_frame()
            took.append(time.perf_counter_ns() - t)
        paced = paced_round_trips(bootstrap, paced_s, PACED_PER_S) if paced_s else []
        # over the round trips and the paced requests: with large requests paced every_s apart,
        # the round trips alone can end before the next one starts
        large_per_s = (answered.value - answered0) / (time.perf_counter() - t0)
    finally:
        conn.close()
        stop.set()
        load.join(10)
        if load.is_alive():
            load.kill()
    took.sort()
    found = {**{f"p{q}_ms": round(_percentile(took, q) / 1e6, 3) for q in (50, 99, 99.9)},
             "large_per_s": round(large_per_s, 1)}
    if paced:
        found.update({f"paced_p{q}_ms": round(_percentile(paced, q) / 1e6, 3) for q in (50, 99, 99.9)})
        found["paced_max_ms"] = round(paced[-1] / 1e6, 3)
    return found


def _burn(share: float, stop: Any) -> None:
    """Child process: busy ``share`` of every 10 ms."""
    busy, period = share * 0.01, 0.01
    while not stop.is_set():
        t = time.perf_counter()
        while time.perf_counter() - t < busy:
            pass
        time.sleep(period - busy)


def end_to_end(bootstrap: str, seconds: float, burner: float) -> dict[str, Any]:
    """A fresh topic each time: the latency consumer reads its topic from offset 0."""
    topic = f"e2e-{time.monotonic_ns()}"
    with AdminClient(bootstrap, timeout=30) as admin:
        admin.create_topic(topic, 1, 1)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    burn = ctx.Process(target=_burn, args=(burner, stop), daemon=True) if burner else None
    if burn:
        burn.start()
    try:
        found = latency_phase(bootstrap, topic, 1, 10_000, seconds, alive=lambda: None, linger_ms=0)
    finally:
        stop.set()
        if burn:
            burn.join(5)
            if burn.is_alive():
                burn.kill()
    return {k: found[k] for k in ("p50_ms", "p99_ms", "p999_ms") if k in found}


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if all(isinstance(r.get(k), (int, float)) for r in rounds)}


SCENARIOS = ("costs", "batch1", "sync", "e2e_quiet", "e2e_burner", "beside_large", "beside_produce", "beside_fetch",
             "beside_retention")
ONLY_WHEN_NAMED = ("beside_retention",)  # it changes the broker's settings for every scenario of the run


def main(argv: list[str] | None = None) -> int:
    stop_cleanly_on_signals()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch1-records", type=int, default=100_000)
    ap.add_argument("--sync-requests", type=int, default=3000)
    ap.add_argument("--e2e-seconds", type=float, default=10.0)
    ap.add_argument("--burner-cores", type=float, default=0.3)
    ap.add_argument("--wide-partitions", type=int, default=COSTS_PARTITIONS,
                    help="partitions of the wide topic (Metadata and Fetch of many partitions)")
    ap.add_argument("--fetch-every-s", type=float, default=FETCH_EVERY_S, help="beside_fetch: seconds between wide fetches")
    ap.add_argument("--paced-seconds", type=float, default=5.0,
                    help="beside_fetch: seconds of small requests sent at a fixed pace (open loop)")
    ap.add_argument("--costs-seconds", type=float, default=2.0, help="per API and size in the per-request cost table")
    ap.add_argument("--only", help=f"comma-separated scenarios: {','.join(SCENARIOS)} "
                                   f"(default: all but {','.join(ONLY_WHEN_NAMED)})")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    partitions = args.wide_partitions
    chosen = args.only.split(",") if args.only else [name for name in SCENARIOS if name not in ONLY_WHEN_NAMED]
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    results: dict[str, Any] = {"rounds": args.rounds}
    with tempfile.TemporaryDirectory(prefix="logbus-latency-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", progress=lambda line: None)
        port = free_port()
        retention = "beside_retention" in chosen
        cluster.up(1, metrics_port_base=port,
                   overrides={"log.retention.check.interval.ms": RETENTION_CHECK_MS} if retention else None)
        try:
            b = cluster.brokers[0]
            broker = Broker(b.pid or 0, port)
            bootstrap = cluster.bootstrap_servers
            with AdminClient(bootstrap, timeout=30) as admin:
                admin.create_topic(TOPIC, 1, 1)
                admin.create_topic(COSTS_TOPIC, partitions, 1)
                admin.create_topic(LARGE_TOPIC, 1, 1, {"max.message.bytes": str(LARGE_MAX_MESSAGE_BYTES)})
                if retention:
                    admin.create_topic(RETAINED_TOPIC, 1, 1, {"max.message.bytes": str(LARGE_MAX_MESSAGE_BYTES),
                                                              "segment.bytes": str(RETAINED_SEGMENT_BYTES),
                                                              "retention.bytes": str(RETAINED_SEGMENT_BYTES)})
            _fill_wide_topic(bootstrap, partitions)
            scenarios = {
                "costs": lambda: api_costs(bootstrap, broker, args.costs_seconds, partitions),
                "batch1": lambda: batch1(bootstrap, broker, args.batch1_records),
                "sync": lambda: sync_round_trips(bootstrap, broker, args.sync_requests),
                "e2e_quiet": lambda: end_to_end(bootstrap, args.e2e_seconds, 0.0),
                "e2e_burner": lambda: end_to_end(bootstrap, args.e2e_seconds, args.burner_cores),
                "beside_large": lambda: beside_large(bootstrap, args.sync_requests, _metadata_frame(COSTS_TOPIC)),
                "beside_produce": lambda: beside_large(
                    bootstrap, args.sync_requests, _produce_frame(LARGE_PRODUCE_RECORDS, LARGE_TOPIC)),
                "beside_fetch": lambda: beside_large(
                    bootstrap, args.sync_requests, _fetch_frame(1 << 10, COSTS_TOPIC, partitions), args.fetch_every_s,
                    args.paced_seconds),
                "beside_retention": lambda: beside_large(
                    bootstrap, args.sync_requests, _produce_frame(LARGE_PRODUCE_RECORDS, RETAINED_TOPIC),
                    paced_s=args.paced_seconds),
            }
            for name in chosen:
                run = scenarios[name]
                rounds = []
                for i in range(args.rounds):
                    rounds.append(run())
                    progress(f"{name} round {i + 1}: {rounds[-1]}")
                results[name] = {"median": median_of(rounds), "rounds": rounds}
        finally:
            cluster.down()
    report(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
