"""Helpers for mirror-maker tests: independent clusters (own ZooKeeper chroot, own brokers) on
the session's real ZooKeeper, the mirror as a `python -m mirror` subprocess, producers that
remember every acknowledged record, and a reader of the aggregate cluster."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.client.simple_consumer import SimpleConsumer
from broker.cluster.local import BrokerProcess, write_properties
from broker.cluster.net import free_port
from mirror.origin import origins
from tests.starting import start_together
from tests.teardown import delete_znodes, stopping
from tests.waiting import wait_until  # noqa: F401  (re-exported to the tests here)

REPO = Path(__file__).resolve().parents[2]
FAST = {"replica.lag.time.max.ms": "3000", "replica.fetch.backoff.ms": "100", "replica.fetch.wait.max.ms": "200",
        "zookeeper.session.timeout.ms": "6000"}




class Cluster:
    """A cluster of its own: a chroot on the shared ZooKeeper and ``n`` broker processes."""

    def __init__(self, name: str, zk_connect: str, home: Path, n: int, overrides: dict | None = None) -> None:
        self.name = name
        self.zk = zk_connect
        self.brokers: list[BrokerProcess] = []
        for i in range(n):
            props = {
                "broker.id": str(i + 1), "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                "log.dirs": str(home / f"b{i + 1}" / "data"), "zookeeper.connect": zk_connect, **FAST,
                **(overrides or {}),
            }
            self.brokers.append(BrokerProcess(props, home / f"b{i + 1}"))

    def start(self) -> Cluster:
        start_together(self.brokers)  # all spawned, then each waited for
        return self

    def stop(self) -> None:
        for b in reversed(self.brokers):
            b.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.alive) or ",".join(b.bootstrap for b in self.brokers)

    def create_topic(self, topic: str, partitions: int, rf: int = 1, configs: dict | None = None) -> None:
        with AdminClient(self.bootstrap) as admin:
            admin.create_topic(topic, partitions, rf, configs or {})
        wait_until(lambda: self.partitions_ready(topic, partitions), 30, what=f"{topic} leaders in {self.name}")

    def partitions_ready(self, topic: str, partitions: int) -> bool:
        try:
            with AdminClient(self.bootstrap) as admin:
                d = admin.describe_topics([topic])[0]
            return len(d.partitions) == partitions and all(p.leader >= 0 for p in d.partitions)
        except Exception:
            return False

    def consumer_props(self, **extra: str) -> dict:
        return {"zookeeper.connect": self.zk, "group.id": "mirror", "mirror.source.name": self.name,
                "rebalance.backoff.ms": "300", **extra}

    def read_all(self, topic: str) -> list:
        """Every record of ``topic``: MessageAndMetadata in (partition, offset) order."""
        def described():
            try:
                with AdminClient(self.bootstrap) as admin:
                    d = admin.describe_topics([topic])[0]
                alive = {b.broker_id for b in self.brokers if b.alive}
                return d if d.partitions and all(p.leader in alive for p in d.partitions) else None
            except Exception:
                return None

        desc = wait_until(described, 30, 0.2, what=f"leaders of {topic}")
        brokers = {b.broker_id: b for b in self.brokers}
        out = []
        for p in desc.partitions:
            leader = brokers[p.leader]
            with SimpleConsumer(leader.host, leader.port, timeout=10) as c:
                end = c.latest_offset(topic, p.partition)
                offset = c.earliest_offset(topic, p.partition)
                while offset < end:
                    ms = c.fetch(topic, p.partition, offset, max_bytes=4 << 20)
                    if not ms:
                        break
                    out.extend(m for m in ms if m.offset >= offset)
                    offset = ms[-1].offset + 1
        return out

    def topics(self) -> list[str]:
        with AdminClient(self.bootstrap) as admin:
            return admin.list_topics()


@pytest.fixture
def clusters(zookeeper, tmp_path) -> Iterator[Callable[..., Cluster]]:
    """``clusters(name, n=1, **overrides)``: an independent started cluster; all stopped at teardown."""
    chroots: list[str] = []

    def make(name: str, n: int = 1, start: bool = True, **overrides: str) -> Cluster:
        chroot = f"/mm-{name}-{uuid.uuid4().hex[:8]}"
        chroots.append(chroot)
        c = keep(Cluster(name, f"{zookeeper.connect_string}{chroot}", tmp_path / name, n,
                         {k.replace("_", "."): v for k, v in overrides.items()}))
        return c.start() if start else c

    try:
        with stopping(Cluster.stop) as keep:
            yield make
    finally:
        delete_znodes(zookeeper.connect_string, chroots)


class MirrorProcess:
    """`python -m mirror ...` as a child process."""

    seq = itertools.count(1)

    def __init__(self, home: Path, sources: list[dict], target: dict, *args: str, prefixes: list[str] | None = None) -> None:
        n = next(self.seq)
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.status_file = home / f"status-{n}.json"
        self.out_path = home / f"mirror-{n}.out"
        cmd = [sys.executable, "-m", "mirror"]
        for i, props in enumerate(sources):
            cmd += ["--consumer.config", str(write_properties(home / f"src{n}-{i}.properties", props))]
        cmd += ["--producer.config", str(write_properties(home / f"dst{n}.properties", target))]
        for p in prefixes or []:
            cmd += ["--topic.prefix", p]
        cmd += ["--status.file", str(self.status_file), *args]
        self.cmd = cmd
        self.proc: subprocess.Popen | None = None

    def start(self) -> MirrorProcess:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=str(self.home), start_new_session=True)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self) -> str:
        try:
            return self.out_path.read_text(errors="replace")
        except OSError:
            return ""


@pytest.fixture
def mirrors(tmp_path) -> Iterator[Callable[..., MirrorProcess]]:
    def make(sources: list[dict], target: dict, *args: str, prefixes: list[str] | None = None,
             start: bool = True) -> MirrorProcess:
        m = keep(MirrorProcess(tmp_path / "mirror", sources, target, *args, prefixes=prefixes))
        return m.start() if start else m

    with stopping(MirrorProcess.kill) as keep:
        yield make


class KeyedLoad(threading.Thread):
    """Produces keyed records into one topic until stopped; remembers every acknowledged one."""

    def __init__(self, cluster: Cluster, topic: str, keys: int = 16, rate: float = 2000.0, prefix: str = "") -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.topic = topic
        self.keys = keys
        self.rate = rate
        self.prefix = prefix or cluster.name
        self.acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
        self.errors: list = []
        self._halt = threading.Event()

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.cluster.bootstrap, "acks": "all", "linger.ms": "5"})
        i = 0
        start = time.monotonic()
        try:
            while not self._halt.is_set():
                key = f"k{i % self.keys}".encode()
                value = f"{self.prefix}-{i}".encode()

                def done(md, exc, value=value):
                    if exc is not None:
                        self.errors.append(exc)
                    else:
                        self.acked[(md.partition, md.offset)] = value

                producer.send(self.topic, value, key, callback=done)
                i += 1
                ahead = i / self.rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            producer.flush(60)
        finally:
            producer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(90)


def by_origin(records: list, cluster_id: str | None = None) -> dict[tuple[str, str, int, int], list]:
    """Aggregate records grouped by their (first) origin (cluster, topic, partition, offset)."""
    out: dict = {}
    for m in records:
        chain = origins(m.headers)
        assert chain, f"record without an origin header: {m}"
        o = chain[0]
        if cluster_id is None or o.cluster_id == cluster_id:
            out.setdefault((o.cluster_id, o.topic, o.partition, o.offset), []).append(m)
    return out


def cluster_id(cluster: Cluster) -> str:
    from mirror.topics import TargetAdmin

    admin = TargetAdmin(cluster.bootstrap)
    try:
        return admin.cluster_id()
    finally:
        admin.close()
