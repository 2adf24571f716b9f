"""JVM options for the short-lived JVMs the tests start (Spark drivers, executors and daemons).

The suite is CPU-bound on two cores and its Spark JVMs live seconds: with the client JIT alone
and the serial collector they take about a quarter less CPU than with C2 and G1 (the machine's
busy CPU over tests/pipelines/test_load_e2e.py: 77 and 64 s before, 53 and 49 s after). Tests
only: a long load wants C2.
"""

from __future__ import annotations

import os

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def use_short_lived_jvms() -> None:
    """Give every process started from here on the options, unless they are set already:
    spark-submit's JVMs (drivers, local mode) read SPARK_SUBMIT_OPTS, standalone daemons
    SPARK_DAEMON_JAVA_OPTS; executors take them from ``spark.executor.extraJavaOptions``."""
    os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_LIVED_JVM)
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", SHORT_LIVED_JVM)
