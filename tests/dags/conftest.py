"""Airflow for the DAG tests: a private AIRFLOW_HOME (sqlite) migrated once per session. The
environment is set when this conftest is imported, before anything imports airflow. (The
``spark`` fixture is tests/conftest.py's.)"""

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


@pytest.fixture(scope="session")
def airflow_db():
    """``airflow db migrate`` once (a few seconds on sqlite); the home is removed at exit."""
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return _HOME
