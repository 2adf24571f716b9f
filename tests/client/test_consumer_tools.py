"""The consumer commands end to end: console-consumer (both modes), consumer-groups, consumer-perf-test."""

from __future__ import annotations

import subprocess
import sys
import uuid

from tests.client.test_zk_consumer import create_topic, produce


def logbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)


def test_consumer_commands(broker_factory, zk_chroot, tmp_path):
    # no initial rebalance delay: the --group member below is assigned at once instead of after 3 s
    broker = broker_factory(overrides={"group.initial.rebalance.delay.ms": "0"})
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, 2)
    produce(broker.bootstrap, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 2} for i in range(20)])

    out = logbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
                 "--timeout-ms", "2000", "--property", "print.key=true", "--property", "key.separator=:",
                 "--property", "print.offset=true", "--property", "print.partition=true")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 20 and "Partition:0:Offset:0:k0:v0" in lines  # key.separator between every column, as Kafka
    assert "Processed a total of 20 messages" in out.stderr

    out = logbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--partition", "1",
                 "--offset", "5", "--timeout-ms", "1000", "--property", "print.offset=true", "--property", "print.value=false")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"Offset:{o}" for o in range(5, 10)]

    # --group with --bootstrap-server: a member through the group coordinator (tests/client/test_group_consumer.py)
    config = tmp_path / "consumer.properties"
    config.write_text("session.timeout.ms=10000\n")
    out = logbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", "g",
                 "--from-beginning", "--max-messages", "20", "--consumer.config", str(config))
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 20, out.stderr
    out = logbus("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", f"{topic}-typo", "--group", "g")
    assert out.returncode == 1 and out.stderr.strip().endswith(f"Topic '{topic}-typo' does not exist"), out.stderr

    out = logbus("console-consumer", "--zookeeper", zk_chroot, "--topic", topic, "--from-beginning",
                 "--group", "cg", "--max-messages", "5")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 5

    out = logbus("consumer-groups", "--zookeeper", zk_chroot, "--list")
    assert out.returncode == 0 and "cg" in out.stdout.split()
    out = logbus("consumer-groups", "--zookeeper", zk_chroot, "--describe", "--group", "cg")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"]
    by_partition = {int(r[2]): r for r in rows[1:]}
    assert sorted(by_partition) == [0, 1]
    # The 5 messages may all come from one partition; the other then has no commit, which
    # Kafka's table shows as "-" for CURRENT-OFFSET and LAG.
    committed = {p: None if r[3] == "-" else int(r[3]) for p, r in by_partition.items()}
    assert sum(c or 0 for c in committed.values()) == 5
    for p, r in by_partition.items():
        assert int(r[4]) == 10
        assert r[5] == ("-" if committed[p] is None else str(10 - committed[p]))

    out = logbus("consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages", "20")
    assert out.returncode == 0, out.stderr
    header, line = out.stdout.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec")
    assert line.split(", ")[4] == "20"
    # Kafka's ZooKeeper perf consumer reads on until no message came for --timeout ms (10 s by default)
    out = logbus("consumer-perf-test", "--zookeeper", zk_chroot, "--topic", topic, "--messages", "20", "--threads", "2",
                 "--timeout", "3000")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split(", ")[4] == "20"
