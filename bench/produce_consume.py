#!/usr/bin/env python3
"""Produce/consume/latency benchmark of one logbus broker, with the machine's own limits.

    .venv/bin/python bench/produce_consume.py [--records N] [--partitions 1,6] [--json out.json]
                                              [--quick] [--profile] [--data-dir DIR]

What one run does (docs/performance.md describes the method and the results):

1. machine limits, measured now on this machine: loopback TCP (a sender and a receiver
   process over 127.0.0.1, 1 MiB writes, 4 MiB socket buffers), sequential disk write with
   fsync and sequential read (cold after POSIX_FADV_DONTNEED, and again from the page cache) in
   the broker's log-dir filesystem, and the client's own ceiling (how fast one Python thread
   can hand 100-byte records to librdkafka when no broker is reachable);
2. an embedded ZooKeeper and one broker (``python -m broker.cli server-start
   conf/server.properties --override ...``), log dir under --data-dir (default: a temp dir
   in /tmp), topics created through confluent_kafka.admin;
3. for each partition count: producer throughput (librdkafka, acks=1, linger.ms=5, 100-byte
   values, no keys, no compression), consumer throughput (librdkafka consumer assigned to all
   partitions from offset 0, reading every produced record; fetch.queue.backoff.ms=0,
   queued.min.messages=1000000), and
   end-to-end latency at a paced 10,000 records/s for 10 s, once per --latency-linger-ms value
   (default linger.ms=0 and 1; the send time is in the value, a consumer in another process
   computes receive time - send time; the producer's ack latency is recorded too);
4. the CPU of the broker, of the benchmark and of everything else during each phase (from
   /proc through psutil), librdkafka's request counts and round-trip times (stats_cb), and
   with --profile a py-spy profile of the broker per phase. A phase during which other
   processes used more than --busy-threshold cores is repeated (--retries) and otherwise
   marked, since this machine may be shared.

Everything it starts (ZooKeeper, broker, child processes, py-spy) is stopped on exit, on
errors and on Ctrl-C. Progress goes to stderr; the table to stdout; the JSON to --json (and
always to bench/results/latest.json).
"""

from __future__ import annotations

import argparse
import array
import contextlib
import datetime as _dt
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from signals import stop_cleanly_on_signals  # noqa: E402  (bench/, the script's directory)

RECORD_SIZE = 100
MIB = 1 << 20

#: The issue's aims (records/s, records/s, ms).
AIM_PRODUCE = 800_000
AIM_CONSUME = 940_000
AIM_P99_MS = 10.0
#: LinkedIn, "Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap Machines)", 2014.
LINKEDIN = {"producer_single_thread_rps": 821_557, "producer_mb_s": 78.3,
            "consumer_single_rps": 940_521, "consumer_mb_s": 89.7}

_T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"[{time.monotonic() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def mib(nbytes: float) -> float:
    return nbytes / MIB


# =============================================================================================
# CPU accounting
# =============================================================================================

class CpuMeter:
    """CPU used by the broker, by this process (and its busiest thread) and by the machine
    between ``start()`` and ``stop()``; cores = CPU seconds / wall seconds."""

    def __init__(self, broker_pid: int | None) -> None:
        import psutil

        self._psutil = psutil
        self.broker = psutil.Process(broker_pid) if broker_pid else None
        self.me = psutil.Process()

    @staticmethod
    def _cpu(proc: Any) -> float:
        try:
            t = proc.cpu_times()
            return t.user + t.system
        except Exception:  # the process ended
            return float("nan")

    def _threads(self) -> dict[int, float]:
        try:
            return {t.id: t.user_time + t.system_time for t in self.me.threads()}
        except Exception:
            return {}

    def start(self) -> CpuMeter:
        ps = self._psutil
        self.t0 = time.monotonic()
        self.b0 = self._cpu(self.broker) if self.broker else float("nan")
        self.m0 = self._cpu(self.me)
        self.th0 = self._threads()
        self.sys0 = ps.cpu_times()
        return self

    def stop(self, extra_client_cpu_s: float = 0.0) -> dict[str, Any]:
        """``extra_client_cpu_s``: CPU seconds of client child processes over the same span."""
        ps = self._psutil
        wall = max(time.monotonic() - self.t0, 1e-9)
        sys1 = ps.cpu_times()
        busy = lambda t: t.user + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0) + getattr(t, "nice", 0)  # noqa: E731
        total = lambda t: sum(t)  # noqa: E731
        d_total = total(sys1) - total(self.sys0)
        th1 = self._threads()
        busiest = max((th1[k] - self.th0.get(k, 0.0) for k in th1), default=float("nan"))
        client = self._cpu(self.me) - self.m0 + extra_client_cpu_s
        broker = (self._cpu(self.broker) - self.b0) if self.broker else 0.0
        machine = ((busy(sys1) - busy(self.sys0)) / d_total * (os.cpu_count() or 1)) if d_total > 0 else float("nan")
        out = {
            "wall_s": round(wall, 3),
            "broker_cores": round((self._cpu(self.broker) - self.b0) / wall, 3) if self.broker else None,
            "client_cores": round(client / wall, 3),
            "client_busiest_thread_cores": round(busiest / wall, 3),
            "machine_busy_pct": round(100.0 * (busy(sys1) - busy(self.sys0)) / d_total, 1) if d_total > 0 else None,
            # CPU used by everything else on the machine (other processes, kernel threads, ZooKeeper)
            "other_cores": round(max(0.0, machine - (broker + client) / wall), 3) if d_total > 0 else None,
        }
        return out


def background_load(seconds: float = 2.0) -> dict[str, Any]:
    """Share of all CPUs busy over ``seconds`` before the benchmark starts anything, and the
    other processes using CPU (this machine may be shared: their load skews the results)."""
    import psutil

    me = os.getpid()
    procs = {}
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        with contextlib.suppress(Exception):
            if proc.pid != me:
                procs[proc.pid] = (proc, proc.cpu_times().user + proc.cpu_times().system)
    t0 = psutil.cpu_times()
    time.sleep(seconds)
    t1 = psutil.cpu_times()
    idle = lambda t: t.idle + getattr(t, "iowait", 0)  # noqa: E731
    d_total = sum(t1) - sum(t0)
    busy = 100.0 * (1 - (idle(t1) - idle(t0)) / d_total) if d_total > 0 else 0.0
    users = []
    for pid, (proc, c0) in procs.items():
        with contextlib.suppress(Exception):
            t = proc.cpu_times()
            cores = (t.user + t.system - c0) / seconds
            if cores >= 0.05:
                cmd = " ".join(proc.info.get("cmdline") or [proc.info.get("name") or "?"])
                users.append({"pid": pid, "cores": round(cores, 2), "cmd": cmd[:120]})
    users.sort(key=lambda u: -u["cores"])
    return {"machine_busy_pct": round(busy, 1), "seconds": seconds, "busy_processes": users[:5]}


def wait_for_quiet(max_wait: float, threshold_pct: float = 15.0) -> dict[str, Any]:
    """Measure the background load; with ``max_wait`` > 0, wait (10 s steps) until it drops
    below ``threshold_pct`` or the time is up. Returns the last measurement."""
    deadline = time.monotonic() + max_wait
    while True:
        load = background_load()
        if load["machine_busy_pct"] < threshold_pct or time.monotonic() >= deadline:
            return load
        top = ", ".join(f"{u['cores']} cores: {u['cmd'][:60]}" for u in load["busy_processes"][:2])
        progress(f"machine {load['machine_busy_pct']}% busy before start ({top}); waiting for it to calm down")
        time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))


# =============================================================================================
# Machine limits
# =============================================================================================

def _loopback_receiver(conn: Any, bufsize: int) -> None:
    """Child process: accept one connection on 127.0.0.1 and count bytes until EOF."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, bufsize)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    conn.send(srv.getsockname()[1])
    s, _ = srv.accept()
    buf = bytearray(MIB)
    view = memoryview(buf)
    total = 0
    n = s.recv_into(view)
    t0 = time.perf_counter()
    total += n
    while n:
        n = s.recv_into(view)
        total += n
    t1 = time.perf_counter()
    s.close()
    srv.close()
    conn.send((total, t1 - t0))


def measure_loopback(seconds: float, bufsize: int = 4 * MIB) -> dict[str, Any]:
    """One TCP stream over 127.0.0.1 between two processes, 1 MiB writes, large buffers."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_loopback_receiver, args=(child, bufsize), daemon=True)
    proc.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("loopback receiver did not start")
        port = parent.recv()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, bufsize)
        s.connect(("127.0.0.1", port))
        chunk = memoryview(os.urandom(MIB))
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(16):
                s.sendall(chunk)
        s.shutdown(socket.SHUT_WR)
        if not parent.poll(60):
            raise RuntimeError("loopback receiver did not report")
        total, elapsed = parent.recv()
        s.close()
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    return {"bytes": total, "seconds": round(elapsed, 3), "mb_s": round(mib(total) / elapsed, 1),
            "method": "1 TCP stream, 2 processes, 127.0.0.1, 1 MiB sendall/recv_into, SO_SNDBUF/SO_RCVBUF 4 MiB"}


def measure_disk(directory: Path, size_mb: int) -> dict[str, Any]:
    """Sequential write (1 MiB writes, then fsync, timed together), cold read (after
    POSIX_FADV_DONTNEED on the file) and page-cache read, in ``directory``'s filesystem."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "bench-disk-limit.tmp"
    block = os.urandom(MIB)
    nblocks = size_mb
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for _ in range(nblocks):
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]
        t_written = time.perf_counter()
        os.fsync(fd)
        t1 = time.perf_counter()
    finally:
        os.close(fd)
    total = nblocks * MIB

    def read_all() -> float:
        buf = bytearray(MIB)
        fd = os.open(path, os.O_RDONLY)
        try:
            t = time.perf_counter()
            got = 0
            while True:
                n = os.readv(fd, [buf])
                if not n:
                    break
                got += n
            return time.perf_counter() - t
        finally:
            os.close(fd)

    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        cold = read_all()
        hot = read_all()
        hot = min(hot, read_all())
    finally:
        path.unlink(missing_ok=True)
    return {
        "bytes": total,
        "write_fsync_s": round(t1 - t0, 3),
        "write_fsync_mb_s": round(mib(total) / (t1 - t0), 1),
        "fsync_part_s": round(t1 - t_written, 3),
        "read_cold_mb_s": round(mib(total) / cold, 1),
        "read_page_cache_mb_s": round(mib(total) / hot, 1),
        "filesystem": fs_of(directory),
        "method": (f"{size_mb} MiB file of random bytes, 1 MiB os.write then one fsync (timed together); "
                   "read with 1 MiB readv after POSIX_FADV_DONTNEED (cold), then again (page cache)"),
    }


def fs_of(path: Path) -> str:
    """'<device> <fstype>' of the mount that holds path."""
    best = ("", "?", "?")
    p = str(path.resolve())
    try:
        with open("/proc/mounts") as f:
            for line in f:
                dev, mnt, fstype, *_ = line.split()
                if (p == mnt or p.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
                    best = (mnt, dev, fstype)
    except OSError:
        pass
    return f"{best[1]} {best[2]} (mounted on {best[0]})"


def measure_client_ceiling(records: int) -> dict[str, Any]:
    """How fast this Python thread hands 100-byte records to librdkafka (produce() with the
    same settings as the benchmark) when no broker is reachable: the client's own limit."""
    from confluent_kafka import Producer

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    p = Producer({"bootstrap.servers": f"127.0.0.1:{dead}", "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.messages": records + 1000,
                  "queue.buffering.max.kbytes": 2 * 1024 * 1024, "log_level": 0,
                  "delivery.report.only.error": True, "error_cb": lambda err: None,
                  "on_delivery": lambda err, msg: None})
    value = os.urandom(RECORD_SIZE)
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for i in range(records):
        produce("bench-ceiling", value)
        if not i & 1023:
            poll(0)
    t1 = time.perf_counter()
    p.purge()
    p.flush(0)
    del p
    return {"records": records, "seconds": round(t1 - t0, 3), "records_s": round(records / (t1 - t0)),
            "mb_s": round(mib(records * RECORD_SIZE) / (t1 - t0), 1),
            "method": "Producer.produce() loop (poll(0) every 1024) with bootstrap on a closed port: enqueue only"}


class ClientStats:
    """librdkafka statistics (stats_cb): requests sent per type and the client-side broker
    round-trip / internal-queue latencies, over the phase."""

    def __init__(self) -> None:
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.windows: list[dict[str, Any]] = []

    def __call__(self, raw: str) -> None:
        d = json.loads(raw)
        if self.first is None:
            self.first = d
        self.last = d
        for b in d.get("brokers", {}).values():
            if b.get("nodeid", -1) >= 0 and b.get("rtt", {}).get("cnt"):
                self.windows.append({k: b[k] for k in ("rtt", "int_latency", "outbuf_latency") if k in b})

    @staticmethod
    def _reqs(d: dict[str, Any], kind: str) -> int:
        return sum(b.get("req", {}).get(kind, 0) for b in d.get("brokers", {}).values() if b.get("nodeid", -1) >= 0)

    def summary(self, elapsed: float | None = None) -> dict[str, Any]:
        """Request counts between the first and last report, or (``elapsed`` given: a client
        made for this phase) all requests of the client over ``elapsed`` seconds."""
        if not self.last or (elapsed is None and self.last is self.first):
            return {}
        dt = elapsed if elapsed is not None else (self.last["ts"] - self.first["ts"]) / 1e6
        out: dict[str, Any] = {"window_s": round(dt, 2)}
        for kind in ("Produce", "Fetch"):
            n = self._reqs(self.last, kind) - (0 if elapsed is not None else self._reqs(self.first, kind))
            if n:
                out[f"{kind.lower()}_requests"] = n
                out[f"{kind.lower()}_requests_s"] = round(n / dt) if dt > 0 else None
        for key in ("rtt", "int_latency", "outbuf_latency"):
            ws = [w[key] for w in self.windows if key in w and w[key].get("cnt")]
            if ws:  # librdkafka reports microseconds, per statistics window
                out[f"{key}_ms"] = {"p50_median_of_windows": round(sorted(w["p50"] for w in ws)[len(ws) // 2] / 1000, 3),
                                    "p99_max_of_windows": round(max(w["p99"] for w in ws) / 1000, 3),
                                    "max": round(max(w["max"] for w in ws) / 1000, 3)}
        return out


# =============================================================================================
# ZooKeeper + broker
# =============================================================================================

class Cluster:
    """Embedded ZooKeeper + one BrokerProcess; ``close()`` stops both (idempotent)."""

    def __init__(self, data_dir: Path, overrides: dict[str, str]) -> None:
        from broker.cluster.embedded_zk import EmbeddedZooKeeper
        from broker.cluster.net import free_port

        self.data_dir = data_dir
        self.zk = EmbeddedZooKeeper(data_dir / "zk")
        self.port = free_port()
        self.log_dirs = data_dir / "kafka-logs"
        self.overrides = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dirs),
            "zookeeper.connect": "",  # filled once ZooKeeper runs
        }
        self.overrides.update(overrides)
        self.broker: Any = None

    def start(self, timeout: float) -> None:
        from broker.cluster.local import BrokerProcess

        progress("starting ZooKeeper")
        self.zk.start()
        self.overrides["zookeeper.connect"] = self.overrides["zookeeper.connect"] or f"{self.zk.connect_string}/logbus"
        progress(f"starting broker on 127.0.0.1:{self.port} (log dir {self.log_dirs})")
        self.broker = BrokerProcess(REPO / "conf" / "server.properties", self.data_dir / "broker",
                                    self.overrides, start_timeout=timeout)
        self.broker.start()
        progress(f"broker up: pid {self.broker.pid}, output in {self.broker.out_path}")

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def check_alive(self) -> None:
        if self.broker is not None and not self.broker.alive:
            raise RuntimeError(f"broker exited with code {self.broker.returncode}; "
                               f"{self.broker.out_path} ends with: {self.broker.log_tail()}")

    def close(self) -> None:
        if self.broker is not None:
            progress("stopping broker")
            try:
                code = self.broker.stop()
                if code not in (0, None, -signal.SIGTERM):
                    progress(f"broker exited with code {code}")
            except Exception as exc:  # keep going: ZooKeeper must stop too
                progress(f"broker stop failed: {exc!r}; killing")
                with contextlib.suppress(Exception):
                    self.broker.kill()
        progress("stopping ZooKeeper")
        self.zk.stop()


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0) -> None:
    """Create topics (name -> partitions) through the admin API and wait until every
    partition has a leader in Metadata."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=1) for t, n in topics.items()],
                                  operation_timeout=timeout, request_timeout=timeout)
    for fut in futures.values():
        fut.result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        ok = all(
            t in md.topics and md.topics[t].error is None and len(md.topics[t].partitions) == n
            and all(p.leader >= 0 and p.error is None for p in md.topics[t].partitions.values())
            for t, n in topics.items()
        )
        if ok:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {list(topics)} not ready in Metadata after {timeout:g}s: "
                               f"{ {t: (md.topics.get(t) and md.topics[t].error) for t in topics} }")
        time.sleep(0.2)


# =============================================================================================
# Phases
# =============================================================================================

def produce_phase(bootstrap: str, topic: str, records: int, timeout: float,
                  alive: Callable[[], None], extra: dict[str, str] | None = None) -> dict[str, Any]:
    """Tight produce loop of 100-byte values; time from the first produce() to flush()'s end."""
    from confluent_kafka import Producer

    errors: list[str] = []
    err_count = [0]

    def on_delivery(err: Any, msg: Any) -> None:  # called for failed records only
        if err is not None:
            err_count[0] += 1
            if len(errors) < 5:
                errors.append(str(err))

    conf = {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "compression.type": "none",
        "enable.idempotence": False,
        "batch.num.messages": 10000,          # librdkafka default
        "batch.size": 1000000,                # librdkafka default (bytes per batch)
        "queue.buffering.max.messages": 1_000_000,  # ~1 s of records; BufferError beyond that
        "queue.buffering.max.kbytes": 2 * 1024 * 1024,
        "delivery.report.only.error": True,   # success reports would cost a Python call each
        "on_delivery": on_delivery,
        "statistics.interval.ms": 500,
    }
    conf.update(extra or {})
    stats = ClientStats()
    p = Producer({**conf, "stats_cb": stats})
    p.list_topics(topic, timeout=10)  # metadata before the clock starts
    value = os.urandom(RECORD_SIZE)
    produce, poll = p.produce, p.poll
    buffer_full = 0
    sent = 0
    truncated = False
    t0 = time.perf_counter()
    deadline = t0 + timeout
    while sent < records:
        try:
            produce(topic, value)
        except BufferError:
            buffer_full += 1
            poll(0.001)
            continue
        sent += 1
        if not sent & 1023:
            poll(0)
            if not sent & 0xFFFF:
                if time.perf_counter() > deadline:
                    truncated = True
                    break
                alive()
    t_sent = time.perf_counter()
    left = p.flush(max(deadline + 30 - time.perf_counter(), 5))
    t1 = time.perf_counter()
    elapsed = t1 - t0
    p.poll(0.6)  # one more statistics report after the last response
    client = stats.summary(elapsed)
    if client.get("produce_requests"):
        client["records_per_produce_request"] = round(sent / client["produce_requests"])
    delivered = sent - left - err_count[0]
    return {
        "records": sent, "delivered": delivered, "undelivered_at_flush_timeout": left,
        "delivery_errors": err_count[0], "error_samples": errors, "buffer_full_waits": buffer_full,
        "seconds": round(elapsed, 3), "enqueue_seconds": round(t_sent - t0, 3),
        "records_s": round(delivered / elapsed), "mb_s": round(mib(delivered * RECORD_SIZE) / elapsed, 2),
        "truncated_by_timeout": truncated, "client_stats": client,
        "settings": {k: v for k, v in conf.items() if k not in ("bootstrap.servers", "on_delivery")},
    }


def consume_phase(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float,
                  alive: Callable[[], None], extra: dict[str, str] | None = None) -> dict[str, Any]:
    """A librdkafka consumer assigned to every partition at offset 0 reads all records."""
    from confluent_kafka import Consumer, Message, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{os.getpid()}-{time.time_ns()}",  # required by the client; no group is joined (assign)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "statistics.interval.ms": 500,
        # librdkafka stops fetching a partition whose local queue holds queued.min.messages
        # (default 100,000) and then waits fetch.queue.backoff.ms (default 1000 ms) before the
        # next fetch: a client-side pause that cuts a fast reader to ~200,000 records/s whatever
        # the broker does. 0 keeps the prefetch going, and a higher queued.min.messages keeps
        # the fetcher busy with 6 partitions (measured both ways: docs/performance.md).
        "fetch.queue.backoff.ms": 0,
        "queued.min.messages": 1_000_000,
    }
    conf.update(extra or {})
    stats = ClientStats()
    c = Consumer({**conf, "stats_cb": stats})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = [c.get_watermark_offsets(tp, timeout=10) for tp in tps]
        log_end = sum(hi for _lo, hi in ends)
        log_start = sum(lo for lo, _hi in ends)
        target = log_end - log_start
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        consume = c.consume
        message_error = Message.error
        got = 0
        errs: list[str] = []
        bad_size = 0
        truncated = False
        t0 = time.perf_counter()
        deadline = t0 + timeout
        t_first = None
        last_check = t0
        while got < target:
            msgs = consume(min(10000, target - got), 0.5)
            if not msgs:
                pass
            else:
                if t_first is None:
                    t_first = time.perf_counter()
                failed = list(filter(None, map(message_error, msgs)))  # C-level loop over the batch
                got += len(msgs) - len(failed)
                errs.extend(str(e) for e in failed[: max(0, 5 - len(errs))])
                last = msgs[-1]
                if last.error() is None and len(last.value() or b"") != RECORD_SIZE:
                    bad_size += 1
            now = time.perf_counter()
            if now - last_check > 1.0:
                last_check = now
                if now > deadline:
                    truncated = True
                    break
                alive()
        t1 = time.perf_counter()
        c.consume(1, 0.6)  # one more statistics report
    finally:
        c.close()
    elapsed = t1 - t0
    return {
        "records": got, "log_records": target, "log_end_offsets": log_end, "produced": expected,
        "errors": errs, "bad_value_sizes": bad_size,
        "seconds": round(elapsed, 3),
        "first_record_after_s": round(t_first - t0, 3) if t_first else None,
        "records_s": round(got / elapsed), "mb_s": round(mib(got * RECORD_SIZE) / elapsed, 2),
        "truncated_by_timeout": truncated, "client_stats": stats.summary(t1 - t0),
        "settings": {k: v for k, v in conf.items() if k not in ("bootstrap.servers", "group.id")}
                    | {"consume_batch": 10000, "fetch.wait.max.ms": "default (500)",
                       "fetch.max.bytes": "default (52428800)", "max.partition.fetch.bytes": "default (1048576)"},
    }


_LAT_HDR = struct.Struct("<Bq")  # flag (0 warm-up, 1 measured), send time in ns (CLOCK_REALTIME)


def _latency_consumer(conn: Any, bootstrap: str, topic: str, partitions: int) -> None:
    """Child process: read the latency topic from offset 0 and record receive - send times."""
    from confluent_kafka import Consumer, TopicPartition

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    stats = ClientStats()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lat-{os.getpid()}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "enable.partition.eof": False, "fetch.wait.max.ms": 100,
                  "statistics.interval.ms": 1000, "stats_cb": stats})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    lat = array.array("q")
    sent_at = array.array("q")
    warm = 0
    errors = 0
    expected: int | None = None
    give_up: float | None = None
    poll, now_ns, unpack = c.poll, time.time_ns, _LAT_HDR.unpack_from
    cpu0 = time.process_time()  # all threads of this process
    conn.send("ready")
    try:
        while True:
            m = poll(0.05)
            if m is not None:
                recv = now_ns()
                if m.error():
                    errors += 1
                else:
                    flag, sent = unpack(m.value())
                    if flag:
                        lat.append(recv - sent)
                        sent_at.append(sent)
                    else:
                        warm += 1
                        if warm == 1:
                            conn.send("warm")
            if conn.poll():
                msg = conn.recv()
                if msg == "abort":
                    break
                expected, give_up = msg, time.monotonic() + 10.0
            if expected is not None and (len(lat) >= expected or time.monotonic() > give_up):
                break
    finally:
        c.close()
    conn.send({"latencies_ns": lat.tobytes(), "sent_ns": sent_at.tobytes(), "warmup": warm, "errors": errors,
               "cpu_s": time.process_time() - cpu0, "client_stats": stats.summary()})


def _percentile(sorted_vals: list[int], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(round(q / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def latency_phase(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
                  alive: Callable[[], None], on_start: Callable[[int], None] | None = None,
                  linger_ms: int = 0) -> dict[str, Any]:
    """Paced producer (acks=1, ``linger_ms``) at ``rate`` records/s; a consumer process reads."""
    from confluent_kafka import Producer

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_latency_consumer, args=(child, bootstrap, topic, partitions), daemon=True)
    proc.start()
    p = None
    try:
        if not parent.poll(30) or parent.recv() != "ready":
            raise RuntimeError("latency consumer did not start")
        if on_start:
            on_start(proc.pid)
        err_count = [0]
        acks = array.array("q")  # ack time - send time of measured records (delivery reports)
        unpack = _LAT_HDR.unpack_from

        def on_delivery(err: Any, msg: Any) -> None:
            now = now_ns()
            if err is not None:
                err_count[0] += 1
                return
            flag, sent_ns = unpack(msg.value())
            if flag:
                acks.append(now - sent_ns)

        now_ns = time.time_ns
        conf = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": linger_ms, "compression.type": "none",
                "enable.idempotence": False, "on_delivery": on_delivery}
        pstats = ClientStats()
        p = Producer({**conf, "statistics.interval.ms": 1000, "stats_cb": pstats})
        p.list_topics(topic, timeout=10)
        pad = os.urandom(RECORD_SIZE - _LAT_HDR.size)
        pack, produce, poll = _LAT_HDR.pack, p.produce, p.poll
        # warm-up: until the consumer has seen a record (connections and fetch sessions exist)
        deadline = time.monotonic() + 30
        seen = False
        while not seen:
            for part in range(partitions):
                produce(topic, pack(0, now_ns()) + pad, partition=part)
            p.flush(5)
            if parent.poll(0.05):
                seen = parent.recv() == "warm"
            if time.monotonic() > deadline:
                raise RuntimeError("latency consumer saw no warm-up record in 30s")
        time.sleep(0.2)
        # paced run: record i is due at t0 + i / rate
        sent = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        last_alive = t0
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            due = int((now - t0) * rate) + 1
            while sent < due:
                produce(topic, pack(1, now_ns()) + pad)
                sent += 1
            poll(0)
            if now - last_alive > 1.0:
                last_alive = now
                alive()
            sleep = t0 + sent / rate - time.perf_counter()
            if sleep >= 0.002:
                poll(sleep - 0.001)  # serves delivery reports while it waits (whole ms only)
            elif sleep > 0:
                time.sleep(sleep)  # poll() would round a sub-ms wait down to 0 and spin
        elapsed = time.perf_counter() - t0
        left = p.flush(15)
        p.poll(1.1)  # a statistics report after the last response
        parent.send(sent)
        if not parent.poll(40):
            raise RuntimeError("latency consumer did not report")
        res = parent.recv()
    except BaseException:
        with contextlib.suppress(Exception):
            parent.send("abort")
        raise
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    lat = array.array("q")
    lat.frombytes(res["latencies_ns"])
    sent_at = array.array("q")
    sent_at.frombytes(res["sent_ns"])
    vals = sorted(lat)
    # when the slow records were sent: 100 ms windows, the worst by max latency
    windows: dict[int, list[int]] = {}
    start_ns = min(sent_at) if sent_at else 0
    for s_ns, l_ns in zip(sent_at, lat):
        windows.setdefault((s_ns - start_ns) // 100_000_000, []).append(l_ns)
    worst = sorted(windows.items(), key=lambda kv: -max(kv[1]))[:8]
    slow = sum(1 for v in lat if v > AIM_P99_MS * 1e6)
    slow_windows = sum(1 for v in windows.values() if max(v) > AIM_P99_MS * 1e6)
    ack_vals = sorted(acks)
    ms = lambda ns: round(ns / 1e6, 3)  # noqa: E731
    return {
        "target_rate": rate, "seconds": round(elapsed, 3), "sent": sent,
        "achieved_rate": round(sent / elapsed), "received": len(vals),
        "missing": sent - len(vals), "delivery_errors": err_count[0], "unflushed": left,
        "consumer_errors": res["errors"], "consumer_cpu_s": res["cpu_s"],
        "producer_stats": pstats.summary(), "consumer_stats": res["client_stats"],
        "p50_ms": ms(_percentile(vals, 50)), "p90_ms": ms(_percentile(vals, 90)),
        "p99_ms": ms(_percentile(vals, 99)), "p999_ms": ms(_percentile(vals, 99.9)),
        "max_ms": ms(vals[-1]) if vals else None, "min_ms": ms(vals[0]) if vals else None,
        "over_aim": {"records": slow, "windows_100ms": slow_windows, "of_windows": len(windows),
                     "worst_windows": [{"t_s": round(k / 10, 1), "records": len(v), "max_ms": round(max(v) / 1e6, 2),
                                        "median_ms": round(sorted(v)[len(v) // 2] / 1e6, 2)} for k, v in worst]},
        "produce_ack": {"records": len(ack_vals), "p50_ms": ms(_percentile(ack_vals, 50)),
                        "p99_ms": ms(_percentile(ack_vals, 99)), "p999_ms": ms(_percentile(ack_vals, 99.9)),
                        "max_ms": ms(ack_vals[-1]) if ack_vals else None},
        "settings": {"producer": {"acks": 1, "linger.ms": linger_ms, "partitioner": "librdkafka default (no keys)"},
                     "consumer": {"fetch.wait.max.ms": 100, "fetch.min.bytes": "default (1)",
                                  "process": "separate (spawned) process, poll() per record"},
                     "timestamp": "time.time_ns() at produce(), carried in the value's first 9 bytes"},
    }


# =============================================================================================
# Profiling
# =============================================================================================

class Profiler:
    """py-spy record against a pid, stopped with SIGINT (py-spy then writes its file)."""

    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        self.pid, self.out, self.rate = pid, out, rate
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if not exe:
            raise RuntimeError("py-spy not found (pip install py-spy)")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out.with_suffix(".py-spy.log"), "wb")
        self.proc = subprocess.Popen(
            [exe, "record", "--pid", str(self.pid), "--rate", str(self.rate), "--nonblocking",
             "--format", "speedscope", "--output", str(self.out)],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        time.sleep(1.0)  # py-spy attaches
        if self.proc.poll() is not None:
            raise RuntimeError(f"py-spy exited at once; see {self.log.name}")

    def stop(self) -> Path | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()
        return self.out if self.out.exists() else None


def summarize_speedscope(path: Path, top: int = 25) -> dict[str, Any]:
    """Where the broker's busy time goes, from py-spy's speedscope file (all threads).

    py-spy counts the reactor's epoll_wait as active when it cannot tell (--nonblocking), so
    samples whose innermost frame is ``doPoll`` are reported apart as the reactor waiting, and
    the shares below are of the remaining (busy) samples: self time per function line and per
    source file, and inclusive time per function."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    label = lambda i: f"{frames[i]['name']} ({_short(frames[i].get('file', '?'))}:{frames[i].get('line', '?')})"  # noqa: E731
    func = lambda i: f"{frames[i]['name']} ({_short(frames[i].get('file', '?'))})"  # noqa: E731
    self_c: dict[str, float] = {}
    file_c: dict[str, float] = {}
    incl_c: dict[str, float] = {}
    busy = idle = 0.0
    count = 0
    for prof in data["profiles"]:
        for stack, w in zip(prof.get("samples", []), prof.get("weights", [])):
            if not stack:
                continue
            count += 1
            if frames[stack[-1]]["name"].endswith("doPoll"):
                idle += w
                continue
            busy += w
            leaf = label(stack[-1])
            self_c[leaf] = self_c.get(leaf, 0) + w
            f = _short(frames[stack[-1]].get("file", "?"))
            f = "twisted/" + f.split("twisted/", 1)[1].split("/", 1)[0] + "/*" if "twisted/" in f else f
            file_c[f] = file_c.get(f, 0) + w
            for name in {func(i) for i in stack}:
                incl_c[name] = incl_c.get(name, 0) + w
    pct = lambda d: [(k, round(100.0 * v / busy, 1)) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]] if busy else []  # noqa: E731
    return {"samples": count, "sampled_seconds": round(busy + idle, 2), "busy_seconds": round(busy, 2),
            "reactor_wait_seconds": round(idle, 2),
            "self": pct(self_c), "self_by_file": pct(file_c), "inclusive": pct(incl_c)}


def _short(file: str) -> str:
    for marker in ("/work/main/", "site-packages/", "lib/python3.11/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file


# =============================================================================================
# Report
# =============================================================================================

def machine_info(data_dir: Path) -> dict[str, Any]:
    import confluent_kafka
    import psutil

    model = "?"
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    git = "?"
    with contextlib.suppress(Exception):
        git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5).stdout.strip() or "(no commit)"
    return {
        "cpu": model, "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
        "kernel": platform.release(), "python": platform.python_version(),
        "confluent_kafka": getattr(confluent_kafka, "__version__", None) or str(confluent_kafka.version()), "librdkafka": confluent_kafka.libversion()[0],
        "data_dir": str(data_dir), "data_fs": fs_of(data_dir), "git": git,
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def render(result: dict[str, Any]) -> str:
    out: list[str] = []
    w = out.append
    m = result["machine"]
    w(f"logbus produce/consume benchmark  {m['date']}  git {m['git']}")
    w(f"machine: {m['cpus']} x {m['cpu']}, {m['memory_gib']} GiB, Linux {m['kernel']}, Python {m['python']}, "
      f"librdkafka {m['librdkafka']}; log dir {m['data_fs']}")
    w(f"records: {RECORD_SIZE}-byte values, no keys, no compression; MB = 2^20 bytes of values (LinkedIn's convention)")
    bg = result.get("background")
    if bg:
        w(f"background load before start: {bg['machine_busy_pct']}% of all CPUs busy"
          + ("".join(f"; {u['cores']} cores: {u['cmd'][:60]}" for u in bg["busy_processes"][:3])
             if bg["machine_busy_pct"] >= 10 else ""))
    lim = result.get("limits", {})
    if lim:
        w("")
        w("machine limits (measured in this run)")
        if "loopback" in lim:
            lb = lim["loopback"]
            w(f"  loopback TCP, 1 stream, 2 processes           {lb['mb_s']:>9,.1f} MB/s  "
              f"(= {lb['mb_s'] * MIB / RECORD_SIZE:>10,.0f} 100-byte records/s)")
        if "disk" in lim:
            d = lim["disk"]
            w(f"  disk sequential write + fsync ({mib(d['bytes']):.0f} MiB)        {d['write_fsync_mb_s']:>9,.1f} MB/s")
            w(f"  disk sequential read, cold (fadvise DONTNEED) {d['read_cold_mb_s']:>9,.1f} MB/s")
            w(f"  sequential read from page cache               {d['read_page_cache_mb_s']:>9,.1f} MB/s")
        if "client_produce_ceiling" in lim:
            c = lim["client_produce_ceiling"]
            w(f"  client ceiling: Python produce() enqueue      {c['mb_s']:>9,.1f} MB/s  "
              f"(= {c['records_s']:>10,} records/s, no broker)")
    if result.get("broker", {}).get("idle"):
        w(f"broker CPU when idle (2 s, no clients): {result['broker']['idle']['broker_cores']:.3f} cores")
    if result.get("runs"):
        w("")
        hdr = (f"{'phase':<10}{'parts':>6}{'records':>11}{'seconds':>9}{'records/s':>12}{'MB/s':>8}"
               f"{'aim':>10}{'':>8}{'broker CPU':>12}{'client CPU':>12}{'other CPU':>11}")
        w(hdr)
        w("-" * len(hdr))
        for run in result["runs"]:
            n = run["partitions"]
            for phase, aim in (("produce", AIM_PRODUCE), ("consume", AIM_CONSUME)):
                ph = run.get(phase)
                if not ph:
                    continue
                cpu = ph.get("cpu", {})
                ok = ("met" if ph["records_s"] >= aim else "MISSED") + ("*" if ph.get("contaminated") else "")
                w(f"{phase:<10}{n:>6}{ph['records']:>11,}{ph['seconds']:>9.2f}{ph['records_s']:>12,}{ph['mb_s']:>8.1f}"
                  f"{aim:>10,}{ok:>8}{_cores(cpu.get('broker_cores')):>12}{_cores(cpu.get('client_cores')):>12}"
                  f"{_cores(cpu.get('other_cores')):>11}")
        if any(run.get("latency") for run in result["runs"]):
            w("")
            hdr = (f"{'latency':<9}{'parts':>6}{'linger':>7}{'rate/s':>8}{'records':>9}{'p50 ms':>8}{'p99 ms':>8}"
                   f"{'p99.9 ms':>9}{'max ms':>8}{'aim p99':>8}{'':>8}{'broker CPU':>11}{'client CPU':>11}{'other CPU':>10}"
                   f"{'ack p50/p99 ms':>16}")
            w(hdr)
            w("-" * len(hdr))
            for run in result["runs"]:
                for la in run.get("latency", []):
                    ok = ("met" if la["p99_ms"] <= AIM_P99_MS else "MISSED") + ("*" if la.get("contaminated") else "")
                    cpu = la.get("cpu", {})
                    w(f"{'e2e':<9}{run['partitions']:>6}{la['settings']['producer']['linger.ms']:>7}{la['achieved_rate']:>8,}"
                      f"{la['received']:>9,}{la['p50_ms']:>8.2f}{la['p99_ms']:>8.2f}{la['p999_ms']:>9.2f}{la['max_ms']:>8.2f}"
                      f"{AIM_P99_MS:>8g}{ok:>8}{_cores(cpu.get('broker_cores')):>11}{_cores(cpu.get('client_cores')):>11}"
                      f"{_cores(cpu.get('other_cores')):>10}"
                      f"{la['produce_ack']['p50_ms']:>8.2f}/{la['produce_ack']['p99_ms']:<7.2f}")
        w("")
        pset = next((r["produce"]["settings"] for r in result["runs"] if r.get("produce")), {})
        cset = next((r["consume"]["settings"] for r in result["runs"] if r.get("consume")), {})
        w(f"producer: acks={pset.get('acks')}, linger.ms={pset.get('linger.ms')}, "
          f"batch.num.messages={pset.get('batch.num.messages')}, batch.size={pset.get('batch.size')}, "
          f"poll(0) every 1024 records; consumer: fetch.queue.backoff.ms={cset.get('fetch.queue.backoff.ms')}, "
          f"queued.min.messages={cset.get('queued.min.messages')}, other settings librdkafka defaults")
        extra = {**result["settings"]["producer_config"], **result["settings"]["consumer_config"]}
        if extra:
            w(f"settings changed on the command line: producer {result['settings']['producer_config']}, "
              f"consumer {result['settings']['consumer_config']}")
        w("latency: paced producer acks=1 with the linger.ms shown; consumer in its own process, poll() per record, "
          "fetch.wait.max.ms=100")
        w("CPU in cores (1.00 = one core busy for the whole phase; this machine has "
          f"{result['machine']['cpus']}); other = everything outside broker and benchmark (ZooKeeper, kernel, other users); "
          "e2e = consumer receive - producer send; ack = producer delivery report - send")
        if any(ph.get("contaminated") for run in result["runs"]
               for ph in [run.get("produce") or {}, run.get("consume") or {}, *run.get("latency", [])]):
            w(f"* other processes used more than {result['settings']['busy_threshold']} cores during this phase "
              "(after the allowed repeats): its number understates the broker")
        problems = [f"{run['partitions']}p {ph}: {msg}" for run in result["runs"] for ph, msg in run.get("problems", [])]
        if problems:
            w("")
            w("PROBLEMS:")
            out.extend(f"  {p}" for p in problems)
    for err in result.get("errors", []):
        w(f"ERROR: {err}")
    return "\n".join(out)


def _cores(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


# =============================================================================================
# main
# =============================================================================================

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=None,
                    help="records produced (and consumed) per partition count (default 5,000,000; --quick 200,000)")
    ap.add_argument("--partitions", default="1,6", help="comma-separated partition counts (default 1,6)")
    ap.add_argument("--json", type=Path, help="write the results here too (always: bench/results/latest.json)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run (~1 minute)")
    ap.add_argument("--profile", action="store_true",
                    help="py-spy the broker during every phase; speedscope files and top-function summaries "
                         "under bench/results/ (the profiler costs the broker some speed)")
    ap.add_argument("--data-dir", type=Path, help="where ZooKeeper, the broker and its log dir live "
                                                  "(default: a new temp dir in /tmp, removed afterwards)")
    ap.add_argument("--keep-data", action="store_true", help="do not remove the data dir at the end")
    ap.add_argument("--latency-rate", type=int, default=10_000, help="records/s of the latency phase (default 10000)")
    ap.add_argument("--latency-seconds", type=float, default=None, help="length of the latency phase (default 10; --quick 3)")
    ap.add_argument("--latency-linger-ms", default="0,1", metavar="MS[,MS]",
                    help="producer linger.ms of the latency phase, one phase per value (default 0,1)")
    ap.add_argument("--phase-timeout", type=float, default=60.0,
                    help="cut a produce/consume phase after this many seconds (results marked truncated)")
    ap.add_argument("--skip-limits", action="store_true", help="do not measure the machine limits")
    ap.add_argument("--limits-only", action="store_true", help="measure the machine limits only (no broker)")
    ap.add_argument("--disk-mb", type=int, default=None, help="size of the disk test file (default 1024; --quick 256)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker property override (repeatable)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="wait up to this long for other processes' CPU load to drop below 15%% first")
    ap.add_argument("--producer-config", action="append", default=[], metavar="KEY=VALUE",
                    help="librdkafka setting for the throughput producer (repeatable)")
    ap.add_argument("--consumer-config", action="append", default=[], metavar="KEY=VALUE",
                    help="librdkafka setting for the throughput consumer (repeatable), "
                         "e.g. fetch.queue.backoff.ms=1000 for librdkafka's default")
    ap.add_argument("--busy-threshold", type=float, default=0.3, metavar="CORES",
                    help="a phase during which other processes used more CPU than this is repeated (default 0.3)")
    ap.add_argument("--retries", type=int, default=2,
                    help="how often a phase disturbed by other processes is repeated (default 2; 0 with --profile)")
    ap.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for the broker to listen")
    args = ap.parse_args(argv)
    args.partition_counts = [int(x) for x in args.partitions.split(",") if x.strip()]
    args.latency_linger = [int(x) for x in args.latency_linger_ms.split(",") if x.strip()]
    if not args.partition_counts or min(args.partition_counts) < 1:
        ap.error("--partitions needs positive integers")
    args.records = args.records or (200_000 if args.quick else 5_000_000)
    args.latency_seconds = args.latency_seconds or (3.0 if args.quick else 10.0)
    args.disk_mb = args.disk_mb or (256 if args.quick else 1024)
    return args


def _kv(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict (broker.config's parser; a bad one ends the run)."""
    from broker.config import ConfigError, parse_overrides

    try:
        return parse_overrides(items)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None


class _Done(Exception):
    """Nothing more to measure (--limits-only)."""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop_cleanly_on_signals()
    owns_data = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="logbus-bench-", dir="/tmp")) if owns_data else args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "bench/produce_consume.py",
                             *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_info(data_dir),
        "aims": {"produce_records_s": AIM_PRODUCE, "consume_records_s": AIM_CONSUME, "p99_ms_at_10k": AIM_P99_MS},
        "linkedin_2014": LINKEDIN,
        "settings": {"records_per_run": args.records, "record_bytes": RECORD_SIZE, "partitions": args.partition_counts,
                     "latency_rate": args.latency_rate, "latency_seconds": args.latency_seconds,
                     "latency_linger_ms": args.latency_linger,
                     "producer_config": _kv(args.producer_config), "consumer_config": _kv(args.consumer_config),
                     "phase_timeout_s": args.phase_timeout, "profile": args.profile,
                     "busy_threshold": args.busy_threshold, "retries": args.retries, "wait_idle_s": args.wait_idle},
        "limits": {}, "runs": [], "errors": [],
    }
    exit_code = 0
    cluster: Cluster | None = None
    profilers: list[Profiler] = []
    try:
        progress("background load check")
        result["background"] = bg = wait_for_quiet(args.wait_idle)
        progress(f"  machine {bg['machine_busy_pct']}% busy before start"
                 + "".join(f"; {u['cores']} cores: {u['cmd'][:70]}" for u in bg["busy_processes"][:3]))
        if not args.skip_limits:
            progress("machine limit: loopback TCP")
            result["limits"]["loopback"] = measure_loopback(1.0 if args.quick else 3.0)
            progress(f"  loopback {result['limits']['loopback']['mb_s']:,} MB/s")
            progress(f"machine limit: disk ({args.disk_mb} MiB in {data_dir})")
            result["limits"]["disk"] = measure_disk(data_dir, args.disk_mb)
            d = result["limits"]["disk"]
            progress(f"  write+fsync {d['write_fsync_mb_s']:,} MB/s, read cold {d['read_cold_mb_s']:,} MB/s, "
                     f"page cache {d['read_page_cache_mb_s']:,} MB/s")
            progress("client ceiling: produce() enqueue rate with no broker")
            result["limits"]["client_produce_ceiling"] = measure_client_ceiling(min(args.records, 1_000_000))
            progress(f"  {result['limits']['client_produce_ceiling']['records_s']:,} records/s")
        if args.limits_only:
            raise _Done

        overrides = _kv(args.override)
        cluster = Cluster(data_dir, overrides)
        result["broker"] = {"config": "conf/server.properties", "overrides": cluster.overrides}
        cluster.start(args.start_timeout)
        result["broker"]["overrides"] = dict(cluster.overrides)
        topics = {}
        for n in args.partition_counts:
            topics[f"bench-p{n}"] = n
            for linger in args.latency_linger:
                topics[f"bench-latency-p{n}-linger{linger}"] = n
        progress(f"creating topics {topics}")
        create_topics(cluster.bootstrap, topics)
        pid = cluster.broker.pid
        meter = CpuMeter(pid).start()
        time.sleep(2.0)
        result["broker"]["idle"] = meter.stop()
        progress(f"broker idle CPU {result['broker']['idle']['broker_cores']} cores")

        retries = 0 if args.profile else args.retries  # py-spy itself would count as "other"

        def measured(label: str, fn: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
            """Run a phase; repeat it (up to --retries times, after waiting for quiet) while other
            processes used more than --busy-threshold cores during it."""
            discarded: list[dict[str, Any]] = []
            for i in range(retries + 1):
                if i:
                    wait_for_quiet(args.wait_idle)
                res = fn(i)
                other = res.get("cpu", {}).get("other_cores")
                busy = other is not None and other > args.busy_threshold
                if not busy or i == retries:
                    res["contaminated"] = busy
                    res["attempt"] = i + 1
                    if discarded:
                        res["discarded_attempts"] = discarded
                    return res
                progress(f"  {label}: other processes used {other} cores during the phase; repeating it")
                discarded.append({k: res[k] for k in ("records_s", "p50_ms", "p99_ms", "cpu") if k in res})
            raise AssertionError("unreachable")

        def profiled(name: str) -> Profiler | None:
            if not args.profile:
                return None
            prof = Profiler(pid, RESULTS_DIR / f"profile-{stamp}-{name}.speedscope.json")
            profilers.append(prof)
            prof.start()
            return prof

        def metered(name: str, phase: Callable[[], dict[str, Any]], report: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
            """Run one phase under the broker's CPU meter (and py-spy with --profile), print
            ``report(result)``, and check the broker survived it."""
            prof = profiled(name)
            meter = CpuMeter(pid).start()
            ph = phase()
            ph["cpu"] = meter.stop()
            if prof:
                _finish_profile(prof, ph)
            progress(report(ph))
            cluster.check_alive()
            return ph

        def rate(ph: dict[str, Any]) -> str:
            cpu = ph["cpu"]
            return (f"{ph['records_s']:,} records/s ({ph['mb_s']} MB/s), CPU broker {cpu['broker_cores']} "
                    f"client {cpu['client_cores']} other {cpu['other_cores']} cores")

        def suffix(i: int) -> str:
            return f"-r{i}" if i else ""

        for n in args.partition_counts:
            run: dict[str, Any] = {"partitions": n, "problems": []}
            result["runs"].append(run)

            def produce(i: int, n: int = n) -> dict[str, Any]:
                topic = f"bench-p{n}{suffix(i)}"
                if i:
                    create_topics(cluster.bootstrap, {topic: n})
                progress(f"[{n}p] produce {args.records:,} records to {topic}")
                ph = metered(f"produce-p{n}", lambda: produce_phase(
                    cluster.bootstrap, topic, args.records, args.phase_timeout, cluster.check_alive,
                    _kv(args.producer_config)), lambda res: f"[{n}p]   {rate(res)}; delivery errors {res['delivery_errors']}")
                ph["topic"] = topic
                return ph

            run["produce"] = ph = measured(f"[{n}p] produce", produce)
            run["topic"] = ph["topic"]
            if ph["delivery_errors"] or ph["undelivered_at_flush_timeout"]:
                run["problems"].append(("produce", f"{ph['delivery_errors']} delivery errors "
                                        f"{ph['error_samples']}, {ph['undelivered_at_flush_timeout']} undelivered"))
            if ph["truncated_by_timeout"]:
                run["problems"].append(("produce", f"cut at {args.phase_timeout:g}s after {ph['records']:,} records"))

            def consume(i: int, n: int = n, topic: str = run["topic"], delivered: int = ph["delivered"]) -> dict[str, Any]:
                progress(f"[{n}p] consume {topic} from offset 0")
                return metered(f"consume-p{n}", lambda: consume_phase(
                    cluster.bootstrap, topic, n, delivered, args.phase_timeout, cluster.check_alive,
                    _kv(args.consumer_config)), lambda res: f"[{n}p]   {rate(res)}")

            run["consume"] = ph = measured(f"[{n}p] consume", consume)
            delivered = run["produce"]["delivered"]
            if ph["records"] != delivered or ph["log_records"] != delivered:
                run["problems"].append(("consume", f"read {ph['records']:,} of {ph['log_records']:,} in the log; "
                                        f"producer delivered {delivered:,}"))
            if ph["errors"] or ph["bad_value_sizes"]:
                run["problems"].append(("consume", f"errors {ph['errors']}, bad value sizes {ph['bad_value_sizes']}"))

            run["latency"] = []
            for linger in args.latency_linger:
                def latency(i: int, n: int = n, linger: int = linger) -> dict[str, Any]:
                    topic = f"bench-latency-p{n}-linger{linger}{suffix(i)}"
                    if i:
                        create_topics(cluster.bootstrap, {topic: n})
                    progress(f"[{n}p] end-to-end latency at {args.latency_rate:,} records/s for "
                             f"{args.latency_seconds:g}s, producer linger.ms={linger}")
                    meter_box: list[CpuMeter] = []
                    prof = profiled(f"latency-p{n}-linger{linger}")
                    la = latency_phase(
                        cluster.bootstrap, topic, n, args.latency_rate, args.latency_seconds,
                        cluster.check_alive, on_start=lambda child: meter_box.append(CpuMeter(pid).start()),
                        linger_ms=linger)
                    la["cpu"] = meter_box[0].stop(la.pop("consumer_cpu_s")) if meter_box else {}
                    la["topic"] = topic
                    if prof:
                        _finish_profile(prof, la)
                    progress(f"[{n}p]   p50 {la['p50_ms']} ms, p99 {la['p99_ms']} ms, max {la['max_ms']} ms "
                             f"({la['received']:,}/{la['sent']:,} received; produce ack p99 "
                             f"{la['produce_ack']['p99_ms']} ms; other CPU {la['cpu'].get('other_cores')} cores)")
                    cluster.check_alive()
                    return la

                la = measured(f"[{n}p] latency linger.ms={linger}", latency)
                run["latency"].append(la)
                if la["missing"] or la["delivery_errors"]:
                    run["problems"].append(("latency", f"linger.ms={linger}: {la['missing']} records not received, "
                                            f"{la['delivery_errors']} delivery errors"))
        if any(run["problems"] for run in result["runs"]):
            exit_code = 1
    except _Done:
        pass
    except KeyboardInterrupt as exc:
        why = str(exc) or "Ctrl-C"
        progress(f"interrupted ({why}); cleaning up")
        result["errors"].append(f"interrupted: {why}")
        exit_code = 130
    except Exception as exc:
        progress(f"FAILED: {exc!r}")
        result["errors"].append(repr(exc))
        if cluster is not None and cluster.broker is not None:
            result["errors"].append(f"broker output tail: {cluster.broker.log_tail(15)}")
        exit_code = 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the cleanup
        for prof in profilers:
            with contextlib.suppress(Exception):
                prof.stop()
        if cluster is not None:
            cluster.close()
        if owns_data and not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
        elif cluster is not None:
            progress(f"data kept in {data_dir}")
        signal.signal(signal.SIGINT, signal.default_int_handler)

    for run in result["runs"]:
        run["problems"] = [list(p) for p in run["problems"]]
    text = render(result)
    result["table"] = text
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamped = RESULTS_DIR / f"produce_consume-{stamp}.json"
    for path in filter(None, [RESULTS_DIR / "latest.json", stamped, args.json]):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(text)
    progress(f"results in {stamped.relative_to(REPO)} (and bench/results/latest.json)"
             + (f" and {args.json}" if args.json else ""))
    return exit_code


def _finish_profile(prof: Profiler, phase: dict[str, Any]) -> None:
    path = prof.stop()
    if path is None:
        phase["profile"] = {"error": f"py-spy wrote nothing; see {prof.out.with_suffix('.py-spy.log')}"}
        return
    summary = summarize_speedscope(path)
    txt = path.with_name(path.name.replace(".speedscope.json", ".top.txt"))
    lines = [f"py-spy samples: {summary['samples']} = {summary['sampled_seconds']} s of thread time, of which "
             f"{summary['reactor_wait_seconds']} s the reactor waiting in epoll (left out below) and "
             f"{summary['busy_seconds']} s busy", f"speedscope file: {path.name} (open at https://www.speedscope.app/)",
             f"phase: {phase.get('records_s', phase.get('achieved_rate'))} records/s, broker CPU "
             f"{phase.get('cpu', {}).get('broker_cores')} cores", "",
             "self time by source file, % of busy samples:"]
    lines += [f"  {p:5.1f}%  {name}" for name, p in summary["self_by_file"][:12]]
    lines += ["", "self time (innermost function:line), % of busy samples:"]
    lines += [f"  {p:5.1f}%  {name}" for name, p in summary["self"]]
    lines += ["", "inclusive time (function anywhere on the stack), % of busy samples:"]
    lines += [f"  {p:5.1f}%  {name}" for name, p in summary["inclusive"]]
    txt.write_text("\n".join(lines) + "\n")
    phase["profile"] = {"speedscope": str(path.relative_to(REPO)), "summary": str(txt.relative_to(REPO)),
                        "busy_seconds": summary["busy_seconds"], "reactor_wait_seconds": summary["reactor_wait_seconds"],
                        "self_by_file": summary["self_by_file"][:10],
                        "top_self": summary["self"][:10], "top_inclusive": summary["inclusive"][:15]}
    progress(f"  profile: {txt.relative_to(REPO)}")
    for name, p in summary["self"][:8]:
        progress(f"    {p:5.1f}%  {name}")


if __name__ == "__main__":
    sys.exit(main())
