"""The mirror's refusals are one line: a target cluster that is down, and (with a cluster) a
source that is the target cluster itself (it would copy every topic into itself)."""

from __future__ import annotations

import socket
import subprocess
import sys

from broker.cluster.local import write_properties


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mirror(tmp_path, source: dict, target: dict) -> subprocess.CompletedProcess:
    src = write_properties(tmp_path / "src.properties", source)
    dst = write_properties(tmp_path / "dst.properties", target)
    return subprocess.run([sys.executable, "-m", "mirror", "--consumer.config", str(src), "--producer.config", str(dst),
                           "--whitelist", ".*", "--status.file", str(tmp_path / "status.json")],
                          capture_output=True, text=True, timeout=60)


def test_a_target_cluster_that_is_down_is_one_line(tmp_path):
    out = _mirror(tmp_path, {"zookeeper.connect": f"127.0.0.1:{_closed_port()}", "group.id": "g"},
                  {"bootstrap.servers": f"127.0.0.1:{_closed_port()}"})
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines()[-1].startswith("mirror-maker: error: "), out.stderr
    assert "Traceback" not in out.stderr


def test_a_source_that_is_the_target_refuses_to_start(clusters, tmp_path):
    agg = clusters("agg")
    out = _mirror(tmp_path, agg.consumer_props(**{"group.id": "self"}), {"bootstrap.servers": agg.bootstrap})
    assert out.returncode == 1, out.stderr
    assert "is the aggregate cluster itself" in out.stderr and "Traceback" not in out.stderr
