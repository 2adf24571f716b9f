"""BrokerProcess mechanics (with a stand-in child), and the broker fixture's contract."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cluster.local import BrokerProcess, BrokerStartError, write_properties
from broker.cluster.net import free_port, port_open
from broker.cluster.zk import ZkClient
from broker.config import ConfigError, load_properties

# Listens on the port given in argv, says so, exits 0 on SIGTERM.
STAND_IN = """
import signal, socket, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("stand-in starting", flush=True)
time.sleep(float(sys.argv[2]))
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("listening", flush=True)
while True:
    time.sleep(1)
"""

CRASHER = "import sys; print('ERROR: broker.id 1 is already registered', file=sys.stderr); sys.exit(3)"


def stand_in(tmp_path: Path, script: str, delay: float = 0.2, **kw: object) -> BrokerProcess:
    port = free_port()
    props = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:1", "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    proc = BrokerProcess(props, tmp_path / "b", **kw)  # type: ignore[arg-type]
    proc.command = lambda: [sys.executable, "-c", script, str(port), str(delay)]  # type: ignore[method-assign]
    return proc


def test_command_line_follows_the_cli_contract(tmp_path: Path) -> None:
    proc = BrokerProcess(
        {"broker.id": "2", "zookeeper.connect": "zk:2181", "listeners": "PLAINTEXT://127.0.0.1:9999"},
        tmp_path, {"num.partitions": "3"},
    )
    cmd = proc.command()
    assert cmd[:5] == [sys.executable, "-m", "broker.cli", "server-start", str(tmp_path / "server.properties")]
    assert cmd[5:] == ["--override", "num.partitions=3"]
    assert load_properties(proc.config_path)["listeners"] == "PLAINTEXT://127.0.0.1:9999"
    assert (proc.broker_id, proc.bootstrap) == (2, "127.0.0.1:9999")


def test_start_waits_for_the_port_then_stop_and_restart(tmp_path: Path) -> None:
    proc = stand_in(tmp_path, STAND_IN)
    try:
        proc.start()
        assert proc.alive and port_open(proc.host, proc.port)
        assert proc.stop() == 0
        assert not proc.alive
        proc.restart()
        assert proc.alive and port_open(proc.host, proc.port)
        assert proc.kill() == -signal.SIGKILL
    finally:
        proc.stop()
    assert "listening" in proc.out_path.read_text()


def test_death_during_start_reports_exit_code_and_log_tail(tmp_path: Path) -> None:
    proc = stand_in(tmp_path, CRASHER)
    with pytest.raises(BrokerStartError, match=r"exited with code 3.*already registered"):
        proc.start()


def test_start_timeout_kills_the_child(tmp_path: Path) -> None:
    proc = stand_in(tmp_path, STAND_IN, delay=30, start_timeout=0.5)
    with pytest.raises(BrokerStartError, match="did not listen"):
        proc.start()
    assert not proc.alive


def test_bad_config_is_still_startable(tmp_path: Path) -> None:
    """The broker itself must reject a bad config; BrokerProcess only needs the listener."""
    proc = BrokerProcess({"listeners": "PLAINTEXT://127.0.0.1:9999", "log.segment.bytes": "abc"}, tmp_path)
    assert proc.config is None and proc.port == 9999
    with pytest.raises(ConfigError):
        BrokerProcess({"broker.id": "1", "zookeeper.connect": "z", "listeners": "PLAINTEXT://127.0.0.1:0"}, tmp_path)


def test_write_properties_round_trips(tmp_path: Path) -> None:
    props = {"a key": "v", "b=c": " lead", "path": "C:\\x", "multi": "1\n2", "colon:key": "x:y"}
    assert load_properties(write_properties(tmp_path / "p.properties", props)) == props


def server_start_available() -> bool:
    """True once `logbus server-start` exists (broker/cli.py and the server are written)."""
    if importlib.util.find_spec("broker.cli") is None:
        return False
    probe = subprocess.run(
        [sys.executable, "-m", "broker.cli", "server-start", "--help"], capture_output=True, timeout=60
    )
    return probe.returncode == 0


def test_broker_fixture_registers_in_zookeeper(request: pytest.FixtureRequest, zk_chroot: str) -> None:
    if not server_start_available():
        pytest.skip("`logbus server-start` is not available yet")
    broker: BrokerProcess = request.getfixturevalue("broker")
    with ZkClient(zk_chroot) as zk:
        info = zk.live_brokers()[broker.broker_id]  # type: ignore[index]
        assert json.loads(zk.kazoo.get(f"/brokers/ids/{broker.broker_id}")[0])["endpoints"] == [
            f"PLAINTEXT://{broker.bootstrap}"
        ]
        assert info.port == broker.port
