"""Airflow for the DAG tests: a private AIRFLOW_HOME (sqlite) migrated once per session. The
environment is set when this conftest is imported, before anything imports airflow."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_HOME = tempfile.mkdtemp(prefix="logbus-airflow-")
os.environ.update({
    "AIRFLOW_HOME": _HOME,
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
})
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown messages would hit closed streams
atexit.register(shutil.rmtree, _HOME, True)
logging.getLogger("py4j").setLevel(logging.WARNING)  # its shutdown messages hit closed streams


@pytest.fixture(scope="session")
def airflow_db():
    """``airflow db migrate`` once (a few seconds on sqlite); the home is removed at exit."""
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _HOME


@pytest.fixture(scope="module")
def spark():
    """One SparkSession (local[2,4]) per module: the inline load step uses the active session."""
    from pipelines.config import parse_config
    from pipelines.job import make_spark

    cfg = parse_config({"cluster": {"bootstrap.servers": "127.0.0.1:1"}, "warehouse": "file:///tmp",
                        "topics": ["x"], "spark": {"master": "local[2,4]", "conf": {
                            "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}}})
    session = make_spark(cfg)
    try:
        yield session
    finally:
        session.stop()
