"""A real Airflow deployment for the scheduler tests, made the way README.md tells an operator to:
a fresh ``AIRFLOW_HOME`` (sqlite), ``airflow db migrate``, then ``airflow api-server``,
``airflow scheduler`` (LocalExecutor) and ``airflow dag-processor`` as separate processes,
DAGs unpaused and triggered with the ``airflow`` command. Run states are read from the
metadata database (read-only), which is what the CLI would print, without its start-up cost."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from broker.cluster.net import free_port
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
COMPONENTS = {"api-server": ["api-server"], "scheduler": ["scheduler"], "dag-processor": ["dag-processor"]}
FINISHED = {"success", "failed"}


class AirflowDeployment:
    """Scheduler, DAG processor and API server of one ``AIRFLOW_HOME``; ``stop`` ends them and every
    task process they started (each component runs in a process group of its own)."""

    def __init__(self, home: Path, loader_config: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.port = free_port()
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),  # shared by the components that sign and check
            "LOGBUS_LOADER_CONFIG": loader_config,
            "SPARK_LOCAL_IP": "127.0.0.1",
            **(env or {}),
        }
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def database(self) -> Path:
        return self.home / "airflow.db"

    def cli(self, *args: str) -> str:
        """``airflow <args>``; its output, or an AssertionError with its last lines."""
        proc = subprocess.run([AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"airflow {' '.join(args)}: {(proc.stdout + proc.stderr)[-2000:]}"
        return proc.stdout

    def start(self, dag_ids: list[str], timeout: float = 90) -> AirflowDeployment:
        self.home.mkdir(parents=True, exist_ok=True)
        self.cli("db", "migrate")
        for name, args in COMPONENTS.items():
            out = open(self.home / f"{name}.log", "wb")  # noqa: SIM115 - the child writes it until stop()
            self.procs[name] = subprocess.Popen([AIRFLOW, *args], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                                start_new_session=True)
            out.close()
        wait_until(self._healthy, timeout, 0.25, "the api-server's health endpoint")
        wait_until(lambda: set(dag_ids) <= self._serialized(), timeout, 0.25, f"{dag_ids} parsed by the dag-processor")
        return self

    def _healthy(self) -> bool:
        for name, proc in self.procs.items():
            assert proc.poll() is None, f"airflow {name} exited: {self.log_tail(name)}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v2/monitor/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, sql: str, *args: object) -> list[dict]:
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=10) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(sql, args)]

    def _serialized(self) -> set[str]:
        """The DAG ids parsed so far; an import error of the DAG file fails at once, with its traceback."""
        try:
            errors = self.query("SELECT stacktrace FROM import_error")
            assert not errors, f"dags/ failed to import: {errors[0]['stacktrace'][-1500:]}"
            return {r["dag_id"] for r in self.query("SELECT dag_id FROM serialized_dag")}
        except sqlite3.OperationalError:
            return set()

    def trigger(self, dag_id: str, run_id: str, conf: dict | None = None) -> None:
        self.cli("dags", "trigger", dag_id, "--run-id", run_id, *(["-c", json.dumps(conf)] if conf else []))

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.query("SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", dag_id, run_id)
        return rows[0]["state"] if rows else None

    def task(self, dag_id: str, run_id: str, task_id: str) -> dict:
        """The task instance's row: state, try_number, pid (of the process running it), ..."""
        rows = self.query("SELECT * FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = ?",
                          dag_id, run_id, task_id)
        return rows[0] if rows else {}

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 180) -> str:
        """The run's final state, once it has one."""
        deadline = time.monotonic() + timeout
        while (state := self.run_state(dag_id, run_id)) not in FINISHED:
            assert time.monotonic() < deadline, f"run {run_id} still {state} after {timeout} s: {self.log_tail('scheduler')}"
            time.sleep(0.5)
        return str(state)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.home / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        for proc in self.procs.values():
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # what SIGTERM left: task processes, Spark JVMs
            proc.wait(5)

    def __enter__(self) -> AirflowDeployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
