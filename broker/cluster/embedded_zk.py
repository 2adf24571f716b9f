"""A real ZooKeeper server (Debian's package) in a child JVM, for tests and `logbus cluster up`."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from broker.cluster.net import free_port

__all__ = ["EmbeddedZooKeeper", "ZooKeeperNotInstalledError", "free_port", "four_letter_word"]

JAVA_DIR = Path("/usr/share/java")
#: zookeeper.jar's manifest Class-Path brings its own dependencies (netty, jute, slf4j-api...);
#: slf4j-simple is the logging backend that sends its log to stderr.
CLASSPATH_JARS = ("zookeeper.jar", "slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperNotInstalledError(RuntimeError):
    """Java or Debian's ZooKeeper jars are missing."""


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the reply ('' when unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def java_executable() -> str:
    """The java a JVM of ours runs on: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home, "bin", "java"), os.X_OK):
        return str(Path(home, "bin", "java"))
    java = shutil.which("java")
    if not java:
        raise ZooKeeperNotInstalledError("java not found: run `make setup` (installs a JRE and Debian's zookeeper)")
    return java


def _classpath() -> str:
    jars = [JAVA_DIR / name for name in CLASSPATH_JARS]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise ZooKeeperNotInstalledError(
            f"{', '.join(missing)} not found: run `make setup` (installs Debian's zookeeper package)"
        )
    return os.pathsep.join(str(j) for j in jars)


#: Servers still running at interpreter exit are stopped, so an aborted run leaves no JVM behind.
_RUNNING: set[EmbeddedZooKeeper] = set()


@atexit.register
def _stop_leftovers() -> None:
    for zk in list(_RUNNING):
        zk.stop(timeout=5)


class EmbeddedZooKeeper:
    """A standalone ZooKeeper on ``host:port`` with its data and log under ``data_dir``."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 60000,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.log_path = self.data_dir / "zookeeper.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join([
                f"dataDir={self.data_dir / 'data'}",
                f"clientPort={self.port}",
                f"clientPortAddress={self.host}",
                f"tickTime={self.tick_time_ms}",
                # short sessions allowed so tests can expire them quickly
                f"minSessionTimeout={2 * self.tick_time_ms}",
                f"maxSessionTimeout={self.max_session_timeout_ms}",
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                "",
            ])
        )
        return cfg

    def start(self, timeout: float = 30.0) -> None:
        """Start the JVM and wait until the server answers ``srvr`` as serving."""
        if self.running:
            return
        cmd = [java_executable(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.4lw.commands.whitelist=*",
               "-cp", _classpath(), MAIN_CLASS, str(self._write_config())]
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        _RUNNING.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with code {self._proc.returncode} on start; see {self.log_path}: {self._log_tail()}"
                )
            if "Mode: " in four_letter_word(self.host, self.port, "srvr", timeout=0.5):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer on {self.connect_string} within {timeout:g}s; see {self.log_path}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait, SIGKILL if it lingers."""
        proc, self._proc = self._proc, None
        _RUNNING.discard(self)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def detach(self) -> int | None:
        """Let the server outlive this interpreter: no stop at exit. Returns its pid.

        The JVM already runs in a session of its own with its output in ``log_path``.
        """
        _RUNNING.discard(self)
        if self._proc is not None:
            # Popen warns (ResourceWarning) when collected while its child runs; a detached
            # child is meant to. poll()/wait()/signals keep working.
            self._proc._child_created = False  # type: ignore[attr-defined]
        return self.pid

    def _log_tail(self, lines: int = 10) -> str:
        try:
            tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return " | ".join(t.strip() for t in tail)

    def __enter__(self) -> EmbeddedZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
