"""The tests' Spark JVM options (tests/jvm.py): a JVM started before the archive is built runs as before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from broker.cluster.embedded_zk import java_executable
from tests.jvm import spark_archive, spark_jvm_options

pytestmark = pytest.mark.integration  # starts a JVM


def test_a_jvm_started_before_the_archive_exists_runs_and_prints_nothing_more(tmp_path: Path):
    options = spark_jvm_options().replace(str(spark_archive()), str(tmp_path / "not-built-yet.jsa"))
    assert "not-built-yet.jsa" in options
    proc = subprocess.run([java_executable(), *options.split(), "-version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr.startswith("openjdk version") and "warning" not in proc.stderr, proc.stderr
