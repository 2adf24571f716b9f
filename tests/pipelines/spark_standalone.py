"""A Spark standalone master and workers started from pyspark's own jars (``bin/spark-class``), for tests.

Each daemon is a JVM in its own process group (a worker's executors are in the worker's), bound
to 127.0.0.1 on free ports with little memory; ``stop`` kills the group, so nothing outlives the
test. The daemons get no PYTHONPATH: executors see only the Python the driver points them at.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from broker.cluster.net import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH (so no logbus tree leaks to executors), bound to 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()), **extra)
    return env


class Daemon:
    """One ``spark-class`` JVM (master or worker), its output in ``log``."""

    def __init__(self, home: Path, name: str, args: list[str]) -> None:
        self.log = home / f"{name}.log"
        env = clean_env(SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(home), SPARK_WORKER_DIR=str(home / "work"))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the daemon's whole process group (a worker's executors too) and reap it."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(15)


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores each on 127.0.0.1."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.daemons: list[Daemon] = []

    def start(self, workers: int = 1, cores: int = 2, memory: str = "1g", timeout: float = 60) -> StandaloneCluster:
        self.daemons.append(Daemon(self.home, "master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                                         "--port", str(self.port), "--webui-port", str(self.ui_port)]))
        for i in range(workers):
            self.add_worker(f"worker{i}", cores, memory)
        self.wait_for_workers(workers, timeout)
        return self

    def add_worker(self, name: str, cores: int = 2, memory: str = "1g") -> Daemon:
        worker = Daemon(self.home, name, ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                          "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
                                          "--work-dir", str(self.home / name), self.url])
        self.daemons.append(worker)
        return worker

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as resp:
                state = json.load(resp)
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < count:
            if time.monotonic() > deadline or any(d.proc.poll() is not None for d in self.daemons):
                logs = "\n".join(d.log.read_text(errors="replace")[-2000:] for d in self.daemons)
                raise AssertionError(f"the standalone cluster did not get {count} worker(s) up:\n{logs}")
            time.sleep(0.5)

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.kill()
