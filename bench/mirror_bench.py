#!/usr/bin/env python3
"""Mirror-maker throughput against producing straight into the aggregate cluster, same run.

    .venv/bin/python bench/mirror_bench.py [--records 300000] [--partitions 3] [--streams 3] [--size 100]
        [--py-spy mirror.txt] [--kill-at 0.5]

1. an embedded ZooKeeper, a source cluster and an aggregate cluster (one broker each, own chroots);
2. direct: librdkafka (confluent_kafka, acks=all, linger.ms=5) produces N keyed records of
   --size bytes straight into the aggregate cluster; records/s = N / time to all acknowledged;
3. the same N records are preloaded into the source; `python -m mirror` copies them into the
   aggregate cluster (acks=all, idempotent, commit every 5 s); records/s = N / time from the
   mirror's start until the aggregate holds all N (log end offsets summed);
4. prints both and the ratio (the issue's aim: >= 85 %). Everything is stopped on exit.

``--kill-at F`` (exact resume): afterwards a second mirror copies the source into a second
target topic and is SIGKILLed once the target holds F of the records; N/10 more records are
produced into the source, and the mirror is started again. It prints the time from that restart
until the next copy shows up (the tail scan of every target partition happens in between) and
the target's record count, which equals the source's when nothing was copied twice.

``--py-spy FILE`` runs the mirror under ``py-spy record`` (collapsed stacks into FILE; it slows the
mirror a little, so do not quote that run's rates).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer as RdProducer  # noqa: E402

from bench.feeding import produce_waiting  # noqa: E402
from bench.options import int_options  # noqa: E402
from broker.client.admin import AdminClient  # noqa: E402
from broker.client.simple_consumer import SimpleConsumer  # noqa: E402
from broker.cluster.embedded_zk import EmbeddedZooKeeper  # noqa: E402
from broker.cluster.local import BrokerProcess, write_properties  # noqa: E402
from broker.cluster.net import free_port  # noqa: E402


def broker(zk: str, home: Path) -> BrokerProcess:
    port = free_port()
    return BrokerProcess({"broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                          "log.dirs": str(home / "data"), "zookeeper.connect": zk}, home).start()


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    p = RdProducer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                    "queue.buffering.max.messages": 1000000})
    value = b"x" * size
    start = time.perf_counter()
    for i in range(n):
        produce_waiting(p, topic, value, 0.01, key=b"k%d" % (i % 1000))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - start


def end_offsets(b: BrokerProcess, topic: str, partitions: int) -> int:
    try:
        with SimpleConsumer(b.host, b.port, timeout=5) as c:
            return sum(c.latest_offset(topic, p) for p in range(partitions))
    except Exception:
        return 0


def main() -> int:
    ap = int_options(records=300000, partitions=3, streams=3, size=100)
    ap.add_argument("--py-spy", metavar="FILE", help="profile the mirror into FILE (collapsed stacks)")
    ap.add_argument("--kill-at", type=float, default=0.0, metavar="F",
                    help="also SIGKILL a mirror at this fraction of the copies and restart it (exact resume)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    zk = EmbeddedZooKeeper(home / "zk")
    zk.start()
    procs: list = []
    try:
        src = broker(f"{zk.connect_string}/src", home / "src")
        procs.append(src)
        agg = broker(f"{zk.connect_string}/agg", home / "agg")
        procs.append(agg)
        for b, t in ((src, "bench"), (agg, "direct")):
            with AdminClient(b.bootstrap) as a:
                a.create_topic(t, args.partitions, 1)
        time.sleep(1)
        n = args.records
        direct = produce(agg.bootstrap, "direct", n, args.size)
        produce(src.bootstrap, "bench", n, args.size)
        cfg = write_properties(home / "src.properties", {"zookeeper.connect": f"{zk.connect_string}/src",
                                                          "group.id": "bench", "mirror.source.name": "src"})
        pcfg = write_properties(home / "agg.properties", {"bootstrap.servers": agg.bootstrap})
        cmd = [sys.executable, "-m", "mirror", "--consumer.config", str(cfg), "--producer.config", str(pcfg),
               "--whitelist", "bench", "--num.streams", str(args.streams), "--status.file", str(home / "status.json")]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        start = time.perf_counter()
        with open(home / "mirror.out", "wb") as out:
            mm = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        procs.append(mm)
        if args.py_spy:  # attached, so it ends (and writes FILE) when the mirror does
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--format", "raw",
                                    "--rate", "200", "--nonblocking", "-p", str(mm.pid),
                                    "-o", str(Path(args.py_spy).resolve())],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(spy)
        first = None  # when the first copied record showed up in the aggregate
        while True:
            copied = end_offsets(agg, "bench", args.partitions)
            if copied and first is None:
                first = (time.perf_counter() - start, copied)
            if copied >= n:
                break
            if mm.poll() is not None:
                raise SystemExit(f"mirror exited: {(home / 'mirror.out').read_text()[-2000:]}")
            time.sleep(0.05)
        mirrored = time.perf_counter() - start
        mm.terminate()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        mm.wait(60)
        if args.py_spy:
            spy.wait(60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        d_rate, m_rate = n / direct, n / mirrored
        print(f"records={n} size={args.size}B partitions={args.partitions} streams={args.streams}")
        print(f"direct produce into the aggregate (librdkafka, acks=all): {d_rate:,.0f} rec/s ({direct:.2f} s)")
        print(f"mirror-maker source -> aggregate (incl. start-up):       {m_rate:,.0f} rec/s ({mirrored:.2f} s)")
        print(f"ratio: {100 * m_rate / d_rate:.0f} %")
        if first is not None and mirrored > first[0]:
            print(f"(start-up until the first copies: {first[0]:.2f} s; copy rate after it: "
                  f"{(n - first[1]) / (mirrored - first[0]):,.0f} rec/s; mirror CPU {cpu:.2f} s in all)")
        if args.kill_at:
            restart(home, zk.connect_string, src, agg, args, env)
        return 0
    finally:
        for p in reversed(procs):
            if isinstance(p, subprocess.Popen):
                if p.poll() is None:
                    p.kill()
                    p.wait()
            else:
                p.stop()
        zk.stop()


def restart(home: Path, zk: str, src: BrokerProcess, agg: BrokerProcess, args, env: dict) -> None:
    """The --kill-at run: copy into ``resumed.bench`` (topic prefix), SIGKILL at a fraction, more
    records into the source, restart."""
    cfg = write_properties(home / "src-resume.properties", {"zookeeper.connect": f"{zk}/src", "group.id": "resume",
                                                             "mirror.source.name": "src"})
    pcfg = write_properties(home / "agg.properties", {"bootstrap.servers": agg.bootstrap})
    cmd = [sys.executable, "-m", "mirror", "--consumer.config", str(cfg), "--producer.config", str(pcfg),
           "--whitelist", "bench", "--num.streams", str(args.streams), "--topic.prefix", "resumed.",
           "--status.file", str(home / "status-resume.json")]
    n, topic = args.records, "resumed.bench"
    with open(home / "mirror-resume.out", "wb") as out:
        first = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        while end_offsets(agg, topic, args.partitions) < args.kill_at * n:
            time.sleep(0.02)
    finally:
        first.kill()
        first.wait()
    at_kill = end_offsets(agg, topic, args.partitions)
    more = n // 10
    produce(src.bootstrap, "bench", more, args.size)
    n += more
    time.sleep(7)  # the killed consumer's ZooKeeper session (6 s) ends; then its partitions are free
    started = time.perf_counter()
    with open(home / "mirror-resume.out", "ab") as out:
        second = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        while end_offsets(agg, topic, args.partitions) <= at_kill:
            time.sleep(0.02)
        to_first = time.perf_counter() - started
        while end_offsets(agg, topic, args.partitions) < n and time.perf_counter() - started < 300:
            time.sleep(0.05)
        time.sleep(2)  # anything copied twice would arrive by now
        total = end_offsets(agg, topic, args.partitions)
    finally:
        second.kill()
        second.wait()
    resumed = (home / "mirror-resume.out").read_text(errors="replace").count("resumes at")
    print(f"exact resume: SIGKILL at {at_kill:,} of {n:,} copies; restart to the next copy {to_first:.2f} s "
          f"({args.partitions} partitions scanned, {resumed} resumed past their commit); "
          f"target holds {total:,} records ({total - n:+,} against the source)")


if __name__ == "__main__":
    sys.exit(main())
