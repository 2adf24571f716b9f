"""`logbus consumer-groups --bootstrap-server`: list and describe groups of standard clients
(members, lag per partition) and of ZooKeeper consumers alike; --zookeeper sees the
standard clients' offsets too."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.coordinator.conftest import confluent_member, create_topic, produce, settled, unique, wait_until


def logbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)


def test_list_and_describe(group_broker, zk_chroot, zk_client):
    bootstrap = group_broker.bootstrap
    topic = create_topic(bootstrap, 2)
    produce(bootstrap, topic, 2, 10)
    group = unique("tool")
    zk_group = unique("zkonly")
    zk_client.client.create(f"/consumers/{zk_group}/offsets/{topic}/0", b"4", makepath=True)
    members = [confluent_member(bootstrap, topic, group, **{"client.id": "tool-client"}) for _ in range(2)]
    try:
        wait_until(lambda: settled(members, 2) and sum(len(m.records) for m in members) >= 20, 40, what="consumption")
        time.sleep(1)  # auto commit
        out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--list")
        assert out.returncode == 0, out.stderr
        assert {group, zk_group} <= set(out.stdout.split())

        out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = [line.split() for line in lines[1:]]
        assert [(r[1], r[2], r[3], r[4], r[5], r[-1]) for r in rows] == [
            (topic, "0", "10", "10", "0", "tool-client"), (topic, "1", "10", "10", "0", "tool-client")]
        assert len({r[6] for r in rows}) == 2  # two members, one partition each
        assert {r[7] for r in rows} == {"/127.0.0.1"}, "HOST: where each member connects from"

        out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members")
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert sorted(line.split()[2:] for line in out.stdout.splitlines()[1:]) == [["/127.0.0.1", "tool-client", "1"]] * 2
        out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state")
        assert out.returncode == 0, out.stderr
        state = out.stdout.splitlines()[1].split()
        assert (state[0], state[-2], state[-1]) == (group, "Stable", "2")
        out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                     "--topic", topic, "--to-earliest", "--execute")
        assert out.returncode == 1 and out.stderr.strip().endswith(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."), out.stderr
    finally:
        for m in members:
            m.leave()
    produce(bootstrap, topic, 2, 3, start=10)
    out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert out.returncode == 0, out.stderr
    assert "has no active members" in out.stdout
    assert [line.split()[3:6] for line in out.stdout.splitlines()[2:]] == [["10", "13", "3"]] * 2

    out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", zk_group)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].split()[:6] == [zk_group, topic, "0", "4", "13", "9"]

    out = logbus("consumer-groups", "--zookeeper", zk_chroot, "--describe", "--group", group)
    assert out.returncode == 0, out.stderr
    assert [line.split()[3:6] for line in out.stdout.splitlines()[1:]] == [["10", "13", "3"]] * 2

    out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                 "--topic", f"{topic}:1", "--shift-by", "-4")
    assert out.returncode == 0, out.stderr
    assert "No action will be performed" in out.stderr
    assert out.stdout.splitlines()[1].split() == [group, topic, "1", "6"]
    out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                 "--all-topics", "--to-offset", "11", "--execute")
    assert out.returncode == 0, out.stderr
    assert [line.split()[1:] for line in out.stdout.splitlines()[1:]] == [[topic, "0", "11"], [topic, "1", "11"]]
    out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--all-groups")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    assert [r[3:6] for r in rows if r and r[0] == group] == [["11", "13", "2"]] * 2, "the reset was committed"
    assert any(r and r[0] == zk_group for r in rows)

    out = logbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", unique("none"))
    assert out.returncode != 0 and "does not exist" in out.stderr and "Traceback" not in out.stderr
