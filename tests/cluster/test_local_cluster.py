"""`logbus cluster up|status|down` and LocalCluster: a real ZooKeeper and real broker processes
that outlive the command, found again through the state file, stopped cleanly by `down`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from broker.cluster.local import BrokerProcess
from broker.cluster.local_cluster import (
    STATE_FILE,
    ClusterAlreadyUpError,
    ClusterError,
    LocalCluster,
    NoClusterError,
    pid_alive,
    process_start_time,
)
from broker.cluster.net import free_port, port_open
from tests.waiting import wait_until

pytestmark = pytest.mark.integration  # starts ZooKeeper and brokers itself

REPO = Path(__file__).resolve().parents[2]


def processes_under(path: Path) -> list[int]:
    """Pids of running processes whose command line mentions ``path`` (the cluster's dir)."""
    needle = str(path).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes() and pid_alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def logbus(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
        env=env,
    )


def produce(bootstrap: str, topic: str, count: int = 30) -> list[int]:
    """Produce ``count`` keyed records with librdkafka (acks=all); return their partitions."""
    delivered: list[int] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err:
            errors.append(err)
        else:
            delivered.append(msg.partition())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert not errors, errors
    assert len(delivered) == count
    return delivered


def test_python_api_up_status_produce_down(tmp_path: Path) -> None:
    cdir = tmp_path / "cluster"
    lines: list[str] = []
    cluster = LocalCluster(cdir, progress=lines.append)
    try:
        cluster.up(3, overrides={"num.partitions": "3"})
        assert any("ZooKeeper ready" in line for line in lines)
        state = json.loads((cdir / STATE_FILE).read_text())
        assert state["state"] == "up" and [b["id"] for b in state["brokers"]] == [1, 2, 3]
        for b in state["brokers"]:
            assert Path(b["data_dir"]).is_dir() and Path(b["log_file"]).is_file()
            assert b["data_dir"].startswith(str(cdir)) and b["port"] > 0
        assert len(cluster.bootstrap_servers.split(",")) == 3

        # a fresh object (as another process would) sees the same cluster
        status = LocalCluster(cdir).status()
        assert status.all_up, status
        assert [(s.node.id, s.alive, s.registered) for s in status.brokers] == [(1, True, True), (2, True, True),
                                                                                 (3, True, True)]

        # auto-created with 3 partitions, spread over the brokers
        partitions = produce(cluster.bootstrap_servers, "api-events")
        assert set(partitions) == {0, 1, 2}

        with pytest.raises(ClusterAlreadyUpError, match="already up"):
            LocalCluster(cdir).up(1)
        assert LocalCluster(cdir).status().all_up  # the refused `up` touched nothing

        nodes = cluster.nodes()
        assert cluster.down() is True
        assert not any(n.alive() for n in nodes)
        assert not any(port_open(n.host, n.port, timeout=0.2) for n in nodes)
        assert not cdir.exists()
    finally:
        cluster.down()
    assert processes_under(cdir) == []


def _free_port_run(n: int) -> int:
    """A port P with P..P+n-1 all free right now."""
    while True:
        base = free_port("127.0.0.1")
        if base + n < 65536 and not any(port_open("127.0.0.1", base + i, 0.1) for i in range(n)):
            return base


def test_cli_up_status_down(tmp_path: Path) -> None:
    cdir = tmp_path / "cli-cluster"
    try:
        base = _free_port_run(3)
        up = logbus("cluster", "up", "--dir", str(cdir), "--brokers", "3", "--metrics-port-base", str(base))
        assert up.returncode == 0, up.stderr
        assert f"broker 3 http://127.0.0.1:{base + 2}/metrics" in up.stdout
        out = dict(line.split("=", 1) for line in up.stdout.splitlines() if line.split("=")[0] in
                   ("bootstrap.servers", "zookeeper.connect"))
        bootstrap = out["bootstrap.servers"]
        assert len(bootstrap.split(",")) == 3 and all(b.startswith("127.0.0.1:") for b in bootstrap.split(","))
        assert out["zookeeper.connect"].startswith("127.0.0.1:")
        assert "broker-1/broker.out" in up.stdout  # where the logs are
        assert "starting 3 brokers" in up.stderr  # progress

        # the command has returned; its processes live on in sessions of their own
        state = json.loads((cdir / STATE_FILE).read_text())
        pids = [state["zookeeper"]["pid"]] + [b["pid"] for b in state["brokers"]]
        assert all(pid_alive(pid) for pid in pids)
        assert all(os.getsid(pid) == pid for pid in pids)

        status = logbus("cluster", "status", env={**os.environ, "LOGBUS_CLUSTER_DIR": str(cdir)})
        assert status.returncode == 0, status.stdout + status.stderr
        broker_rows = [line.split() for line in status.stdout.splitlines() if line.startswith("broker ")]
        assert [(r[1], r[4], r[5], r[6]) for r in broker_rows] == [
            ("1", str(base), "yes", "yes"), ("2", str(base + 1), "yes", "yes"), ("3", str(base + 2), "yes", "yes")]
        assert all(port_open("127.0.0.1", base + i, 0.5) for i in range(3)), "each broker serves its own metrics port"
        assert any(line.startswith("zookeeper") and " yes " in line for line in status.stdout.splitlines())

        assert len(produce(bootstrap, "cli-events", count=10)) == 10

        restarted = logbus("cluster", "restart", "2", "--dir", str(cdir))
        assert restarted.returncode == 0, restarted.stderr
        new_pid = json.loads((cdir / STATE_FILE).read_text())["brokers"][1]["pid"]
        assert new_pid != pids[2] and pid_alive(new_pid) and not pid_alive(pids[2])
        pids[2] = new_pid

        # broker 3 stopped and started again by hand: status sees it, down stops it before removing its data
        os.kill(pids[3], signal.SIGTERM)
        wait_until(lambda: not pid_alive(pids[3]), 20, what="broker 3 stopped")
        by_hand = subprocess.Popen([sys.executable, "-m", "broker.cli", "server-start", str(cdir / "broker-3" / "server.properties")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                   cwd=str(cdir / "broker-3"))
        pids.append(by_hand.pid)
        wait_until(lambda: port_open("127.0.0.1", int(bootstrap.split(",")[2].rsplit(":", 1)[1]), 0.2), 30,
                   what="broker 3 listening again")
        status = logbus("cluster", "status", "--dir", str(cdir))
        row = next(line for line in status.stdout.splitlines() if line.split()[:2] == ["broker", "3"])
        assert f"restarted outside `cluster` (pid {by_hand.pid})" in row and " yes " in row, status.stdout
        state = json.loads((cdir / STATE_FILE).read_text())

        again = logbus("cluster", "up", "--dir", str(cdir))
        assert again.returncode == 1
        assert "already up" in again.stderr and len(again.stderr.strip().splitlines()) == 1
        assert json.loads((cdir / STATE_FILE).read_text()) == state

        down = logbus("cluster", "down", "--dir", str(cdir))
        assert down.returncode == 0, down.stderr
        assert not any(pid_alive(pid) for pid in pids)
        by_hand.wait(5)
        assert not any(port_open("127.0.0.1", int(hp.rsplit(":", 1)[1]), 0.2) for hp in bootstrap.split(","))
        assert not cdir.exists()

        after = logbus("cluster", "status", "--dir", str(cdir))
        assert after.returncode == 1 and "no cluster" in after.stderr
        assert logbus("cluster", "down", "--dir", str(cdir)).returncode == 0  # idempotent
    finally:
        LocalCluster(cdir).down(timeout=5)
    assert processes_under(cdir) == []


def test_down_keep_data_then_up_again_reuses_it(tmp_path: Path) -> None:
    cdir = tmp_path / "kept"
    cluster = LocalCluster(cdir)
    try:
        cluster.up(1)
        produce(cluster.bootstrap_servers, "kept", count=5)
        cluster.down(keep_data=True)
        assert not (cdir / STATE_FILE).exists()
        assert "stopped cleanly" in (cdir / "broker-1" / "broker.out").read_text()  # SIGTERM, clean shutdown
        assert (cdir / "broker-1" / "data" / "kept-0").is_dir()
        cluster.up(1)
        assert cluster.status().all_up
        assert (cdir / "broker-1" / "data" / "kept-0").is_dir()
    finally:
        cluster.down()
    assert processes_under(cdir) == []


def test_a_failure_part_way_stops_what_had_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_command = BrokerProcess.command

    def command(self: BrokerProcess) -> list[str]:
        if self.broker_id == 2:
            return [sys.executable, "-c", "import sys; print('ERROR: cannot bind, port taken'); sys.exit(3)"]
        return real_command(self)

    monkeypatch.setattr(BrokerProcess, "command", command)
    cdir = tmp_path / "broken"
    try:
        with pytest.raises(ClusterError) as info:
            LocalCluster(cdir).up(2)
        message = str(info.value)
        assert "\n" not in message
        assert "broker 2 exited with code 3" in message
        assert str(cdir / "broker-2" / "broker.out") in message and "port taken" in message
        assert not (cdir / STATE_FILE).exists()
        assert processes_under(cdir) == []  # ZooKeeper and broker 1 were stopped
    finally:
        LocalCluster(cdir).down(timeout=5)


def test_no_cluster_and_bad_arguments(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "none")
    with pytest.raises(NoClusterError, match="no cluster"):
        cluster.status()
    assert cluster.down() is False
    assert not cluster.is_up()
    with pytest.raises(ClusterError, match="listeners cannot be overridden"):
        cluster.up(1, overrides={"listeners": "PLAINTEXT://127.0.0.1:9092"})
    with pytest.raises(ClusterError, match="use --metrics-port-base 9404"):
        cluster.up(2, overrides={"metrics.port": "9404"})
    with pytest.raises(ClusterError, match="log.segment.bytes"):
        cluster.up(1, overrides={"log.segment.bytes": "abc"})
    assert not (tmp_path / "none").exists()  # refused before starting anything


def test_stale_state_is_not_up_and_reused_pids_are_not_ours(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not pid_alive(dead.pid)
    me = os.getpid()
    assert pid_alive(me, process_start_time(me))
    assert not pid_alive(me, (process_start_time(me) or 0) + 1)  # same pid, another process

    cdir = tmp_path / "stale"
    cdir.mkdir()
    node = {"pid": me, "start_time": (process_start_time(me) or 0) + 1, "host": "127.0.0.1", "port": 1,
            "home": str(cdir / "zookeeper"), "data_dir": "", "log_file": ""}
    (cdir / STATE_FILE).write_text(json.dumps({
        "state": "up", "zookeeper": {**node, "role": "zookeeper"},
        "brokers": [{**node, "role": "broker", "id": 1, "pid": dead.pid, "home": str(cdir / "broker-1")}],
        "bootstrap_servers": "127.0.0.1:1", "zookeeper_connect": "127.0.0.1:1",
    }))
    cluster = LocalCluster(cdir)
    assert not cluster.is_up()
    status = cluster.status()
    assert not status.all_up and not any(n.process_alive for n in status.nodes)
    assert logbus("cluster", "status", "--dir", str(cdir)).returncode == 1
    assert cluster.down() is True  # signals nothing (the recorded pid is this test's, but not its start)
    assert not cdir.exists()


def test_cli_up_with_security_serves_tls_scram_and_acls(tmp_path: Path) -> None:
    """``cluster up --security``: SASL_SSL only (replication too), the admin's client properties
    printed and private; a new user is refused until an ACL lets it in; ``down`` removes the keys."""
    from confluent_kafka import Consumer, KafkaError, KafkaException

    cdir = tmp_path / "secured"
    try:
        up = logbus("cluster", "up", "--dir", str(cdir), "--brokers", "2", "--security")
        assert up.returncode == 0, up.stderr
        bootstrap = next(line.split("=", 1)[1] for line in up.stdout.splitlines() if line.startswith("bootstrap.servers="))
        zk = next(line.split("=", 1)[1] for line in up.stdout.splitlines() if line.startswith("zookeeper.connect="))
        properties = cdir / "security" / "client.properties"
        assert f"admin's client properties: {properties}" in up.stdout
        assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in (cdir / "security").iterdir())
        admin = dict(line.split("=", 1) for line in properties.read_text().splitlines())
        assert (admin["security.protocol"], admin["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")

        plain = logbus("topics", "--bootstrap-server", bootstrap, "--list")  # no properties: no way in
        assert plain.returncode == 1 and "security.protocol" in plain.stderr
        as_admin = ["--bootstrap-server", bootstrap, "--command-config", str(properties)]
        created = logbus("topics", *as_admin, "--create", "--topic", "secret-events", "--partitions", "1",
                         "--replication-factor", "2", "--config", "min.insync.replicas=2")
        assert created.returncode == 0, created.stderr
        producer = Producer({**admin, "bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
        for i in range(10):  # acks=all with two in-sync replicas: the follower fetches over SASL_SSL
            producer.produce("secret-events", f"v{i}".encode())
        assert producer.flush(30) == 0

        assert logbus("configs", "--zookeeper", zk, "--alter", "--entity-type", "users", "--entity-name", "carol",
                      "--add-config", "SCRAM-SHA-512=[password=carol-secret]").returncode == 0
        carol = {**admin, "bootstrap.servers": bootstrap, "sasl.username": "carol", "sasl.password": "carol-secret",
                 "group.id": "carols", "auto.offset.reset": "earliest"}

        def carol_reads() -> list[bytes] | KafkaError:
            consumer = Consumer(carol)
            consumer.subscribe(["secret-events"])
            got: list[bytes] = []
            try:
                for _ in range(40):
                    m = consumer.poll(0.5)
                    if m is not None and m.error() is not None and m.error().code() != KafkaError._PARTITION_EOF:
                        return m.error()
                    if m is not None and m.error() is None:
                        got.append(m.value())
                    if len(got) == 10:
                        break
            except KafkaException as exc:
                return exc.args[0]
            finally:
                consumer.close()
            return got

        refused = carol_reads()
        assert isinstance(refused, KafkaError), refused
        assert refused.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
        granted = logbus("acls", *as_admin, "--add", "--allow-principal", "User:carol", "--consumer",
                         "--topic", "secret-events", "--group", "carols")
        assert granted.returncode == 0, granted.stderr
        assert carol_reads() == [f"v{i}".encode() for i in range(10)]

        assert logbus("cluster", "down", "--dir", str(cdir)).returncode == 0
        assert not cdir.exists()
    finally:
        LocalCluster(cdir).down(timeout=5)
    assert processes_under(cdir) == []
