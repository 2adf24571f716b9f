"""JVM options for the short-lived JVMs the tests start (Spark drivers, executors and daemons).

The suite is CPU-bound on two cores and its Spark JVMs live seconds: with the client JIT alone
and the serial collector they take about a quarter less CPU than with C2 and G1 (the machine's
busy CPU over tests/pipelines/test_load_e2e.py: 77 and 64 s before, 53 and 49 s after). Tests
only: a long load wants C2.

A Spark JVM also spends seconds loading and verifying Spark's classes: drivers, executors and
daemons map a class-data archive (Java's AppCDS) of what a driver loads, built once per machine
in the background (``python -m tests.jvm``) and kept in the cache directory. A JVM started
before it exists, or handed one from another Java build, runs as before: it only saves time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from broker.cluster.embedded_zk import ZooKeeperNotInstalledError, java_executable
from pipelines.code_zip import cache_dir

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUIET_CDS = "-Xlog:cds=off,cds+dynamic=off"  # a refused or absent archive is only slower: no warning lines
_SPARK_JVM = f"{SHORT_LIVED_JVM} {QUIET_CDS}"


def spark_archive() -> Path:
    """Where the Spark JVMs' archive is kept: one per Java build, pyspark version and JVM options
    (an archive is valid only for the JVM build and class path that wrote it)."""
    build = ""
    try:
        libjvm = Path(os.path.realpath(java_executable())).parents[1] / "lib" / "server" / "libjvm.so"
    except ZooKeeperNotInstalledError:  # no java: no Spark JVM will start either
        libjvm = None
    if libjvm is not None and libjvm.exists():
        stat = libjvm.stat()
        build = f"{libjvm}:{stat.st_size}:{stat.st_mtime_ns}"
    key = hashlib.sha256(f"{build}|{version('pyspark')}|{SHORT_LIVED_JVM}".encode()).hexdigest()[:16]
    return cache_dir() / "test-jvm" / f"spark-{key}.jsa"


def spark_jvm_options() -> str:
    """The options of every Spark JVM the tests start: short-lived, mapping the archive."""
    return f"{_SPARK_JVM} -XX:SharedArchiveFile={spark_archive()}"


def use_short_lived_jvms() -> None:
    """Give every process started from here on the options, unless they are set already:
    spark-submit's JVMs (drivers, local mode) read SPARK_SUBMIT_OPTS, standalone daemons
    SPARK_DAEMON_JAVA_OPTS; executors take them from ``spark.executor.extraJavaOptions``."""
    options = spark_jvm_options()
    os.environ.setdefault("SPARK_SUBMIT_OPTS", options)
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", options)


def start_spark_archive_build() -> subprocess.Popen | None:
    """Build the archive in a child process, unless it exists already; the child gives
    way to another session building it. None when there is nothing to build."""
    archive = spark_archive()
    if archive.exists():
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    log = open(archive.with_suffix(".log"), "ab")  # noqa: SIM115 - the child writes it (another session's too)
    with log:
        return subprocess.Popen([sys.executable, "-m", "tests.jvm", str(archive)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=Path(__file__).parents[1])


def finish_spark_archive_build(builder: subprocess.Popen | None, timeout: float = 120) -> None:
    """Let a build started by this session end (its work is kept for the next); stop it after ``timeout``."""
    if builder is None:
        return
    try:
        builder.wait(timeout)
    except subprocess.TimeoutExpired:
        builder.kill()
        builder.wait()


def _build(archive: Path) -> None:
    """Run a small local Spark job of Python tasks (as the loader's) in a driver that writes its
    loaded classes at exit, then publish the archive in one rename (a JVM sees none or a whole one)."""
    with open(archive.with_suffix(".lock"), "wb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another session builds it
        if archive.exists():
            return
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        os.environ["SPARK_SUBMIT_OPTS"] = f"{_SPARK_JVM} -XX:ArchiveClassesAtExit={partial}"
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").appName("logbus-cds")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.parallelize(range(100), 2).mapPartitions(lambda rows: [sum(rows)]).collect()
        spark.stop()
        gateway = SparkContext._gateway
        assert gateway is not None
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its stdin closes, writing the archive
        gateway.proc.wait(120)
        if partial.exists():
            os.replace(partial, archive)


if __name__ == "__main__":
    _build(Path(sys.argv[1]))
